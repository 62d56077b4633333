#!/usr/bin/env bash
# Everything `make test` runs: the alert rules' promtool tests, unit and
# integration tests (SQLite and PostgreSQL), schemathesis against the real
# server, then the Playwright journeys against a real server.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/end2end/node_modules/.bin:${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"

# The same flags scripts/build-console.sh uses for debug builds, so `cargo test` reuses
# its artifacts instead of rebuilding everything.
export RUSTFLAGS="--cfg erase_components"
export LEPTOS_OUTPUT_NAME=signet

echo "==> layering rules (domain has no HTTP/UI; the wasm build has no DB or crypto)"
scripts/check-deps.sh

echo "==> alert rules (promtool check rules; promtool test rules: each fires and stays quiet)"
promtool check rules deploy/prometheus/alerts.yml
promtool test rules deploy/prometheus/alerts.test.yml

echo "==> formatting (cargo fmt --check) and lints (clippy, warnings are errors)"
cargo fmt --all --check
# rustfmt cannot wrap string literals, macro bodies or attributes: no line of
# the Rust sources may be longer than rustfmt.toml's max_width either way.
long=$(git ls-files -z '*.rs' | xargs -0 awk 'length > 120 { print FILENAME ":" FNR }')
if [ -n "$long" ]; then
  echo "lines over 120 columns (wrap them by hand):" >&2
  echo "$long" >&2
  exit 1
fi
cargo clippy --workspace --all-targets -- -D warnings

# Debug builds (scripts/build-console.sh, cargo test) erase the view types; release
# builds (make bench, a deployment's cargo build --release) do not, and have
# failed to compile where debug builds passed. Type-check that configuration
# too, in its own target dir so the debug artifacts stay valid.
echo "==> the release configuration type-checks (cargo check without erase_components)"
RUSTFLAGS="" CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/plain" cargo check -p server --bins

echo "==> building the console and the binary (scripts/build-console.sh)"
scripts/build-console.sh

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
