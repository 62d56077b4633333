#!/usr/bin/env bash
# `make bench-logins`: /hooks latency while people sign in. The release
# server on PostgreSQL takes webhooks at a fixed rate (loadgen, concurrency
# 16, BENCH_RATE per second), once alone and once with 20 sign-ins per
# second alongside (bench/login_driver.py: real POSTs to /fn/login with the
# right password, so each costs one argon2id verification), interleaved
# BENCH_ROUNDS times. Prints a Markdown table of p50 and p99 per run.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
PORT=${BENCH_PORT:-3310}
RATE=${BENCH_RATE:-600}
SECS=${BENCH_SECONDS:-15}
ROUNDS=${BENCH_ROUNDS:-3}
LOGINS=${BENCH_LOGINS_PER_SEC:-20}
PASSWORD="a benchmark password long enough"

release_build
db="signet_logins_$$"
data=$(mktemp -d)
server=""
cleanup() {
  [ -n "$server" ] && { kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; }
  psql "$PG_ADMIN" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$data"
}
trap cleanup EXIT
psql "$PG_ADMIN" -qc "CREATE DATABASE $db"
export SIGNET_DATA_DIR=$data DATABASE_URL="${PG_ADMIN%/*}/$db" SIGNET_LOG=warn
BIN=target/release/signet
$BIN tenant create bench >/dev/null
$BIN endpoint create bench hooks --scheme standard-webhooks >/dev/null
secret=$($BIN --json key provision bench hooks --approve-as bench | python3 -c 'import json,sys; print(json.load(sys.stdin)["secret"])')
printf '%s' "$PASSWORD" | $BIN user create bench-user --role oncall >/dev/null
SIGNET_ADDR=127.0.0.1:$PORT SIGNET_METRICS_ADDR=127.0.0.1:0 $BIN serve >/dev/null 2>"$data/server.log" &
server=$!
wait_ready "$PORT" "$data/server.log"

run() {
  LOADGEN_SECRET=$secret target/release/loadgen --url "http://127.0.0.1:$PORT/hooks/bench/hooks" --concurrency 16 --seconds "$SECS" --rate "$RATE"
}
# One table row from loadgen's JSON report: run label, sign-ins per second.
row() {
  python3 - "$@" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
print(f"| {sys.argv[2]} | {sys.argv[3]} | {r['verified_per_sec']:.0f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} |")
PY
}
echo "| run | sign-ins per s | webhooks per s | p50 ms | p99 ms |"
echo "|---|---|---|---|---|"
for round in $(seq 1 "$ROUNDS"); do
  echo "==> round $round: webhooks alone" >&2
  line=$(run)
  row "$line" "$round alone" 0
  echo "==> round $round: webhooks with $LOGINS sign-ins per second" >&2
  python3 bench/login_driver.py "127.0.0.1" "$PORT" "bench-user" "$PASSWORD" "$LOGINS" "$((SECS + 1))" > "$data/logins.txt" &
  driver=$!
  sleep 0.5
  line=$(run)
  wait "$driver"
  row "$line" "$round with sign-ins" "$(cat "$data/logins.txt")"
done
