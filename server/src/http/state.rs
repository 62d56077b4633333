//! The router's state: what the console's server functions share with the
//! server's own handlers ([`SharedState`], defined beside the server
//! functions that read it from their context), plus what only the HTTP layer
//! uses.

use app::ssr::SharedState;
use axum::extract::FromRef;
use leptos::prelude::LeptosOptions;

#[derive(Clone)]
pub struct AppState {
    /// The console's site (paths, output name) for the Leptos routes.
    pub leptos_options: LeptosOptions,
    /// Send `Strict-Transport-Security` (the public URL is https).
    pub hsts: bool,
    pub shared: SharedState,
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(s: &AppState) -> Self {
        s.leptos_options.clone()
    }
}

impl FromRef<AppState> for SharedState {
    fn from_ref(s: &AppState) -> Self {
        s.shared.clone()
    }
}
