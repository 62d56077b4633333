//! `/setup?token=…`: creates the first administrator with the token the
//! server printed at start.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use crate::{
    api::session::{SetupAdmin, setup_open},
    components::{ActionError, AuthCard, Credentials, Loaded, ReturnedError, Submit},
};

#[component]
pub fn SetupPage() -> impl IntoView {
    let open = Resource::new(|| (), |_| setup_open());
    view! {
        <AuthCard title="Set up" heading="Create the first administrator">
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
        </AuthCard>
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
            <Credentials new=true/>
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
