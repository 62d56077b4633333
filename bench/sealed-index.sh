#!/usr/bin/env bash
# `make bench-sealed-index`: how long upgrading a PostgreSQL database with
# ten million stored events to migration 000200 takes. That migration builds
# the partial index `ix_claims_sealed_age` with a plain `CREATE INDEX`, which
# blocks writes to the claims (so intake) while it reads them once.
# Seeds the dashboard benchmark's data (events over 30 days, 20 tenants x 2
# endpoints, a sealed 1 KiB body in every event of the last 7 days), takes the
# index and its migration record away again (the database as 000190 left
# it), then times `signet migrate`, which builds it. BENCH_EVENTS overrides
# the event count, BENCH_BODY_DAYS the sealed days.
set -euo pipefail
cd "$(dirname "$0")/.."
PG_ADMIN=${SIGNET_TEST_PG_URL:-postgres://postgres@127.0.0.1:5432/test}
EVENTS=${BENCH_EVENTS:-10000000}
BODY_DAYS=${BENCH_BODY_DAYS:-7}

echo "==> release build" >&2
cargo build --release -p loadgen --bin dashbench >&2
cargo build --release -p server --bin signet >&2

db="signet_index_$$"
work=$(mktemp -d)
trap 'psql "$PG_ADMIN" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
psql "$PG_ADMIN" -qc "CREATE DATABASE $db"
url="${PG_ADMIN%/*}/$db"
head -c 32 /dev/urandom | base64 > "$work/master.key"
chmod 600 "$work/master.key"

echo "==> seeding PostgreSQL ($EVENTS events, bodies for the last $BODY_DAYS days)" >&2
target/release/dashbench --database-url "$url" --events "$EVENTS" --master-key-file "$work/master.key" \
  --seed-only --sealed-body-days "$BODY_DAYS" >&2
# Back to the database before 000200: no index, no record of the migration.
psql "$url" -v ON_ERROR_STOP=1 -q <<'SQL'
DROP INDEX ix_claims_sealed_age;
DELETE FROM seaql_migrations WHERE version = 'm20261206_000200_claims_sealed_index';
CHECKPOINT;
VACUUM ANALYZE inbox_claims;
SQL
claims=$(psql "$url" -tAc "SELECT count(*) FROM inbox_claims")
sealed=$(psql "$url" -tAc "SELECT count(*) FROM inbox_claims WHERE body_ciphertext IS NOT NULL")
table=$(psql "$url" -tAc "SELECT pg_size_pretty(pg_table_size('inbox_claims'))")

export DATABASE_URL=$url SIGNET_MASTER_KEY_FILE=$work/master.key SIGNET_DATA_DIR=$work
start=$(date +%s.%N)
target/release/signet migrate >&2
migrate_s=$(echo "$(date +%s.%N) - $start" | bc)
index=$(psql "$url" -tAc "SELECT pg_size_pretty(pg_relation_size('ix_claims_sealed_age'))")
psql "$url" -tAc "SELECT 1 FROM seaql_migrations WHERE version = 'm20261206_000200_claims_sealed_index'" | grep -qx 1

echo "| claims stored | with a sealed body | claims table | \`signet migrate\` s (000200) | index size |"
echo "|---|---|---|---|---|"
printf '| %s | %s | %s | %.1f | %s |\n' "$claims" "$sealed" "$table" "$migrate_s" "$index"
