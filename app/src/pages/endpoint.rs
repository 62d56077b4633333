//! `/tenants/:slug/endpoints/:endpoint`: onboarding a provider. What the
//! endpoint expects a provider to send (URL, scheme, headers, a signed
//! example), the `v1a` public keys it registered, and a test delivery
//! through the real receiver with each gate's outcome.

use leptos::prelude::*;
use leptos_router::hooks::{use_params_map, use_query_map};
use views::onboarding::GateResult;
use views::onboarding::LastTestDelivery;
use views::onboarding::OnboardingView;
use views::onboarding::TestDeliveryView;

use crate::{
    api::registry::{SendTestDelivery, endpoint_onboarding},
    components::{ActionError, Layout, Loaded, ReturnedError, Submit, format::when},
    dto::OnboardingPage,
};

#[component]
pub fn EndpointPage() -> impl IntoView {
    let params = use_params_map();
    let query = use_query_map();
    let tenant = move || params.read().get("slug").unwrap_or_default();
    let endpoint = move || params.read().get("endpoint").unwrap_or_default();
    // A test delivery redirects here with `?tested=`: a new key reloads.
    let tested = move || query.read().get("tested");
    let data = Resource::new(
        move || (tenant(), endpoint(), tested()),
        |(tenant, endpoint, _)| endpoint_onboarding(tenant, endpoint),
    );
    view! {
        <Layout
            title=""
            render=move |_| view! {
                <Loaded resource=data what="endpoint" name=endpoint heading="Endpoint" render=move |page| view! {
                    <Onboarding page/>
                }/>
            }
        />
    }
}

#[component]
fn Onboarding(page: OnboardingPage) -> impl IntoView {
    let OnboardingPage { guide, can_send } = page;
    let g = guide.clone();
    let back = format!("/tenants/{}#endpoint-{}", g.tenant, g.endpoint);
    view! {
        <p class="crumbs">
            <a href="/tenants">"Tenants"</a> " / " <a href=back>{g.tenant.to_string()}</a>
            " / " {g.endpoint.to_string()}
        </p>
        <div class="page-head">
            <div>
                <h1>"Onboard a provider"</h1>
                <p class="muted">
                    "Endpoint " <code>{g.endpoint.to_string()}</code> " of " <code>{g.tenant.to_string()}</code>
                    " · scheme " <code data-testid="scheme">{g.scheme.as_str()}</code>
                </p>
            </div>
        </div>
        <ReturnedError/>
        <WhatToSend guide=guide.clone()/>
        <Profile guide=guide.clone()/>
        <PublicKeys guide=guide.clone()/>
        <TestDelivery guide can_send/>
    }
}

#[component]
fn WhatToSend(guide: OnboardingView) -> impl IntoView {
    view! {
        <section class="card" data-testid="onboarding">
            <h2>"What the provider sends"</h2>
            <dl class="facts">
                <dt>"URL"</dt>
                <dd><code data-testid="hook-url">{guide.url.clone()}</code> " (POST, JSON body)"</dd>
                <dt>"Scheme"</dt>
                <dd><code>{guide.scheme.as_str()}</code></dd>
                <dt>"Signed content"</dt>
                <dd><code>{guide.signed_content.clone()}</code> ", over the exact bytes sent"</dd>
                <dt>"Signature"</dt>
                <dd><code>{guide.signature.clone()}</code></dd>
                <dt>"Event id"</dt>
                <dd>{guide.event_id_source.clone()}</dd>
            </dl>
            <h3>"Headers"</h3>
            <div class="table-wrap">
                <table data-testid="headers">
                    <thead><tr><th>"Header"</th><th>"Example value"</th></tr></thead>
                    <tbody>
                        {guide.headers.iter().map(|h| view! {
                            <tr><td><code>{h.name.clone()}</code></td><td><code>{h.value.clone()}</code></td></tr>
                        }).collect_view()}
                    </tbody>
                </table>
            </div>
            <p class="hint">
                "The examples are signed with a placeholder secret, not this endpoint's key: Signet refuses them "
                "(" <code>"signature_mismatch"</code> ") until the provider signs with its own secret. "
                "Their timestamp is the time this page was loaded."
            </p>
            <h3>"With curl"</h3>
            <pre class="body" data-testid="curl">{guide.curl.clone()}</pre>
            <h3>"With " <code>"signet send"</code></h3>
            <pre class="body" data-testid="send-command">{guide.send_command.clone()}</pre>
        </section>
    }
}

/// Scheme `hmac`: the profile in full, as approved with the keys (it is
/// part of their scope), and as JSON a provider or another Signet can reuse
/// (`signet endpoint create … --profile FILE`).
#[component]
fn Profile(guide: OnboardingView) -> impl IntoView {
    let Some(p) = guide.hmac_profile else { return ().into_any() };
    let json = serde_json::to_string_pretty(&p).unwrap_or_default();
    let window = if p.has_timestamp() {
        format!("{} s either side of now", guide.tolerance_secs)
    } else {
        "none: this sender signs no timestamp, so a captured request is never refused for its age; \
         deduplication by event id, for the endpoint's dedup retention, is its only replay protection"
            .to_owned()
    };
    let timestamp = match (&p.timestamp_header, p.has_timestamp()) {
        (Some(h), _) => format!("the {h} header"),
        (None, true) => "t= in the signature header".to_owned(),
        (None, false) => "none".to_owned(),
    };
    let lower = |v: &dyn std::fmt::Debug| format!("{v:?}").to_lowercase();
    view! {
        <section class="card" data-testid="hmac-profile">
            <h2>"HMAC profile"</h2>
            <dl class="facts">
                <dt>"Preset"</dt>
                <dd data-testid="profile-preset">{p.preset.map_or("none (custom)", |x| x.as_str())}</dd>
                <dt>"Signature header"</dt>
                <dd><code>{p.signature_header.clone()}</code></dd>
                <dt>"Format"</dt>
                <dd>{lower(&p.signature_format)}</dd>
                <dt>"Prefix"</dt>
                <dd>{if p.prefix.is_empty() { "none".to_owned() } else { p.prefix.clone() }}</dd>
                <dt>"Encoding"</dt>
                <dd>{lower(&p.encoding)}</dd>
                <dt>"Algorithm"</dt>
                <dd>{format!("HMAC-{}", lower(&p.algorithm).to_uppercase())}</dd>
                <dt>"Signed content"</dt>
                <dd><code>{p.signed_content.clone()}</code></dd>
                <dt>"Timestamp"</dt>
                <dd>{timestamp}</dd>
                <dt>"Window"</dt>
                <dd data-testid="profile-window">{window}</dd>
                <dt>"Event id"</dt>
                <dd>{guide.event_id_source.clone()}</dd>
            </dl>
            <p class="hint">
                "The profile is part of every key's approved scope: it cannot change. A different format needs a new \
                 endpoint, and its keys a new approval."
            </p>
            <details>
                <summary>"As JSON"</summary>
                <pre class="body profile-json" data-testid="profile-json">{json}</pre>
            </details>
        </section>
    }
    .into_any()
}

#[component]
fn PublicKeys(guide: OnboardingView) -> impl IntoView {
    if guide.public_keys.is_empty() {
        return ().into_any();
    }
    view! {
        <section class="card" data-testid="public-keys">
            <h2>"Registered v1a public keys"</h2>
            <p class="hint">"The provider signs with the private half; Signet holds only these."</p>
            <ul>
                {guide.public_keys.into_iter().map(|(id, pk)| view! {
                    <li><code>{id}</code> ": " <code>{pk}</code></li>
                }).collect_view()}
            </ul>
        </section>
    }
    .into_any()
}

#[component]
fn TestDelivery(guide: OnboardingView, can_send: bool) -> impl IntoView {
    let action = ServerAction::<SendTestDelivery>::new();
    let form = match (can_send, guide.test.possible) {
        (false, _) => view! {
            <p class="hint">"Only a clinic admin of this tenant or an admin can send a test delivery."</p>
        }
        .into_any(),
        (true, false) => view! {
            <p class="warning" role="alert" data-testid="test-impossible">
                <strong>"A test delivery is not possible here. "</strong>
                {guide.test.reason.clone().unwrap_or_default()}
                " (" <code>{guide.test.code.clone().unwrap_or_default()}</code> ")"
            </p>
        }
        .into_any(),
        (true, true) => view! {
            <ActionError action/>
            <ActionForm action>
                <input type="hidden" name="tenant" value=guide.tenant.to_string()/>
                <input type="hidden" name="endpoint" value=guide.endpoint.to_string()/>
                <label class="field">
                    <span>"Event type"</span>
                    <input name="event_type" placeholder="reminder.created" maxlength="100"/>
                    <small class="hint">"Optional: the key's own type by default."</small>
                </label>
                <div class="actions">
                    <Submit action label="Send a test delivery"/>
                </div>
            </ActionForm>
        }
        .into_any(),
    };
    view! {
        <section class="card" id="test-delivery">
            <h2>"Test delivery"</h2>
            <p class="hint">
                "Signet signs an event with this endpoint's own active key and sends it through the real "
                "receiver. It is marked as a test and keeps nothing: no claim, no replay record, no reminder, "
                "no outbox intent. It is counted apart from real traffic and recorded in the audit log."
            </p>
            {form}
            {guide.last_test.map(|last| view! { <GateOutcomes last/> })}
        </section>
    }
}

#[component]
fn GateOutcomes(last: LastTestDelivery) -> impl IntoView {
    let LastTestDelivery { at, actor, delivery } = last;
    let TestDeliveryView { key_id, event_id, event_type, gates, status, outcome, answer, .. } = delivery;
    view! {
        <div data-testid="test-result">
            <h3>"Last test delivery"</h3>
            <p class="muted">
                {when(&at)} " by " {actor} " · event " <code>{event_id.into_string()}</code>
                " (" <code>{event_type}</code>
                ") · signed with " <code>{key_id.into_string()}</code>
            </p>
            <div class="table-wrap">
                <table data-testid="gates">
                    <thead><tr><th>"Gate"</th><th>"Check"</th><th>"Result"</th><th>"Code"</th></tr></thead>
                    <tbody>
                        {gates.into_iter().map(|g| {
                            let class = match g.result {
                                GateResult::Passed => "badge badge-enabled",
                                GateResult::Failed => "badge badge-disabled",
                                GateResult::NotReached => "badge",
                            };
                            view! {
                                <tr data-gate=g.gate.to_string() data-result=g.result.as_str()>
                                    <td>{g.gate}</td>
                                    <td>{g.name.replace('_', " ")}</td>
                                    <td><span class=class>{g.result.as_str().replace('_', " ")}</span></td>
                                    <td>{g.code.map(|c| view! { <code>{c}</code> })}</td>
                                </tr>
                            }
                        }).collect_view()}
                    </tbody>
                </table>
            </div>
            <p data-testid="test-answer">
                "The receiver answered " <strong>{status}</strong> " " <code>{outcome}</code> ": "
                <code>{answer.to_string()}</code> ". Nothing of it was kept."
            </p>
        </div>
    }
}
