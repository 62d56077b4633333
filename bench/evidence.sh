#!/usr/bin/env bash
# `make bench-evidence`: the sign-off evidence on the dashboard benchmark's
# data (ten million stored events over 30 days, 20 tenants x 2 endpoints,
# an approved key per endpoint), on PostgreSQL and on SQLite, with the
# release binary: `signet evidence export` and `signet drill run`, each as a
# whole command (process start, migrations check, vault, work, exit).
# BENCH_EVENTS overrides the event count, BENCH_RUNS the timed runs.
set -euo pipefail
cd "$(dirname "$0")/.."
PG_ADMIN=${SIGNET_TEST_PG_URL:-postgres://postgres@127.0.0.1:5432/test}
EVENTS=${BENCH_EVENTS:-10000000}
RUNS=${BENCH_RUNS:-5}

echo "==> release build" >&2
cargo build --release -p loadgen --bin dashbench >&2
cargo build --release -p server --bin signet >&2

db="signet_evid_$$"
work=$(mktemp -d)
trap 'psql "$PG_ADMIN" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
psql "$PG_ADMIN" -qc "CREATE DATABASE $db"
head -c 32 /dev/urandom | base64 > "$work/master.key"
chmod 600 "$work/master.key"

# Seconds of one run of "$@" (wall clock, whole process).
seconds() {
  local start end
  start=$(date +%s.%N)
  "$@" >/dev/null 2>"$work/last.err" || { cat "$work/last.err" >&2; return 1; }
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}

# Median, min and max of RUNS runs of "$@", after one warm-up run.
timed() {
  "$@" >/dev/null 2>&1 || true
  local t=()
  for _ in $(seq "$RUNS"); do t+=("$(seconds "$@")"); done
  printf '%s\n' "${t[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.2f | %.2f | %.2f", a[int((NR+1)/2)], a[1], a[NR]}'
}

echo "| engine | command | median s | min s | max s |"
echo "|---|---|---|---|---|"
for url in "${PG_ADMIN%/*}/$db" "sqlite://$work/signet.db?mode=rwc"; do
  engine=$([[ $url == postgres* ]] && echo PostgreSQL || echo SQLite)
  echo "==> seeding $engine ($EVENTS events)" >&2
  target/release/dashbench --database-url "$url" --events "$EVENTS" --master-key-file "$work/master.key" --seed-only >&2
  export DATABASE_URL=$url SIGNET_MASTER_KEY_FILE=$work/master.key SIGNET_DATA_DIR=$work
  echo "| $engine | \`signet drill run\` (all seven drills) | $(timed target/release/signet drill run) |"
  echo "| $engine | \`signet evidence export\` (all tenants) | $(timed target/release/signet evidence export --out "$work/bundle" --force) |"
  echo "| $engine | \`signet evidence export --tenant clinic-010\` | $(timed target/release/signet evidence export --out "$work/bundle" --force --tenant clinic-010) |"
  echo "| $engine | \`signet evidence verify\` | $(timed target/release/signet evidence verify "$work/bundle") |"
  target/release/signet evidence verify "$work/bundle" >&2
  unset DATABASE_URL
done
