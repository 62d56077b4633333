#!/usr/bin/env bash
# Everything `make test` runs: unit and integration tests (SQLite and
# PostgreSQL), schemathesis against the real server, then the Playwright
# journeys against a real server.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/end2end/node_modules/.bin:$HOME/.cargo/bin:$PATH"

# The same flags cargo-leptos uses for debug builds, so `cargo test` reuses
# its artifacts instead of rebuilding everything.
export RUSTFLAGS="--cfg erase_components"
export LEPTOS_OUTPUT_NAME=signet

echo "==> layering rules (domain has no HTTP/UI; the wasm build has no DB or crypto)"
scripts/check-deps.sh

echo "==> formatting (cargo fmt --check) and lints (clippy, warnings are errors)"
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings

echo "==> building the console (cargo leptos build)"
cargo leptos build

echo "==> cargo test (SQLite and PostgreSQL)"
cargo test --workspace --no-fail-fast

echo "==> schemathesis against the real server (every check)"
scripts/schemathesis.sh

echo "==> Playwright journeys (JavaScript off and on)"
rm -f end2end/console-errors.txt
if ! (cd end2end && npx playwright test); then
  if [ -s end2end/console-errors.txt ]; then
    echo "==> browser console errors seen by the journeys:"
    cat end2end/console-errors.txt
  fi
  exit 1
fi
