//! `/kek`: the key-encryption keys that seal every secret at rest, the rows
//! each one seals, and their rotation: add a version, reseal everything
//! under it (in the background, with live progress; Cancel until it ends,
//! Resume once it stopped), retire the old one once nothing uses it.
//! Administrators only.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;
use views::kek::KekOverview;
use views::kek::KekVersionView;
use views::kek::RewrapView;

use crate::{
    api::kek::{CancelRewrap, ResumeRewrap, RetireKek, RotateKek, StartRewrap, kek_overview},
    components::{
        ActionError, Layout, Loaded, Notice, Refresh, ReturnedError, Submit,
        format::when,
        poll::{MetaRefresh, ProgressBar, RunActions, every_second_while},
    },
};
use views::jobs::RunStatus;

/// The sealed columns, as the page names them.
const SOURCES: [(&str, &str); 4] = [
    ("signing_keys", "Signing keys"),
    ("service_keys", "Service keys"),
    ("outbox_payloads", "Outbox payloads"),
    ("event_bodies", "Event bodies"),
];

#[component]
pub fn KekPage() -> impl IntoView {
    let query = use_query_map();
    let refresh = Refresh::provide();
    // While a rewrap runs: re-read every second (hydrated), or every two
    // seconds by meta refresh. Neither keeps a session alive.
    let live = RwSignal::new(false);
    let tick = every_second_while(live);
    let auto = move || query.with_untracked(|q| q.get("auto").is_some_and(|a| a == "1"));
    let data = Resource::new(move || (tick.get(), refresh.get()), move |(n, _)| kek_overview(Some(n > 0 || auto())));
    Effect::new(move |_| {
        if let Some(Ok(o)) = data.get() {
            live.set(o.latest_rewrap.as_ref().is_some_and(RewrapView::is_running));
        }
    });
    view! {
        <Layout
            title="Key-encryption keys"
            render=move |_| view! {
                <p class="lede">
                    "Every secret Signet stores is sealed with AES-256-GCM under a key-encryption key (KEK): \
                    signing-key secrets, Signet's own service keys, "
                    "outbox payloads (one-time codes) and event bodies (health data). \
                    New secrets are sealed under the newest version. "
                    "Rotating adds a version and reseals every row under it while webhooks keep arriving; \
                    a version nothing uses any more can then be retired for good."
                </p>
                {move || query.read().get("retired").map(|v| view! {
                    <Notice>
                        "KEK version " {v} " is retired: it is gone from the ring and opens nothing any more."
                    </Notice>
                })}
                <ReturnedError/>
                <Loaded resource=data render=move |o| view! { <Overview o/> }/>
            }
        />
    }
}

#[component]
fn Overview(o: KekOverview) -> impl IntoView {
    let running = o.latest_rewrap.as_ref().is_some_and(RewrapView::is_running);
    let newest = o.versions.iter().find(|v| v.newest).map_or(0, |v| v.version);
    let stale = o.stale_rows;
    let rotate = ServerAction::<RotateKek>::new();
    let rewrap = ServerAction::<StartRewrap>::new();
    Refresh::after(rotate);
    Refresh::after(rewrap);
    let (rotate_label, rotate_kind) = if stale > 0 {
        ("Rotate (resumes resealing first)", "secondary")
    } else {
        ("Rotate: add a version and reseal everything", "primary")
    };
    let actions = (!running).then(|| {
        view! {
            <ActionError action=rotate/>
            <ActionError action=rewrap/>
            <div class="actions">
                {(stale > 0).then(|| view! {
                    <ActionForm action=rewrap>
                        <Submit action=rewrap label="Reseal the rest under the newest version"/>
                    </ActionForm>
                })}
                <ActionForm action=rotate>
                    <Submit action=rotate label=rotate_label kind=rotate_kind/>
                </ActionForm>
            </div>
        }
    });
    view! {
        {running.then(|| view! { <MetaRefresh content="2;url=/kek?auto=1"/> })}
        <section class="card" id="versions">
            <h2>"Versions"</h2>
            <p class="hint">
                {if !o.counted {
                    "Rows are counted again when the rewrap ends (counting reads every sealed table); \
                    its progress is below."
                        .to_owned()
                } else if stale == 0 {
                    format!("Every sealed row is under version {newest}, the newest.")
                } else {
                    format!("{stale} sealed rows are still under older versions than {newest}.")
                }}
            </p>
            <div class="table-wrap">
                <table>
                    <thead>
                        <tr>
                            <th>"Version"</th>
                            <th>"Created"</th>
                            {SOURCES.map(|(_, label)| view! { <th class="num">{label}</th> })}
                            <th class="num">"All rows"</th>
                            <th></th>
                        </tr>
                    </thead>
                    <tbody>
                        {o.versions
                            .into_iter()
                            .map(|v| view! { <VersionRow v running counted=o.counted/> })
                            .collect_view()}
                    </tbody>
                </table>
            </div>
            {actions}
        </section>
        {o.latest_rewrap.map(|j| view! { <RewrapCard j/> })}
        {(!o.retired.is_empty()).then(|| view! {
            <section class="card" id="retired">
                <h2>"Retired versions"</h2>
                <table class="compact">
                    <thead><tr><th>"Version"</th><th>"Created"</th><th>"Retired"</th></tr></thead>
                    <tbody>
                        {o.retired.into_iter().map(|r| view! {
                            <tr>
                                <td>"v" {r.version}</td>
                                <td>{when(&r.created_at)}</td>
                                <td>{when(&r.retired_at)} " by " <strong>{r.retired_by}</strong></td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            </section>
        })}
    }
}

#[component]
fn VersionRow(v: KekVersionView, running: bool, counted: bool) -> impl IntoView {
    let state = if v.newest {
        view! { <span class="badge badge-active">"newest"</span> }.into_any()
    } else if v.retirable && !running {
        let retire = ServerAction::<RetireKek>::new();
        view! {
            <ActionError action=retire/>
            <ActionForm action=retire>
                <input type="hidden" name="version" value=v.version.to_string()/>
                <Submit action=retire label="Retire" kind="danger small"/>
            </ActionForm>
        }
        .into_any()
    } else if v.retirable {
        view! { <span class="muted">"unused"</span> }.into_any()
    } else {
        view! { <span class="muted">"in use"</span> }.into_any()
    };
    view! {
        <tr data-version=v.version.to_string()>
            <td><strong>"v" {v.version}</strong></td>
            <td class="nowrap">{when(&v.created_at)}</td>
            {SOURCES.map(|(key, _)| {
                let n = if counted { v.rows.get(key).copied().unwrap_or(0).to_string() } else { "…".to_owned() };
                view! { <td class="num">{n}</td> }
            })}
            <td class="num"><strong>{if counted { v.total_rows.to_string() } else { "…".to_owned() }}</strong></td>
            <td>{state}</td>
        </tr>
    }
}

fn status_text(j: &RewrapView) -> String {
    match j.status {
        RunStatus::Running => format!(
            "Resealing under version {}: {} of {} rows done (now: {}).",
            j.target_version,
            j.rewrapped,
            j.total,
            source_label(&j.source)
        ),
        RunStatus::Finished => {
            format!("Done: {} rows resealed under version {} ({} read).", j.rewrapped, j.target_version, j.scanned)
        }
        RunStatus::Interrupted => format!(
            "Interrupted after {} of {}: the process running it stopped reporting. \
             Nothing is lost; resume to reseal the rest.",
            j.rewrapped, j.total
        ),
        RunStatus::Canceled => format!(
            "Canceled after {} of {}: those stay resealed; a new rewrap reseals the rest.",
            j.rewrapped, j.total
        ),
        RunStatus::Failed => {
            format!("Stopped after {} of {}: {}", j.rewrapped, j.total, j.error.clone().unwrap_or_default())
        }
    }
}

fn source_label(source: &str) -> &'static str {
    SOURCES.iter().find(|(k, _)| *k == source).map_or("finishing", |(_, label)| label)
}

#[component]
fn RewrapCard(j: RewrapView) -> impl IntoView {
    let percent = j.percent();
    let stopped = matches!(j.status, RunStatus::Interrupted | RunStatus::Failed);
    let actions = (stopped || j.status == RunStatus::Running).then(|| {
        let (resume, cancel) = (ServerAction::<ResumeRewrap>::new(), ServerAction::<CancelRewrap>::new());
        view! { <RunActions resume cancel id=j.id.clone() stopped/> }
    });
    let badge = match j.status {
        RunStatus::Failed => "stopped by an error",
        other => other.as_str(),
    };
    view! {
        <section class="card" id="rewrap">
            <h2>"Latest rewrap " <span class=format!("badge badge-job-{}", j.status)>{badge}</span></h2>
            <p class="job-summary" role="status" aria-live="polite">{status_text(&j)}</p>
            <ProgressBar label="Resealed" percent state=j.status.as_str().to_owned()/>
            <dl class="stats tiles">
                <div><dt>"Resealed"</dt><dd data-count="rewrapped">{j.rewrapped}</dd></div>
                <div><dt>"To reseal at the start"</dt><dd data-count="total">{j.total}</dd></div>
                <div><dt>"Rows read"</dt><dd data-count="scanned">{j.scanned}</dd></div>
            </dl>
            <dl class="facts">
                <dt>"Started"</dt><dd>{when(&j.started_at)} " by " <strong>{j.started_by.clone()}</strong></dd>
                {j.finished_at.as_deref().map(|t| view! { <dt>"Finished"</dt><dd>{when(t)}</dd> })}
            </dl>
            {actions}
        </section>
    }
}
