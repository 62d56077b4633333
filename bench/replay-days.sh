#!/usr/bin/env bash
# `make bench-replay-days`: a day of replay records on PostgreSQL, purged the
# two ways m20261207_000230 leaves. Records with no signed timestamp (GitHub's,
# and every record stored before that migration) are deleted row by row by
# their expiry, in batches of 500, as every record was before; a day of
# signed records goes as one partition drop. Seeds BENCH_RECORDS (default
# 3,000,000: a day of issue 28's clinic network) of each kind, then times
# `signet retention purge` on each alone and reads the WAL it wrote.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
RECORDS=${BENCH_RECORDS:-3000000}

echo "==> release build" >&2
cargo build --release -p server >&2

scratch_pg signet_replay
export DATABASE_URL=$url SIGNET_MASTER_KEY_FILE=$work/master.key SIGNET_DATA_DIR=$work SIGNET_LOG=warn
target/release/signet migrate >&2

# Two days ago: past the drop rule (the day's end + 2 h) whenever this runs.
day=$(($(date +%s) / 86400 - 2))
from=$((day * 86400000))
part="replay_records_p$(date -u -d "@$((day * 86400))" +%Y%m%d)"

# purge LABEL: one `signet retention purge`, its time and the WAL it wrote.
purge() {
  psql "$url" -qc "CHECKPOINT" >/dev/null
  local wal_before start seconds wal
  wal_before=$(psql "$url" -tAc "SELECT pg_current_wal_lsn()")
  start=$(date +%s.%N)
  target/release/signet retention purge >"$work/purge.out"
  seconds=$(echo "$(date +%s.%N) - $start" | bc)
  wal=$(psql "$url" -tAc "SELECT pg_size_pretty(pg_wal_lsn_diff(pg_current_wal_lsn(), '$wal_before'))")
  printf '%s: %.2f s, %s of WAL; %s\n' "$1" "$seconds" "$wal" "$(head -n 1 "$work/purge.out")"
}

echo "==> seeding $RECORDS expired records with no signed timestamp" >&2
psql "$url" -v ON_ERROR_STOP=1 -q <<SQL
INSERT INTO replay_records (tenant_id, endpoint_id, message_digest, signed_at, expires_at)
  SELECT 'bench-tenant', 'bench-endpoint', encode(sha256(('u' || i)::bytea), 'hex'), 0, $from + i % 86400000
  FROM generate_series(1, $RECORDS) i;
ANALYZE replay_records;
SQL
unsigned=$(psql "$url" -tAc "SELECT pg_size_pretty(pg_total_relation_size('replay_records_unsigned'))")
purge "row by row ($RECORDS records, $unsigned with its indexes)"

echo "==> seeding $RECORDS records signed on $part" >&2
psql "$url" -v ON_ERROR_STOP=1 -q <<SQL
CREATE TABLE $part PARTITION OF replay_records FOR VALUES FROM ($from) TO ($((from + 86400000)));
INSERT INTO replay_records (tenant_id, endpoint_id, message_digest, signed_at, expires_at)
  SELECT 'bench-tenant', 'bench-endpoint', encode(sha256(('s' || i)::bytea), 'hex'), $from + i % 86400000,
         $from + i % 86400000 + 600000
  FROM generate_series(1, $RECORDS) i;
ANALYZE replay_records;
SQL
signed=$(psql "$url" -tAc "SELECT pg_size_pretty(pg_total_relation_size('$part'))")
purge "one partition drop ($RECORDS records, $signed with its key)"
