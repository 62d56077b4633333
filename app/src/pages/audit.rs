//! `/audit`: the tamper-evident log of every change, filtered by a plain
//! GET form so filters are links that can be shared.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use crate::{
    api::{audit::audit_log, registry::list_tenants},
    components::{
        format::{query_value, when},
        FormError, Layout,
    },
    dto::{AuditDto, AuditPage as AuditPageDto},
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
    /// The query string for these filters plus `extra` (already encoded).
    fn href(&self, extra: &str) -> String {
        let mut parts: Vec<String> = [("actor", &self.actor), ("action", &self.action), ("tenant", &self.tenant), ("since", &self.since)]
            .into_iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| format!("{k}={}", query_value(v)))
            .collect();
        if !extra.is_empty() {
            parts.push(extra.to_owned());
        }
        if parts.is_empty() { "/audit".to_owned() } else { format!("/audit?{}", parts.join("&")) }
    }
}

fn opt(s: &str) -> Option<String> {
    Some(s.trim().to_owned()).filter(|s| !s.is_empty())
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
        |(f, before)| audit_log(opt(&f.actor), opt(&f.action), opt(&f.tenant), opt(&f.since), before),
    );
    let tenants = Resource::new(|| (), |_| list_tenants());
    view! {
        <Layout
            title="Audit log"
            render=move |_me| view! {
                <Suspense>
                    {move || {
                        let current = filters.get();
                        Suspend::new(async move {
                            let tenants = tenants.await.map(|ts| ts.into_iter().map(|t| t.slug).collect()).unwrap_or_default();
                            view! { <FilterForm filters=current tenants/> }
                        })
                    }}
                </Suspense>
                <Transition fallback=|| view! { <p class="loading">"Loading…"</p> }>
                    {move || Suspend::new(async move {
                        match page.await {
                            Ok(p) => view! { <AuditEntries page=p filters=filters.get_untracked() paged=before.get_untracked().is_some()/> }.into_any(),
                            Err(error) => view! { <FormError error/> }.into_any(),
                        }
                    })}
                </Transition>
            }
        />
    }
}

#[component]
fn FilterForm(filters: Filters, tenants: Vec<String>) -> impl IntoView {
    let since_options = [("", "Any time"), ("1h", "Last hour"), ("24h", "Last 24 hours"), ("7d", "Last 7 days")];
    let since = filters.since.clone();
    let tenant = filters.tenant.clone();
    view! {
        <form method="get" action="/audit" class="filters card">
            <label class="field">
                <span>"Actor"</span>
                <input type="text" name="actor" value=filters.actor.clone() placeholder="username or token"/>
            </label>
            <label class="field">
                <span>"Action starts with"</span>
                <input type="text" name="action" value=filters.action.clone() placeholder="key."/>
            </label>
            <label class="field">
                <span>"Tenant"</span>
                <select name="tenant">
                    <option value="">"All tenants"</option>
                    {tenants.into_iter().map(|t| {
                        let selected = t == tenant;
                        let label = t.clone();
                        view! { <option value=t selected=selected>{label}</option> }
                    }).collect_view()}
                </select>
            </label>
            <label class="field">
                <span>"Since"</span>
                <select name="since">
                    {since_options.into_iter().map(|(v, label)| view! { <option value=v selected=v == since>{label}</option> }).collect_view()}
                </select>
            </label>
            <div class="filter-actions">
                <button type="submit" class="button primary">"Filter"</button>
                <a class="button secondary" href="/audit">"Clear"</a>
            </div>
        </form>
    }
}

#[component]
fn AuditEntries(page: AuditPageDto, filters: Filters, paged: bool) -> impl IntoView {
    let chain = page.chain_ok.map(|ok| {
        if ok {
            view! { <p class="chain chain-ok">"Hash chain verified: no entry has been altered or removed."</p> }.into_any()
        } else {
            view! { <p class="chain chain-broken" role="alert">"Hash chain BROKEN — run " <code>"signet audit verify"</code> " on the server."</p> }.into_any()
        }
    });
    let older = page.next_before.map(|seq| view! { <a class="button secondary" href=filters.href(&format!("before={seq}"))>"Older entries →"</a> });
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
                        {page.entries.into_iter().map(|e| view! { <AuditRow e/> }).collect_view()}
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
fn AuditRow(e: AuditDto) -> impl IntoView {
    let change = match (e.before, e.after) {
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
            <td><span class="muted">{e.target_kind} " "</span><code class="wrap">{e.target_id}</code></td>
            <td>{e.tenant.unwrap_or_else(|| "—".to_owned())}</td>
            <td class="change">{change}</td>
        </tr>
    }
}
