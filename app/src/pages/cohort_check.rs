//! The evidence page's live cohort check: for each tenant with retries
//! enabled, the events claimed since they were, and every breach of "one
//! claim, at most one reminder transition, at most one intent per kind"
//! by name.

use leptos::prelude::*;
use views::evidence::CohortCheck;

use crate::components::{Table, format::when};

#[component]
pub fn CohortCheckSection(checks: Vec<CohortCheck>) -> impl IntoView {
    let empty = checks.is_empty();
    view! {
        <h3>"Live cohort check (since retries were enabled)"</h3>
        <Table heads=&["Tenant", "Enabled since", "Events checked", "Breaches"] class="cohort-check">
            {checks.into_iter().map(|c| {
                let more = c.breaches_total.saturating_sub(c.breaches.len() as u64);
                view! {
                    <tr data-cohort=c.tenant.clone() data-breaches=c.breaches_total.to_string()>
                        <td><a href=format!("/tenants/{}", c.tenant)>{c.tenant.clone()}</a></td>
                        <td>{when(&c.enabled_since)}</td>
                        <td>{c.events_checked}</td>
                        <td>
                            {if c.breaches_total == 0 {
                                view! { <span class="badge badge-enabled">"none"</span> }.into_any()
                            } else {
                                view! {
                                    <strong class="error-text">{c.breaches_total} " breach(es)"</strong>
                                    <ul class="breaches">
                                        {c.breaches.iter().map(|b| view! {
                                            <li><small class="mono">{views::evidence::breach_text(b)}</small></li>
                                        }).collect_view()}
                                    </ul>
                                    {(more > 0).then(|| view! { <small>"and " {more} " more"</small> })}
                                }
                                .into_any()
                            }}
                        </td>
                    </tr>
                }
            }).collect_view()}
        </Table>
        {empty.then(|| view! { <p class="empty">"No tenant has retries enabled."</p> })}
    }
}
