#!/usr/bin/env bash
# `make bench-multi`: throughput of 1 and of 3 `signet serve` processes on one
# PostgreSQL database (issue 28 item 3). Each run gets a fresh database, one
# tenant, endpoint and approved key, and loadgen spreading signed
# standard-webhooks traffic (1 KiB bodies, 10% duplicates) round-robin across
# the processes' URLs at concurrency 16. Prints a Markdown table.
#
# BENCH_SECONDS (default 15) per run; BENCH_BUILD=debug uses the workspace's
# debug binaries (a smoke run, not a measurement).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_RUN=${BENCH_SECONDS:-15}
CONCURRENCY=${BENCH_CONCURRENCY:-16}
PG_ADMIN=${SIGNET_TEST_PG_URL:-postgres://postgres@127.0.0.1:5432/test}
PORT=${BENCH_PORT:-3400}
PROFILE=${BENCH_BUILD:-release}

if [ "$PROFILE" = release ]; then
  echo "==> release build" >&2
  cargo build --release -p server -p loadgen >&2
else
  echo "==> $PROFILE build (smoke run: figures mean nothing)" >&2
  cargo build --workspace --bins >&2
fi
BIN=target/$PROFILE/signet
LOADGEN=target/$PROFILE/loadgen
PG_BASE=${PG_ADMIN%/*}

servers=()
databases=()
dirs=()
cleanup() {
  for p in "${servers[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${servers[@]}"; do wait "$p" 2>/dev/null || true; done
  for d in "${databases[@]}"; do psql "$PG_ADMIN" -qc "DROP DATABASE IF EXISTS $d WITH (FORCE)" >/dev/null 2>&1 || true; done
  for d in "${dirs[@]}"; do rm -rf "$d"; done
}
trap cleanup EXIT

# run N: N processes on a fresh database; prints loadgen's JSON line (and
# nothing else on stdout).
run() {
  local n=$1 db data secret urls=() pids=()
  db="signet_multi_$(date +%s)_$n"
  psql "$PG_ADMIN" -qc "CREATE DATABASE $db" >&2
  databases+=("$db")
  data=$(mktemp -d)
  dirs+=("$data")
  export SIGNET_DATA_DIR=$data DATABASE_URL=$PG_BASE/$db SIGNET_LOG=warn
  $BIN tenant create bench >/dev/null
  $BIN endpoint create bench hooks --scheme standard-webhooks >/dev/null
  secret=$($BIN --json key provision bench hooks --approve-as bench | python3 -c 'import json,sys; print(json.load(sys.stdin)["secret"])')
  for k in $(seq 0 $((n - 1))); do
    local port=$((PORT + k))
    SIGNET_ADDR=127.0.0.1:$port SIGNET_METRICS_ADDR=127.0.0.1:0 $BIN serve >/dev/null 2>"$data/server-$k.log" &
    pids+=($!)
    servers+=($!)
    urls+=(--url "http://127.0.0.1:$port/hooks/bench/hooks")
    for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.2; done
    curl -fs "http://127.0.0.1:$port/readyz" >/dev/null || {
      echo "signet serve did not come up on port $port; its log:" >&2
      cat "$data/server-$k.log" >&2
      exit 1
    }
  done
  echo "==> $n process(es), concurrency $CONCURRENCY, ${SECONDS_PER_RUN}s" >&2
  LOADGEN_SECRET=$secret $LOADGEN "${urls[@]}" --concurrency "$CONCURRENCY" --seconds "$SECONDS_PER_RUN"
  for p in "${pids[@]}"; do kill "$p"; wait "$p" 2>/dev/null || true; done
  servers=()
  unset SIGNET_DATA_DIR DATABASE_URL
}

# Not in $(…): the cleanup lists must be this shell's.
out=$(mktemp)
dirs+=("$out")
run 1 >"$out"
run 3 >>"$out"
one=$(sed -n 1p "$out")
three=$(sed -n 2p "$out")
python3 - "$one" "$three" "$(nproc)" <<'PY'
import json, sys
rows = [json.loads(sys.argv[1]), json.loads(sys.argv[2])]
print(f"PostgreSQL, concurrency {rows[0]['concurrency']}, {sys.argv[3]} CPUs, server(s), database and loadgen on one machine")
print()
print("| processes | verified/s | p50 ms | p99 ms | answers |")
print("|---|---|---|---|---|")
for r in rows:
    answers = ", ".join(f"{k}: {v}" for k, v in sorted(r["statuses"].items()))
    print(f"| {r['receivers']} | {r['verified_per_sec']:.0f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {answers} |")
ratio = rows[1]["verified_per_sec"] / max(rows[0]["verified_per_sec"], 1e-9)
print()
print(f"3 processes / 1 process: {ratio:.2f}")
PY
