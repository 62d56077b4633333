//! `/quarantine`: events that were authenticated but could not apply,
//! filtered by a plain GET form (filters are shareable links), with counts
//! by reason and, for on-call, a bulk release of everything matching (run
//! in the background; see `bulk_release`), with the latest bulk releases.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;
use views::quarantine::BulkReleaseView;
use views::quarantine::QuarantineList;
use views::quarantine::QuarantineStatus;
use views::quarantine::QuarantineView;

use crate::{
    api::{
        operations::{StartBulkRelease, list_quarantine, recent_bulk_releases},
        registry::list_tenants,
    },
    components::{
        ActionError, IfLoaded, Layout, Loaded, ReasonField, ReturnedError, Submit, Table,
        filters::{Choice, FilterForm, TenantSelect},
        format::{nonempty, when, with_query},
        quarantine_labels::{filter_text, reason_label, status_label},
    },
    dto::Me,
};

/// The filters as they stand in the URL.
#[derive(Clone, Debug, Default, PartialEq)]
struct Filters {
    tenant: String,
    endpoint: String,
    reason: String,
    status: String,
    age: String,
}

impl Filters {
    /// This view's URL with `reason` in place of the current one.
    fn href(&self, reason: &str) -> String {
        with_query(
            "/quarantine",
            &[
                ("tenant", &self.tenant),
                ("endpoint", &self.endpoint),
                ("status", &self.status),
                ("age", &self.age),
                ("reason", reason),
            ],
        )
    }
}

#[component]
pub fn QuarantinePage() -> impl IntoView {
    let query = use_query_map();
    let filters = Memo::new(move |_| {
        query.with(|q| Filters {
            tenant: q.get("tenant").unwrap_or_default(),
            endpoint: q.get("endpoint").unwrap_or_default(),
            reason: q.get("reason").unwrap_or_default(),
            status: q.get("status").unwrap_or_default(),
            age: q.get("age").unwrap_or_default(),
        })
    });
    let list = Resource::new(
        move || filters.get(),
        |f| {
            list_quarantine(
                nonempty(&f.tenant),
                nonempty(&f.endpoint),
                nonempty(&f.reason),
                nonempty(&f.status),
                nonempty(&f.age),
            )
        },
    );
    let tenants = Resource::new(|| (), |_| list_tenants());
    let jobs = Resource::new(|| (), |_| recent_bulk_releases());
    view! {
        <Layout
            title="Quarantine"
            render=move |me| view! {
                <p class="lede">
                    "Events that were authenticated and claimed but could not apply. \
                    Provider retries of them are acknowledged as duplicates; \
                    nothing happens until someone releases or discards them here."
                </p>
                <ReturnedError/>
                <FilterForm
                    path="/quarantine"
                    tenants
                    fields=move |tenants| view! { <Fields filters=filters.get() tenants/> }
                />
                <Loaded resource=list render={
                    let me = me.clone();
                    move |l| view! { <Listing list=l filters=filters.get_untracked() me=me.clone()/> }
                }/>
                <IfLoaded resource=jobs render=|jobs| (!jobs.is_empty()).then(|| view! { <RecentBulkReleases jobs/> })/>
            }
        />
    }
}

#[component]
fn RecentBulkReleases(jobs: Vec<BulkReleaseView>) -> impl IntoView {
    view! {
        <section class="card">
            <h2>"Recent bulk releases"</h2>
            <ul class="job-list">
                {jobs.into_iter().map(|j| view! {
                    <li>
                        <a href=format!("/quarantine/bulk/{}", j.id)>{filter_text(&j)}</a>
                        " " <span class=format!("badge badge-job-{}", j.status)>{status_label(j.status)}</span>
                        <span class="muted">
                            " · " {j.released} " of " {j.total} " released · "
                            {when(&j.started_at)} " by " {j.started_by.clone()}
                        </span>
                    </li>
                }).collect_view()}
            </ul>
        </section>
    }
}

/// The filter form's controls.
#[component]
fn Fields(filters: Filters, tenants: Vec<String>) -> impl IntoView {
    const AGES: &[(&str, &str)] =
        &[("", "Any age"), ("1h", "Last hour"), ("24h", "Last 24 hours"), ("7d", "Last 7 days")];
    const STATUSES: &[(&str, &str)] = &[
        ("", "Open"),
        (QuarantineStatus::Released.as_str(), "Released"),
        (QuarantineStatus::Discarded.as_str(), "Discarded"),
        ("all", "All"),
    ];
    view! {
        <TenantSelect tenants selected=filters.tenant.clone()/>
        <label class="field">
            <span>"Endpoint"</span>
            <input type="text" name="endpoint" value=filters.endpoint.clone() placeholder="needs a tenant"/>
        </label>
        <label class="field">
            <span>"Reason"</span>
            <input type="text" name="reason" value=filters.reason.clone() placeholder="e.g. reminder_not_found"/>
        </label>
        <Choice label="Status" name="status" options=STATUSES selected=filters.status.clone()/>
        <Choice label="Age" name="age" options=AGES selected=filters.age.clone()/>
    }
}

#[component]
fn Listing(list: QuarantineList, filters: Filters, me: Me) -> impl IntoView {
    let open_view = filters.status.is_empty() || filters.status == QuarantineStatus::Open.as_str();
    let counts = (!list.by_reason.is_empty()).then(|| {
        let all = list.by_reason.iter().map(|c| c.count).sum::<u64>();
        let f = filters.clone();
        view! {
            <nav class="reason-counts" aria-label="By reason">
                <a href=f.href("") class:current=f.reason.is_empty()>"All reasons " <span class="count">{all}</span></a>
                {list.by_reason.iter().map(|c| view! {
                    <a href=f.href(c.reason.as_str()) class:current=f.reason == c.reason.as_str()>
                        {reason_label(c.reason.as_str())} " " <span class="count">{c.count}</span>
                    </a>
                }).collect_view()}
            </nav>
        }
    });
    let shown = list.items.len() as u64;
    let more = (list.total > shown).then(|| {
        view! {
            <p class="hint">
                "Showing the newest " {shown} " of " {list.total} ". Narrow the filters to see the rest."
            </p>
        }
    });
    let table = if list.items.is_empty() {
        let msg = if open_view {
            "Nothing is waiting in quarantine for these filters."
        } else {
            "No events match these filters."
        };
        view! {
            <div class="empty">
                <p class="empty-title">{if open_view { "Quarantine is empty" } else { "No events" }}</p>
                <p>{msg}</p>
            </div>
        }
        .into_any()
    } else {
        view! {
            <Table heads=&["Quarantined", "Tenant / endpoint", "Event", "Reason", "Status"]>
                {list.items.into_iter().map(|q| view! { <Row q/> }).collect_view()}
            </Table>
        }
        .into_any()
    };
    let bulk = (me.can_triage() && open_view && list.total > 0)
        .then(|| view! { <BulkRelease filters=filters.clone() total=list.total/> });
    view! {
        {counts}
        {table}
        {more}
        {bulk}
    }
}

#[component]
fn Row(q: QuarantineView) -> impl IntoView {
    let href = format!("/quarantine/{}", q.id);
    let story = crate::components::format::event_href(&q.tenant, q.endpoint.as_str(), &q.event_id);
    view! {
        <tr>
            <td class="nowrap"><a href=href>{when(&q.quarantined_at)}</a></td>
            <td><code>{q.tenant}</code> " / " <code>{q.endpoint.into_string()}</code></td>
            <td>
                <a href=story title="The event's whole story"><code class="wrap">{q.event_id}</code></a>
                <br/>
                <span class="muted">{q.event_type.unwrap_or_else(|| "no type (malformed)".to_owned())}</span>
            </td>
            <td>
                <span class="badge badge-reason">{reason_label(q.reason.as_str())}</span>
                {q.last_release_error.map(|e| view! {
                    <br/><small class="muted">"last release: " {reason_label(&e)}</small>
                })}
            </td>
            <td><span class=format!("badge badge-q-{}", q.status)>{q.status.as_str()}</span></td>
        </tr>
    }
}

#[component]
fn BulkRelease(filters: Filters, total: u64) -> impl IntoView {
    /// Mirrors `domain::quarantine::bulk_release::MAX_ENTRIES`.
    const MAX_ENTRIES: u64 = 10_000;
    let action = ServerAction::<StartBulkRelease>::new();
    let capped = total.min(MAX_ENTRIES);
    view! {
        <section class="card">
            <h2>"Release everything matching"</h2>
            <p>
                <strong>{total}</strong>
                " open event(s) match these filters"
                {(total > capped).then(|| format!("; one bulk release handles the oldest {capped}"))}
                ". Each is re-run against the current state in its own transaction, in the background: \
                you can watch the progress, leave the page and come back. \
                Any that still cannot apply stay open with the new error."
            </p>
            <ActionError action/>
            <ActionForm action>
                <input type="hidden" name="tenant" value=filters.tenant/>
                <input type="hidden" name="endpoint" value=filters.endpoint/>
                <input type="hidden" name="reason_filter" value=filters.reason/>
                <input type="hidden" name="age" value=filters.age/>
                <ReasonField placeholder="e.g. missing reminders backfilled by the clinic">
                    <small class="hint">"Recorded on each event and in the audit log."</small>
                </ReasonField>
                <div class="actions">
                    <Submit action label="Release matching events" kind="primary"/>
                </div>
            </ActionForm>
        </section>
    }
}
