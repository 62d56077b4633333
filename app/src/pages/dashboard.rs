//! `/dashboard`: is the pipeline healthy? Events by outcome over the last
//! hour, day or week, failures and quarantines by reason, latency, the
//! outbox, keys in overlap and the retry policies, for every tenant or one.
//! Reloads its figures every 30 s once hydrated (every 60 s without
//! JavaScript, by a meta refresh).

use std::time::Duration;
use views::stats::FailingEndpoint;
use views::stats::OverlapKey;
use views::stats::PolicyState;
use views::stats::ReasonCount;
use views::stats::StatsView;

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use crate::{
    api::stats::dashboard_stats,
    components::{
        Countdown, Layout, Loaded,
        chart::{LatencyLines, Series, ShareBar, StackedBars},
        format::{duration, when, with_query},
    },
    dto::Me,
};

/// Label and CSS name of each charted outcome.
const OUTCOMES: [(&str, &str); 8] = [
    ("applied", "Applied"),
    ("stale_transition", "Stale transitions (applied nothing)"),
    ("duplicate", "Duplicate acks"),
    ("quarantined", "Quarantined"),
    ("verification_failed", "Verification failures"),
    ("replay", "Replays"),
    ("identity_conflict", "Identity conflicts"),
    ("unavailable", "Unavailable (rolled back, 503)"),
];

fn human(reason: &str) -> String {
    reason.replace('_', " ")
}

/// `bad signature 3, expired 1`.
fn reason_list(reasons: Vec<ReasonCount>) -> String {
    reasons.into_iter().map(|r| format!("{} {}", human(&r.reason), r.count)).collect::<Vec<_>>().join(", ")
}

#[component]
pub fn DashboardPage() -> impl IntoView {
    let query = use_query_map();
    let tick = RwSignal::new(0u64);
    Effect::new(move |_| {
        if let Ok(handle) = set_interval_with_handle(move || tick.update(|n| *n += 1), Duration::from_secs(30)) {
            on_cleanup(move || handle.clear());
        }
    });
    let tenant = Memo::new(move |_| query.with(|q| q.get("tenant").unwrap_or_default()));
    let window = Memo::new(move |_| query.with(|q| q.get("window").unwrap_or_else(|| "24h".to_owned())));
    // The page's own refreshes (its poll, its meta refresh's `?auto=1`) are
    // not the person at work: they never keep an idle session alive.
    let auto = Memo::new(move |_| query.with(|q| q.get("auto").is_some_and(|a| a == "1")));
    let data = Resource::new(
        move || (tenant.get(), window.get(), tick.get()),
        move |(t, w, n)| dashboard_stats(Some(t), Some(w), Some(n > 0 || auto.get_untracked())),
    );
    let refresh_to = move || {
        let url = with_query("/dashboard", &[("tenant", &tenant.get()), ("window", &window.get()), ("auto", "1")]);
        format!(r#"<meta http-equiv="refresh" content="60;url={}">"#, url.replace('&', "&amp;").replace('"', "&quot;"))
    };
    view! {
        // Markup, not an element, so a client-rendered page never reloads (see `poll::MetaRefresh`).
        <noscript inner_html=refresh_to></noscript>
        <Layout
            title="Dashboard"
            render=move |me| view! {
                <crate::pages::EventSearch/>
                <Loaded resource=data render={
                    let me = me.clone();
                    move |s| view! { <Dashboard s me=me.clone()/> }
                }/>
            }
        />
    }
}

#[component]
fn Dashboard(s: StatsView, me: Me) -> impl IntoView {
    let tenant = s.tenant.as_ref().map(|t| t.to_string()).unwrap_or_default();
    let link = {
        let tenant = tenant.clone();
        move |window: &str| with_query("/dashboard", &[("tenant", &tenant), ("window", window)])
    };
    let windows = [("1h", "Last hour"), ("24h", "Last 24 hours"), ("7d", "Last 7 days")]
        .into_iter()
        .map(|(w, label)| view! { <a href=link(w) class:current={s.window == w}>{label}</a> })
        .collect_view();
    let scope = match (&s.tenant, me.role.is_tenant_bound()) {
        (Some(t), false) => view! {
            <p class="scope">
                "Tenant " <strong>{t.to_string()}</strong>
                " · " <a href=with_query("/dashboard", &[("window", &s.window)])>"all tenants"</a>
            </p>
        }
        .into_any(),
        (Some(t), true) => view! { <p class="scope">"Tenant " <strong>{t.to_string()}</strong></p> }.into_any(),
        (None, _) => view! { <p class="scope">"All tenants"</p> }.into_any(),
    };
    let total = |o: &str| s.series.iter().find(|x| x.outcome == o).map_or(0, |x| x.total);
    let reasons = |o: &str| s.series.iter().find(|x| x.outcome == o).map(|x| x.reasons.clone()).unwrap_or_default();
    let quarantine_href = with_query("/quarantine", &[("tenant", &tenant)]);
    let p = |v: Option<f64>| v.map_or("–".to_owned(), |v| format!("{v:.1} ms"));
    let oldest = s
        .outbox
        .oldest_pending_age_secs
        .map_or("none waiting".to_owned(), |a| format!("oldest {}", duration(a * 1000)));
    let series: Vec<Series> = OUTCOMES
        .iter()
        .map(|(name, label)| Series {
            name: (*name).to_owned(),
            label: (*label).to_owned(),
            points: s.series.iter().find(|x| x.outcome == *name).map(|x| x.points.clone()).unwrap_or_default(),
        })
        .collect();
    let labels: Vec<String> = s.bucket_starts.iter().map(|b| when(b)).collect();
    let (from, to) = (when(&s.start), "now".to_owned());
    let outbox_chart = |heading: &'static str, name: &str, label: &str, points: Vec<i64>, title: &'static str| {
        let series = vec![Series { name: name.into(), label: label.into(), points }];
        view! {
            <div>
                <h3>{heading}</h3>
                <StackedBars series labels=labels.clone() title left_label=from.clone() right_label=to.clone()/>
            </div>
        }
    };
    view! {
        <div class="dash-head">
            {scope}
            <nav class="reason-counts" aria-label="Window">{windows}</nav>
        </div>
        <dl class="stats tiles">
            <div><dt>"Applied"</dt><dd>{total("applied")}</dd></div>
            <div><dt>"Duplicate acks"</dt><dd>{total("duplicate")}</dd></div>
            <div class:alert={total("verification_failed") > 0}>
                <dt>"Verification failures"</dt>
                <dd>{total("verification_failed")}</dd>
            </div>
            <div class:alert={total("quarantined") > 0}><dt>"Quarantined"</dt><dd>{total("quarantined")}</dd></div>
            <div class:alert={s.quarantine_open > 0}>
                <dt>"Awaiting triage"</dt>
                <dd><a href=quarantine_href.clone()>{s.quarantine_open}</a></dd>
            </div>
            <div class:alert={s.outbox.dead > 0}>
                <dt>"Outbox backlog"</dt>
                <dd><a href="/outbox?status=pending">{s.outbox.backlog}</a></dd>
                <small class="muted">{oldest} " · " <a href="/outbox?status=dead">{s.outbox.dead} " dead"</a></small>
            </div>
            <div>
                <dt>"Latency p50 / p99"</dt>
                <dd class="small">{p(s.latency.p50_ms)} " / " {p(s.latency.p99_ms)}</dd>
            </div>
        </dl>
        <section class="card" id="events">
            <h2>"Events"</h2>
            <ul class="legend">
                {OUTCOMES.iter().map(|(name, label)| view! {
                    <li>
                        <span class=format!("swatch series-{name}")></span>{*label} " " <strong>{total(name)}</strong>
                    </li>
                }).collect_view()}
            </ul>
            <StackedBars
                series
                labels=labels.clone()
                title="Events by outcome"
                left_label=from.clone()
                right_label=to.clone()
            />
        </section>
        <div class="two-col">
            <section class="card" id="failures">
                <h2>"Verification failures by reason"</h2>
                <ReasonTable rows=reasons("verification_failed") class="series-verification_failed" link=None/>
            </section>
            <section class="card" id="quarantines">
                <h2>"Quarantined by reason"</h2>
                <ReasonTable rows=reasons("quarantined") class="series-quarantined" link=Some(tenant.clone())/>
            </section>
        </div>
        <section class="card" id="latency">
            <h2>"Latency"</h2>
            <ul class="legend">
                <li><span class="swatch line-p50"></span>"p50 " <strong>{p(s.latency.p50_ms)}</strong></li>
                <li><span class="swatch line-p99"></span>"p99 " <strong>{p(s.latency.p99_ms)}</strong></li>
                <li class="muted">{s.latency.samples} " requests"</li>
            </ul>
            <LatencyLines
                p50=s.latency.p50_points.clone()
                p99=s.latency.p99_points.clone()
                left_label=from.clone()
                right_label=to.clone()
            />
        </section>
        <section class="card" id="outbox">
            <h2>"Outbox"</h2>
            <p class="hint">"Highest backlog and oldest pending age seen in each bucket (sampled every 15 seconds)."</p>
            <div>
                {outbox_chart(
                    "Notifications waiting",
                    "backlog",
                    "waiting",
                    s.outbox.backlog_points.clone(),
                    "Outbox backlog",
                )}
                {outbox_chart(
                    "Oldest pending (seconds)",
                    "oldest",
                    "oldest pending s",
                    s.outbox.oldest_age_points.clone(),
                    "Age of the oldest pending notification",
                )}
            </div>
        </section>
        <div class="two-col">
            <section class="card" id="overlap">
                <h2>"Keys in overlap"</h2>
                <Overlap keys=s.keys_in_overlap now_ms=s.now_ms/>
            </section>
            <section class="card" id="failing">
                <h2>"Endpoints with verification failures"</h2>
                <Failing endpoints=s.failing_endpoints/>
            </section>
        </div>
        <section class="card" id="retry-policies">
            <h2>"Retry policy"</h2>
            <RetryPolicies policies=s.retry_policies window=s.window.clone()/>
        </section>
        <p class="muted small">
            "Counts since " {when(&s.start)} " in " {if s.bucket_secs == 60 { "one-minute" } else { "one-hour" }}
            " buckets, from rollups flushed every 5 seconds. Refreshes every 30 seconds."
        </p>
    }
}

#[component]
fn Overlap(keys: Vec<OverlapKey>, now_ms: i64) -> impl IntoView {
    if keys.is_empty() {
        return view! { <p class="muted">"No key is being replaced."</p> }.into_any();
    }
    let rows = keys
        .into_iter()
        .map(|k| {
            let replaced_by = match k.replaced_by {
                Some(n) => view! { <code>{n.into_string()}</code> }.into_any(),
                None => view! { <span class="muted">"–"</span> }.into_any(),
            };
            view! {
                <tr>
                    <td><code>{k.key_id.into_string()}</code></td>
                    <td>
                        <a href=format!("/tenants/{}", k.tenant)>{k.tenant.to_string()}</a>
                        " / " {k.endpoint.into_string()}
                    </td>
                    <td>{replaced_by}</td>
                    <td>{k.expires_at_ms.map(|at| view! { <Countdown expires_at_ms=at now_ms/> })}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table class="compact">
            <thead><tr><th>"Key"</th><th>"Endpoint"</th><th>"Replaced by"</th><th>"Accepted until"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
    .into_any()
}

#[component]
fn Failing(endpoints: Vec<FailingEndpoint>) -> impl IntoView {
    if endpoints.is_empty() {
        return view! { <p class="muted">"None in this window."</p> }.into_any();
    }
    let rows = endpoints.into_iter().map(|f| view! { <FailingRow f/> }).collect_view();
    view! {
        <p class="hint">
            "Failures are counted per endpoint, and under a key when the request named one (signet-key-id), \
            its signature matched (a timestamp outside the window), or it was the endpoint's last key to verify."
        </p>
        <table class="compact">
            <thead>
                <tr>
                    <th>"Endpoint"</th>
                    <th class="num">"Failures"</th>
                    <th>"Reasons"</th>
                    <th>"Accepted keys · failures by key"</th>
                </tr>
            </thead>
            <tbody>{rows}</tbody>
        </table>
    }
    .into_any()
}

#[component]
fn FailingRow(f: FailingEndpoint) -> impl IntoView {
    let by_key = (!f.by_key.is_empty()).then(|| {
        view! {
            <ul class="by-key" data-testid="failures-by-key">
                {f.by_key.into_iter().map(|k| view! {
                    <li><code>{k.key_id.into_string()}</code> ": " {k.failures} " (" {reason_list(k.reasons)} ")"</li>
                }).collect_view()}
            </ul>
        }
    });
    view! {
        <tr>
            <td><a href=format!("/tenants/{}", f.tenant)>{f.tenant.clone()}</a> " / " {f.endpoint.into_string()}</td>
            <td class="num">{f.failures}</td>
            <td>{reason_list(f.reasons)}</td>
            <td>
                {f.accepted_keys.into_iter().map(|k| view! { <code>{k.into_string()}</code> " " }).collect_view()}
                {by_key}
            </td>
        </tr>
    }
}

#[component]
fn RetryPolicies(policies: Vec<PolicyState>, window: String) -> impl IntoView {
    view! {
        <table class="compact">
            <thead><tr><th>"Tenant"</th><th>"Policy"</th><th class="num">"Version"</th><th></th></tr></thead>
            <tbody>
                {policies.into_iter().map(|r| {
                    let dash = with_query("/dashboard", &[("tenant", r.tenant.as_str()), ("window", &window)]);
                    view! {
                        <tr>
                            <td><a href=format!("/tenants/{}#retry-policy", r.tenant)>{r.tenant.to_string()}</a></td>
                            <td>
                                <span class=format!("badge badge-{}", r.policy)>"retries " {r.policy.as_str()}</span>
                            </td>
                            <td class="num">{r.version}</td>
                            <td><a href=dash>"dashboard"</a></td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
    }
}

#[component]
fn ReasonTable(rows: Vec<ReasonCount>, #[prop(into)] class: String, link: Option<String>) -> impl IntoView {
    if rows.is_empty() {
        return view! { <p class="muted">"None in this window."</p> }.into_any();
    }
    let max = rows.iter().map(|r| r.count).max().unwrap_or(0);
    view! {
        <table class="compact">
            <tbody>
                {rows.into_iter().map(|r| {
                    let label = human(&r.reason);
                    let name = match &link {
                        Some(t) => {
                            let href = with_query("/quarantine", &[("tenant", t), ("reason", &r.reason)]);
                            view! { <a href=href>{label}</a> }.into_any()
                        }
                        None => view! { <span>{label}</span> }.into_any(),
                    };
                    view! {
                        <tr>
                            <td>{name}</td>
                            <td class="num"><strong>{r.count}</strong></td>
                            <td><ShareBar value=r.count max class=class.clone()/></td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}
