//! `/keys/:id/revoke`: confirmation before a key stops working at once.

use leptos::prelude::*;
use views::keys::KeyView;

use crate::{
    api::keys::RevokeKey,
    components::{ActionError, KeyPage, KeySummary, Submit},
    dto::Me,
};

#[component]
pub fn RevokePage() -> impl IntoView {
    view! { <KeyPage title="Revoke key" body=|key, me| view! { <Revoke key me/> }/> }
}

#[component]
fn Revoke(key: KeyView, me: Me) -> impl IntoView {
    let back = format!("/tenants/{}#endpoint-{}", key.tenant, key.endpoint);
    let live = key.status.is_live();
    let body = if !me.can_manage_tenant(key.tenant.as_str()) {
        view! { <p class="error" role="alert">"Your role cannot revoke keys of this tenant."</p> }.into_any()
    } else if !live {
        let status = key.status.as_str().replace('_', " ");
        view! {
            <p class="error" role="alert">"This key is already " {status} "; there is nothing to revoke."</p>
        }
        .into_any()
    } else {
        view! {
            <div class="warning danger" role="alert">
                <strong>"Revocation is immediate and cannot be undone."</strong>
                " Webhooks signed with this key are refused from the moment you confirm. "
                "If senders still use it, rotate instead."
            </div>
            <RevokeForm key_id=key.key_id.to_string()/>
        }
        .into_any()
    };
    view! {
        <p class="crumbs">
            <a href=back.clone()>{key.tenant.to_string()} " / " {key.endpoint.to_string()}</a>
            " / revoke"
        </p>
        <div class="two-col">
            <section class="card">
                <h2>"Key"</h2>
                <KeySummary key/>
            </section>
            <section class="card">
                <h2>"Confirm revocation"</h2>
                {body}
            </section>
        </div>
        <p><a href=back>"Cancel and go back"</a></p>
    }
}

#[component]
fn RevokeForm(key_id: String) -> impl IntoView {
    let action = ServerAction::<RevokeKey>::new();
    view! {
        <ActionError action/>
        <ActionForm action>
            <input type="hidden" name="key_id" value=key_id/>
            <label class="field">
                <span>"Reason"</span>
                <textarea
                    name="reason"
                    rows="3"
                    required
                    placeholder="e.g. secret exposed in a support ticket"
                ></textarea>
                <small class="hint">"Recorded in the audit log."</small>
            </label>
            <div class="actions">
                <Submit action label="Revoke key now" kind="danger"/>
            </div>
        </ActionForm>
    }
}
