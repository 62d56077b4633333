//! Signing a bundle off, what changed since the last approval, and the
//! history of sign-offs.

use leptos::prelude::*;
use views::decision::Decision;
use views::evidence::Difference;
use views::evidence::SignoffView;
use views::evidence::SinceApproval;

use super::bundle::{file_link, short};
use crate::{
    api::evidence::SignOffEvidence,
    components::{ActionError, Refresh, Submit, Table, format::when},
    dto::BundleDto,
};

#[component]
pub(super) fn SignOff(bundle: BundleDto, tenant: String) -> impl IntoView {
    let action = ServerAction::<SignOffEvidence>::new();
    Refresh::after(action);
    // One acknowledgement per critical finding id, covering its subjects.
    let mut critical: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for f in bundle.evidence.findings.iter().filter(|f| f.severity == "critical") {
        critical.entry(f.id.clone()).or_default().push(format!("{}: {}", f.subject, f.message));
    }
    let count = critical.len().to_string();
    let acknowledgements = (!critical.is_empty()).then(|| {
        view! {
            <fieldset class="field" data-acknowledge=count>
                <legend>"Acknowledge each critical finding (required to approve)"</legend>
                {critical.into_iter().map(|(id, lines)| view! {
                    <label class="field">
                        <span><code>{id.clone()}</code></span>
                        <ul class="hint">{lines.into_iter().map(|l| view! { <li>{l}</li> }).collect_view()}</ul>
                        <textarea
                            name=format!("acknowledge[{id}]")
                            rows="2"
                            maxlength="2000"
                            placeholder="Why this finding is accepted"
                        ></textarea>
                    </label>
                }).collect_view()}
            </fieldset>
        }
    });
    view! {
        <section class="card" id="sign-off">
            <h2>"Sign off"</h2>
            <p class="hint">
                "Your decision names this bundle's digest; only the newest bundle can be signed off, once per "
                "reviewer."
            </p>
            <ActionError action/>
            <ActionForm action>
                <input type="hidden" name="tenant" value=tenant/>
                <input type="hidden" name="digest" value=bundle.digest.clone()/>
                <fieldset class="field">
                    <legend>"Decision on " <code>{short(&bundle.digest)} "…"</code></legend>
                    <label class="radio">
                        <input type="radio" name="decision" value="approved" required/> " Approve"
                    </label>
                    <label class="radio"><input type="radio" name="decision" value="rejected"/> " Reject"</label>
                </fieldset>
                <label class="field">
                    <span>"Comment"</span>
                    <textarea
                        name="comment"
                        rows="3"
                        maxlength="2000"
                        required
                        placeholder="What you reviewed, and why this decision"
                    ></textarea>
                </label>
                {acknowledgements}
                <div class="actions"><Submit action label="Record sign-off" kind="primary"/></div>
            </ActionForm>
        </section>
    }
}

#[component]
pub(super) fn Since(since: Option<SinceApproval>) -> impl IntoView {
    let body = match since {
        None => view! { <p class="empty">"Export a bundle to compare it with the last approved one."</p> }.into_any(),
        Some(SinceApproval { approval: None, .. }) => {
            view! { <p class="empty">"No bundle of this scope has been approved yet."</p> }.into_any()
        }
        Some(SinceApproval { approval: Some(a), differences }) => view! {
            <p>
                "Compared with the bundle " <code>{short(a.digest.as_str())} "…"</code>
                " approved by " <strong>{a.actor.clone()}</strong> " " {when(&a.at)} "."
            </p>
            <Differences differences/>
        }
        .into_any(),
    };
    view! {
        <section class="card" id="since-approval">
            <h2>"What changed since the last approved bundle"</h2>
            {body}
        </section>
    }
}

#[component]
fn Differences(differences: Vec<Difference>) -> impl IntoView {
    if differences.is_empty() {
        return view! {
            <p class="ok-text" data-differences="0">
                "Nothing changed in keys, constraints, retention or the retry policy."
            </p>
        }
        .into_any();
    }
    let count = differences.len().to_string();
    let absent = |value: Option<String>| value.unwrap_or_else(|| "(absent)".into());
    let rows = differences
        .into_iter()
        .map(|x| {
            view! {
                <tr>
                    <td>{x.section.replace('_', " ")}</td>
                    <td><code>{x.subject}</code></td>
                    <td>{absent(x.approved)}</td>
                    <td><strong>{absent(x.now)}</strong></td>
                </tr>
            }
        })
        .collect_view();
    // Not a `Table`: the count is on the table element.
    view! {
        <div class="table-wrap">
            <table data-differences=count>
                <thead><tr><th>"Section"</th><th>"What"</th><th>"Approved"</th><th>"Now"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
        </div>
    }
    .into_any()
}

#[component]
pub(super) fn History(signoffs: Vec<SignoffView>) -> impl IntoView {
    let table = if signoffs.is_empty() {
        view! { <p class="empty">"No sign-offs yet."</p> }.into_any()
    } else {
        view! {
            <Table heads=&["When", "Who", "Decision", "Bundle", "Comment", "Acknowledged"]>
                {signoffs.into_iter().map(|s| {
                    let badge = if s.decision == Decision::Approved { "active" } else { "danger" };
                    let acknowledged = s.acknowledged.len().to_string();
                    view! {
                        <tr data-decision=s.decision.as_str()>
                            <td class="nowrap">{when(&s.at)}</td>
                            <td>{s.actor}</td>
                            <td><span class=format!("badge badge-{badge}")>{s.decision.as_str()}</span></td>
                            <td>
                                <a href=file_link(s.digest.as_str(), "evidence.html") target="_blank" rel="noopener">
                                    <code>{short(s.digest.as_str())} "…"</code>
                                </a>
                            </td>
                            <td>{s.comment}</td>
                            <td data-acknowledged=acknowledged>
                                <ul>
                                    {s.acknowledged.into_iter().map(|a| view! {
                                        <li><code>{a.finding}</code> ": " {a.comment}</li>
                                    }).collect_view()}
                                </ul>
                            </td>
                        </tr>
                    }
                }).collect_view()}
            </Table>
        }
        .into_any()
    };
    view! {
        <section class="card" id="history">
            <h2>"Sign-off history"</h2>
            {table}
        </section>
    }
}
