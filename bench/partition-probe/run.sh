#!/usr/bin/env bash
# What partitioned claims cost at the database, before any server code: the
# claim transaction as pgbench runs it (bench/claim.sql, the ceiling of
# `make bench`) against today's unpartitioned claims, daily partitions and
# weekly partitions, each probing every partition for the key (PostgreSQL
# enforces a unique key across partitions only if it holds the partition
# column, which a retry days later does not share). Interleaved runs,
# concurrency 16, prepared statements, a CHECKPOINT before each run; prints transactions/s and the ratio
# to today's layout per round. See docs/scaling.md.
#
#   bench/partition-probe/run.sh   (BENCH_ROUNDS=3, BENCH_SECONDS=12, BENCH_ROWS=30000 per old day)
set -euo pipefail
cd "$(dirname "$0")"
PG_ADMIN=${SIGNET_TEST_PG_URL:-postgres://postgres@127.0.0.1:5432/test}
SIGNET=${SIGNET:-../../target/debug/signet}
ROUNDS=${BENCH_ROUNDS:-3}
SECONDS_PER_RUN=${BENCH_SECONDS:-12}
ROWS=${BENCH_ROWS:-30000}

db="signet_probe_$$"
url="${PG_ADMIN%/*}/$db"
work=$(mktemp -d)
trap 'psql "$PG_ADMIN" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
psql "$PG_ADMIN" -qc "CREATE DATABASE $db"
DATABASE_URL=$url SIGNET_DATA_DIR=$work "$SIGNET" migrate >&2
psql -q -v rows="$ROWS" "$url" -f setup.sql >&2

echo "| round | today (tx/s) | daily, 34 probed (tx/s) | ratio | weekly, 7 probed (tx/s) | ratio |"
echo "|---|---|---|---|---|---|"
for round in $(seq 1 "$ROUNDS"); do
  declare -A tps=()
  # A different layout goes first each round, so drift (the tables grow,
  # other work on the machine) does not always favour the same one.
  order=(today daily weekly today daily)
  for layout in "${order[@]:$(( (round - 1) % 3 )):3}"; do
    psql -q "$url" -c CHECKPOINT
    sleep 2
    tps[$layout]=$(pgbench -n -c 16 -j 2 -T "$SECONDS_PER_RUN" -M prepared -f "$layout.sql" "$url" 2>/dev/null \
      | awk '/^tps/ {print $3; exit}')
  done
  awk -v r="$round" -v t="${tps[today]}" -v d="${tps[daily]}" -v w="${tps[weekly]}" \
    'BEGIN { printf "| %d | %.0f | %.0f | %.2f | %.0f | %.2f |\n", r, t, d, d / t, w, w / t }'
done
