#!/usr/bin/env bash
# The layering rules of STYLE.md, checked on the real dependency trees:
# the domain crate has no HTTP or UI in it, the browser build carries no
# database, runtime or key-handling code, and the views crate stands alone.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
# No leptos or axum in the domain, nor the evidence page: the edges hand the
# export its renderer.
if cargo tree -p domain -e normal --prefix none | grep -E '^(leptos|axum|askama|evidence-html)' ; then
  echo "domain must not depend on leptos, axum or the evidence page (askama)"; fail=1
fi
if cargo tree -p frontend --target wasm32-unknown-unknown -e normal --prefix none | grep -E '^(sea-orm|sqlx|tokio|aes-gcm|hmac|argon2) ' ; then
  echo "the wasm build must not contain sea-orm, sqlx, tokio, aes-gcm, hmac or argon2"; fail=1
fi
# The shared view types stand alone: the browser and every server crate use
# them, so they may depend on nothing of ours (and on no database or runtime).
if cargo tree -p views -e normal --prefix none | tail -n +2 | grep -E '^(app|domain|migrations|server|frontend|loadgen|sea-orm|sqlx|tokio) ' ; then
  echo "views must depend on nothing of ours and on no database or runtime"; fail=1
fi
exit $fail
