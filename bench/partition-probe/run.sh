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
# to today's layout per round. See docs/scaling.md.
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

# pgbench's script and options for a layout.
run_layout() {
  local layout=$1 script=$1.sql opts=()
  if [[ $layout =~ ^gen([0-9]+)(-nolock)?$ ]]; then
    local g=${BASH_REMATCH[1]}
    script=generations.sql
    [[ -z ${BASH_REMATCH[2]} ]] || script=$work/generations-nolock.sql
    opts=(-D g="$g")
    export PGOPTIONS="-c search_path=gen$g,public"
  else
    export PGOPTIONS=
  fi
  pgbench -n -c 16 -j 2 -T "$SECONDS_PER_RUN" -M prepared "${opts[@]}" -f "$script" "$url" 2>/dev/null \
    | awk '/^tps/ {print $3; exit}'
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
  header+=" $name (tx/s) | ratio |" rule+="---|---|"
done
echo "$header"
echo "$rule"
n=${#layouts[@]}
for round in $(seq 1 "$ROUNDS"); do
  declare -A tps=()
  # A different layout goes first each round, so drift (the tables grow,
  # other work on the machine) does not always favour the same one.
  for i in $(seq 0 $(( n - 1 ))); do
    layout=${layouts[$(( (i + round - 1) % n ))]}
    psql -q "$url" -c CHECKPOINT
    sleep 2
    tps[$layout]=$(run_layout "$layout")
  done
  line="| $round | $(printf '%.0f' "${tps[today]}") |"
  for layout in "${layouts[@]:1}"; do
    line+=$(awk -v t="${tps[today]}" -v x="${tps[$layout]}" 'BEGIN { printf " %.0f | %.2f |", x, x / t }')
  done
  echo "$line"
done
