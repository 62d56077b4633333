# Shared by the bench scripts (sourced, not run, from the repository root).
PG_ADMIN=${SIGNET_TEST_PG_URL:-postgres://postgres@127.0.0.1:5432/test}
PORT=${BENCH_PORT:-3300}
HOOK="http://127.0.0.1:$PORT/hooks/bench/hooks"
BIN=target/release/signet
LOADGEN=target/release/loadgen

release_build() {
  echo "==> release build" >&2
  cargo build --release -p server -p loadgen >&2
}

# wait_ready PORT LOG: until the server on PORT answers /readyz; if it never
# does, print its LOG and stop.
wait_ready() {
  for _ in $(seq 1 50); do curl -fs "http://127.0.0.1:$1/readyz" >/dev/null && return 0; sleep 0.2; done
  echo "signet serve did not come up on port $1; its log:" >&2
  cat "$2" >&2
  exit 1
}

# start_server URL [PIN...]: a fresh data directory, one tenant, endpoint and
# approved key, and the server (under PIN, e.g. `taskset -c 1`) on PORT.
# Sets `server`, `secret` and `data`.
start_server() {
  local url=$1
  shift
  data=$(mktemp -d)
  export SIGNET_DATA_DIR=$data DATABASE_URL=$url SIGNET_LOG=warn
  $BIN tenant create bench >/dev/null
  $BIN endpoint create bench hooks --scheme standard-webhooks >/dev/null
  secret=$($BIN --json key provision bench hooks --approve-as bench | python3 -c 'import json,sys; print(json.load(sys.stdin)["secret"])')
  # Metrics on any free port: a `make run` beside it keeps 9464.
  SIGNET_ADDR=127.0.0.1:$PORT SIGNET_METRICS_ADDR=127.0.0.1:0 "$@" $BIN serve >/dev/null 2>"$data/server.log" &
  server=$!
  wait_ready "$PORT" "$data/server.log"
}
stop_server() {
  kill "$server"; wait "$server" 2>/dev/null || true
  server=""
  unset SIGNET_DATA_DIR DATABASE_URL
  rm -rf "$data"
}

# settle: between two measured runs, PostgreSQL writes out what the last one
# left dirty (a CHECKPOINT, so its flush does not land in the next run) and
# the disk gets BENCH_SETTLE_SECONDS (default 5) of quiet. Without it, pgbench's
# writes weighed on the server run after it and the ratio drifted down pair
# by pair.
settle() {
  psql "$PG_ADMIN" -qc CHECKPOINT >/dev/null
  sleep "${BENCH_SETTLE_SECONDS:-5}"
}

# scratch_pg NAME: a fresh PostgreSQL database NAME_<pid> (`db`, its URL in
# `url`) and a scratch directory `work` holding a fresh master key
# (`work/master.key`); both go when the script exits.
scratch_pg() {
  db="$1_$$"
  work=$(mktemp -d)
  trap 'psql "$PG_ADMIN" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
  psql "$PG_ADMIN" -qc "CREATE DATABASE $db"
  url="${PG_ADMIN%/*}/$db"
  head -c 32 /dev/urandom | base64 > "$work/master.key"
  chmod 600 "$work/master.key"
}
