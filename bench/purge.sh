#!/usr/bin/env bash
# `make bench-purge`: one day's retention purge on the dashboard benchmark's
# data (events over 30 days, 20 tenants x 2 endpoints, a sealed 1 KiB body in
# every event of the last 7 days), timed as the purge meets it each day in a
# steady state: the oldest day's claims past the 30-day dedup retention are
# deleted and a day of bodies past the 7-day body retention cleared, in
# batches of 500 (one transaction each). SQLite at each size in
# BENCH_SIZES (default 1 and 10 million events), then PostgreSQL at the
# largest, whose claims are still deleted row by row too (its bodies, logs,
# replay records, rollups and gauges are partitioned by day; docs/scaling.md).
set -euo pipefail
cd "$(dirname "$0")/.."
PG_ADMIN=${SIGNET_TEST_PG_URL:-postgres://postgres@127.0.0.1:5432/test}
SIZES=${BENCH_SIZES:-"1000000 10000000"}

echo "==> release build" >&2
cargo build --release -p loadgen --bin dashbench >&2

db="signet_purge_$$"
work=$(mktemp -d)
trap 'psql "$PG_ADMIN" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

echo "| engine | events stored | days later | claims deleted | bodies cleared | partitions dropped | purge s | rows/s |"
echo "|---|---|---|---|---|---|---|---|"
largest=0
for n in $SIZES; do
  rm -f "$work"/signet.db*
  echo "==> SQLite, $n events" >&2
  target/release/dashbench --database-url "sqlite://$work/signet.db?mode=rwc" --events "$n" \
    --sealed-body-days 7 --purge-after-days 1
  [ "$n" -gt "$largest" ] && largest=$n
done
psql "$PG_ADMIN" -qc "CREATE DATABASE $db"
echo "==> PostgreSQL, $largest events" >&2
target/release/dashbench --database-url "${PG_ADMIN%/*}/$db" --events "$largest" \
  --sealed-body-days 7 --purge-after-days 1
