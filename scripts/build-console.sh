#!/usr/bin/env bash
# Builds the console and the `signet` binary: what `cargo leptos build` does,
# as four plain steps, so a fresh machine needs no cargo-leptos (a 15-25 min
# install). `cargo leptos watch` still works for development: the workspace
# keeps its [[workspace.metadata.leptos]] section, and both write the same
# site layout.
#
#   scripts/build-console.sh            debug build (what `make run` and the tests use)
#   scripts/build-console.sh --release  release build (deployments, benchmarks)
#
# Output: target/site/ (pkg/signet.js, pkg/signet.wasm, pkg/signet.css, the
# public/ assets) and target/{debug,release}/signet.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/end2end/node_modules/.bin:${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"

release=false
case "${1:-}" in
  "") ;;
  --release) release=true ;;
  *) echo "usage: $0 [--release]" >&2; exit 2 ;;
esac

target="${CARGO_TARGET_DIR:-target}"
site="${LEPTOS_SITE_ROOT:-target/site}"
pkg="$site/pkg"
# The server's HydrationScripts names /pkg/signet.js and /pkg/signet.wasm:
# it reads LEPTOS_OUTPUT_NAME at compile time (without it, it asks for
# signet_bg.wasm).
export LEPTOS_OUTPUT_NAME=signet

if $release; then
  # Release builds keep the view types (what a deployment runs).
  export RUSTFLAGS="${RUSTFLAGS:-}"
  front_profile=(--profile wasm-release)
  front_dir=wasm-release
  server_profile=(--release)
  server_dir=release
else
  # Debug builds erase the view types: far faster to compile, and the same
  # flag `scripts/test.sh` uses, so `cargo test` reuses these artifacts.
  export RUSTFLAGS="--cfg erase_components"
  front_profile=()
  front_dir=debug
  server_profile=()
  server_dir=debug
fi

echo "==> the console's wasm (cargo build -p frontend --target wasm32-unknown-unknown)"
# Its own target dir, as cargo-leptos does: the host build's proc macros are
# compiled with other flags, and sharing a dir would rebuild them each time.
cargo build -p frontend --lib --target wasm32-unknown-unknown --target-dir "$target/front" "${front_profile[@]}"

echo "==> JavaScript bindings (wasm-bindgen $(wasm-bindgen --version | awk '{print $2}'))"
mkdir -p "$pkg"
wasm-bindgen --target web --out-name signet --out-dir "$pkg" \
  "$target/front/wasm32-unknown-unknown/$front_dir/frontend.wasm"
mv -f "$pkg/signet_bg.wasm" "$pkg/signet.wasm"
if $release; then
  # Optional: binaryen's wasm-opt shrinks the wasm. Debian's (108) silently
  # breaks hydration, so only a recent one (npm's binaryen, 116+) is used.
  opt=$(command -v wasm-opt || true)
  ver=$([ -n "$opt" ] && "$opt" --version | sed -n 's/^wasm-opt version \([0-9]*\).*/\1/p' || true)
  if [ -n "$ver" ] && [ "$ver" -ge 116 ]; then
    "$opt" -Oz --enable-bulk-memory --enable-nontrapping-float-to-int "$pkg/signet.wasm" -o "$pkg/signet.wasm"
  else
    echo "    (no wasm-opt 116+ on PATH: the wasm is correct, only larger)"
  fi
fi

echo "==> stylesheet and assets"
cp style/main.css "$pkg/signet.css"
cp -R public/. "$site/"

echo "==> the signet binary (cargo build -p server)"
cargo build -p server --bin signet "${server_profile[@]}"
echo "==> built $target/$server_dir/signet and $site/"
