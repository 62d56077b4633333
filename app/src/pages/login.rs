//! `/login`: the only way in. Not inside the layout: there is no one to
//! show navigation to yet.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use crate::{
    api::session::{Login, setup_open},
    components::{ActionError, AuthCard, Credentials, IfLoaded, Notice, ReturnedError, Submit},
};

#[component]
pub fn LoginPage() -> impl IntoView {
    let action = ServerAction::<Login>::new();
    let query = use_query_map();
    let next = move || query.read().get("next").unwrap_or_default();
    let setup_done = move || query.read().get("setup").as_deref() == Some("done");
    let setup = Resource::new(|| (), |_| setup_open());
    view! {
        <AuthCard title="Sign in" heading="Sign in">
            {move || setup_done().then(|| view! { <Notice>"Administrator created — sign in."</Notice> })}
            <ReturnedError fixed=login_message/>
            <ActionError action/>
            <ActionForm action>
                <input type="hidden" name="next" value=next/>
                <Credentials/>
                <div class="actions">
                    <Submit action label="Sign in"/>
                </div>
            </ActionForm>
            <IfLoaded resource=setup render=|open: bool| open.then(|| view! {
                <p class="hint setup-hint">"No administrator yet: use the setup link printed by the server."</p>
            })/>
        </AuthCard>
    }
}

/// The sign-in page's own words for a failed sign-in, by error code: a link
/// carrying `__err` cannot put its text in the login box.
fn login_message(code: &str) -> &'static str {
    match code {
        "bad_credentials" => "Wrong username or password.",
        "throttled" => "Too many attempts. Wait a moment and try again.",
        "forwarding_invalid" => "Sign-in is refused: the reverse proxy sent a forwarding header Signet cannot read.",
        "invalid_input" => "Enter a username and a password.",
        _ => "try again.",
    }
}
