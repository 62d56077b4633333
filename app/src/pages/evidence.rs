//! `/evidence`: what a security reviewer signs off on. Drill runs with live
//! progress (polled every second once hydrated; a 2 s meta refresh without
//! JavaScript), the latest exported bundle rendered for reading with its
//! files to download, the public key that signs it, the sign-off form, what
//! changed since the last approved bundle, and the history of sign-offs.
//! Reviewers and admins see every tenant (or the whole deployment); a
//! clinic admin its own tenant; on-call is refused by every call.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use super::cohort_check::CohortCheckSection;
use crate::{
    api::evidence::{ExportEvidence, SignOffEvidence, StartDrills, drill_run, evidence_page},
    components::{
        ActionError, Layout, Loaded, Notice, Refresh, ReturnedError, Submit, Table,
        filters::TenantSelect,
        format::{seconds, when, when_or},
        poll::{MetaRefresh, ProgressBar, every_second_while},
    },
    dto::{
        BundleDto, DRILL_NAMES, Difference, DrillResult, DrillRunView, Evidence, EvidencePageDto, Holder, Me,
        RoleAccess, SignoffView, SinceApproval,
    },
};

#[component]
pub fn EvidencePage() -> impl IntoView {
    let query = use_query_map();
    let tenant = move || query.read().get("tenant").filter(|t| !t.is_empty());
    let refresh = Refresh::provide();
    let data = Resource::new(move || (tenant(), refresh.get()), |(t, _)| evidence_page(t));
    view! {
        <Layout
            title="Sign-off evidence"
            render=move |me| view! {
                <p class="lede">
                    "Drills run the seed's test matrix (concurrent duplicates, a process killed before commit, \
                    a lost acknowledgement, an unknown tenant, a bad signature, a replay, an identity conflict) "
                    "against this deployment's own database, through the receiver that serves " <code>"/hooks"</code>
                    ", and check the rows, not only the answers. "
                    "The bundle reads credentials, database constraints, drills, retention, the retry policy, \
                    metrics and the audit chain live, and is signed with this deployment's key."
                </p>
                {move || query.read().get("exported").map(|d| view! {
                    <Notice>"Exported a new bundle, digest " <code>{d}</code> "."</Notice>
                })}
                {move || query.read().get("signed").map(|d| view! {
                    <Notice>"Sign-off recorded: " <strong>{d}</strong> "."</Notice>
                })}
                <ReturnedError/>
                <Loaded resource=data render={
                    let me = me.clone();
                    move |d| view! { <Evidence d me=me.clone()/> }
                }/>
            }
        />
    }
}

#[component]
fn Evidence(d: EvidencePageDto, me: Me) -> impl IntoView {
    let tenant = d.tenant.clone().unwrap_or_default();
    let scope_form = (!d.tenants.is_empty()).then(|| {
        view! {
            <form method="get" action="/evidence" class="filters">
                <TenantSelect tenants=d.tenants.clone() selected=tenant.clone()/>
                <div class="filter-actions">
                    <button type="submit" class="button secondary">"Show"</button>
                </div>
            </form>
        }
    });
    let scope_text = match &d.tenant {
        Some(t) => format!("Scope: tenant {t}"),
        None => "Scope: the whole deployment".to_owned(),
    };
    view! {
        <div class="scope-bar"><p class="muted">{scope_text}</p>{scope_form}</div>
        <Drills runs=d.runs.clone() tenant=tenant.clone() me=me.clone()/>
        <Bundle bundle=d.bundle.clone() tenant=tenant.clone()/>
        {d.bundle.clone().filter(|_| d.can_sign_off).map(|bundle| view! { <SignOff bundle tenant=tenant.clone()/> })}
        <Since since=d.since.clone()/>
        <History signoffs=d.signoffs.clone()/>
        <section class="card" id="public-key">
            <h2>"Evidence-signing public key"</h2>
            <p class="hint">
                "Ed25519. Give it to whoever verifies a bundle: "
                <code>"signet evidence verify <dir> --public-key <file>"</code>
                "."
            </p>
            <p><code class="wrap" data-public-key="">{d.public_key.clone()}</code></p>
            <pre class="pem">{d.public_key_pem.clone()}</pre>
        </section>
    }
}

fn verdict(run: &DrillRunView) -> (&'static str, String) {
    match (run.status.as_str(), run.passed) {
        ("running", _) => ("running", format!("running: {} of {} drills done", run.done, run.total)),
        ("interrupted", _) => ("failed", "interrupted: the process running it stopped".to_owned()),
        (_, Some(true)) => ("passed", "all drills passed".to_owned()),
        _ => ("failed", format!("{} of {} drills failed", run.drills.iter().filter(|x| !x.passed).count(), run.total)),
    }
}

#[component]
fn Drills(runs: Vec<DrillRunView>, tenant: String, me: Me) -> impl IntoView {
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

fn file_link(digest: &str, name: &str) -> String {
    format!("/evidence/files/{digest}/{name}")
}

/// The start of a digest, enough to tell bundles apart.
fn short(digest: &str) -> String {
    digest[..12.min(digest.len())].to_owned()
}

#[component]
fn Bundle(bundle: Option<BundleDto>, tenant: String) -> impl IntoView {
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

/// A check's outcome as a badge: `yes` when it holds, `no` when it does not.
#[component]
fn Check(ok: bool, yes: &'static str, no: &'static str) -> impl IntoView {
    if ok {
        view! { <span class="badge badge-active">{yes}</span> }.into_any()
    } else {
        view! { <span class="badge badge-danger">{no}</span> }.into_any()
    }
}

/// Who holds a role: `user alice (clinic-a), token ci`; in a tenant's
/// bundle, holders of deployment-wide roles only as counts.
fn holders(access: &RoleAccess) -> String {
    let holder = |h: &Holder| {
        format!("{} {}{}", h.kind, h.name, h.tenant.as_deref().map(|t| format!(" ({t})")).unwrap_or_default())
    };
    let mut shown: Vec<String> = access.holders.iter().map(holder).collect();
    let (users, tokens) = access.unnamed();
    if users + tokens > 0 {
        shown.push(format!("{users} user(s), {tokens} token(s), not named in a tenant's bundle"));
    }
    if shown.is_empty() { "–".to_owned() } else { shown.join(", ") }
}

/// The build the bundle is bound to, the database's durability settings as
/// read (a weak one is named by a `durability_weak` finding), and the files'
/// modes.
#[component]
fn BuildAndDatabase(e: Evidence) -> impl IntoView {
    let weak: Vec<String> =
        e.findings.iter().filter(|f| f.id == "durability_weak").map(|f| f.subject.clone()).collect();
    let engine = e.database.engine.clone();
    let sha = if e.build.binary_sha256.is_empty() { "(not read)".to_owned() } else { e.build.binary_sha256.clone() };
    view! {
        <h3>"Build and database"</h3>
        <dl class="facts" id="build">
            <dt>"Version"</dt><dd data-build="version">{e.build.version.clone()}</dd>
            <dt>"Commit"</dt><dd><code class="wrap" data-build="commit">{e.build.commit.clone()}</code></dd>
            <dt>"Binary SHA-256"</dt><dd><code class="wrap" data-build="binary_sha256">{sha}</code></dd>
            <dt>"Engine · schema"</dt>
            <dd>{e.database.engine.clone()} " · " <code>{e.database.schema_version.clone()}</code></dd>
            {e.database.synchronous_standby.map(|s| view! {
                <dt>"Synchronous standby"</dt><dd>{if s { "configured" } else { "none" }}</dd>
            })}
        </dl>
        <Table heads=&["Durability setting (live)", "Value", "Ack promise"]>
            {e.database.durability.iter().map(|(name, value)| {
                let judged = views::evidence::durability_judged(&engine, name);
                let ok = !weak.contains(name);
                view! {
                    <tr data-setting=name.clone() data-weak=(!ok).to_string()>
                        <td><code>{name.clone()}</code></td>
                        <td>{value.clone()}</td>
                        <td>
                            {if judged {
                                view! { <Check ok=ok yes="holds" no="WEAK"/> }.into_any()
                            } else {
                                view! { <small class="muted">"shown, not judged"</small> }.into_any()
                            }}
                        </td>
                    </tr>
                }
            }).collect_view()}
        </Table>
        <Table heads=&["File", "Path", "Mode", "Owner (uid:gid)", "Owner-only"]>
            {e.files.iter().map(|f| view! {
                <tr data-file=f.role.clone()>
                    <td>{f.role.replace('_', " ")}</td>
                    <td><code class="wrap">{f.path.clone().or_else(|| f.note.clone()).unwrap_or_default()}</code></td>
                    <td><code>{f.mode.clone().unwrap_or_else(|| "–".into())}</code></td>
                    <td>
                        {match (f.uid, f.gid) { (Some(u), Some(g)) => format!("{u}:{g}"), _ => "–".into() }}
                        {(f.owned_by_signet == Some(false)).then(|| view! {
                            <br/><small class="error-text">"not Signet's user"</small>
                        })}
                    </td>
                    <td>
                        {f.mode.is_some().then(|| view! {
                            <Check ok=!f.group_or_world_access yes="yes" no="NO"/>
                        })}
                    </td>
                </tr>
            }).collect_view()}
        </Table>
    }
}

#[component]
fn Sections(e: Evidence) -> impl IntoView {
    const CREDENTIAL_HEADS: &[&str] = &[
        "Tenant / endpoint",
        "Key",
        "Status",
        "Event types",
        "Owner · rotation",
        "Approved by",
        "KEK",
        "Age",
        "Last verified",
        "Verifications (window)",
    ];
    const RETENTION_HEADS: &[&str] =
        &["Endpoint", "Claims kept", "Bodies kept", "Horizon", "Guard", "Manual resend", "Decided"];
    let m = e.metrics.clone();
    let reasons = |rs: &[crate::dto::ReasonCount]| {
        if rs.is_empty() {
            "none".to_owned()
        } else {
            rs.iter().map(|r| format!("{} {}", r.reason, r.count)).collect::<Vec<_>>().join(", ")
        }
    };
    let no_keys = e.credentials.is_empty();
    view! {
        <BuildAndDatabase e=e.clone()/>
        <h3>"Credentials"</h3>
        <Table heads=CREDENTIAL_HEADS>
            {e.credentials.iter().map(|k| view! {
                <tr>
                    <td>{k.tenant.clone()} " / " <strong>{k.endpoint.clone()}</strong></td>
                    <td><code>{k.key_id.clone()}</code></td>
                    <td>
                        <span class=format!("badge badge-{}", k.status)>{k.status.clone()}</span>
                        {(!k.scope_approved).then(|| view! {
                            <br/><small class="error-text">"scope not approved"</small>
                        })}
                    </td>
                    <td>{k.scheme.clone()} <br/> <small>{k.event_types.join(", ")}</small></td>
                    <td>{k.owner.clone()} " · " {k.rotation_owner.clone()}</td>
                    <td>
                        {k.approved_by.clone().unwrap_or_else(|| "–".into())} <br/>
                        <small class="muted">{when_or(k.approved_at.as_deref(), "")}</small>
                    </td>
                    <td data-can-sign=k.can_sign.to_string()>
                        {if k.can_sign {
                            format!("v{}", k.kek_version)
                        } else {
                            format!("{} public key · cannot sign", k.credential)
                        }}
                    </td>
                    <td class="nowrap">{k.age_days} " d"</td>
                    <td class="nowrap">{when_or(k.last_verified_at.as_deref(), "never")}</td>
                    <td data-verifications=k.key_id.clone()>
                        {k.verification.successes} " verified · " {k.verification.failures} " failed"
                        {(!k.verification.failures_by_reason.is_empty())
                            .then(|| format!(" ({})", reasons(&k.verification.failures_by_reason)))}
                        {k.verification.last_failure_at.clone().map(|at| view! {
                            <br/><small class="muted">
                                "last failure " {when(&at)} " ("
                                {k.verification.last_failure_reason.clone().unwrap_or_default()} ")"
                            </small>
                        })}
                    </td>
                </tr>
            }).collect_view()}
        </Table>
        {no_keys.then(|| view! { <p class="empty">"No keys."</p> })}
        <h3>"Who can touch credentials"</h3>
        <Table heads=&["Role", "Permissions (live policy)", "Held by"]>
            {e.access.iter().map(|a| view! {
                <tr>
                    <td><strong>{a.role.clone()}</strong></td>
                    <td><small>{a.permissions.join(", ")}</small></td>
                    <td>{holders(a)}</td>
                </tr>
            }).collect_view()}
        </Table>
        <h3>"Database constraints (live catalog)"</h3>
        <Table heads=&["Constraint", "Rule", "Guarantees", "Present"]>
            {e.constraints.iter().map(|c| {
                let rule = match &c.references {
                    Some(r) => format!("{}: {}({}) → {}", c.kind, c.table, c.columns.join(", "), r),
                    None if c.columns.is_empty() => format!("{}: {}", c.kind, c.table),
                    None => format!("{}: {}({})", c.kind, c.table, c.columns.join(", ")),
                };
                view! {
                    <tr data-constraint=c.id.clone() data-present=c.present.to_string()>
                        <td><code>{c.id.clone()}</code></td>
                        <td><small class="mono">{rule}</small></td>
                        <td>{c.guarantees.clone()}</td>
                        <td><Check ok=c.present yes="present" no="MISSING"/></td>
                    </tr>
                }
            }).collect_view()}
        </Table>
        <h3>"Retention"</h3>
        <Table heads=RETENTION_HEADS>
            {e.retention.endpoints.iter().map(|r| view! {
                <tr>
                    <td>
                        {r.tenant.clone()} " / " <strong>{r.endpoint.clone()}</strong>
                        <br/><small>{r.scheme.clone()}</small>
                    </td>
                    <td>{seconds(r.dedup_secs)}</td>
                    <td>{seconds(r.body_secs)}</td>
                    <td>{seconds(r.horizon_secs)}</td>
                    <td><Check ok=r.guard_holds yes="holds" no="below horizon"/></td>
                    <td>
                        {seconds(r.manual_resend_secs)} <br/>
                        <Check ok={r.dedup_secs >= r.manual_resend_secs} yes="covered" no="risk accepted"/>
                    </td>
                    <td>
                        {r.decided_by.clone()}
                        <br/><small class="muted">{when(&r.decided_at)} " · " {r.reason.clone()}</small>
                    </td>
                </tr>
            }).collect_view()}
        </Table>
        <h3>"Retry policy"</h3>
        <Table heads=&["Tenant", "Now", "May roll back"]>
            {e.retry_policy.iter().map(|p| view! {
                <tr>
                    <td><a href=format!("/tenants/{}", p.tenant)>{p.tenant.clone()}</a></td>
                    <td>{p.policy.clone()} " (v" {p.version} ")"</td>
                    <td><small>{p.may_roll_back.join(", ")}</small></td>
                </tr>
            }).collect_view()}
        </Table>
        <CohortCheckSection checks=e.cohort_check.clone()/>
        <h3>"Metrics (" {m.window.clone()} ")"</h3>
        <dl class="facts">
            <dt>"Applied"</dt><dd>{m.applied}</dd>
            <dt>"Duplicate acknowledgements"</dt><dd>{m.duplicate_acks}</dd>
            <dt>"Verification failures"</dt><dd>{reasons(&m.verification_failures)}</dd>
            <dt>"Rollbacks (503)"</dt><dd>{m.rollbacks}</dd>
            <dt>"Quarantined"</dt><dd>{reasons(&m.quarantined)} " · " {m.quarantine_open} " awaiting triage"</dd>
            <dt>"Outbox"</dt>
            <dd>
                {m.outbox_backlog} " pending"
                {m.outbox_oldest_pending_age_secs.map(|s| format!(" (oldest {})", seconds(s)))}
                " · " {m.outbox_dead} " dead"
            </dd>
        </dl>
        <h3>"Audit log"</h3>
        <dl class="facts">
            <dt>"Chain"</dt>
            <dd>{if e.audit.chain_verified { "verifies" } else { "BROKEN" }} " · " {e.audit.entries} " entries"</dd>
            <dt>"Recomputed"</dt>
            <dd>{views::evidence::chain_recomputed(e.audit.verified_from_seq)}</dd>
            <dt>"Keyed since entry"</dt>
            <dd>{e.audit.keyed_since_seq.map_or_else(|| "–".to_owned(), |s| s.to_string())}</dd>
            <dt>"Head"</dt>
            <dd><code class="wrap">{e.audit.head_seq} " · " {e.audit.head_hash.clone()}</code></dd>
        </dl>
    }
}

#[component]
fn SignOff(bundle: BundleDto, tenant: String) -> impl IntoView {
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
fn Since(since: Option<SinceApproval>) -> impl IntoView {
    let body = match since {
        None => view! { <p class="empty">"Export a bundle to compare it with the last approved one."</p> }.into_any(),
        Some(SinceApproval { approval: None, .. }) => {
            view! { <p class="empty">"No bundle of this scope has been approved yet."</p> }.into_any()
        }
        Some(SinceApproval { approval: Some(a), differences }) => view! {
            <p>
                "Compared with the bundle " <code>{short(&a.digest)} "…"</code>
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
fn History(signoffs: Vec<SignoffView>) -> impl IntoView {
    let table = if signoffs.is_empty() {
        view! { <p class="empty">"No sign-offs yet."</p> }.into_any()
    } else {
        view! {
            <Table heads=&["When", "Who", "Decision", "Bundle", "Comment", "Acknowledged"]>
                {signoffs.into_iter().map(|s| {
                    let badge = if s.decision == "approved" { "active" } else { "danger" };
                    let acknowledged = s.acknowledged.len().to_string();
                    view! {
                        <tr data-decision=s.decision.clone()>
                            <td class="nowrap">{when(&s.at)}</td>
                            <td>{s.actor}</td>
                            <td><span class=format!("badge badge-{badge}")>{s.decision.clone()}</span></td>
                            <td>
                                <a href=file_link(&s.digest, "evidence.html") target="_blank" rel="noopener">
                                    <code>{short(&s.digest)} "…"</code>
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
