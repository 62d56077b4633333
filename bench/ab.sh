#!/usr/bin/env bash
# bench/ab.sh BEFORE AFTER: two `signet` release binaries, side by side, on
# PostgreSQL and on SQLite. Each engine gets both servers at once (one fresh
# database each, one tenant, endpoint and approved key), then PAIRS rounds of
# a concurrency-16 loadgen run against each, the order alternating round by
# round (A B, B A, …) so that the machine's drift falls on both alike.
# Every run starts after `settle` (bench/lib.sh: a CHECKPOINT and a pause), so
# the writes of one side's run do not land in the other's. Prints the
# verified events/s of every run, each side's median and the median of the
# per-round ratios AFTER / BEFORE.
#
# Building a BEFORE binary from an older commit, beside this checkout:
#   git worktree add /tmp/before <rev>
#   (cd /tmp/before && CARGO_TARGET_DIR=$PWD/../main/target cargo build --release -p server)
#   cp target/release/signet /tmp/signet-before
set -euo pipefail
cd "$(dirname "$0")/.."
BEFORE=${1:?usage: bench/ab.sh BEFORE_BINARY AFTER_BINARY}
AFTER=${2:?usage: bench/ab.sh BEFORE_BINARY AFTER_BINARY}
PAIRS=${BENCH_PAIRS:-6}
SECONDS_PER_RUN=${BENCH_PAIR_SECONDS:-8}
. bench/lib.sh
echo "==> release build of loadgen" >&2
cargo build --release -p loadgen >&2

pids=()
dbs=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for d in "${dbs[@]}"; do psql "$PG_ADMIN" -qc "DROP DATABASE IF EXISTS $d WITH (FORCE)" >/dev/null 2>&1 || true; done
}
trap cleanup EXIT

# start BIN URL PORT: a fresh data directory and database, one approved key,
# the server on PORT. Sets `secret`.
start() {
  local bin=$1 url=$2 port=$3 data
  data=$(mktemp -d)
  export SIGNET_DATA_DIR=$data DATABASE_URL=$url SIGNET_LOG=warn
  $bin tenant create bench >/dev/null
  $bin endpoint create bench hooks --scheme standard-webhooks >/dev/null
  secret=$($bin --json key provision bench hooks --approve-as bench | python3 -c 'import json,sys; print(json.load(sys.stdin)["secret"])')
  # Both servers run at once: each its own metrics listener too (any free port).
  SIGNET_ADDR=127.0.0.1:$port SIGNET_METRICS_ADDR=127.0.0.1:0 $bin serve >/dev/null 2>"$data/server.log" &
  pids+=($!)
  wait_ready "$port" "$data/server.log"
  unset SIGNET_DATA_DIR DATABASE_URL
}
load() { # SECRET PORT: verified events/s of one run, after `settle`
  settle
  LOADGEN_SECRET=$1 $LOADGEN --url "http://127.0.0.1:$2/hooks/bench/hooks" --concurrency 16 --seconds "$SECONDS_PER_RUN" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["verified_per_sec"])'
}

results=$(mktemp)
for engine in postgres sqlite; do
  if [ "$engine" = postgres ]; then
    for side in a b; do
      psql "$PG_ADMIN" -qc "CREATE DATABASE signet_ab_$$_$side"
      dbs+=("signet_ab_$$_$side")
    done
    url_a="${PG_ADMIN%/*}/signet_ab_$$_a" url_b="${PG_ADMIN%/*}/signet_ab_$$_b"
  else
    url_a="sqlite://$(mktemp -d)/a.db?mode=rwc" url_b="sqlite://$(mktemp -d)/b.db?mode=rwc"
  fi
  start "$BEFORE" "$url_a" 3311
  secret_a=$secret
  start "$AFTER" "$url_b" 3312
  secret_b=$secret
  for i in $(seq 1 "$PAIRS"); do
    echo "==> $engine, round $i" >&2
    if [ $((i % 2)) = 1 ]; then
      a=$(load "$secret_a" 3311); b=$(load "$secret_b" 3312)
    else
      b=$(load "$secret_b" 3312); a=$(load "$secret_a" 3311)
    fi
    echo "$engine $a $b" >>"$results"
  done
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  pids=()
done

python3 - "$results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]).read().splitlines()]
print("| engine | before, verified events/s per round | after | median before | median after | median ratio after/before |")
print("|---|---|---|---|---|---|")
for engine in ("postgres", "sqlite"):
    rs = [(float(a), float(b)) for e, a, b in rows if e == engine]
    before, after = [a for a, _ in rs], [b for _, b in rs]
    ratios = [b / a for a, b in rs]
    print(f"| {engine} | {' / '.join(f'{a:.0f}' for a in before)} | {' / '.join(f'{b:.0f}' for b in after)} "
          f"| {statistics.median(before):.0f} | {statistics.median(after):.0f} | **{statistics.median(ratios):.2f}** |")
PY
