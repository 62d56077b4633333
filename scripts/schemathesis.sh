#!/usr/bin/env bash
# Runs schemathesis with every check against the real `signet serve`: a
# fresh SQLite data dir, an admin token, a seeded tenant and endpoint so path
# parameters can name existing objects. Fails on any failure. Configuration
# (and the few checks turned off, each with its reason) in schemathesis.toml.
set -euo pipefail
cd "$(dirname "$0")/.."

bin="${CARGO_TARGET_DIR:-target}/debug/signet"
st=".venv/bin/schemathesis"
[ -x "$bin" ] || { echo "no $bin: build it first (cargo build -p server)" >&2; exit 1; }
[ -x "$st" ] || { echo "no $st: run scripts/setup.sh" >&2; exit 1; }

data=$(mktemp -d)
server=""
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$data"
}
trap cleanup EXIT

export SIGNET_DATA_DIR="$data"
SIGNET_MASTER_KEY=$(head -c 32 /dev/urandom | base64)
export SIGNET_MASTER_KEY
export SIGNET_LOG=warn

"$bin" user create st-admin --role admin </dev/null >/dev/null
token=$("$bin" --json token create --name schemathesis --role admin | sed -n 's/.*"token":"\([^"]*\)".*/\1/p')
[ -n "$token" ] || { echo "could not create an API token" >&2; exit 1; }
"$bin" tenant create clinic-a --name "Clinic A" >/dev/null
"$bin" endpoint create clinic-a hooks --scheme standard-webhooks >/dev/null

SIGNET_ADDR=127.0.0.1:0 SIGNET_METRICS_ADDR=127.0.0.1:0 LEPTOS_SITE_ROOT="$data/site" \
  "$bin" serve >"$data/serve.log" 2>&1 &
server=$!
base=""
for _ in $(seq 1 300); do
  base=$(sed -n 's/^Signet is listening on \(http:[^ ]*\).*/\1/p' "$data/serve.log")
  [ -n "$base" ] && break
  kill -0 "$server" 2>/dev/null || { cat "$data/serve.log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$base" ] || { echo "signet serve did not start" >&2; cat "$data/serve.log" >&2; exit 1; }

echo "==> schemathesis --checks all against $base/api/v1/openapi.json"
"$st" --config-file scripts/schemathesis.toml run "$base/api/v1/openapi.json" \
  -H "Authorization: Bearer $token" "$@"
