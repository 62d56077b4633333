//! `/setup?token=…`: creates the first administrator with the token the
//! server printed at start.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::{
    api::session::{SetupAdmin, setup_open},
    components::{ActionError, Loaded, ReturnedError, Submit},
};

#[component]
pub fn SetupPage() -> impl IntoView {
    let open = Resource::new(|| (), |_| setup_open());
    view! {
        <Title text="Set up · Signet"/>
        <main class="auth">
            <div class="auth-card">
                <p class="auth-brand">"Signet"</p>
                <h1>"Create the first administrator"</h1>
                <Loaded resource=open render=|open| {
                    if open {
                        view! { <SetupForm/> }.into_any()
                    } else {
                        view! {
                            <p>"Setup is finished: an administrator exists."</p>
                            <p><a class="button primary" href="/login">"Go to sign in"</a></p>
                        }
                        .into_any()
                    }
                }/>
            </div>
        </main>
    }
}

#[component]
fn SetupForm() -> impl IntoView {
    let action = ServerAction::<SetupAdmin>::new();
    let query = use_query_map();
    let token = move || query.read_untracked().get("token").unwrap_or_default();
    if token().is_empty() {
        return view! {
            <p class="error" role="alert">
                "This page needs the setup link printed by the server: it carries a one-time token. "
                "Look for “Create the first administrator” in the server's output."
            </p>
        }
        .into_any();
    }
    view! {
        <p class="hint">
            "This account can do everything, including creating the other users. "
            "Passwords need at least 12 characters."
        </p>
        <ReturnedError/>
        <ActionError action/>
        <ActionForm action>
            <input type="hidden" name="token" value=token/>
            <label class="field">
                <span>"Username"</span>
                <input type="text" name="username" autocomplete="username" required autofocus/>
            </label>
            <label class="field">
                <span>"Password"</span>
                <input type="password" name="password" autocomplete="new-password" minlength="12" required/>
            </label>
            <label class="field">
                <span>"Confirm password"</span>
                <input type="password" name="confirm" autocomplete="new-password" minlength="12" required/>
            </label>
            <div class="actions">
                <Submit action label="Create administrator"/>
            </div>
        </ActionForm>
    }
    .into_any()
}
