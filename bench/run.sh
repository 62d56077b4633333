#!/usr/bin/env bash
# `make bench`: the real server (release build) on PostgreSQL and on SQLite,
# driven by loadgen with signed standard-webhooks traffic (1 KiB bodies, 10%
# duplicates) at concurrency 1, 16 and 64; then pgbench running the same SQL
# transaction as the ceiling. Prints a Markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_RUN=${BENCH_SECONDS:-15}
PG_ADMIN=${SIGNET_TEST_PG_URL:-postgres://postgres@127.0.0.1:5432/test}
PORT=${BENCH_PORT:-3300}

echo "==> release build" >&2
cargo build --release -p server -p loadgen >&2
BIN=target/release/signet
LOADGEN=target/release/loadgen
results=$(mktemp)

run_engine() {
  local engine=$1 url=$2 data
  data=$(mktemp -d)
  export SIGNET_DATA_DIR=$data DATABASE_URL=$url SIGNET_LOG=warn
  $BIN tenant create bench >/dev/null
  $BIN endpoint create bench hooks --scheme standard-webhooks >/dev/null
  local secret
  secret=$($BIN --json key provision bench hooks --approve-as bench | python3 -c 'import json,sys; print(json.load(sys.stdin)["secret"])')
  SIGNET_ADDR=127.0.0.1:$PORT $BIN serve >/dev/null 2>"$data/server.log" &
  local pid=$!
  for _ in $(seq 1 50); do curl -fs "http://127.0.0.1:$PORT/readyz" >/dev/null && break; sleep 0.2; done
  local c16=0
  for c in 1 16 64; do
    echo "==> $engine, concurrency $c" >&2
    line=$(LOADGEN_SECRET=$secret $LOADGEN --url "http://127.0.0.1:$PORT/hooks/bench/hooks" --concurrency "$c" --seconds "$SECONDS_PER_RUN")
    echo "$engine $c saturated $line" >>"$results"
    [ "$c" = 16 ] && c16=$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['verified_per_sec'])" "$line")
  done
  local half
  half=$(python3 -c "print(max(1.0, $c16 / 2))")
  echo "==> $engine, concurrency 16 at half of saturation ($half req/s)" >&2
  line=$(LOADGEN_SECRET=$secret $LOADGEN --url "http://127.0.0.1:$PORT/hooks/bench/hooks" --concurrency 16 --seconds "$SECONDS_PER_RUN" --rate "$half")
  echo "$engine 16 half $line" >>"$results"
  kill "$pid"; wait "$pid" 2>/dev/null || true
  unset SIGNET_DATA_DIR DATABASE_URL
  rm -rf "$data"
}

db="signet_bench_$$"
psql "$PG_ADMIN" -qc "CREATE DATABASE $db"
pg_url="${PG_ADMIN%/*}/$db"
trap 'psql "$PG_ADMIN" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true' EXIT

run_engine postgres "$pg_url"
run_engine sqlite "sqlite://$(mktemp -d)/bench.db?mode=rwc"

# The receiver's statements are prepared once per connection (sqlx's
# statement cache), so the ceiling is pgbench with prepared statements too;
# the simple protocol (pgbench's default: every statement parsed and planned
# again) is printed for reference.
echo "==> pgbench ceiling (same transaction, 16 clients, prepared statements)" >&2
tps=$(pgbench -n -c 16 -j 2 -T "$SECONDS_PER_RUN" -M prepared -f bench/claim.sql "$pg_url" 2>/dev/null | awk '/^tps/ {print $3; exit}')
echo "==> pgbench, simple protocol (for reference)" >&2
tps_simple=$(pgbench -n -c 16 -j 2 -T "$SECONDS_PER_RUN" -M simple -f bench/claim.sql "$pg_url" 2>/dev/null | awk '/^tps/ {print $3; exit}')

python3 - "$results" "$tps" "$tps_simple" <<'PY'
import json, sys
rows = [l.split(" ", 3) for l in open(sys.argv[1]).read().splitlines()]
ceiling = float(sys.argv[2])
print(f"pgbench ceiling (16 clients, same transaction, prepared statements): {ceiling:.0f} tx/s")
print(f"pgbench with the simple protocol (reference): {float(sys.argv[3]):.0f} tx/s\n")
print("| engine | concurrency | load | verified events/s | p50 ms | p99 ms | × pgbench ceiling |")
print("|---|---|---|---|---|---|---|")
for engine, c, mode, js in rows:
    r = json.loads(js)
    ratio = f"{r['verified_per_sec'] / ceiling:.2f}" if engine == "postgres" and mode == "saturated" else "–"
    print(f"| {engine} | {c} | {mode} | {r['verified_per_sec']:.0f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {ratio} |")
PY
