#!/usr/bin/env bash
# `make bench-dashboard`: the dashboard reads (GET /api/v1/stats) against ten
# million stored events on PostgreSQL and on SQLite. Seeds each database
# (a few minutes per engine), then prints a Markdown table of median / p95
# milliseconds per read. BENCH_EVENTS overrides the event count.
set -euo pipefail
cd "$(dirname "$0")/.."
PG_ADMIN=${SIGNET_TEST_PG_URL:-postgres://postgres@127.0.0.1:5432/test}
EVENTS=${BENCH_EVENTS:-10000000}

echo "==> release build" >&2
cargo build --release -p loadgen --bin dashbench >&2

db="signet_dash_$$"
data=$(mktemp -d)
trap 'psql "$PG_ADMIN" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true; rm -rf "$data"' EXIT
psql "$PG_ADMIN" -qc "CREATE DATABASE $db"

echo "| engine | read | median ms | p95 ms |"
echo "|---|---|---|---|"
target/release/dashbench --database-url "${PG_ADMIN%/*}/$db" --events "$EVENTS"
target/release/dashbench --database-url "sqlite://$data/signet.db?mode=rwc" --events "$EVENTS"
