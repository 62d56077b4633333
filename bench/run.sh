#!/usr/bin/env bash
# `make bench`: the real server (release build) on PostgreSQL and on SQLite,
# driven by loadgen with signed standard-webhooks traffic (1 KiB bodies, 10%
# duplicates) at concurrency 1, 16 and 64 and at half of saturation; pgbench
# running the same SQL transaction as the ceiling; then the concurrency-16
# ratio to that ceiling measured in interleaved pairs, once with everything
# sharing the CPUs and once with the database on its own core. Every
# measured run starts after `settle` (bench/lib.sh: a CHECKPOINT and a
# pause), and each pair's pgbench run has a fresh database. Prints Markdown
# tables.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_RUN=${BENCH_SECONDS:-15}
PAIRS=${BENCH_PAIRS:-6}
PAIR_SECONDS=${BENCH_PAIR_SECONDS:-8}
. bench/lib.sh
release_build
results=$(mktemp)
pairs=$(mktemp)

# load CONCURRENCY [PIN...] [-- LOADGEN ARGS...]: one loadgen run of
# `seconds` (default SECONDS_PER_RUN); prints its JSON line.
load() {
  local c=$1
  shift
  local pin=() extra=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do pin+=("$1"); shift; done
  [ $# -gt 0 ] && { shift; extra=("$@"); }
  LOADGEN_SECRET=$secret "${pin[@]}" $LOADGEN --url "$HOOK" --concurrency "$c" --seconds "${seconds:-$SECONDS_PER_RUN}" "${extra[@]}"
}
verified() { python3 -c "import json,sys; print(json.loads(sys.argv[1])['verified_per_sec'])" "$1"; }
# ceiling MODE URL [PIN...]: pgbench running bench/claim.sql with 16 clients
# for `seconds` (default SECONDS_PER_RUN); prints tx/s.
ceiling() {
  local mode=$1 url=$2
  shift 2
  "$@" pgbench -n -c 16 -j 2 -T "${seconds:-$SECONDS_PER_RUN}" -M "$mode" -f "${script:-bench/claim.sql}" "$url" 2>/dev/null | awk '/^tps/ {print $3; exit}'
}

# The sweep: concurrency 1, 16, 64, then 16 paced to half of its saturated rate.
sweep() {
  local url=$1 label=$2 c16=0 line
  start_server "$url"
  for c in 1 16 64; do
    echo "==> $label, concurrency $c" >&2
    line=$(load "$c")
    echo "$label $c saturated $line" >>"$results"
    [ "$c" = 16 ] && c16=$(verified "$line")
  done
  local half
  half=$(python3 -c "print(max(1.0, $c16 / 2))")
  echo "==> $label, concurrency 16 at half of saturation ($half req/s)" >&2
  line=$(load 16 -- --rate "$half")
  echo "$label 16 half $line" >>"$results"
  stop_server
}

# Database on its own core: PostgreSQL (the postmaster, every running
# backend, and so every backend it forks later) is pinned to CPU 0 and the
# client side (the server and loadgen, or pgbench) to the other CPUs, so the
# receiver's own CPU no longer comes out of the database's share, as when the
# database has a host of its own. This pins the whole local cluster (every
# database on it) for the duration; a trap restores it, so a SIGKILLed run
# leaves PostgreSQL on CPU 0 until `taskset -a -p -c 0-N <postmaster>` for it
# and its children. Needs permission to change PostgreSQL's affinity (root
# or the postgres user); otherwise that part is skipped.
postmaster=""
pg_cpus=""
pin_pg() {
  local dir
  dir=$(psql "$PG_ADMIN" -Atc "SHOW data_directory" 2>/dev/null) || return 1
  postmaster=$(head -1 "$dir/postmaster.pid" 2>/dev/null) || return 1
  pg_cpus=$(taskset -p -c "$postmaster" 2>/dev/null | awk '{print $NF}') || return 1
  taskset -a -p -c 0 "$postmaster" >/dev/null 2>&1 || { pg_cpus=""; return 1; }
  for p in $(pgrep -P "$postmaster"); do taskset -a -p -c 0 "$p" >/dev/null 2>&1 || true; done
}
restore_pg_affinity() {
  [ -n "$pg_cpus" ] || return 0
  taskset -a -p -c "$pg_cpus" "$postmaster" >/dev/null 2>&1 || true
  for p in $(pgrep -P "$postmaster"); do taskset -a -p -c "$pg_cpus" "$p" >/dev/null 2>&1 || true; done
  pg_cpus=""
}

# Pairs: a concurrency-16 loadgen run, then pgbench, PAIRS times and short
# (PAIR_SECONDS each), so that both halves of a pair see the same machine:
# this one's disk and CPU speed drift by ±30% from minute to minute. Each
# half starts after `settle`, and each pgbench run gets a database of its own
# (a copy of the migrated, empty template) that is dropped right after it, so
# pgbench's rows, dead tuples and dirty pages never meet the server's next run.
paired() {
  local url=$1 label=$2
  shift 2
  start_server "$url" "$@"
  for i in $(seq 1 "$PAIRS"); do
    echo "==> $label, pair $i: concurrency 16, then pgbench" >&2
    local ev tps db="signet_bench_$$_pgbench"
    settle
    ev=$(verified "$(seconds=$PAIR_SECONDS load 16 "$@")")
    psql "$PG_ADMIN" -qc "CREATE DATABASE $db TEMPLATE signet_bench_$$_template"
    settle
    tps=$(seconds=$PAIR_SECONDS ceiling prepared "${PG_ADMIN%/*}/$db" "$@")
    psql "$PG_ADMIN" -qc "DROP DATABASE $db WITH (FORCE)"
    echo "$label $ev $tps" >>"$pairs"
  done
  stop_server
}

dbs=(sweep shared split template pgbench)
cleanup() {
  [ -n "${server:-}" ] && { kill "$server" 2>/dev/null || true; }
  restore_pg_affinity
  for d in "${dbs[@]}"; do psql "$PG_ADMIN" -qc "DROP DATABASE IF EXISTS signet_bench_$$_$d WITH (FORCE)" >/dev/null 2>&1 || true; done
}
trap cleanup EXIT
for d in sweep shared split template; do psql "$PG_ADMIN" -qc "CREATE DATABASE signet_bench_$$_$d"; done
pg_sweep="${PG_ADMIN%/*}/signet_bench_$$_sweep"
pg_shared="${PG_ADMIN%/*}/signet_bench_$$_shared"
pg_split="${PG_ADMIN%/*}/signet_bench_$$_split"
# The pairs' pgbench databases are copies of this one: Signet's schema, no rows.
tpl_data=$(mktemp -d)
SIGNET_DATA_DIR=$tpl_data DATABASE_URL="${PG_ADMIN%/*}/signet_bench_$$_template" SIGNET_LOG=warn $BIN migrate >/dev/null
rm -rf "$tpl_data"

sweep "$pg_sweep" postgres
sweep "sqlite://$(mktemp -d)/bench.db?mode=rwc" sqlite

# The receiver's statements are prepared once per connection (sqlx's
# statement cache), so the ceiling is pgbench with prepared statements too;
# the simple protocol (pgbench's default: every statement parsed and planned
# again) is printed for reference.
echo "==> pgbench ceiling (same transaction, 16 clients, prepared statements)" >&2
settle
tps=$(ceiling prepared "$pg_sweep")
echo "==> pgbench, simple protocol (for reference)" >&2
settle
tps_simple=$(ceiling simple "$pg_sweep")
# For reference: the shape the receiver sends under load (four events per
# shared transaction, about what a batch carries at concurrency 16).
echo "==> pgbench, the shared transaction's shape, 4 events per transaction (for reference)" >&2
settle
tps_batch=$(script=bench/claim_batch4.sql ceiling prepared "$pg_sweep")

paired "$pg_shared" shared
if [ "$(nproc)" -ge 2 ] && pin_pg; then
  paired "$pg_split" split taskset -c "1-$(($(nproc) - 1))"
  restore_pg_affinity
else
  echo "==> skipped the database-on-its-own-core pairs (needs 2 CPUs and permission to set PostgreSQL's CPU affinity)" >&2
fi

python3 - "$results" "$pairs" "$tps" "$tps_simple" "$tps_batch" <<'PY'
import json, statistics, sys
rows = [l.split(" ", 3) for l in open(sys.argv[1]).read().splitlines()]
pairs = [l.split() for l in open(sys.argv[2]).read().splitlines()]
ceiling, simple, batch4 = float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
print(f"pgbench ceiling (16 clients, same transaction, prepared statements): {ceiling:.0f} tx/s")
print(f"pgbench with the simple protocol (reference): {simple:.0f} tx/s")
print(f"pgbench, shared-transaction shape, 4 events per transaction (reference): {4 * batch4:.0f} events/s\n")
print("| engine | concurrency | load | verified events/s | p50 ms | p99 ms | × pgbench ceiling |")
print("|---|---|---|---|---|---|---|")
for engine, c, mode, js in rows:
    r = json.loads(js)
    ratio = f"{r['verified_per_sec'] / ceiling:.2f}" if engine == "postgres" and mode == "saturated" else "–"
    print(f"| {engine} | {c} | {mode} | {r['verified_per_sec']:.0f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {ratio} |")
names = {"shared": "all on the same CPUs", "split": "database on its own core"}
print("\nConcurrency 16 on PostgreSQL against pgbench, in interleaved pairs:\n")
print("| placement | verified events/s | pgbench tx/s | ratio per pair | median ratio |")
print("|---|---|---|---|---|")
for label in ("shared", "split"):
    ps = [(float(e), float(t)) for l, e, t in pairs if l == label]
    if not ps:
        continue
    ratios = [e / t for e, t in ps]
    print(f"| {names[label]} | {' / '.join(f'{e:.0f}' for e, _ in ps)} | {' / '.join(f'{t:.0f}' for _, t in ps)} "
          f"| {' / '.join(f'{r:.2f}' for r in ratios)} | **{statistics.median(ratios):.2f}** |")
PY
