//! Drill runs: start one, follow it live, and each run's rows.

use leptos::prelude::*;
use views::evidence::DRILL_NAMES;
use views::evidence::DrillResult;
use views::evidence::DrillRunView;
use views::evidence::DrillStatus;

use crate::{
    api::evidence::{StartDrills, drill_run},
    components::{
        ActionError, Refresh, Submit, Table,
        format::when,
        poll::{MetaRefresh, ProgressBar, every_second_while},
    },
    dto::Me,
};

fn verdict(run: &DrillRunView) -> (&'static str, String) {
    match (DrillStatus::parse(&run.status), run.passed) {
        (Some(DrillStatus::Running), _) => ("running", format!("running: {} of {} drills done", run.done, run.total)),
        (Some(DrillStatus::Interrupted), _) => ("failed", "interrupted: the process running it stopped".to_owned()),
        (_, Some(true)) => ("passed", "all drills passed".to_owned()),
        _ => ("failed", format!("{} of {} drills failed", run.drills.iter().filter(|x| !x.passed).count(), run.total)),
    }
}

#[component]
pub(super) fn Drills(runs: Vec<DrillRunView>, tenant: String, me: Me) -> impl IntoView {
    let action = ServerAction::<StartDrills>::new();
    Refresh::after(action);
    let latest = runs.first().cloned();
    view! {
        <section class="card" id="drills">
            <div class="card-head">
                <h2>"Drills"</h2>
                {me.can_read_evidence().then(|| view! {
                    <ActionForm action>
                        <input type="hidden" name="tenant" value=tenant.clone()/>
                        <Submit action label="Run drills" kind="primary"/>
                    </ActionForm>
                })}
            </div>
            <ActionError action/>
            {match latest {
                Some(run) => view! { <LiveRun run/> }.into_any(),
                // A clinic admin sees only its own tenant's runs.
                None if me.tenant.is_some() => {
                    view! { <p class="empty">"No drill run started in this tenant yet."</p> }.into_any()
                }
                None => view! { <p class="empty">"No drill has run on this deployment yet."</p> }.into_any(),
            }}
            {(runs.len() > 1).then(|| view! {
                <h3>"Earlier runs"</h3>
                <Table heads=&["Started", "By", "Engine", "Result"]>
                    {runs.iter().skip(1).map(|r| {
                        let (class, text) = verdict(r);
                        view! {
                            <tr>
                                <td class="nowrap">{when(&r.started_at)}</td>
                                <td>{r.actor.clone().unwrap_or_else(|| "–".into())}</td>
                                <td>{r.engine.clone()}</td>
                                <td><span class=format!("badge badge-drill-{class}")>{text}</span></td>
                            </tr>
                        }
                    }).collect_view()}
                </Table>
            })}
        </section>
    }
}

/// The newest run; while it runs, re-read every second (hydrated) or every
/// two seconds by meta refresh (no JavaScript).
#[component]
fn LiveRun(run: DrillRunView) -> impl IntoView {
    let id = run.run_id.clone();
    let live = RwSignal::new(run.is_running());
    let tick = every_second_while(live);
    let fresh = Resource::new(
        move || tick.get(),
        move |n| {
            let id = id.clone();
            async move { if n == 0 { None } else { Some(drill_run(id, Some(true)).await) } }
        },
    );
    let initial = run.clone();
    let refresh = use_context::<Refresh>();
    Effect::new(move |_| {
        if let Some(Some(Ok(r))) = fresh.get() {
            live.set(r.is_running());
            // Finished: reload the page's data (the run list, findings).
            if !r.is_running()
                && let Some(refresh) = refresh
            {
                refresh.bump();
            }
        }
    });
    view! {
        {initial.is_running().then(|| view! { <MetaRefresh content="2"/> })}
        <Transition fallback=move || view! { <RunView run=initial.clone()/> }>
            {move || {
                let current = match fresh.get() {
                    Some(Some(Ok(r))) => r,
                    _ => run.clone(),
                };
                view! { <RunView run=current/> }
            }}
        </Transition>
    }
}

#[component]
fn RunView(run: DrillRunView) -> impl IntoView {
    let (class, text) = verdict(&run);
    let percent = (run.done * 100).checked_div(run.total).unwrap_or(0) as u64;
    let rows = DRILL_NAMES
        .iter()
        .map(|name| match run.drills.iter().find(|x| x.name == *name) {
            Some(result) => view! { <DrillRow name result=result.clone()/> }.into_any(),
            None => view! {
                <tr data-drill=*name>
                    <td><code>{*name}</code></td>
                    <td><span class="badge">{if run.is_running() { "waiting" } else { "did not run" }}</span></td>
                    <td></td><td></td>
                </tr>
            }
            .into_any(),
        })
        .collect_view();
    view! {
        <div class="drill-run" data-run-id=run.run_id.clone() data-status=run.status.clone()>
            <p role="status" aria-live="polite">
                <span class=format!("badge badge-drill-{class}")>{text}</span>
                " · started " {when(&run.started_at)} " by "
                <strong>{run.actor.clone().unwrap_or_else(|| "–".into())}</strong>
                " on " {run.engine.clone()}
                {run.finished_at.as_deref().map(|f| format!(" · finished {}", when(f)))}
                " · signature schemes verified: "
                <span data-schemes="">{views::evidence::schemes_text(&run.schemes)}</span>
            </p>
            <ProgressBar label="Drills done" percent state=if class == "failed" { "failed" } else { "running" }/>
            {run.error.clone().map(|e| view! { <p class="error">{e}</p> })}
            <Table heads=&["Drill", "Result", "Expected → observed", "Time"] class="drills">{rows}</Table>
        </div>
    }
}

#[component]
fn DrillRow(name: &'static str, result: DrillResult) -> impl IntoView {
    let checks: Vec<String> = result
        .expected
        .iter()
        .map(|(k, v)| {
            let seen = result.observed.get(k).map(|o| o.to_string()).unwrap_or_else(|| "–".into());
            format!("{k}: {v} → {seen}")
        })
        .collect();
    let (class, label) = if result.passed { ("passed", "passed") } else { ("failed", "FAILED") };
    view! {
        <tr data-drill=name data-passed=result.passed.to_string()>
            <td><code>{name}</code></td>
            <td>
                <span class=format!("badge badge-drill-{class}")>{label}</span>
                {result.failures.iter().map(|f| view! { <br/><small class="error-text">{f.clone()}</small> })
                    .collect_view()}
            </td>
            <td><small class="mono">{checks.join(" · ")}</small></td>
            <td class="nowrap">{result.duration_ms} " ms"</td>
        </tr>
    }
}
