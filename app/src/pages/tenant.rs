//! `/tenants/:slug`: a tenant's endpoints and their keys, and (for those who
//! manage it) the forms that change them.

use leptos::prelude::*;
use leptos_router::hooks::{use_params_map, use_query_map};
use views::keys::KeyStatus;
use views::keys::KeyView;
use views::scheme::Scheme;

use crate::{
    api::{
        AppError,
        keys::ProvisionKey,
        registry::{CreateEndpoint, SetEndpointEnabled, load_tenant},
    },
    components::{
        ActionError, ApproveAsField, Countdown, EventTypes, KeyScope, Layout, Loaded, Notice, Refresh, ReturnedError,
        StatusBadge, Submit,
        format::{bytes, is_any_type, seconds, when},
    },
    dto::{EndpointKeys, Me, TenantOverview, TenantSummary},
};
use views::hmac::HmacPreset;

#[component]
pub fn TenantPage() -> impl IntoView {
    let params = use_params_map();
    let query = use_query_map();
    let slug = move || params.read().get("slug").unwrap_or_default();
    let refresh = Refresh::provide();
    // The retry-policy panel loads with the page; its own error stays in
    // the panel.
    let data = Resource::new(
        move || (slug(), refresh.get()),
        |(slug, _)| async move {
            let overview = load_tenant(slug.clone()).await?;
            Ok::<_, AppError>((overview, super::retry_policy::load_panel(slug).await))
        },
    );
    let revoked = move || query.read().get("revoked");
    view! {
        <Layout
            title=""
            render=move |me| view! {
                <Loaded resource=data what="tenant" name=slug heading="Tenant" render={
                    let me = me.clone();
                    move |(ov, policy)| view! { <TenantDetail ov me=me.clone() revoked=revoked() policy/> }
                }/>
            }
        />
    }
}

#[component]
fn TenantDetail(
    ov: TenantOverview,
    me: Me,
    revoked: Option<String>,
    policy: Result<super::retry_policy::PanelData, AppError>,
) -> impl IntoView {
    let TenantSummary { tenant: t, endpoint_count, active_keys, pending_keys } = ov.tenant;
    let can_manage = ov.can_manage;
    let is_admin = me.is_admin();
    let now_ms = ov.now_ms;
    let endpoints = if ov.endpoints.is_empty() {
        let hint = if can_manage {
            "Create one below to start receiving webhooks."
        } else {
            "Nobody has created an endpoint here yet."
        };
        view! {
            <div class="empty">
                <p class="empty-title">"No endpoints yet"</p>
                <p>{hint}</p>
            </div>
        }
        .into_any()
    } else {
        let slug = t.slug.to_string();
        ov.endpoints
            .into_iter()
            .map(|ep| view! { <EndpointCard tenant=slug.clone() ep can_manage is_admin now_ms/> })
            .collect_view()
            .into_any()
    };
    view! {
        <p class="crumbs"><a href="/tenants">"Tenants"</a> " / " {t.slug.to_string()}</p>
        <div class="page-head">
            <div>
                <h1>{t.name.clone()}</h1>
                <p class="muted">
                    <code>{t.slug.to_string()}</code>
                    " · created " {when(&t.created_at)}
                    " · notify URL: "
                    {match t.notify_url.clone() {
                        Some(u) => view! { <code>{u}</code> }.into_any(),
                        None => view! { <span>"none"</span> }.into_any(),
                    }}
                </p>
            </div>
            <dl class="stats">
                <div><dt>"Endpoints"</dt><dd>{endpoint_count}</dd></div>
                <div><dt>"Active keys"</dt><dd>{active_keys}</dd></div>
                <div><dt>"Awaiting approval"</dt><dd>{pending_keys}</dd></div>
            </dl>
        </div>
        {revoked.map(|id| view! {
            <Notice>"Key " <code>{id}</code> " is revoked. Webhooks signed with it are refused from now on."</Notice>
        })}
        <ReturnedError/>
        {(!can_manage).then(|| view! { <p class="hint">"Read-only: your role cannot change this tenant."</p> })}
        {endpoints}
        {can_manage.then(|| view! { <NewEndpointForm tenant=t.slug.to_string()/> })}
        <super::retry_policy::RetryPolicyCard policy is_admin/>
    }
}

#[component]
fn EndpointCard(tenant: String, ep: EndpointKeys, can_manage: bool, is_admin: bool, now_ms: i64) -> impl IntoView {
    let EndpointKeys { endpoint: ep, keys } = ep;
    let receive_url = format!("/hooks/{tenant}/{}", ep.slug);
    let onboard = format!("/tenants/{tenant}/endpoints/{}", ep.slug);
    let state = if ep.enabled { "enabled" } else { "disabled" };
    let types_hint = if is_any_type(&ep.event_types) { "any event type".to_owned() } else { ep.event_types.join(", ") };
    let anchor = format!("endpoint-{}", ep.slug);
    let has_live_key = keys.iter().any(|k| k.status.is_live());
    view! {
        <section class="card endpoint" class:endpoint-disabled=!ep.enabled id=anchor>
            <header class="card-head">
                <h2>
                    <span class="muted">"Endpoint "</span>
                    <code>{ep.slug.to_string()}</code>
                    " "
                    <span class=format!("badge badge-{state}")>{state}</span>
                </h2>
                {can_manage.then(|| view! {
                    <EndpointToggle tenant=tenant.clone() endpoint=ep.slug.to_string() enabled=ep.enabled/>
                })}
            </header>
            {(!ep.enabled).then(|| view! {
                <p class="warning">
                    "This endpoint is disabled: Signet refuses every webhook sent to it, whatever the signature."
                </p>
            })}
            <dl class="facts">
                <dt>"Receive URL"</dt>
                <dd>
                    <code>{receive_url}</code>
                    " · " <a href=onboard data-testid="onboard-link">"Onboard a provider and send a test delivery"</a>
                </dd>
                <dt>"Scheme"</dt>
                <dd data-testid="endpoint-scheme">
                    {ep.hmac_profile.as_ref().map_or_else(|| ep.scheme.as_str().to_owned(), |p| p.describe())}
                </dd>
                <dt>"Event types"</dt>
                <dd><EventTypes types=ep.event_types.clone()/></dd>
                <dt>"Timestamp tolerance"</dt>
                <dd>{seconds(ep.tolerance_secs)}</dd>
                <dt>"Max body"</dt>
                <dd>{bytes(ep.max_body_bytes)}</dd>
                <dt>"Events without an id"</dt>
                <dd data-testid="event-key">
                    {match &ep.event_key {
                        Some(fields) => view! {
                            "identified by the compound key " <code>{fields.join(" + ")}</code>
                            " (" <code>"signet endpoint event-key"</code>
                            " changes it; every change is versioned and audited)"
                        }.into_any(),
                        None => view! {
                            "quarantined as " <code>"missing_event_id"</code>
                            " (no compound key: an event is never deduplicated by its body alone)"
                        }.into_any(),
                    }}
                </dd>
                <dt>"Created"</dt>
                <dd>{when(&ep.created_at)}</dd>
            </dl>
            <h3>"Signing keys"</h3>
            <KeyTable keys can_manage now_ms/>
            {can_manage.then(|| view! {
                <ProvisionForm tenant endpoint=ep.slug.into_string() types_hint is_admin open=!has_live_key/>
            })}
        </section>
    }
}

#[component]
fn EndpointToggle(tenant: String, endpoint: String, enabled: bool) -> impl IntoView {
    let action = ServerAction::<SetEndpointEnabled>::new();
    Refresh::after(action);
    let (label, kind) =
        if enabled { ("Disable endpoint", "danger-outline small") } else { ("Enable endpoint", "secondary small") };
    view! {
        <div class="toggle">
            <ActionForm action>
                <input type="hidden" name="tenant" value=tenant/>
                <input type="hidden" name="endpoint" value=endpoint/>
                <input type="hidden" name="enabled" value=(!enabled).to_string()/>
                <Submit action label kind/>
            </ActionForm>
            <ActionError action/>
        </div>
    }
}

#[component]
fn KeyTable(keys: Vec<KeyView>, can_manage: bool, now_ms: i64) -> impl IntoView {
    if keys.is_empty() {
        return view! {
            <p class="empty-inline">"No keys yet. Provision one so senders can sign webhooks for this endpoint."</p>
        }
        .into_any();
    }
    view! {
        <div class="table-wrap">
            <table class="keys">
                <thead>
                    <tr>
                        <th>"Key"</th>
                        <th>"Status"</th>
                        <th>"Scope"</th>
                        <th>"Owner / rotation owner"</th>
                        <th>"Created"</th>
                        <th>"Last used"</th>
                        {can_manage.then(|| view! { <th><span class="visually-hidden">"Actions"</span></th> })}
                    </tr>
                </thead>
                <tbody>
                    {keys.into_iter().map(|key| view! { <KeyRow key can_manage now_ms/> }).collect_view()}
                </tbody>
            </table>
        </div>
    }
    .into_any()
}

#[component]
fn KeyRow(key: KeyView, can_manage: bool, now_ms: i64) -> impl IntoView {
    let status_note = match (key.status.as_str(), key.expires_at_ms) {
        ("retiring", Some(at)) => Some(view! { <Countdown expires_at_ms=at now_ms/> }.into_any()),
        ("revoked", _) => key.revoked_at.as_deref().map(|t| view! { <span class="muted">{when(t)}</span> }.into_any()),
        _ => None,
    };
    let last_used = match &key.last_verified_at {
        Some(t) => view! {
            <span class="nowrap">{when(t)}</span> <br/><span class="muted">{key.verified_count} " verified"</span>
        }
        .into_any(),
        None => view! { <span class="muted">"never"</span> }.into_any(),
    };
    // Failed verifications counted under this key (the verification log per
    // credential of docs/architecture.md#idempotency-is-not-authorization).
    let last_failure = key.last_failure_at.clone().map(|t| {
        let reason = key.last_failure_reason.clone().unwrap_or_default().replace('_', " ");
        view! {
            <br/>
            <span class="fail-note" data-testid="key-last-failure">
                {key.failure_count} " failed · last " {when(&t)} ": " {reason}
            </span>
        }
    });
    let actions = can_manage.then(|| {
        let rotate = (key.status == KeyStatus::Active).then(|| {
            view! { <a class="button secondary small" href=format!("/keys/{}/rotate", key.key_id)>"Rotate"</a> }
        });
        let revoke = key.status.is_live().then(|| {
            view! { <a class="button danger-outline small" href=format!("/keys/{}/revoke", key.key_id)>"Revoke"</a> }
        });
        view! { <td class="row-actions">{rotate} {revoke}</td> }
    });
    view! {
        <tr>
            <td class="nowrap">
                <code>{key.key_id.to_string()}</code>
                {key.replaces_key_id.clone().map(|r| view! {
                    <br/><span class="muted" title=format!("Replaces {r}")>"rotation"</span>
                })}
                {key.public_key.clone().map(|pk| view! {
                    <br/><span class="muted" title=pk>"v1a public key · cannot sign"</span>
                })}
            </td>
            <td class="status">
                <StatusBadge status=key.status.as_str()/>
                {status_note.map(|n| view! { <br/>{n} })}
            </td>
            <td><KeyScope key=key.clone()/></td>
            <td>{key.owner.clone()} <br/><span class="muted">"rotation: " {key.rotation_owner.clone()}</span></td>
            <td>
                <span class="nowrap">{when(&key.created_at)}</span>
                <br/><span class="muted">"by " {key.created_by.clone()}</span>
            </td>
            <td>{last_used} {last_failure}</td>
            {actions}
        </tr>
    }
}

/// Open while the endpoint has no working key (provisioning is the next
/// step); folded away once it has one.
#[component]
fn ProvisionForm(tenant: String, endpoint: String, types_hint: String, is_admin: bool, open: bool) -> impl IntoView {
    let action = ServerAction::<ProvisionKey>::new();
    Refresh::after(action);
    view! {
        <details class="subform" open=open>
            <summary>"Provision a key"</summary>
            <ActionError action/>
            <ActionForm action>
                <input type="hidden" name="tenant" value=tenant/>
                <input type="hidden" name="endpoint" value=endpoint/>
                <div class="form-grid">
                    <label class="field">
                        <span>"Owner"</span>
                        <input type="text" name="owner" placeholder="you"/>
                        <small class="hint">"Who answers for this key. Empty: you."</small>
                    </label>
                    <label class="field">
                        <span>"Rotation owner"</span>
                        <input type="text" name="rotation_owner" placeholder="same as owner"/>
                        <small class="hint">"Who rotates it when the time comes."</small>
                    </label>
                    <label class="field wide">
                        <span>"Event types " <em class="optional">"(optional)"</em></span>
                        <input type="text" name="event_types" placeholder="all of the endpoint's types"/>
                        <small class="hint">
                            "Comma-separated, to scope the key more narrowly than the endpoint (" {types_hint} ")."
                        </small>
                    </label>
                </div>
                {is_admin.then(|| view! {
                    <ApproveAsField hint="Activate at once, recorded as approved by this reviewer. \
                        Never you: four eyes. \
                        Empty: a security reviewer approves the scope before the key verifies anything."/>
                })}
                <div class="actions">
                    <Submit action label="Provision key"/>
                </div>
            </ActionForm>
        </details>
    }
}

/// Scheme `hmac`'s profile: a known sender's preset, or a custom profile as
/// JSON. Shown only while `hmac` is the chosen scheme (CSS `:has`, so with
/// or without JavaScript); the server refuses a profile for another scheme.
#[component]
fn HmacProfileFields() -> impl IntoView {
    view! {
        <fieldset class="field wide hmac-only" data-testid="hmac-profile-fields">
            <legend>"HMAC profile " <em class="optional">"(scheme hmac only)"</em></legend>
            <label class="field">
                <span>"Preset"</span>
                <select name="hmac_preset">
                    <option value="">"custom profile (below)"</option>
                    {HmacPreset::ALL
                        .into_iter()
                        .map(|p| view! { <option value=p.as_str()>{p.as_str()}</option> })
                        .collect_view()}
                </select>
                <small class="hint">
                    "dvir: X-DVIR-Signature t=…,v1=… · shopify: X-Shopify-Hmac-Sha256, base64 · "
                    "slack: X-Slack-Signature v0=… with X-Slack-Request-Timestamp"
                </small>
            </label>
            <label class="field wide">
                <span>"Custom profile (JSON)"</span>
                <textarea name="hmac_profile" rows="6" spellcheck="false" placeholder=CUSTOM_PROFILE_EXAMPLE></textarea>
                <small class="hint">
                    "Only without a preset. Fields: signature_header, signature_format (digest | pairs), prefix, "
                    "encoding (hex | base64), algorithm (sha256 | sha512), signed_content over {body}, {timestamp} "
                    "and {id}, timestamp_header, tolerance_secs, event_id (header:NAME or json:/pointer)."
                </small>
            </label>
        </fieldset>
    }
}

const CUSTOM_PROFILE_EXAMPLE: &str = r#"{"signature_header": "X-Acme-Signature", "signature_format": "digest",
 "prefix": "sha256=", "encoding": "hex", "algorithm": "sha256", "signed_content": "{timestamp}.{body}",
 "timestamp_header": "X-Acme-Timestamp", "event_id": "header:X-Acme-Id"}"#;

#[component]
fn NewEndpointForm(tenant: String) -> impl IntoView {
    let action = ServerAction::<CreateEndpoint>::new();
    Refresh::after(action);
    view! {
        <section class="card">
            <h2>"New endpoint"</h2>
            <ActionError action/>
            <ActionForm action>
                <input type="hidden" name="tenant" value=tenant/>
                <div class="form-grid">
                    <label class="field">
                        <span>"Endpoint slug"</span>
                        <input type="text" name="slug" required pattern="[a-z0-9][a-z0-9\\-]*" placeholder="reminders"/>
                        <small class="hint">"Lower-case letters, digits and hyphens."</small>
                    </label>
                    <label class="field">
                        <span>"Signature scheme"</span>
                        <select name="scheme">
                            {Scheme::ALL
                                .into_iter()
                                .map(|s| view! { <option value=s.as_str()>{s.as_str()}</option> })
                                .collect_view()}
                        </select>
                    </label>
                    <HmacProfileFields/>
                    <label class="field wide">
                        <span>"Event types " <em class="optional">"(optional)"</em></span>
                        <input type="text" name="event_types" placeholder="reminder.created, otp.requested"/>
                        <small class="hint">"Comma-separated. Empty: any event type."</small>
                    </label>
                    <label class="field">
                        <span>"Timestamp tolerance (seconds)"</span>
                        <input type="number" name="tolerance_secs" min="1" max="3600" placeholder="300"/>
                    </label>
                    <label class="field">
                        <span>"Max body (bytes)"</span>
                        <input type="number" name="max_body_bytes" min="1" max="10485760" placeholder="1048576"/>
                    </label>
                </div>
                <div class="actions">
                    <Submit action label="Create endpoint"/>
                </div>
            </ActionForm>
        </section>
    }
}
