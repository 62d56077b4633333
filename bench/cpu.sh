#!/usr/bin/env bash
# `make bench-cpu`: the server's CPU per accepted event. A release `signet
# serve` on PostgreSQL, then on SQLite, takes signed standard-webhooks traffic
# (1 KiB bodies, 10% duplicates) at a fixed BENCH_CPU_RATE (default 1,000)
# requests/s from 16 connections for BENCH_CPU_SECONDS (default 30), after a
# short warm-up. The server process's user + system CPU time over the run
# (/proc/<pid>/stat, before and after) divided by the number of 2xx answers
# is the figure. On SQLite it includes the database itself (it runs inside the
# process); on PostgreSQL the database's CPU is not counted.
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${BENCH_CPU_RATE:-1000}
RUN_SECONDS=${BENCH_CPU_SECONDS:-30}
WARMUP_SECONDS=${BENCH_CPU_WARMUP_SECONDS:-3}
. bench/lib.sh
release_build
results=$(mktemp)
db="signet_bench_cpu_$$"

cleanup() {
  [ -n "${server:-}" ] && { kill "$server" 2>/dev/null || true; }
  psql "$PG_ADMIN" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
}
trap cleanup EXIT

# cpu_ticks PID: user + system time of the process so far, in clock ticks
# (fields 14 and 15 of /proc/PID/stat; the command name before them may hold
# spaces, so count from the closing parenthesis).
cpu_ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }

measure() {
  local url=$1 label=$2 before after line
  start_server "$url"
  echo "==> $label: warm-up, ${WARMUP_SECONDS}s" >&2
  LOADGEN_SECRET=$secret $LOADGEN --url "$HOOK" --concurrency 16 --rate "$RATE" --seconds "$WARMUP_SECONDS" >/dev/null
  settle
  echo "==> $label: $RATE requests/s at concurrency 16 for ${RUN_SECONDS}s" >&2
  before=$(cpu_ticks "$server")
  line=$(LOADGEN_SECRET=$secret $LOADGEN --url "$HOOK" --concurrency 16 --rate "$RATE" --seconds "$RUN_SECONDS")
  after=$(cpu_ticks "$server")
  echo "$label $((after - before)) $line" >>"$results"
  stop_server
}

psql "$PG_ADMIN" -qc "CREATE DATABASE $db"
measure "${PG_ADMIN%/*}/$db" postgres
measure "sqlite://$(mktemp -d)/bench.db?mode=rwc" sqlite

python3 - "$results" "$(getconf CLK_TCK)" "$RATE" <<'PY'
import json, sys
tick_ms = 1000 / float(sys.argv[2])
print("| engine | target req/s | answered req/s | 2xx answers | server CPU s | CPU ms per accepted event | p99 ms |")
print("|---|---|---|---|---|---|---|")
for line in open(sys.argv[1]).read().splitlines():
    engine, ticks, js = line.split(" ", 2)
    r = json.loads(js)
    ok = sum(n for status, n in r["statuses"].items() if status.startswith("2"))
    cpu_ms = int(ticks) * tick_ms
    per = f"{cpu_ms / ok:.3f}" if ok else "–"
    print(f"| {engine} | {float(sys.argv[3]):.0f} | {r['requests'] / r['seconds']:.0f} | {ok} | {cpu_ms / 1000:.2f} "
          f"| **{per}** | {r['p99_ms']:.1f} |")
PY
