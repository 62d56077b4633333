//! `/retention`: how long each endpoint keeps claims (what makes a
//! redelivery a duplicate) and bodies (health data), and each scheme's
//! redelivery horizon, the floor under every claim retention. The tables
//! are also what a security reviewer reads as evidence.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;
use views::retention::HorizonView;
use views::retention::RetentionOverview;
use views::retention::RetentionView;
use views::retention::human;

use crate::{
    api::retention::{SetHorizon, SetRetention, retention_overview},
    components::{
        ActionError, Layout, Loaded, Notice, ReasonField, Refresh, ReturnedError, Submit, Table, format::when,
    },
    dto::Me,
};

#[component]
pub fn RetentionPage() -> impl IntoView {
    let query = use_query_map();
    let refresh = Refresh::provide();
    let data = Resource::new(move || refresh.get(), |_| retention_overview());
    view! {
        <Layout
            title="Retention"
            render=move |me| view! {
                <p class="lede">
                    "A claim is what turns a provider's redelivery into a harmless duplicate, so it is kept at least \
                    as long as the provider may redeliver (the scheme's horizon). "
                    "Bodies hold health data and go sooner, except those of events still waiting in quarantine. "
                    "The purge runs every hour in " <code>"signet serve"</code>
                    " (" <code>"signet retention purge"</code> " runs it now) and is recorded in the audit log."
                </p>
                {move || query.read().get("changed").map(|t| view! {
                    <Notice>
                        "Retention of " <code>{t}</code> " changed; the previous decision stays in its history."
                    </Notice>
                })}
                {move || query.read().get("horizon").map(|s| view! {
                    <Notice>"The " {s} " redelivery horizon changed."</Notice>
                })}
                <ReturnedError/>
                <Loaded resource=data render={
                    let me = me.clone();
                    move |o| view! { <Overview o me=me.clone()/> }
                }/>
            }
        />
    }
}

#[component]
fn Overview(o: RetentionOverview, me: Me) -> impl IntoView {
    let manageable: Vec<String> = o
        .endpoints
        .iter()
        .filter(|e| me.can_manage_tenant(e.tenant.as_str()))
        .map(|e| format!("{}/{}", e.tenant, e.endpoint))
        .collect();
    let schemes: Vec<String> = o.horizons.iter().map(|h| h.scheme.clone()).collect();
    view! {
        <section class="card" id="endpoints">
            <h2>"Endpoints"</h2>
            <EndpointTable rows=o.endpoints/>
        </section>
        {(!manageable.is_empty()).then(|| view! { <ChangeRetention targets=manageable/> })}
        <section class="card" id="horizons">
            <h2>"Redelivery horizons"</h2>
            <p class="hint">
                "How long each scheme's senders may redeliver an event, per their documentation. \
                No endpoint keeps claims for less."
            </p>
            <HorizonTable rows=o.horizons/>
            {me.is_admin().then(|| view! { <ChangeHorizon schemes/> })}
        </section>
    }
}

#[component]
fn EndpointTable(rows: Vec<RetentionView>) -> impl IntoView {
    if rows.is_empty() {
        return view! { <p class="empty">"No endpoints yet."</p> }.into_any();
    }
    view! {
        <Table heads=&["Endpoint", "Scheme", "Claims kept", "Bodies kept", "Decided", "Why"]>
            {rows.into_iter().map(|r| view! { <EndpointRow r/> }).collect_view()}
        </Table>
    }
    .into_any()
}

#[component]
fn EndpointRow(r: RetentionView) -> impl IntoView {
    let claims_note = if r.below_horizon {
        let note = format!(
            " decided {}, less than the {} horizon: kept for the horizon meanwhile; record a new decision",
            human(r.current.dedup_secs),
            human(r.horizon_secs)
        );
        view! {
            <span class="badge badge-warning" data-testid="below-horizon">"below the horizon"</span>
            <small class="muted">{note}</small>
        }
        .into_any()
    } else if r.below_manual_resend {
        let note = format!(
            " decided {}, less than the manual resend window of {}: the risk was accepted on record",
            human(r.current.dedup_secs),
            human(r.manual_resend_secs)
        );
        view! {
            <span class="badge badge-warning" data-testid="below-manual-resend">"below manual resend"</span>
            <small class="muted">{note}</small>
        }
        .into_any()
    } else {
        view! { <small class="muted">{format!("horizon {}", human(r.horizon_secs))}</small> }.into_any()
    };
    view! {
        <tr class:alert=r.below_horizon>
            <td>
                <a href=format!("/tenants/{}", r.tenant)>{r.tenant.to_string()}</a>
                " / " <strong>{r.endpoint.into_string()}</strong>
            </td>
            <td>{r.scheme.clone()}</td>
            <td>
                <strong>{human(r.effective_dedup_secs)}</strong>
                <br/>
                {claims_note}
            </td>
            <td><strong>{human(r.current.body_secs)}</strong></td>
            <td class="nowrap">
                "v" {r.current.version} " · " {r.current.actor.clone()} <br/>
                <small class="muted">{when(&r.current.created_at)}</small>
            </td>
            <td>{r.current.reason.clone()}</td>
        </tr>
    }
}

#[component]
fn ChangeRetention(targets: Vec<String>) -> impl IntoView {
    let action = ServerAction::<SetRetention>::new();
    Refresh::after(action);
    view! {
        <section class="card" id="change-retention">
            <h2>"Change an endpoint's retention"</h2>
            <p class="hint">
                "Durations such as 30d, 36h or 1d 12h. Leave a field empty to keep its current value. \
                Claims cannot be kept for less than the scheme's horizon, nor bodies longer than claims. \
                Less than the scheme's manual resend window needs the risk accepted: it is audited and \
                shows as a finding in every evidence bundle."
            </p>
            <ActionError action/>
            <ActionForm action>
                <label class="field">
                    <span>"Endpoint"</span>
                    <select name="target">
                        {targets
                            .into_iter()
                            .map(|t| view! { <option value=t.clone()>{t.clone()}</option> })
                            .collect_view()}
                    </select>
                </label>
                <label class="field">
                    <span>"Keep claims for"</span>
                    <input type="text" name="dedup" placeholder="e.g. 30d" autocomplete="off"/>
                </label>
                <label class="field">
                    <span>"Keep bodies for"</span>
                    <input type="text" name="body" placeholder="e.g. 7d" autocomplete="off"/>
                </label>
                <ReasonField placeholder="e.g. data minimisation agreed with the clinic"/>
                <label class="check">
                    <input type="checkbox" name="accept_risk" value="true"/>
                    " Accept the risk of keeping claims for less than the manual resend window"
                </label>
                <div class="actions"><Submit action label="Record decision"/></div>
            </ActionForm>
        </section>
    }
}

#[component]
fn HorizonTable(rows: Vec<HorizonView>) -> impl IntoView {
    view! {
        <table class="compact">
            <thead>
                <tr>
                    <th>"Scheme"</th><th>"Horizon (automatic retries)"</th><th>"Source"</th>
                    <th>"Manual resend"</th><th>"Decided"</th><th>"Why"</th>
                </tr>
            </thead>
            <tbody>
                {rows.into_iter().map(|h| view! {
                    <tr>
                        <td>{h.scheme}</td>
                        <td><strong>{human(h.horizon_secs)}</strong></td>
                        <td class="source">
                            {h.source.unwrap_or_else(|| "an administrator's decision (see why)".to_owned())}
                        </td>
                        <td class="source" data-testid="manual-resend">
                            <strong>{human(h.manual_resend_secs)}</strong> <br/>
                            <small>{h.manual_resend_source.unwrap_or_else(|| "none recorded".to_owned())}</small>
                        </td>
                        <td class="nowrap">
                            "v" {h.version} " · " {h.actor} <br/> <small class="muted">{when(&h.created_at)}</small>
                        </td>
                        <td>{h.reason}</td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
    }
}

#[component]
fn ChangeHorizon(schemes: Vec<String>) -> impl IntoView {
    let action = ServerAction::<SetHorizon>::new();
    Refresh::after(action);
    view! {
        <details>
            <summary>"Change a horizon"</summary>
            <ActionError action/>
            <ActionForm action attr:class="inline-form">
                <select name="scheme" aria-label="Scheme">
                    {schemes.into_iter().map(|s| view! { <option value=s.clone()>{s.clone()}</option> }).collect_view()}
                </select>
                <input
                    type="text"
                    name="horizon"
                    required
                    placeholder="e.g. 3d"
                    aria-label="Horizon"
                    autocomplete="off"
                />
                <input
                    type="text"
                    name="reason"
                    required
                    placeholder="why (e.g. the provider's documentation changed)"
                    aria-label="Reason"
                />
                <Submit action label="Change horizon" kind="secondary"/>
            </ActionForm>
        </details>
    }
}
