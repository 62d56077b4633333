#!/usr/bin/env bash
# `make bench-kek`: the KEK rewrap on the dashboard benchmark's data (ten
# million stored events over 30 days, 20 tenants x 2 endpoints, an approved
# key per endpoint), with a sealed 1 KiB body in every event of the last 7
# days (the default body retention), on PostgreSQL and on SQLite, with the
# release binary. Times `signet kek status` (counting rows per version) and
# `signet kek rotate` (add a version, reseal every sealed row), each as a
# whole command, and prints the rows read and resealed per second.
# BENCH_EVENTS overrides the event count, BENCH_BODY_DAYS the sealed days.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
EVENTS=${BENCH_EVENTS:-10000000}
BODY_DAYS=${BENCH_BODY_DAYS:-7}

echo "==> release build" >&2
cargo build --release -p loadgen --bin dashbench >&2
cargo build --release -p server --bin signet >&2

scratch_pg signet_kek

echo "| engine | sealed rows | \`kek status\` s | \`kek rotate\` s | rows read | rows resealed | resealed rows/s |"
echo "|---|---|---|---|---|---|---|"
pg_url=$url
for url in "$pg_url" "sqlite://$work/signet.db?mode=rwc"; do
  engine=$([[ $url == postgres* ]] && echo PostgreSQL || echo SQLite)
  echo "==> seeding $engine ($EVENTS events, bodies for the last $BODY_DAYS days)" >&2
  target/release/dashbench --database-url "$url" --events "$EVENTS" --master-key-file "$work/master.key" --seed-only --sealed-body-days "$BODY_DAYS" >&2
  export DATABASE_URL=$url SIGNET_MASTER_KEY_FILE=$work/master.key SIGNET_DATA_DIR=$work
  start=$(date +%s.%N)
  target/release/signet --json kek status > "$work/status.json"
  status_s=$(echo "$(date +%s.%N) - $start" | bc)
  sealed=$(python3 -c 'import json,sys; print(sum(v["total_rows"] for v in json.load(open(sys.argv[1]))["versions"]))' "$work/status.json")
  start=$(date +%s.%N)
  target/release/signet --json kek rotate > "$work/rotate.json"
  rotate_s=$(echo "$(date +%s.%N) - $start" | bc)
  python3 - "$work/rotate.json" "$engine" "$sealed" "$status_s" "$rotate_s" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["rewrap"]
engine, sealed, status_s, rotate_s = sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
assert r["status"] == "finished" and r["rewrapped"] == sealed, r
print(f"| {engine} | {sealed} | {status_s:.2f} | {rotate_s:.1f} | {r['scanned']} | {r['rewrapped']} | {r['rewrapped'] / rotate_s:.0f} |")
PY
  unset DATABASE_URL
done
