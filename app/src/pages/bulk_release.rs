//! `/quarantine/bulk/:id`: one background bulk release, its live progress
//! (polled every second while it runs once hydrated; a meta refresh every
//! 2 s without JavaScript), what still fails, a resume button when its
//! runner stopped, and a cancel button until it ends.

use leptos::prelude::*;
use leptos_router::hooks::use_params_map;
use views::quarantine::BulkReleaseView;

use crate::{
    api::operations::{CancelBulkRelease, ResumeBulkRelease, bulk_release},
    components::{
        Layout, Loaded, Refresh, ReturnedError, Table,
        format::{when, with_query},
        poll::{MetaRefresh, ProgressBar, RunActions, every_second_while},
        quarantine_labels::{filter_text, status_label},
    },
    dto::Me,
};
use views::jobs::RunStatus;

#[component]
pub fn BulkReleasePage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let live = RwSignal::new(true);
    let tick = every_second_while(live);
    // A resume redirects back here: a client-side navigation that must
    // reload the job (and so restart the polling).
    let refresh = Refresh::provide();
    // Polls and the meta refresh (`?auto=1`) never keep a session alive.
    let query = leptos_router::hooks::use_query_map();
    let auto = move || query.with_untracked(|q| q.get("auto").is_some_and(|a| a == "1"));
    let job = Resource::new(
        move || (id(), tick.get(), refresh.get()),
        move |(id, n, _)| bulk_release(id, Some(n > 0 || auto())),
    );
    Effect::new(move |_| {
        if let Some(Ok(j)) = job.get() {
            live.set(j.is_running());
        }
    });
    view! {
        <Layout
            title=""
            render=move |me| view! {
                <Loaded resource=job what="bulk release" name=id heading="Bulk release" render={
                    let me = me.clone();
                    move |j| view! { <Progress j me=me.clone()/> }
                }/>
            }
        />
    }
}

#[component]
fn Progress(j: BulkReleaseView, me: Me) -> impl IntoView {
    let percent = j.percent();
    let remaining = j.total.saturating_sub(j.processed);
    let stopped = matches!(j.status, RunStatus::Interrupted | RunStatus::Failed);
    let f = &j.filter;
    let back = with_query(
        "/quarantine",
        &[
            ("tenant", f.tenant.as_deref().unwrap_or("")),
            ("endpoint", f.endpoint.as_deref().unwrap_or("")),
            ("reason", f.reason.as_deref().unwrap_or("")),
            ("age", f.age.as_deref().unwrap_or("")),
        ],
    );
    let summary = match j.status {
        RunStatus::Running => format!("Releasing {} of {} events…", j.processed, j.total),
        RunStatus::Finished => format!("Done: {} of {} released.", j.released, j.total),
        RunStatus::Interrupted => format!(
            "Interrupted after {} of {}: the process running it stopped reporting. \
             Nothing is lost; resume to release the other {remaining}.",
            j.processed, j.total
        ),
        RunStatus::Canceled => format!(
            "Canceled after {} of {}: {} released; the other {remaining} stay in quarantine.",
            j.processed, j.total, j.released
        ),
        RunStatus::Failed => {
            format!("Stopped after {} of {}: {}", j.processed, j.total, j.error.clone().unwrap_or_default())
        }
    };
    let job_id = j.id.clone();
    let cancelable = matches!(j.status, RunStatus::Running | RunStatus::Interrupted | RunStatus::Failed);
    let actions = (cancelable && me.can_triage()).then(move || {
        let (resume, cancel) = (ServerAction::<ResumeBulkRelease>::new(), ServerAction::<CancelBulkRelease>::new());
        view! { <RunActions resume cancel id=job_id stopped/> }
    });
    let failures = (!j.failures.is_empty()).then(|| {
        let shown = j.failures.len();
        let more =
            (j.still_failing > shown as u64).then(|| format!("Showing the first {shown} of {}.", j.still_failing));
        let rows = j
            .failures
            .iter()
            .map(|x| {
                view! {
                    <tr>
                        <td><a href=format!("/quarantine/{}", x.id)><code>{x.event_id.clone()}</code></a></td>
                        <td><span class="badge badge-reason">{x.error.clone()}</span></td>
                    </tr>
                }
            })
            .collect_view();
        view! {
            <section class="card">
                <h2>"Still cannot apply"</h2>
                <p>"These stay open in quarantine with the new error; fix the cause and release them again."</p>
                <Table heads=&["Event", "Why"]>{rows}</Table>
                {more.map(|m| view! { <p class="hint">{m}</p> })}
            </section>
        }
    });
    view! {
        {j.is_running().then(|| view! { <MetaRefresh content="2;url=?auto=1"/> })}
        <p class="crumbs"><a href=back.clone()>"Quarantine"</a> " / bulk release"</p>
        <div class="page-head">
            <div>
                <h1>
                    "Bulk release " <span class=format!("badge badge-job-{}", j.status)>{status_label(j.status)}</span>
                </h1>
                <p class="muted">{filter_text(&j)}</p>
            </div>
        </div>
        <ReturnedError/>
        <section class="card">
            <p class="job-summary" role="status" aria-live="polite">{summary}</p>
            <ProgressBar label="Processed" percent state=j.status.as_str().to_owned()/>
            <dl class="stats tiles">
                <div><dt>"Released"</dt><dd data-count="released">{j.released}</dd></div>
                <div class:alert={j.still_failing > 0}>
                    <dt>"Still cannot apply"</dt>
                    <dd data-count="still-failing">{j.still_failing}</dd>
                </div>
                <div>
                    <dt>"Already resolved by someone else"</dt>
                    <dd data-count="already-resolved">{j.already_resolved}</dd>
                </div>
                <div><dt>"Remaining"</dt><dd data-count="remaining">{remaining}</dd></div>
            </dl>
            <dl class="facts">
                <dt>"Reason"</dt><dd>{j.reason.clone()}</dd>
                <dt>"Started"</dt><dd>{when(&j.started_at)} " by " <strong>{j.started_by.clone()}</strong></dd>
                {j.finished_at.as_deref().map(|t| view! { <dt>"Finished"</dt><dd>{when(t)}</dd> })}
            </dl>
            {actions}
        </section>
        {failures}
    }
}
