#!/usr/bin/env bash
# What partitioned claims cost at the database, before any server code: the
# claim transaction as pgbench runs it (bench/claim.sql, the ceiling of
# `make bench`) against today's unpartitioned claims, daily partitions and
# weekly partitions, each probing every partition for the key (PostgreSQL
# enforces a unique key across partitions only if it holds the partition
# column, which a retry days later does not share), and generational claim
# keys (gen<G>: generations.sql, generations of G days, two probed; gen<G>-nolock
# without the key's advisory lock, to price it). Interleaved runs,
# concurrency 16, prepared statements, a CHECKPOINT before each run; prints transactions/s and the ratio
# to today's layout per round, then the database's CPU and buffers per transaction. See docs/scaling.md.
#
#   bench/partition-probe/run.sh   (BENCH_ROUNDS=3, BENCH_SECONDS=12, BENCH_ROWS=30000 per old day,
#                                   BENCH_LAYOUTS="today daily weekly"; e.g. "today weekly gen8 gen32")
set -euo pipefail
cd "$(dirname "$0")"
PG_ADMIN=${SIGNET_TEST_PG_URL:-postgres://postgres@127.0.0.1:5432/test}
SIGNET=${SIGNET:-../../target/debug/signet}
ROUNDS=${BENCH_ROUNDS:-3}
SECONDS_PER_RUN=${BENCH_SECONDS:-12}
ROWS=${BENCH_ROWS:-30000}
read -ra layouts <<<"${BENCH_LAYOUTS:-today daily weekly}"
[[ ${layouts[0]} == today ]] || { echo "BENCH_LAYOUTS must start with today (the ratios' base)" >&2; exit 2; }

db="signet_probe_$$"
url="${PG_ADMIN%/*}/$db"
work=$(mktemp -d)
trap 'psql "$PG_ADMIN" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
psql "$PG_ADMIN" -qc "CREATE DATABASE $db"
DATABASE_URL=$url SIGNET_DATA_DIR=$work "$SIGNET" migrate >&2
psql -q -v rows="$ROWS" "$url" -f setup.sql >&2
gens=$(printf '%s\n' "${layouts[@]}" | sed -n 's/^gen\([0-9]*\).*/\1/p' | sort -un | paste -sd,)
[[ -z $gens ]] || psql -q -v rows="$ROWS" -v gens="$gens" "$url" -f setup-generations.sql >&2
sed '/pg_advisory_xact_lock/d; s/^  SELECT \(.*\), 0$/  VALUES (\1, 0)/' generations.sql >"$work/generations-nolock.sql"

# Runs a layout's pgbench and prints its transactions/s, the CPU its 16
# backends used per transaction (ms) and the buffers they read per transaction
# (shared blocks hit or read, from pg_stat_database): the database's own cost,
# which other work on the machine disturbs less than the throughput, or not at
# all. Each backend's utime + stime is read from /proc every 0.1 s until
# pgbench exits.
run_layout() {
  local layout=$1 script=$1.sql opts=() pid p ticks=0 stat
  if [[ $layout =~ ^gen([0-9]+)(-nolock)?$ ]]; then
    local g=${BASH_REMATCH[1]}
    script=generations.sql
    [[ -z ${BASH_REMATCH[2]} ]] || script=$work/generations-nolock.sql
    opts=(-D g="$g")
    export PGOPTIONS="-c search_path=gen$g,public"
  else
    export PGOPTIONS=
  fi
  local blocks
  blocks=$(PGOPTIONS= psql -Atc "SELECT blks_hit + blks_read FROM pg_stat_database WHERE datname = current_database()" \
    "$url")
  pgbench -n -c 16 -j 2 -T "$SECONDS_PER_RUN" -M prepared "${opts[@]}" -f "$script" "$url" >"$work/out" 2>/dev/null &
  pid=$!
  sleep 1
  local -A used=()
  local backends
  backends=$(PGOPTIONS= psql -Atc "SELECT pid FROM pg_stat_activity WHERE datname = current_database()
                                   AND application_name = 'pgbench'" "$url")
  while kill -0 "$pid" 2>/dev/null; do
    for p in $backends; do
      read -ra stat 2>/dev/null <"/proc/$p/stat" && used[$p]=$(( stat[13] + stat[14] ))
    done
    sleep 0.1
  done
  wait "$pid"
  sleep 1 # the exited backends' statistics reach pg_stat_database
  blocks=$(( $(PGOPTIONS= psql -Atc "SELECT blks_hit + blks_read FROM pg_stat_database
                                     WHERE datname = current_database()" "$url") - blocks ))
  for p in "${!used[@]}"; do ticks=$(( ticks + used[$p] )); done
  awk -v ticks="$ticks" -v hz="$(getconf CLK_TCK)" -v blocks="$blocks" \
    '/^tps/ { tps = $3 } /actually processed/ { n = $NF }
     END { printf "%s %.3f %.1f\n", tps, ticks * 1000 / hz / n, blocks / n }' "$work/out"
}

if [[ -n ${BENCH_EXPLAIN:-} ]]; then
  for g in ${gens//,/ }; do
    echo "--- gen$g" >&2
    PGOPTIONS="-c search_path=gen$g,public" psql -q -v g="$g" "$url" -f explain.sql >&2
  done
fi

header="| round | today (tx/s) |" rule="|---|---|"
for layout in "${layouts[@]:1}"; do
  case $layout in
    daily) name="daily, 34 probed" ;;
    weekly) name="weekly, 7 probed" ;;
    *) name="$layout, 2 probed" ;;
  esac
  header+=" $name | ratio |" rule+="---|---|"
done
n=${#layouts[@]}
declare -A tps=() cpu=() blk=()

# One round's line of a table: today's figure, then each other layout's and
# its ratio to today's. $1 names the figures' array, $3 is their format.
row() {
  local -n fig=$1
  local round=$2 fmt=$3 line layout
  line="| $round | $(printf "$fmt" "${fig[$round,today]}") |"
  for layout in "${layouts[@]:1}"; do
    line+=$(awk -v t="${fig[$round,today]}" -v x="${fig[$round,$layout]}" -v f="$fmt" \
      'BEGIN { printf " " f " | %.2f |", x, x / t }')
  done
  echo "$line"
}

# A whole table after the runs: $1 its title, $2 today's column, $3 and $4 as row's.
table() {
  local round
  printf '\n%s\n\n%s\n%s\n' "$1" "${header/today (tx\/s)/$2}" "$rule"
  for round in $(seq 1 "$ROUNDS"); do row "$3" "$round" "$4"; done
}

echo "$header"
echo "$rule"
for round in $(seq 1 "$ROUNDS"); do
  # A different layout goes first each round, so drift (the tables grow,
  # other work on the machine) does not always favour the same one.
  for i in $(seq 0 $(( n - 1 ))); do
    layout=${layouts[$(( (i + round - 1) % n ))]}
    psql -q "$url" -c CHECKPOINT
    sleep 2
    read -r tps[$round,$layout] cpu[$round,$layout] blk[$round,$layout] < <(run_layout "$layout")
  done
  row tps "$round" '%.0f'
done
table "Database CPU per transaction (ms, the backends' user + system time), ratio to today's:" "today (ms)" cpu '%.3f'
table "Shared buffers hit or read per transaction, ratio to today's:" today blk '%.1f'
