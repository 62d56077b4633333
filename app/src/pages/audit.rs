//! `/audit`: the tamper-evident log of every change, filtered by a plain
//! GET form so filters are links that can be shared.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use crate::{
    api::{audit::audit_log, registry::list_tenants},
    components::{
        Layout, Loaded,
        filters::{Choice, FilterForm, TenantSelect},
        format::{nonempty, when, with_query},
    },
    dto::{AuditPage as AuditPageDto, AuditRow},
};

/// The filters as they stand in the URL.
#[derive(Clone, Debug, Default, PartialEq)]
struct Filters {
    actor: String,
    action: String,
    tenant: String,
    since: String,
}

impl Filters {
    /// This view's URL, optionally paged to entries before `before`.
    fn href(&self, before: &str) -> String {
        with_query(
            "/audit",
            &[
                ("actor", &self.actor),
                ("action", &self.action),
                ("tenant", &self.tenant),
                ("since", &self.since),
                ("before", before),
            ],
        )
    }
}

#[component]
pub fn AuditPage() -> impl IntoView {
    let query = use_query_map();
    let filters = Memo::new(move |_| {
        query.with(|q| Filters {
            actor: q.get("actor").unwrap_or_default(),
            action: q.get("action").unwrap_or_default(),
            tenant: q.get("tenant").unwrap_or_default(),
            since: q.get("since").unwrap_or_default(),
        })
    });
    let before = Memo::new(move |_| query.with(|q| q.get("before").and_then(|b| b.parse::<i64>().ok())));
    let page = Resource::new(
        move || (filters.get(), before.get()),
        |(f, before)| {
            audit_log(nonempty(&f.actor), nonempty(&f.action), nonempty(&f.tenant), nonempty(&f.since), before)
        },
    );
    let tenants = Resource::new(|| (), |_| list_tenants());
    view! {
        <Layout
            title="Audit log"
            render=move |_me| view! {
                <FilterForm
                    path="/audit"
                    tenants
                    fields=move |tenants| view! { <Fields filters=filters.get() tenants/> }
                />
                <Loaded resource=page render=move |p| {
                    let paged = before.get_untracked().is_some();
                    view! { <AuditEntries page=p filters=filters.get_untracked() paged/> }
                }/>
            }
        />
    }
}

/// The filter form's controls.
#[component]
fn Fields(filters: Filters, tenants: Vec<String>) -> impl IntoView {
    const SINCE: &[(&str, &str)] =
        &[("", "Any time"), ("1h", "Last hour"), ("24h", "Last 24 hours"), ("7d", "Last 7 days")];
    view! {
        <label class="field">
            <span>"Actor"</span>
            <input type="text" name="actor" value=filters.actor.clone() placeholder="username or token"/>
        </label>
        <label class="field">
            <span>"Action starts with"</span>
            <input type="text" name="action" value=filters.action.clone() placeholder="key."/>
        </label>
        <TenantSelect tenants selected=filters.tenant.clone()/>
        <Choice label="Since" name="since" options=SINCE selected=filters.since.clone()/>
    }
}

#[component]
fn AuditEntries(page: AuditPageDto, filters: Filters, paged: bool) -> impl IntoView {
    let chain = page.chain_ok.map(|ok| {
        if ok {
            view! {
                <p class="chain chain-ok">"Hash chain verified: no entry has been altered or removed."</p>
            }
            .into_any()
        } else {
            view! {
                <p class="chain chain-broken" role="alert">
                    "Hash chain BROKEN — run " <code>"signet audit verify"</code> " on the server."
                </p>
            }
            .into_any()
        }
    });
    let older = page
        .next_before
        .map(|seq| view! { <a class="button secondary" href=filters.href(&seq.to_string())>"Older entries →"</a> });
    let newest = paged.then(|| view! { <a class="button secondary" href=filters.href("")>"← Newest"</a> });
    let table = if page.entries.is_empty() {
        view! {
            <div class="empty">
                <p class="empty-title">"No entries"</p>
                <p>"Nothing matches these filters."</p>
            </div>
        }
        .into_any()
    } else {
        view! {
            <div class="table-wrap">
                <table class="audit">
                    <thead>
                        <tr>
                            <th class="num">"Seq"</th>
                            <th>"Time"</th>
                            <th>"Actor"</th>
                            <th>"Action"</th>
                            <th>"Target"</th>
                            <th>"Tenant"</th>
                            <th>"Before → after"</th>
                        </tr>
                    </thead>
                    <tbody>
                        {page.entries.into_iter().map(|row| view! { <EntryRow row/> }).collect_view()}
                    </tbody>
                </table>
            </div>
        }
        .into_any()
    };
    view! {
        {chain}
        {table}
        <p class="pager">{newest} {older}</p>
    }
}

#[component]
fn EntryRow(row: AuditRow) -> impl IntoView {
    let AuditRow { entry: e, tenant } = row;
    let json = |v: Option<serde_json::Value>| v.map(|v| v.to_string());
    let change = match (json(e.before), json(e.after)) {
        (None, None) => view! { <span class="muted">"—"</span> }.into_any(),
        (None, Some(after)) => view! { <code class="json">{after}</code> }.into_any(),
        (before, after) => view! {
            <code class="json">{before}</code>
            <span class="arrow" aria-label="became">"↓"</span>
            {match after {
                Some(after) => view! { <code class="json">{after}</code> }.into_any(),
                None => view! { <span class="muted">"—"</span> }.into_any(),
            }}
        }
        .into_any(),
    };
    view! {
        <tr>
            <td class="num">{e.seq}</td>
            <td class="nowrap">{when(&e.at)}</td>
            <td>
                {(e.actor_kind != e.actor).then(|| view! { <span class="muted">{e.actor_kind.clone()}</span><br/> })}
                {e.actor}
            </td>
            <td class="nowrap"><code>{e.action}</code></td>
            <td>
                <span class="muted">{e.target_kind.clone()} " "</span><code class="wrap">{e.target_id.clone()}</code>
                {story_link(&e.target_kind, &e.target_id)}
            </td>
            <td>{tenant.unwrap_or_else(|| "—".to_owned())}</td>
            <td class="change">{change}</td>
        </tr>
    }
}

/// A link to the event's story, for entries about a quarantine entry or an
/// outbox intent (`/events` finds the event and redirects).
fn story_link(kind: &str, id: &str) -> Option<AnyView> {
    let param = match kind {
        "quarantine" => "quarantine",
        "outbox_intent" => "intent",
        _ => return None,
    };
    let href = format!("/events?{param}={}", crate::components::format::query_value(id));
    Some(view! { <br/><a href=href class="small">"event story"</a> }.into_any())
}
