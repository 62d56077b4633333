#!/usr/bin/env bash
# Server CPU per accepted event, before and after a change: the measurement of
# `make bench-cpu` (docs/benchmarks.md#cpu-per-accepted-event) for two release
# binaries, interleaved round by round, each run on a fresh database: a 3 s
# warm-up, then BENCH_SECONDS (default 20) at 1,000 requests/s from 16
# connections. Prints one line per run and the after/before ratio per pair.
#
#   bench/cpu-ab.sh BEFORE_BINARY AFTER_BINARY   (BENCH_ROUNDS=2, BENCH_ENGINES="postgres sqlite")
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 BEFORE_BINARY AFTER_BINARY" >&2; exit 2; }
before=$(realpath "$1") after=$(realpath "$2")
cd "$(dirname "$0")/.."
. bench/lib.sh
[ -x "$LOADGEN" ] || cargo build --release -p server -p loadgen >&2
ROUNDS=${BENCH_ROUNDS:-2}
SECS=${BENCH_SECONDS:-20}
cpu_ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
tick_ms=$(awk -v t="$(getconf CLK_TCK)" 'BEGIN { print 1000 / t }')

# run BINARY ENGINE: prints the CPU milliseconds per 2xx answer.
run() {
  local db url t0 t1 out
  BIN=$1
  db="signet_cpu_ab_$$"
  if [ "$2" = postgres ]; then
    psql "$PG_ADMIN" -qc "CREATE DATABASE $db"
    url="${PG_ADMIN%/*}/$db"
  else
    url="sqlite://$(mktemp -d)/bench.db?mode=rwc"
  fi
  start_server "$url" 2>/dev/null
  LOADGEN_SECRET=$secret $LOADGEN --url "$HOOK" --concurrency 16 --rate 1000 --seconds 3 >/dev/null
  settle
  t0=$(cpu_ticks "$server")
  out=$(LOADGEN_SECRET=$secret $LOADGEN --url "$HOOK" --concurrency 16 --rate 1000 --seconds "$SECS")
  t1=$(cpu_ticks "$server")
  stop_server
  [ "$2" = postgres ] && psql "$PG_ADMIN" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)"
  python3 -c '
import json, sys
r = json.loads(sys.argv[1]); ok = sum(n for s, n in r["statuses"].items() if s.startswith("2"))
print(f"{int(sys.argv[2]) * float(sys.argv[3]) / ok:.3f}")' "$out" "$((t1 - t0))" "$tick_ms"
}

echo "| round | engine | before, CPU ms per accepted event | after | ratio |"
echo "|---|---|---|---|---|"
for round in $(seq 1 "$ROUNDS"); do
  for engine in ${BENCH_ENGINES:-postgres sqlite}; do
    b=$(run "$before" "$engine")
    a=$(run "$after" "$engine")
    awk -v r="$round" -v e="$engine" -v b="$b" -v a="$a" 'BEGIN { printf "| %d | %s | %s | %s | %.2f |\n", r, e, b, a, a / b }'
  done
done
