#!/usr/bin/env bash
# Times a fresh machine's first `make run`: from `git clone` to the printed
# setup link, with an empty cargo home (no registry cache, no wasm-bindgen)
# and an empty target dir. Only the Rust toolchain itself (rustup's, with the
# wasm32 target) is taken from this machine, as a fresh one has it.
#
#   bench/first-run.sh [repo]      default: this checkout's committed HEAD
#
# Prints the minutes to the setup link and leaves the log in $work/run.log.
set -euo pipefail
repo="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
work=$(mktemp -d /tmp/signet-first-run.XXXXXX)
home="$work/home"
mkdir -p "$home/.cargo/bin"
# rustup's proxies (cargo, rustc, ...) and nothing installed beside them.
real_bin="${CARGO_HOME:-$HOME/.cargo}/bin"
for tool in cargo rustc rustup rustdoc cargo-fmt rustfmt cargo-clippy clippy-driver; do
  cp "$real_bin/$tool" "$home/.cargo/bin/"
done
export RUSTUP_HOME="${RUSTUP_HOME:-$HOME/.rustup}"
export HOME="$home" CARGO_HOME="$home/.cargo"
export PATH="$CARGO_HOME/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
unset RUSTFLAGS CARGO_TARGET_DIR CARGO_INCREMENTAL LEPTOS_OUTPUT_NAME LEPTOS_SITE_ROOT
export SIGNET_ADDR="127.0.0.1:${FIRST_RUN_PORT:-3190}" SIGNET_METRICS_ADDR=127.0.0.1:0

start=$(date +%s)
git clone -q "$repo" "$work/signet"
cd "$work/signet"
echo "==> make run in $work/signet (cargo home $CARGO_HOME), log in $work/run.log"
make run > "$work/run.log" 2>&1 &
pid=$!
while kill -0 "$pid" 2>/dev/null; do
  if grep -q 'setup?token=' "$work/run.log"; then
    end=$(date +%s)
    pkill -TERM -P "$pid" || true
    kill "$pid" 2>/dev/null || true
    pkill -f "$work/signet/target/debug/signet" || true
    secs=$((end - start))
    printf 'first make run: %dm%02ds from clone to the setup link (%s)\n' $((secs / 60)) $((secs % 60)) "$(git log -1 --format=%h)"
    exit 0
  fi
  sleep 2
done
echo "make run ended without printing the setup link; see $work/run.log" >&2
tail -n 20 "$work/run.log" >&2
exit 1
