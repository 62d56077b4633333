//! `/evidence`: what a security reviewer signs off on. Drill runs with live
//! progress (polled every second once hydrated; a 2 s meta refresh without
//! JavaScript), the latest exported bundle rendered for reading with its
//! files to download, the public key that signs it, the sign-off form, what
//! changed since the last approved bundle, and the history of sign-offs.
//! Reviewers and admins see every tenant (or the whole deployment); a
//! clinic admin its own tenant; on-call is refused by every call.

mod bundle;
mod drills;
mod sections;
mod signoff;

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use bundle::Bundle;
use drills::Drills;
use signoff::{History, SignOff, Since};

use crate::{
    api::evidence::evidence_page,
    components::{Layout, Loaded, Notice, Refresh, ReturnedError, filters::TenantSelect},
    dto::{EvidencePageDto, Me},
};

#[component]
pub fn EvidencePage() -> impl IntoView {
    let query = use_query_map();
    let tenant = move || query.read().get("tenant").filter(|t| !t.is_empty());
    let refresh = Refresh::provide();
    let data = Resource::new(move || (tenant(), refresh.get()), |(t, _)| evidence_page(t));
    view! {
        <Layout
            title="Sign-off evidence"
            render=move |me| view! {
                <p class="lede">
                    "Drills run Signet's test matrix (concurrent duplicates, a process killed before commit, \
                    a lost acknowledgement, an unknown tenant, a bad signature, a replay, an identity conflict) "
                    "against this deployment's own database, through the receiver that serves " <code>"/hooks"</code>
                    ", and check the rows, not only the answers. "
                    "The bundle reads credentials, database constraints, drills, retention, the retry policy, \
                    metrics and the audit chain live, and is signed with this deployment's key."
                </p>
                {move || query.read().get("exported").map(|d| view! {
                    <Notice>"Exported a new bundle, digest " <code>{d}</code> "."</Notice>
                })}
                {move || query.read().get("signed").map(|d| view! {
                    <Notice>"Sign-off recorded: " <strong>{d}</strong> "."</Notice>
                })}
                <ReturnedError/>
                <Loaded resource=data render={
                    let me = me.clone();
                    move |d| view! { <Evidence d me=me.clone()/> }
                }/>
            }
        />
    }
}

#[component]
fn Evidence(d: EvidencePageDto, me: Me) -> impl IntoView {
    let tenant = d.tenant.clone().unwrap_or_default();
    let scope_form = (!d.tenants.is_empty()).then(|| {
        view! {
            <form method="get" action="/evidence" class="filters">
                <TenantSelect tenants=d.tenants.clone() selected=tenant.clone()/>
                <div class="filter-actions">
                    <button type="submit" class="button secondary">"Show"</button>
                </div>
            </form>
        }
    });
    let scope_text = match &d.tenant {
        Some(t) => format!("Scope: tenant {t}"),
        None => "Scope: the whole deployment".to_owned(),
    };
    view! {
        <div class="scope-bar"><p class="muted">{scope_text}</p>{scope_form}</div>
        <Drills runs=d.runs.clone() tenant=tenant.clone() me=me.clone()/>
        <Bundle bundle=d.bundle.clone() tenant=tenant.clone()/>
        {d.bundle.clone().filter(|_| d.can_sign_off).map(|bundle| view! { <SignOff bundle tenant=tenant.clone()/> })}
        <Since since=d.since.clone()/>
        <History signoffs=d.signoffs.clone()/>
        <section class="card" id="public-key">
            <h2>"Evidence-signing public key"</h2>
            <p class="hint">
                "Ed25519. Give it to whoever verifies a bundle: "
                <code>"signet evidence verify <dir> --public-key <file>"</code>
                "."
            </p>
            <p><code class="wrap" data-public-key="">{d.public_key.clone()}</code></p>
            <pre class="pem">{d.public_key_pem.clone()}</pre>
        </section>
    }
}
