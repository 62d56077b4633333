#!/usr/bin/env bash
# `make bench-scale`: issue 28's "measured at 100 M" on PostgreSQL. The
# bodies, replay records and rollups are partitioned by day; the claims are
# not (docs/scaling.md says why), so their purge is row by row.
# 1. Seeds up to 100 M claims over 30 days (dashbench --bulk: 20 tenants x 2
#    endpoints, minute and hourly rollups, a 1 KiB sealed-size body for every
#    claim of the last 7 days, in event_bodies). The bodies are written by SQL: the bytes of
#    one body sealed as the receiver seals it, copied for each claim, so
#    they have the right size for the size and purge figures but open only
#    for one claim. The claims' indexes are dropped around the bulk insert
#    and rebuilt from their own definitions; dashbench checks them, and this
#    script compares `\d inbox_claims` with a freshly migrated database.
#    Before seeding it checks the free disk against BENCH_SCALE_BYTES_PER_CLAIM
#    (measured, below) and leaves BENCH_SCALE_RESERVE_GB (default 10) free;
#    it prints how many it seeds and why, if fewer than 100 M.
#    BENCH_SCALE_EVENTS overrides the count.
# 2. Claim latency: loadgen at concurrency 16, saturated on an empty
#    database and on the seeded one (a key provisioned with the CLI after
#    seeding), then BENCH_SCALE_ROUNDS (default 3) rounds paced to half of
#    the empty database's saturated rate (as bench/run.sh does), empty and
#    stored in turn; prints the median ratio of their p99.
# 3. dashbench's timed dashboard reads at that size.
# 4. BENCH_SCALE_PURGE_DAYS (default 10; 0 leaves them out) consecutive days: each inserts a
#    day's claims (stored / 30, with bodies), then at the day's end drops
#    the expired days' partitions (`partitions::drop_expired`: the bodies',
#    the replay records', the rollups'…) and runs the rest of the retention
#    purge (`domain::retention::purge::run`: the claims row by row; 30 days
#    of claims, 7 of bodies), each timed with the WAL written meanwhile
#    (pg_current_wal_lsn before and after: the whole cluster's), then `VACUUM inbox_claims`
#    (autovacuum is off on this machine's cluster; set BENCH_SCALE_VACUUM=0
#    to leave it out), and prints the claims table's sizes.
# BENCH_BIN_DIR: a directory with release builds of signet, loadgen and
# dashbench to use instead of building them. BENCH_SECONDS (default 15)
# per latency run. The databases are dropped at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
SECONDS_PER_RUN=${BENCH_SECONDS:-15}
PURGE_DAYS=${BENCH_SCALE_PURGE_DAYS:-10}
ROUNDS=${BENCH_SCALE_ROUNDS:-3}
RESERVE_GB=${BENCH_SCALE_RESERVE_GB:-10}
# Disk per stored claim: heap (with the bodies of 7 of 30 days), maps and
# the four indexes took about 850 bytes a claim (docs/benchmarks.md#a-hundred-million-claims);
# the rest is room for the primary key build's sort files and the WAL kept
# between checkpoints.
BYTES_PER_CLAIM=${BENCH_SCALE_BYTES_PER_CLAIM:-1000}
WANT=100000000

if [ -n "${BENCH_BIN_DIR:-}" ]; then
  bin_dir=$BENCH_BIN_DIR
else
  release_build
  cargo build --release -p loadgen --bin dashbench >&2
  bin_dir=target/release
fi
BIN=$bin_dir/signet
LOADGEN=$bin_dir/loadgen
DASHBENCH=$bin_dir/dashbench

# How many claims fit: free bytes where PostgreSQL keeps its data, less the
# reserve, over the bytes a claim takes, rounded down to whole millions.
pgdata=$(psql "$PG_ADMIN" -Atc "SHOW data_directory")
avail=$(df -B1 --output=avail "$pgdata" | tail -1)
fit=$(( (avail - RESERVE_GB * 1024 * 1024 * 1024) / BYTES_PER_CLAIM / 1000000 * 1000000 ))
if [ -n "${BENCH_SCALE_EVENTS:-}" ]; then
  events=$BENCH_SCALE_EVENTS
  why="BENCH_SCALE_EVENTS=$events; the disk would hold $fit"
  [ "$events" -gt "$fit" ] && echo "warning: $events claims may not fit: $fit fit in $((avail / 1073741824)) GB free" >&2
elif [ "$fit" -lt "$WANT" ]; then
  events=$fit
  why="the disk: $((avail / 1073741824)) GB free at $pgdata, $RESERVE_GB GB kept free, $BYTES_PER_CLAIM bytes a claim"
else
  events=$WANT
  why="the goal"
fi
[ "$events" -gt 0 ] || { echo "no room to seed: $why" >&2; exit 1; }
echo "==> seeding $events claims ($why)" >&2

base="signet_scale_$$"
work=$(mktemp -d)
cleanup() {
  for p in ${server:-} ${seeded_server:-}; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  for d in empty seeded fresh; do
    psql "$PG_ADMIN" -qc "DROP DATABASE IF EXISTS ${base}_$d WITH (FORCE)" >/dev/null 2>&1 || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
url() { echo "${PG_ADMIN%/*}/${base}_$1"; }
for d in empty seeded fresh; do psql "$PG_ADMIN" -qc "CREATE DATABASE ${base}_$d"; done
results=$work/latency

# load [LOADGEN ARGS...]: one concurrency-16 run after `settle`; its JSON line.
load() {
  settle
  LOADGEN_SECRET=$secret $LOADGEN --url "$HOOK" --concurrency 16 --seconds "$SECONDS_PER_RUN" "$@"
}
field() { python3 -c "import json,sys; print(json.loads(sys.argv[1])['$1'])" "$2"; }

echo "==> seeding (dashbench --bulk)" >&2
head -c 32 /dev/urandom | base64 >"$work/master.key"
chmod 600 "$work/master.key"
started=$(date +%s)
$DASHBENCH --database-url "$(url seeded)" --events "$events" --master-key-file "$work/master.key" \
  --sealed-body-days 7 --bulk --seed-only >&2
seed_s=$(( $(date +%s) - started ))
# What autovacuum (off on this machine's cluster) would have done by now.
started=$(date +%s)
psql "$(url seeded)" -qc "VACUUM ANALYZE inbox_claims"
vacuum_s=$(( $(date +%s) - started ))
seeded_sizes=$(psql "$(url seeded)" -At -F ' | ' -c "
  SELECT '\`' || c.relname || '\`', round(pg_relation_size(c.oid) / 1048576.0)
  FROM pg_class c WHERE c.relname = 'inbox_claims'
     OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = 'inbox_claims'::regclass)
  ORDER BY 1" | sed 's/^/| /; s/$/ |/')

# The rebuilt indexes are the migrations' own: `\d` of a freshly migrated database.
DATABASE_URL=$(url fresh) SIGNET_MASTER_KEY_FILE=$work/master.key SIGNET_DATA_DIR=$work SIGNET_LOG=warn \
  $BIN migrate >&2
if ! diff <(psql "$(url fresh)" -c '\d inbox_claims') <(psql "$(url seeded)" -c '\d inbox_claims') >&2; then
  echo "the seeded claims table differs from a migrated one" >&2
  exit 1
fi
echo "==> \\d inbox_claims equals a freshly migrated database's" >&2

# Both servers run side by side (the idle one only ticks its background jobs), so
# the half-load runs interleave: empty, stored, empty, stored… each after
# `settle`; this machine's speed drifts from minute to minute.
echo "==> empty database: concurrency 16, saturated" >&2
start_server "$(url empty)"
empty_hook=$HOOK empty_secret=$secret
line=$(load)
echo "empty 0 saturated $line" | tee -a "$results" >&2
half=$(python3 -c "print(max(1.0, $(field verified_per_sec "$line") / 2))")

echo "==> $events claims stored: concurrency 16, saturated" >&2
seeded_port=$((PORT + 1))
seeded_env=(DATABASE_URL="$(url seeded)" SIGNET_MASTER_KEY_FILE="$work/master.key" SIGNET_DATA_DIR="$work" SIGNET_LOG=warn)
secret=$(env "${seeded_env[@]}" $BIN --json key provision clinic-000 hooks-0 --approve-as bench |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["secret"])')
env "${seeded_env[@]}" SIGNET_ADDR=127.0.0.1:$seeded_port SIGNET_METRICS_ADDR=127.0.0.1:0 \
  $BIN serve >/dev/null 2>"$work/server.log" &
seeded_server=$!
wait_ready "$seeded_port" "$work/server.log"
seeded_hook="http://127.0.0.1:$seeded_port/hooks/clinic-000/hooks-0" seeded_secret=$secret
HOOK=$seeded_hook
echo "seeded $events saturated $(load)" | tee -a "$results" >&2
for i in $(seq 1 "$ROUNDS"); do
  echo "==> round $i: empty, then $events stored, both at $half req/s" >&2
  HOOK=$empty_hook secret=$empty_secret
  echo "empty 0 half$i $(load --rate "$half")" | tee -a "$results" >&2
  HOOK=$seeded_hook secret=$seeded_secret
  echo "seeded $events half$i $(load --rate "$half")" | tee -a "$results" >&2
done
kill "$seeded_server"; wait "$seeded_server" 2>/dev/null || true
seeded_server=""
stop_server

echo "==> dashboard reads" >&2
dash=$($DASHBENCH --database-url "$(url seeded)" --events "$events" --master-key-file "$work/master.key" --reuse |
  tee >(cat >&2))
vacuum=()
[ "${BENCH_SCALE_VACUUM:-1}" = 1 ] && vacuum=(--vacuum)
days=""
if [ "$PURGE_DAYS" -gt 0 ]; then
  echo "==> $PURGE_DAYS daily purges" >&2
  days=$($DASHBENCH --database-url "$(url seeded)" --events "$events" --master-key-file "$work/master.key" --reuse \
    --daily-purges "$PURGE_DAYS" "${vacuum[@]}" | tee >(cat >&2))
fi

echo "Claims seeded: $events ($why), in $seed_s s; then VACUUM ANALYZE of the claims, $vacuum_s s."
echo
echo "| relation, after seeding | MB |"
echo "|---|---|"
echo "$seeded_sizes"
echo
python3 - "$results" <<'PY'
import json, statistics, sys
rows = [l.split(" ", 3) for l in open(sys.argv[1]) if l.strip()]
print("| database | claims stored | load | verified events/s | p50 ms | p99 ms |")
print("|---|---|---|---|---|---|")
for db, n, mode, j in rows:
    x = json.loads(j)
    load = "saturated" if mode == "saturated" else f"half, round {mode[4:]}"
    print(f"| {db} | {n} | {load} | {x['verified_per_sec']:.0f} | {x['p50_ms']:.1f} | {x['p99_ms']:.1f} |")
p99 = {(db, mode): json.loads(j)["p99_ms"] for db, _, mode, j in rows if mode != "saturated"}
ratios = [p99[("seeded", m)] / p99[("empty", m)] for (db, m) in p99 if db == "empty"]
print(f"\nHalf-load p99, stored against empty, per round: {' / '.join(f'{r:.2f}' for r in ratios)}; "
      f"median **{statistics.median(ratios):.2f}x** (goal: at most 1.2x).")
PY
echo
echo "| engine | read | median ms | p95 ms |"
echo "|---|---|---|---|"
echo "$dash"
if [ -n "$days" ]; then
  echo
  echo "Daily purges (whole days dropped, then the claims row by row: they are not partitioned):"
  echo
  echo "$days"
fi
