#!/usr/bin/env bash
# Installs what building and testing Signet needs, skipping what is present.
# Idempotent; safe to run before every `make run` / `make test`.
#
#   scripts/setup.sh         what `make run` needs: the wasm target and wasm-bindgen
#   scripts/setup.sh --test  also what only the tests need: Chromium, promtool and
#                            prometheus, libfaketime, the Playwright driver, schemathesis
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '==> %s\n' "$*"; }
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"

tests=false
case "${1:-}" in
  "") ;;
  --test) tests=true ;;
  *) echo "usage: $0 [--test]" >&2; exit 2 ;;
esac

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  say "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi

# No cargo-leptos: scripts/build-console.sh does its four steps with cargo and
# wasm-bindgen (cargo-leptos is an optional tool for `cargo leptos watch`).

# wasm-bindgen-cli must match the wasm-bindgen version in Cargo.lock exactly.
wbg=$(awk '/^name = "wasm-bindgen"$/{getline; gsub(/version = |"/,""); print; exit}' Cargo.lock)
if ! wasm-bindgen --version 2>/dev/null | grep -q " $wbg\$"; then
  say "installing wasm-bindgen-cli $wbg"
  CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
    cargo install wasm-bindgen-cli --version "$wbg" --force
fi

$tests || exit 0

if ! command -v chromium >/dev/null 2>&1; then
  say "installing Debian chromium for the browser tests"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get install -y chromium || { $SUDO apt-get update && $SUDO apt-get install -y chromium; }
fi

# promtool (the alert rules' checks and unit tests) and the prometheus
# server (the end-to-end alert test starts its own, on a free port).
if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
  say "installing Debian prometheus for the alert rule tests"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get install -y --no-install-recommends prometheus \
    || { $SUDO apt-get update && $SUDO apt-get install -y --no-install-recommends prometheus; }
  # The package starts a daemon on :9090 where systemd runs; nothing here needs it.
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
    say "stopping the prometheus service the package started (the tests run their own)"
    $SUDO systemctl disable --now prometheus || true
  fi
fi

# libfaketime: a test moves the clock of `signet serve` (not the database's)
# to see it refuse a clock far off the database's.
if ! ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1; then
  say "installing Debian libfaketime for the clock offset test"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get install -y --no-install-recommends libfaketime \
    || { $SUDO apt-get update && $SUDO apt-get install -y --no-install-recommends libfaketime; }
fi

# Playwright (driving the system chromium; never downloading a browser) and
# binaryen's wasm-opt for release builds (Debian's is too old).
if [ ! -x end2end/node_modules/.bin/playwright ] || [ end2end/package-lock.json -nt end2end/node_modules/.package-lock.json ]; then
  say "installing end2end npm packages"
  (cd end2end && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund)
fi

# schemathesis, pinned, in a repo-local virtualenv (scripts/schemathesis.sh).
if ! .venv/bin/schemathesis --version 2>/dev/null | grep -q ' 4\.32\.5$'; then
  say "installing schemathesis 4.32.5 into .venv/"
  [ -x .venv/bin/pip ] || python3 -m venv .venv
  .venv/bin/pip install --quiet 'schemathesis==4.32.5'
fi
