#!/usr/bin/env bash
# `make bench-bodies-migration`: how long upgrading a PostgreSQL database with
# ten million stored events to migration 000220 takes. That migration moves
# every stored body out of the claims into `event_bodies` (day partitions),
# clears them from the claims and drops the two columns, holding the claims
# in EXCLUSIVE mode (reads go on, intake waits) for the whole of it.
# Seeds the dashboard benchmark's data (events over 30 days, 20 tenants x 2
# endpoints, a sealed 1 KiB body in every event of the last 7 days), puts the
# database back as 000210 left it (the bodies in the claims, the partial
# index, no `event_bodies`, no record of 000220: what the migration's `down`
# does), then times `signet migrate`. BENCH_EVENTS overrides the event
# count, BENCH_BODY_DAYS the sealed days. (Until 000220 this script,
# `bench/sealed-index.sh`, timed 000200's index; docs/benchmarks.md keeps
# those figures.)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
EVENTS=${BENCH_EVENTS:-10000000}
BODY_DAYS=${BENCH_BODY_DAYS:-7}

echo "==> release build" >&2
cargo build --release -p server -p loadgen >&2

scratch_pg signet_bodies

echo "==> seeding PostgreSQL ($EVENTS events, bodies for the last $BODY_DAYS days)" >&2
target/release/dashbench --database-url "$url" --events "$EVENTS" --master-key-file "$work/master.key" \
  --seed-only --sealed-body-days "$BODY_DAYS" --bulk >&2
echo "==> back to the database before 000220" >&2
psql "$url" -v ON_ERROR_STOP=1 -q <<'SQL'
BEGIN;
ALTER TABLE inbox_claims ADD COLUMN body_ciphertext BYTEA;
ALTER TABLE inbox_claims ADD COLUMN kek_version INTEGER;
UPDATE inbox_claims c SET body_ciphertext = b.body_ciphertext, kek_version = b.kek_version
  FROM event_bodies b
  WHERE b.tenant_id = c.tenant_id AND b.endpoint_id = c.endpoint_id AND b.event_id = c.event_id;
CREATE INDEX ix_claims_sealed_age ON inbox_claims (endpoint_id, received_at) WHERE body_ciphertext IS NOT NULL;
DROP TABLE event_bodies;
DELETE FROM seaql_migrations WHERE version = 'm20261207_000220_event_bodies';
COMMIT;
VACUUM FULL inbox_claims;
CHECKPOINT;
ANALYZE;
SQL
claims=$(psql "$url" -tAc "SELECT count(*) FROM inbox_claims")
sealed=$(psql "$url" -tAc "SELECT count(*) FROM inbox_claims WHERE body_ciphertext IS NOT NULL")
table=$(psql "$url" -tAc "SELECT pg_size_pretty(pg_table_size('inbox_claims'))")
wal_before=$(psql "$url" -tAc "SELECT pg_current_wal_lsn()")

export DATABASE_URL=$url SIGNET_MASTER_KEY_FILE=$work/master.key SIGNET_DATA_DIR=$work
start=$(date +%s.%N)
target/release/signet migrate >&2
migrate_s=$(echo "$(date +%s.%N) - $start" | bc)
wal=$(psql "$url" -tAc "SELECT pg_size_pretty(pg_wal_lsn_diff(pg_current_wal_lsn(), '$wal_before'))")
bodies=$(psql "$url" -tAc "SELECT count(*) FROM event_bodies")
[ "$bodies" = "$sealed" ] || { echo "moved $bodies bodies of $sealed" >&2; exit 1; }
size=$(psql "$url" -tAc "SELECT pg_size_pretty(SUM(pg_total_relation_size(inhrelid))) FROM pg_inherits \
  WHERE inhparent = 'event_bodies'::regclass")

echo "| claims stored | with a sealed body | claims table | \`signet migrate\` s (000220) | WAL (cluster) | bodies table after |"
echo "|---|---|---|---|---|---|"
printf '| %s | %s | %s | %.1f | %s | %s |\n' "$claims" "$sealed" "$table" "$migrate_s" "$wal" "$size"
