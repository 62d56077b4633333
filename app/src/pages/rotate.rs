//! `/keys/:id/rotate`: replaces an active key with a new one and an overlap.

use leptos::prelude::*;
use views::keys::KeyStatus;
use views::keys::KeyView;

use crate::{
    api::keys::RotateKey,
    components::{ActionError, ApproveAsField, KeyPage, KeySummary, Submit},
    dto::Me,
};

#[component]
pub fn RotatePage() -> impl IntoView {
    view! { <KeyPage title="Rotate key" body=|key, me| view! { <Rotate key me/> }/> }
}

#[component]
fn Rotate(key: KeyView, me: Me) -> impl IntoView {
    let back = format!("/tenants/{}#endpoint-{}", key.tenant, key.endpoint);
    let new_owner = key.rotation_owner.clone();
    let activation = if me.is_admin() {
        "at once if you approve it now, otherwise once a security reviewer approves it."
    } else {
        "once a security reviewer approves it."
    };
    let blocker = if !me.can_manage_tenant(key.tenant.as_str()) {
        Some("Your role cannot rotate keys of this tenant.".to_owned())
    } else if key.status != KeyStatus::Active {
        Some(format!("Only an active key can be rotated; this key is {}.", key.status.as_str().replace('_', " ")))
    } else if !key.scope_approved {
        Some("This key's current scope is not approved; get it approved before rotating.".to_owned())
    } else {
        None
    };
    let form = match blocker {
        Some(reason) => view! { <p class="error" role="alert">{reason}</p> }.into_any(),
        None => view! { <RotateForm key_id=key.key_id.to_string() is_admin=me.is_admin()/> }.into_any(),
    };
    view! {
        <p class="crumbs">
            <a href=back.clone()>{key.tenant.to_string()} " / " {key.endpoint.to_string()}</a>
            " / rotate"
        </p>
        <div class="two-col">
            <section class="card">
                <h2>"The key today"</h2>
                <KeySummary key/>
            </section>
            <section class="card">
                <h2>"What happens"</h2>
                <ol class="steps">
                    <li>
                        "Signet creates a new key with the same scope, owned by this key's rotation owner ("
                        {new_owner} "), and shows its secret once."
                    </li>
                    <li>
                        "The old key keeps working until the new key is active: "
                        {activation}
                    </li>
                    <li>
                        "Then the old key retires: it still verifies during the overlap you choose, \
                        and expires after it."
                    </li>
                </ol>
                <p class="hint">
                    "Give the new secret to the sender during the overlap; nothing is refused while both keys verify."
                </p>
                {form}
            </section>
        </div>
        <p><a href=back>"Cancel and go back"</a></p>
    }
}

#[component]
fn RotateForm(key_id: String, is_admin: bool) -> impl IntoView {
    let action = ServerAction::<RotateKey>::new();
    view! {
        <ActionError action/>
        <ActionForm action>
            <input type="hidden" name="key_id" value=key_id/>
            <label class="field narrow">
                <span>"Overlap (hours)"</span>
                <input type="number" name="overlap_hours" value="24" min="0.1" max="168" step="any" required/>
                <small class="hint">
                    "How long the old key keeps working once the new one is active: up to 168 hours (7 days); \
                    0.5 is half an hour."
                </small>
            </label>
            {is_admin.then(|| view! {
                <ApproveAsField hint="Activate the new key at once, recorded as approved by this reviewer. \
                    Never you: four eyes. Empty: it waits for a security reviewer."/>
            })}
            <div class="actions">
                <Submit action label="Rotate key"/>
            </div>
        </ActionForm>
    }
}
