//! How a signing key is shown: its status, scope, expiry countdown and a
//! summary card for the pages that act on one key.

use std::time::Duration;
use views::keys::KeyStatus;
use views::keys::KeyView;

use leptos::prelude::*;

use super::format::{duration, is_any_type, when, when_or};

#[component]
pub fn StatusBadge(#[prop(into)] status: String) -> impl IntoView {
    let class = format!("badge badge-{status}");
    view! { <span class=class>{status.replace('_', " ")}</span> }
}

/// The event types a key or endpoint accepts, each as code.
#[component]
pub fn EventTypes(types: Vec<String>) -> impl IntoView {
    if is_any_type(&types) {
        view! { <span class="any-type">"any event type"</span> }.into_any()
    } else {
        view! {
            <span class="event-types">
                {types.into_iter().map(|t| view! { <code class="chip">{t}</code> }).collect_view()}
            </span>
        }
        .into_any()
    }
}

/// A key's scope with a flag while it is not (or no longer) approved.
#[component]
pub fn KeyScope(key: KeyView) -> impl IntoView {
    let live = key.status.is_live();
    let flag = (live && !key.scope_approved).then(|| {
        let text = if key.status == KeyStatus::PendingApproval {
            "awaiting approval"
        } else {
            "scope not approved: not verifying"
        };
        view! { <span class="flag">{text}</span> }
    });
    view! {
        <EventTypes types=key.event_types/>
        {flag}
    }
}

/// "expires in 3 h 12 min". The server renders the time left when the page
/// was read; once hydrated it counts down every second.
#[component]
pub fn Countdown(expires_at_ms: i64, now_ms: i64) -> impl IntoView {
    let elapsed = RwSignal::new(0i64);
    Effect::new(move |_| {
        if let Ok(handle) = set_interval_with_handle(move || elapsed.update(|e| *e += 1000), Duration::from_secs(1)) {
            on_cleanup(move || handle.clear());
        }
    });
    view! {
        <span class="countdown">
            {move || {
                let left = expires_at_ms - now_ms - elapsed.get();
                if left > 0 { format!("expires in {}", duration(left)) } else { "expired".to_owned() }
            }}
        </span>
    }
}

/// Everything about one key, for the rotate, revoke and secret pages.
#[component]
pub fn KeySummary(key: KeyView) -> impl IntoView {
    let tenant_href = format!("/tenants/{}", key.tenant);
    let last_used = match &key.last_verified_at {
        Some(t) => format!("{} ({} verified)", when(t), key.verified_count),
        None => "never".to_owned(),
    };
    view! {
        <dl class="facts">
            <dt>"Key"</dt>
            <dd><code>{key.key_id.to_string()}</code></dd>
            <dt>"Status"</dt>
            <dd><StatusBadge status=key.status.as_str()/></dd>
            {key.revoked_at.clone().map(|at| view! {
                <dt>"Revoked"</dt>
                <dd>
                    {when(&at)}
                    {key.revoked_reason.clone().map(|r| view! { <span class="muted">" — reason: " {r}</span> })}
                </dd>
            })}
            <dt>"Tenant / endpoint"</dt>
            <dd><a href=tenant_href>{key.tenant.to_string()}</a> " / " {key.endpoint.to_string()}</dd>
            <dt>"Scheme"</dt>
            <dd>{key.scheme.as_str()}</dd>
            <dt>"Scope"</dt>
            <dd><KeyScope key=key.clone()/></dd>
            <dt>"Owner"</dt>
            <dd>{key.owner.clone()}</dd>
            <dt>"Rotation owner"</dt>
            <dd>{key.rotation_owner.clone()}</dd>
            <dt>"Created"</dt>
            <dd>{when(&key.created_at)} " by " {key.created_by.clone()}</dd>
            <dt>"Activated"</dt>
            <dd>{when_or(key.activated_at.as_deref(), "not yet")}</dd>
            {key
                .expires_at
                .clone()
                .filter(|_| matches!(key.status.as_str(), "retiring" | "expired"))
                .map(|t| view! { <dt>"Expires"</dt><dd>{when(&t)}</dd> })}
            {key.replaces_key_id.clone().map(|r| view! { <dt>"Replaces"</dt><dd><code>{r.into_string()}</code></dd> })}
            <dt>"Last used"</dt>
            <dd>{last_used}</dd>
            <dt>"Failed verifications"</dt>
            <dd data-testid="key-failures">
                {match &key.last_failure_at {
                    Some(t) => format!(
                        "{} counted under this key; the last {} ({})",
                        key.failure_count,
                        when(t),
                        key.last_failure_reason.clone().unwrap_or_default().replace('_', " ")
                    ),
                    None => "none".to_owned(),
                }}
            </dd>
        </dl>
    }
}

/// The frame of a page about one key (`/keys/:id/…`): loads the key named
/// in the URL, shows a clear error if it cannot be seen, and otherwise
/// renders `body` with it and the signed-in user.
#[component]
pub fn KeyPage<F, V>(title: &'static str, body: F) -> impl IntoView
where
    F: Fn(KeyView, crate::dto::Me) -> V + Clone + Send + Sync + 'static,
    V: IntoView + 'static,
{
    use leptos_router::hooks::use_params_map;

    use crate::{
        api::keys::get_key,
        components::{Layout, Loaded, ReturnedError},
    };
    let params = use_params_map();
    let key_id = move || params.read().get("id").unwrap_or_default();
    let key = Resource::new(key_id, get_key);
    view! {
        <Layout
            title=title
            render=move |me| {
                let body = body.clone();
                view! {
                    <ReturnedError/>
                    <Loaded resource=key what="key" name=key_id render=move |key| body(key, me.clone())/>
                }
            }
        />
    }
}
