//! The latest exported bundle: its files to download, a summary and the
//! findings.

use leptos::prelude::*;
use views::evidence::Evidence;

use super::sections::Sections;
use crate::{
    api::evidence::ExportEvidence,
    components::{ActionError, Refresh, Submit, format::when},
    dto::BundleDto,
};

pub(super) fn file_link(digest: &str, name: &str) -> String {
    format!("/evidence/files/{digest}/{name}")
}

/// The start of a digest, enough to tell bundles apart.
pub(super) fn short(digest: &str) -> String {
    digest[..12.min(digest.len())].to_owned()
}

#[component]
pub(super) fn Bundle(bundle: Option<BundleDto>, tenant: String) -> impl IntoView {
    let action = ServerAction::<ExportEvidence>::new();
    Refresh::after(action);
    let export = view! {
        <ActionForm action>
            <input type="hidden" name="tenant" value=tenant.clone()/>
            <Submit action label="Export a fresh bundle" kind="primary"/>
        </ActionForm>
    };
    let Some(b) = bundle else {
        return view! {
            <section class="card" id="bundle">
                <div class="card-head"><h2>"Bundle"</h2>{export}</div>
                <ActionError action/>
                <p class="empty">"No bundle has been exported for this scope yet."</p>
            </section>
        }
        .into_any();
    };
    let e = b.evidence.clone();
    let download = |path: &str, name: &'static str| {
        view! { <a href=file_link(&b.digest, path) download=name>{name}</a> }
    };
    view! {
        <section class="card" id="bundle">
            <div class="card-head"><h2>"Bundle"</h2>{export}</div>
            <ActionError action/>
            <dl class="facts">
                <dt>"Manifest digest"</dt>
                <dd><code class="wrap" data-digest="">{b.digest.clone()}</code></dd>
                <dt>"Generated"</dt>
                <dd>{when(&e.generated_at)} " by " <strong>{b.actor.clone()}</strong> " (" {b.via.clone()} ")"</dd>
                <dt>"Files"</dt>
                <dd class="downloads">
                    <a href=file_link(&b.digest, "evidence.html") target="_blank" rel="noopener">
                        "Open the printable page"
                    </a>
                    " · " {download("evidence.json", "evidence.json")}
                    " · " {download("evidence.html?download=1", "evidence.html")}
                    " · " {download("manifest.json", "manifest.json")}
                    " · " {download("manifest.sig", "manifest.sig")}
                </dd>
            </dl>
            <Summary e=e.clone()/>
            <Findings e=e.clone()/>
            <Sections e/>
        </section>
    }
    .into_any()
}

#[component]
fn Summary(e: Evidence) -> impl IntoView {
    let critical = e.critical();
    let present = e.constraints.iter().filter(|c| c.present).count();
    let drills = match &e.drills.latest {
        None => "none".to_owned(),
        Some(r) => format!(
            "{}{}",
            if r.passed == Some(true) { "passed" } else { "FAILED" },
            if e.drills.stale { " (stale)" } else { "" }
        ),
    };
    view! {
        <dl class="stats tiles">
            <div class:alert=critical.gt(&0)>
                <dt>"Findings"</dt>
                <dd data-count="critical">{critical} " critical · " {e.findings.len() - critical} " warning"</dd>
            </div>
            <div class:alert=present.lt(&e.constraints.len())>
                <dt>"Constraints present"</dt>
                <dd data-count="constraints">{present} " of " {e.constraints.len()}</dd>
            </div>
            <div class:alert=drills.ne("passed")>
                <dt>"Latest drills"</dt>
                <dd data-count="drills">{drills.clone()}</dd>
            </div>
            <div class:alert=!e.audit.chain_verified>
                <dt>"Audit chain"</dt>
                <dd data-count="audit">{if e.audit.chain_verified { "verified" } else { "BROKEN" }}</dd>
            </div>
        </dl>
    }
}

#[component]
fn Findings(e: Evidence) -> impl IntoView {
    if e.findings.is_empty() {
        return view! { <p class="ok-text">"No findings."</p> }.into_any();
    }
    view! {
        <h3>"Findings"</h3>
        <ul class="findings">
            {e.findings.into_iter().map(|f| {
                let badge = if f.severity == "critical" { "danger" } else { "warn" };
                view! {
                    <li class=format!("finding finding-{}", f.severity)>
                        <span class=format!("badge badge-{badge}")>{f.severity.clone()}</span>
                        " " <code>{f.id.clone()}</code>
                        " " <strong>{f.subject.clone()}</strong>
                        ": " {f.message.clone()}
                    </li>
                }
            }).collect_view()}
        </ul>
    }
    .into_any()
}
