//! Any path that is not a page.

use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn NotFound() -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(res) = use_context::<leptos_axum::ResponseOptions>() {
        res.set_status(http::StatusCode::NOT_FOUND);
    }
    view! {
        <Title text="Not found · Signet"/>
        <main class="auth">
            <div class="auth-card">
                <p class="auth-brand">"Signet"</p>
                <h1>"Page not found"</h1>
                <p>"There is no page at this address."</p>
                <p><a class="button primary" href="/">"Go to the console"</a></p>
            </div>
        </main>
    }
}
