//! A bundle's sections as read: build and database, credentials, who may
//! act, constraints, drills, retention, retry policy, metrics and the audit
//! chain.

use leptos::prelude::*;
use views::evidence::Evidence;
use views::evidence::Holder;
use views::evidence::RoleAccess;

use crate::{
    components::{
        Table,
        format::{seconds, when, when_or},
    },
    pages::cohort_check::CohortCheckSection,
};

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
pub(super) fn Sections(e: Evidence) -> impl IntoView {
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
    let reasons = |rs: &[views::stats::ReasonCount]| {
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
