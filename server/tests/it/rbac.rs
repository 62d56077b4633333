//! The role matrix over HTTP: every server function and every `/api/v1`
//! route, called as every role, including a clinic admin of another tenant
//! and an anonymous caller. The test also proves its own coverage: it fails
//! when a server function or API route exists that the matrix does not list.

use std::{
    collections::{BTreeSet, HashMap},
    sync::atomic::{AtomicUsize, Ordering},
};

use reqwest::{Client, Method, StatusCode};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder};
use serde_json::{Value, json};

use crate::{
    both_engines,
    support::{Install, Server},
};

const PASSWORD: &str = "a long enough password";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Who {
    Admin,
    Reviewer,
    Oncall,
    /// Clinic admin of clinic-a (the tenant every case acts on).
    ClinicOwn,
    /// Clinic admin of clinic-b.
    ClinicOther,
    Anonymous,
}

const EVERYONE: [Who; 6] = [Who::Admin, Who::Reviewer, Who::Oncall, Who::ClinicOwn, Who::ClinicOther, Who::Anonymous];
const READERS: &[Who] = &[Who::Admin, Who::Reviewer, Who::Oncall, Who::ClinicOwn];
const SIGNED_IN: &[Who] = &[Who::Admin, Who::Reviewer, Who::Oncall, Who::ClinicOwn, Who::ClinicOther];
const MANAGERS: &[Who] = &[Who::Admin, Who::ClinicOwn];
const REVIEWERS: &[Who] = &[Who::Admin, Who::Reviewer];
const ADMIN: &[Who] = &[Who::Admin];
const TRIAGE: &[Who] = &[Who::Admin, Who::Oncall];
/// Drills and evidence: everyone but on-call (a clinic admin for its own
/// tenant).
const EVIDENCE: &[Who] = &[Who::Admin, Who::Reviewer, Who::ClinicOwn, Who::ClinicOther];
const EVIDENCE_OF_A: &[Who] = &[Who::Admin, Who::Reviewer, Who::ClinicOwn];

/// What a case needs created fresh before each call.
#[derive(Clone, Copy, Debug)]
enum Fresh {
    Nothing,
    ActiveKey,
    PendingKey,
    /// A reminder in clinic-a, created by a signed webhook.
    Reminder,
    /// An event of clinic-a/hooks, applied (its id).
    Event,
    /// An open quarantine entry in clinic-a (`reminder_not_found`) whose
    /// cause has since been fixed, so a release applies.
    Quarantined,
    /// A dead outbox intent of clinic-a (its relay URL refuses connections).
    DeadIntent,
    /// A running bulk release over clinic-a's open quarantine.
    BulkRelease,
    /// A bulk release of clinic-a whose runner stopped reporting.
    InterruptedBulkRelease,
    /// No drill run in progress (runs go one at a time).
    IdleDrills,
    /// A finished drill run of clinic-a (started by its clinic admin).
    DrillRun,
    /// An exported evidence bundle of clinic-a (its digest).
    Export,
    /// No KEK rewrap running.
    IdleKek,
    /// A rewrap that stopped (failed), to resume (its id).
    StoppedRewrap,
    /// A KEK version no row uses, a newer one long in the ring (its number).
    RetirableKek,
    /// A pending break-glass override of clinic-a, asked for by the CLI (its id).
    PendingOverride,
}

struct Case {
    /// Server function endpoint name, or `METHOD /api/v1/path-template`.
    name: &'static str,
    allowed: &'static [Who],
    /// Whether the resource belongs to clinic-a (a foreign clinic admin then
    /// gets 404, not 403).
    tenant_scoped: bool,
    fresh: Fresh,
    /// Builds the request: (method, path, form-or-json body) from the fresh id and a unique suffix.
    build: fn(&str, usize) -> (Method, String, Body),
}

enum Body {
    None,
    Form(Vec<(&'static str, String)>),
    Json(Value),
}

fn get(path: String) -> (Method, String, Body) {
    (Method::GET, path, Body::None)
}
fn form(path: &str, fields: Vec<(&'static str, String)>) -> (Method, String, Body) {
    (Method::POST, path.to_owned(), Body::Form(fields))
}
fn json_req(method: Method, path: String, body: Value) -> (Method, String, Body) {
    (method, path, Body::Json(body))
}

fn server_fn_cases() -> Vec<Case> {
    vec![
        Case {
            name: "list_tenants",
            allowed: SIGNED_IN,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| get("/fn/list_tenants".into()),
        },
        Case {
            name: "create_tenant",
            allowed: ADMIN,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, n| form("/fn/create_tenant", vec![("slug", format!("t-{n}")), ("name", "T".into())]),
        },
        Case {
            name: "load_tenant",
            allowed: READERS,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, _| get("/fn/load_tenant?slug=clinic-a".into()),
        },
        Case {
            name: "create_endpoint",
            allowed: MANAGERS,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, n| {
                form(
                    "/fn/create_endpoint",
                    vec![("tenant", "clinic-a".into()), ("slug", format!("e-{n}")), ("scheme", "github".into())],
                )
            },
        },
        Case {
            name: "set_endpoint_enabled",
            allowed: MANAGERS,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, _| {
                form(
                    "/fn/set_endpoint_enabled",
                    vec![("tenant", "clinic-a".into()), ("endpoint", "hooks".into()), ("enabled", "true".into())],
                )
            },
        },
        Case {
            name: "provision_key",
            allowed: MANAGERS,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, _| form("/fn/provision_key", vec![("tenant", "clinic-a".into()), ("endpoint", "hooks".into())]),
        },
        Case {
            name: "endpoint_onboarding",
            allowed: READERS,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, _| get("/fn/endpoint_onboarding?tenant=clinic-a&endpoint=hooks".into()),
        },
        Case {
            name: "send_test_delivery",
            allowed: MANAGERS,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, _| {
                form("/fn/send_test_delivery", vec![("tenant", "clinic-a".into()), ("endpoint", "hooks".into())])
            },
        },
        Case {
            name: "rotate_key",
            allowed: MANAGERS,
            tenant_scoped: true,
            fresh: Fresh::ActiveKey,
            build: |id, _| form("/fn/rotate_key", vec![("key_id", id.into()), ("overlap_hours", "1".into())]),
        },
        Case {
            name: "revoke_key",
            allowed: MANAGERS,
            tenant_scoped: true,
            fresh: Fresh::ActiveKey,
            build: |id, _| form("/fn/revoke_key", vec![("key_id", id.into()), ("reason", "matrix test".into())]),
        },
        Case {
            name: "get_key",
            allowed: READERS,
            tenant_scoped: true,
            fresh: Fresh::ActiveKey,
            build: |id, _| get(format!("/fn/get_key?key_id={id}")),
        },
        Case {
            name: "reveal_secret",
            allowed: READERS,
            tenant_scoped: true,
            fresh: Fresh::ActiveKey,
            build: |id, _| form("/fn/reveal_secret", vec![("key_id", id.into()), ("reveal", "not-a-handle".into())]),
        },
        Case {
            name: "review_queue",
            allowed: SIGNED_IN,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| get("/fn/review_queue".into()),
        },
        Case {
            name: "approval_history",
            allowed: SIGNED_IN,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| get("/fn/approval_history".into()),
        },
        Case {
            name: "approve_key",
            allowed: REVIEWERS,
            tenant_scoped: true,
            fresh: Fresh::PendingKey,
            build: |id, _| form("/fn/approve_key", vec![("key_id", id.into()), ("comment", "ok".into())]),
        },
        Case {
            name: "reject_key",
            allowed: REVIEWERS,
            tenant_scoped: true,
            fresh: Fresh::PendingKey,
            build: |id, _| form("/fn/reject_key", vec![("key_id", id.into()), ("comment", "too broad".into())]),
        },
        Case {
            name: "list_users",
            allowed: ADMIN,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| get("/fn/list_users".into()),
        },
        Case {
            name: "create_user",
            allowed: ADMIN,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, n| {
                form(
                    "/fn/create_user",
                    vec![("username", format!("u{n}")), ("role", "oncall".into()), ("password", PASSWORD.into())],
                )
            },
        },
        Case {
            name: "update_user",
            allowed: ADMIN,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| form("/fn/update_user", vec![("username", "carl".into()), ("disabled", "false".into())]),
        },
        Case {
            name: "audit_log",
            allowed: SIGNED_IN,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| get("/fn/audit_log".into()),
        },
        Case {
            name: "list_quarantine",
            allowed: SIGNED_IN,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| get("/fn/list_quarantine".into()),
        },
        Case {
            name: "event_story",
            allowed: READERS,
            tenant_scoped: true,
            fresh: Fresh::Event,
            build: |id, _| get(format!("/fn/event_story?tenant=clinic-a&endpoint=hooks&event_id={id}")),
        },
        Case {
            name: "locate_event",
            allowed: READERS,
            tenant_scoped: true,
            fresh: Fresh::Quarantined,
            build: |id, _| get(format!("/fn/locate_event?quarantine={id}")),
        },
        Case {
            name: "quarantine_detail",
            allowed: READERS,
            tenant_scoped: true,
            fresh: Fresh::Quarantined,
            build: |id, _| get(format!("/fn/quarantine_detail?id={id}")),
        },
        Case {
            name: "reveal_quarantine_body",
            allowed: TRIAGE,
            tenant_scoped: true,
            fresh: Fresh::Quarantined,
            build: |id, _| form("/fn/reveal_quarantine_body", vec![("id", id.into())]),
        },
        Case {
            name: "shown_quarantine_body",
            allowed: TRIAGE,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| form("/fn/shown_quarantine_body", vec![("id", "q-1".into()), ("view", "not-a-view".into())]),
        },
        Case {
            name: "release_quarantine",
            allowed: TRIAGE,
            tenant_scoped: true,
            fresh: Fresh::Quarantined,
            build: |id, _| form("/fn/release_quarantine", vec![("id", id.into()), ("reason", "matrix".into())]),
        },
        Case {
            name: "discard_quarantine",
            allowed: TRIAGE,
            tenant_scoped: true,
            fresh: Fresh::Quarantined,
            build: |id, _| form("/fn/discard_quarantine", vec![("id", id.into()), ("reason", "matrix".into())]),
        },
        Case {
            name: "start_bulk_release",
            allowed: TRIAGE,
            tenant_scoped: true,
            fresh: Fresh::Quarantined,
            build: |_, _| {
                form("/fn/start_bulk_release", vec![("tenant", "clinic-a".into()), ("reason", "matrix".into())])
            },
        },
        Case {
            name: "bulk_release",
            allowed: READERS,
            tenant_scoped: true,
            fresh: Fresh::BulkRelease,
            build: |id, _| get(format!("/fn/bulk_release?id={id}")),
        },
        Case {
            name: "recent_bulk_releases",
            allowed: SIGNED_IN,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| get("/fn/recent_bulk_releases".into()),
        },
        Case {
            name: "resume_bulk_release",
            allowed: TRIAGE,
            tenant_scoped: true,
            fresh: Fresh::InterruptedBulkRelease,
            build: |id, _| form("/fn/resume_bulk_release", vec![("id", id.into())]),
        },
        Case {
            name: "list_outbox",
            allowed: SIGNED_IN,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| get("/fn/list_outbox".into()),
        },
        Case {
            name: "retry_outbox",
            allowed: TRIAGE,
            tenant_scoped: true,
            fresh: Fresh::DeadIntent,
            build: |id, _| form("/fn/retry_outbox", vec![("id", id.into())]),
        },
        Case {
            name: "retry_policy",
            allowed: READERS,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, _| get("/fn/retry_policy?tenant=clinic-a".into()),
        },
        Case {
            name: "set_retry_policy",
            allowed: ADMIN,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, _| {
                form(
                    "/fn/set_retry_policy",
                    vec![("tenant", "clinic-a".into()), ("policy", "disabled".into()), ("reason", "matrix".into())],
                )
            },
        },
        // After set_retry_policy, so there is a version to roll back to.
        Case {
            name: "rollback_retry_policy",
            allowed: ADMIN,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, _| {
                form("/fn/rollback_retry_policy", vec![("tenant", "clinic-a".into()), ("reason", "matrix".into())])
            },
        },
        Case {
            name: "set_retry_policy_cohort",
            allowed: ADMIN,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            // `disabled`: enabling also waits for the rollout order
            // (server/tests/it/rollout.rs); who may call is the same.
            build: |_, _| {
                form(
                    "/fn/set_retry_policy_cohort",
                    vec![("tenants[0]", "clinic-a".into()), ("policy", "disabled".into()), ("reason", "matrix".into())],
                )
            },
        },
        Case {
            name: "cohort_context",
            allowed: ADMIN,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| get("/fn/cohort_context".into()),
        },
        Case {
            name: "dashboard_stats",
            allowed: SIGNED_IN,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| get("/fn/dashboard_stats?window=1h".into()),
        },
        Case {
            name: "dashboard_stats",
            allowed: READERS,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, _| get("/fn/dashboard_stats?tenant=clinic-a&window=24h".into()),
        },
        Case {
            name: "retention_overview",
            allowed: SIGNED_IN,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| get("/fn/retention_overview".into()),
        },
        Case {
            name: "set_retention",
            allowed: MANAGERS,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, _| {
                form(
                    "/fn/set_retention",
                    vec![
                        ("target", "clinic-a/hooks".into()),
                        ("dedup", "90d".into()),
                        ("body", "".into()),
                        ("reason", "matrix".into()),
                    ],
                )
            },
        },
        Case {
            name: "set_horizon",
            allowed: ADMIN,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| {
                form(
                    "/fn/set_horizon",
                    vec![("scheme", "standard-webhooks".into()), ("horizon", "1d".into()), ("reason", "matrix".into())],
                )
            },
        },
        Case {
            name: "evidence_page",
            allowed: EVIDENCE,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| get("/fn/evidence_page".into()),
        },
        Case {
            name: "evidence_page",
            allowed: EVIDENCE_OF_A,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, _| get("/fn/evidence_page?tenant=clinic-a".into()),
        },
        Case {
            name: "start_drills",
            allowed: EVIDENCE,
            tenant_scoped: false,
            fresh: Fresh::IdleDrills,
            build: |_, _| form("/fn/start_drills", vec![]),
        },
        Case {
            name: "drill_run",
            allowed: EVIDENCE_OF_A,
            tenant_scoped: true,
            fresh: Fresh::DrillRun,
            build: |id, _| get(format!("/fn/drill_run?run_id={id}")),
        },
        Case {
            name: "export_evidence",
            allowed: EVIDENCE_OF_A,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, _| form("/fn/export_evidence", vec![("tenant", "clinic-a".into())]),
        },
        Case {
            name: "sign_off_evidence",
            allowed: REVIEWERS,
            tenant_scoped: true,
            fresh: Fresh::Export,
            build: |id, _| {
                form(
                    "/fn/sign_off_evidence",
                    vec![
                        ("tenant", "clinic-a".into()),
                        ("digest", id.into()),
                        ("decision", "approved".into()),
                        ("comment", "matrix".into()),
                    ],
                )
            },
        },
        Case {
            name: "kek_overview",
            allowed: ADMIN,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| get("/fn/kek_overview".into()),
        },
        Case {
            name: "rotate_kek",
            allowed: ADMIN,
            tenant_scoped: false,
            fresh: Fresh::IdleKek,
            build: |_, _| form("/fn/rotate_kek", vec![]),
        },
        Case {
            name: "start_rewrap",
            allowed: ADMIN,
            tenant_scoped: false,
            fresh: Fresh::IdleKek,
            build: |_, _| form("/fn/start_rewrap", vec![]),
        },
        Case {
            name: "resume_rewrap",
            allowed: ADMIN,
            tenant_scoped: false,
            fresh: Fresh::StoppedRewrap,
            build: |id, _| form("/fn/resume_rewrap", vec![("id", id.into())]),
        },
        Case {
            name: "retire_kek",
            allowed: ADMIN,
            tenant_scoped: false,
            fresh: Fresh::RetirableKek,
            build: |version, _| form("/fn/retire_kek", vec![("version", version.into())]),
        },
        // Last: an approved override is a critical finding in later bundles.
        Case {
            name: "retry_overrides",
            allowed: READERS,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, _| get("/fn/retry_overrides?tenant=clinic-a".into()),
        },
        Case {
            name: "decide_override",
            allowed: ADMIN,
            tenant_scoped: true,
            fresh: Fresh::PendingOverride,
            build: |id, _| {
                form(
                    "/fn/decide_override",
                    vec![
                        ("tenant", "clinic-a".into()),
                        ("id", id.to_owned()),
                        ("decision", "approve".into()),
                        ("comment", "matrix".into()),
                    ],
                )
            },
        },
    ]
}

/// Server functions open to anyone, tested on their own below.
const PUBLIC_SERVER_FNS: [&str; 5] = ["whoami", "setup_open", "login", "logout", "setup_admin"];

fn api_cases() -> Vec<Case> {
    use Method as M;
    vec![
        Case {
            name: "GET /api/v1/tenants",
            allowed: SIGNED_IN,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| get("/api/v1/tenants".into()),
        },
        Case {
            name: "POST /api/v1/tenants",
            allowed: ADMIN,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, n| json_req(M::POST, "/api/v1/tenants".into(), json!({"slug": format!("api-{n}")})),
        },
        Case {
            name: "GET /api/v1/tenants/{tenant}",
            allowed: READERS,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, _| get("/api/v1/tenants/clinic-a".into()),
        },
        Case {
            name: "PATCH /api/v1/tenants/{tenant}",
            allowed: ADMIN,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, _| {
                json_req(M::PATCH, "/api/v1/tenants/clinic-a".into(), json!({"notify_url": "http://127.0.0.1:9/relay"}))
            },
        },
        Case {
            name: "GET /api/v1/tenants/{tenant}/endpoints",
            allowed: READERS,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, _| get("/api/v1/tenants/clinic-a/endpoints".into()),
        },
        Case {
            name: "POST /api/v1/tenants/{tenant}/endpoints",
            allowed: MANAGERS,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, n| {
                json_req(
                    M::POST,
                    "/api/v1/tenants/clinic-a/endpoints".into(),
                    json!({"slug": format!("api-e-{n}"), "scheme": "stripe"}),
                )
            },
        },
        Case {
            name: "GET /api/v1/tenants/{tenant}/endpoints/{endpoint}",
            allowed: READERS,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, _| get("/api/v1/tenants/clinic-a/endpoints/hooks".into()),
        },
        Case {
            name: "PATCH /api/v1/tenants/{tenant}/endpoints/{endpoint}",
            allowed: MANAGERS,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, _| {
                json_req(M::PATCH, "/api/v1/tenants/clinic-a/endpoints/hooks".into(), json!({"enabled": true}))
            },
        },
        Case {
            name: "GET /api/v1/tenants/{tenant}/endpoints/{endpoint}/event-key",
            allowed: READERS,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, _| get("/api/v1/tenants/clinic-a/endpoints/hooks/event-key".into()),
        },
        Case {
            name: "PUT /api/v1/tenants/{tenant}/endpoints/{endpoint}/event-key",
            allowed: MANAGERS,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, n| {
                json_req(
                    M::PUT,
                    "/api/v1/tenants/clinic-a/endpoints/hooks/event-key".into(),
                    json!({"fields": ["type", format!("data.field_{n}")], "reason": "matrix"}),
                )
            },
        },
        Case {
            name: "GET /api/v1/tenants/{tenant}/endpoints/{endpoint}/keys",
            allowed: READERS,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, _| get("/api/v1/tenants/clinic-a/endpoints/hooks/keys".into()),
        },
        Case {
            name: "POST /api/v1/tenants/{tenant}/endpoints/{endpoint}/keys",
            allowed: MANAGERS,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, _| {
                json_req(M::POST, "/api/v1/tenants/clinic-a/endpoints/hooks/keys".into(), json!({"owner": "ops"}))
            },
        },
        Case {
            name: "POST /api/v1/tenants/{tenant}/endpoints/{endpoint}/test-delivery",
            allowed: MANAGERS,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, _| {
                json_req(
                    M::POST,
                    "/api/v1/tenants/clinic-a/endpoints/hooks/test-delivery".into(),
                    json!({"event_type": "reminder.created"}),
                )
            },
        },
        Case {
            name: "GET /api/v1/tenants/{tenant}/events",
            allowed: READERS,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, _| get("/api/v1/tenants/clinic-a/events?status=applied".into()),
        },
        Case {
            name: "GET /api/v1/tenants/{tenant}/reminders/{reminder_id}",
            allowed: READERS,
            tenant_scoped: true,
            fresh: Fresh::Reminder,
            build: |id, _| get(format!("/api/v1/tenants/clinic-a/reminders/{id}")),
        },
        Case {
            name: "GET /api/v1/tenants/{tenant}/endpoints/{endpoint}/events/{event_id}",
            allowed: READERS,
            tenant_scoped: true,
            // The reminder's event, `evt-matrix`.
            fresh: Fresh::Reminder,
            build: |_, _| get("/api/v1/tenants/clinic-a/endpoints/hooks/events/evt-matrix".into()),
        },
        Case {
            name: "GET /api/v1/keys",
            allowed: SIGNED_IN,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| get("/api/v1/keys".into()),
        },
        Case {
            name: "GET /api/v1/keys/{key_id}",
            allowed: READERS,
            tenant_scoped: true,
            fresh: Fresh::ActiveKey,
            build: |id, _| get(format!("/api/v1/keys/{id}")),
        },
        Case {
            name: "PATCH /api/v1/keys/{key_id}",
            allowed: MANAGERS,
            tenant_scoped: true,
            fresh: Fresh::ActiveKey,
            build: |id, _| {
                json_req(M::PATCH, format!("/api/v1/keys/{id}"), json!({"event_types": ["reminder.created"]}))
            },
        },
        Case {
            name: "POST /api/v1/keys/{key_id}/approve",
            allowed: REVIEWERS,
            tenant_scoped: true,
            fresh: Fresh::PendingKey,
            build: |id, _| json_req(M::POST, format!("/api/v1/keys/{id}/approve"), json!({"comment": "ok"})),
        },
        Case {
            name: "POST /api/v1/keys/{key_id}/reject",
            allowed: REVIEWERS,
            tenant_scoped: true,
            fresh: Fresh::PendingKey,
            build: |id, _| json_req(M::POST, format!("/api/v1/keys/{id}/reject"), json!({"comment": "too broad"})),
        },
        Case {
            name: "POST /api/v1/keys/{key_id}/rotate",
            allowed: MANAGERS,
            tenant_scoped: true,
            fresh: Fresh::ActiveKey,
            build: |id, _| json_req(M::POST, format!("/api/v1/keys/{id}/rotate"), json!({"overlap_secs": 3600})),
        },
        Case {
            name: "POST /api/v1/keys/{key_id}/revoke",
            allowed: MANAGERS,
            tenant_scoped: true,
            fresh: Fresh::ActiveKey,
            build: |id, _| json_req(M::POST, format!("/api/v1/keys/{id}/revoke"), json!({"reason": "matrix"})),
        },
        Case {
            name: "GET /api/v1/users",
            allowed: ADMIN,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| get("/api/v1/users".into()),
        },
        Case {
            name: "POST /api/v1/users",
            allowed: ADMIN,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, n| {
                json_req(M::POST, "/api/v1/users".into(), json!({"username": format!("api-u{n}"), "role": "reviewer"}))
            },
        },
        Case {
            name: "PATCH /api/v1/users/{username}",
            allowed: ADMIN,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| json_req(M::PATCH, "/api/v1/users/carl".into(), json!({"disabled": false})),
        },
        Case {
            name: "GET /api/v1/audit",
            allowed: SIGNED_IN,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| get("/api/v1/audit".into()),
        },
        Case {
            name: "GET /api/v1/quarantine",
            allowed: SIGNED_IN,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| get("/api/v1/quarantine?status=all".into()),
        },
        Case {
            name: "GET /api/v1/quarantine/{id}",
            allowed: READERS,
            tenant_scoped: true,
            fresh: Fresh::Quarantined,
            build: |id, _| get(format!("/api/v1/quarantine/{id}")),
        },
        // The body itself: on-call and admin only.
        Case {
            name: "GET /api/v1/quarantine/{id}",
            allowed: TRIAGE,
            tenant_scoped: true,
            fresh: Fresh::Quarantined,
            build: |id, _| get(format!("/api/v1/quarantine/{id}?include_body=true")),
        },
        Case {
            name: "POST /api/v1/quarantine/{id}/release",
            allowed: TRIAGE,
            tenant_scoped: true,
            fresh: Fresh::Quarantined,
            build: |id, _| json_req(M::POST, format!("/api/v1/quarantine/{id}/release"), json!({"reason": "matrix"})),
        },
        Case {
            name: "POST /api/v1/quarantine/{id}/discard",
            allowed: TRIAGE,
            tenant_scoped: true,
            fresh: Fresh::Quarantined,
            build: |id, _| json_req(M::POST, format!("/api/v1/quarantine/{id}/discard"), json!({"reason": "matrix"})),
        },
        Case {
            name: "POST /api/v1/quarantine/bulk-releases",
            allowed: TRIAGE,
            tenant_scoped: true,
            fresh: Fresh::Quarantined,
            build: |_, _| {
                json_req(
                    M::POST,
                    "/api/v1/quarantine/bulk-releases".into(),
                    json!({"filter": {"tenant": "clinic-a"}, "reason": "matrix"}),
                )
            },
        },
        Case {
            name: "GET /api/v1/quarantine/bulk-releases",
            allowed: SIGNED_IN,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| get("/api/v1/quarantine/bulk-releases".into()),
        },
        Case {
            name: "GET /api/v1/quarantine/bulk-releases/{id}",
            allowed: READERS,
            tenant_scoped: true,
            fresh: Fresh::BulkRelease,
            build: |id, _| get(format!("/api/v1/quarantine/bulk-releases/{id}")),
        },
        Case {
            name: "POST /api/v1/quarantine/bulk-releases/{id}/resume",
            allowed: TRIAGE,
            tenant_scoped: true,
            fresh: Fresh::InterruptedBulkRelease,
            build: |id, _| (Method::POST, format!("/api/v1/quarantine/bulk-releases/{id}/resume"), Body::None),
        },
        Case {
            name: "GET /api/v1/outbox",
            allowed: SIGNED_IN,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| get("/api/v1/outbox".into()),
        },
        Case {
            name: "POST /api/v1/outbox/{id}/retry",
            allowed: TRIAGE,
            tenant_scoped: true,
            fresh: Fresh::DeadIntent,
            build: |id, _| (Method::POST, format!("/api/v1/outbox/{id}/retry"), Body::None),
        },
        Case {
            name: "GET /api/v1/tenants/{tenant}/retry-policy",
            allowed: READERS,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, _| get("/api/v1/tenants/clinic-a/retry-policy".into()),
        },
        Case {
            name: "PUT /api/v1/tenants/{tenant}/retry-policy",
            allowed: ADMIN,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, _| {
                json_req(
                    M::PUT,
                    "/api/v1/tenants/clinic-a/retry-policy".into(),
                    json!({"policy": "disabled", "reason": "matrix"}),
                )
            },
        },
        Case {
            name: "POST /api/v1/tenants/{tenant}/retry-policy/rollback",
            allowed: ADMIN,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, _| {
                json_req(M::POST, "/api/v1/tenants/clinic-a/retry-policy/rollback".into(), json!({"reason": "matrix"}))
            },
        },
        Case {
            name: "GET /api/v1/stats",
            allowed: SIGNED_IN,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| get("/api/v1/stats?window=1h".into()),
        },
        Case {
            name: "GET /api/v1/stats",
            allowed: READERS,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, _| get("/api/v1/stats?tenant=clinic-a&window=7d".into()),
        },
        Case {
            name: "GET /api/v1/retention",
            allowed: SIGNED_IN,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| get("/api/v1/retention".into()),
        },
        Case {
            name: "GET /api/v1/tenants/{tenant}/endpoints/{endpoint}/retention",
            allowed: READERS,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, _| get("/api/v1/tenants/clinic-a/endpoints/hooks/retention".into()),
        },
        Case {
            name: "PUT /api/v1/tenants/{tenant}/endpoints/{endpoint}/retention",
            allowed: MANAGERS,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, _| {
                json_req(
                    M::PUT,
                    "/api/v1/tenants/clinic-a/endpoints/hooks/retention".into(),
                    json!({"dedup_secs": 7_776_000, "reason": "matrix"}),
                )
            },
        },
        Case {
            name: "PUT /api/v1/retention/horizons/{scheme}",
            allowed: ADMIN,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| {
                json_req(
                    M::PUT,
                    "/api/v1/retention/horizons/standard-webhooks".into(),
                    json!({"horizon_secs": 86_400, "reason": "matrix"}),
                )
            },
        },
        Case {
            name: "POST /api/v1/drills",
            allowed: EVIDENCE,
            tenant_scoped: false,
            fresh: Fresh::IdleDrills,
            build: |_, _| (M::POST, "/api/v1/drills".into(), Body::None),
        },
        Case {
            name: "GET /api/v1/drills",
            allowed: EVIDENCE,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| get("/api/v1/drills".into()),
        },
        Case {
            name: "GET /api/v1/drills/{run_id}",
            allowed: EVIDENCE_OF_A,
            tenant_scoped: true,
            fresh: Fresh::DrillRun,
            build: |id, _| get(format!("/api/v1/drills/{id}")),
        },
        Case {
            name: "GET /api/v1/evidence",
            allowed: EVIDENCE,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| get("/api/v1/evidence".into()),
        },
        Case {
            name: "GET /api/v1/evidence",
            allowed: EVIDENCE_OF_A,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, _| get("/api/v1/evidence?tenant=clinic-a".into()),
        },
        Case {
            name: "GET /api/v1/evidence.html",
            allowed: EVIDENCE,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| get("/api/v1/evidence.html".into()),
        },
        Case {
            name: "GET /api/v1/evidence/exports",
            allowed: EVIDENCE,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| get("/api/v1/evidence/exports".into()),
        },
        Case {
            name: "POST /api/v1/evidence/exports",
            allowed: EVIDENCE,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| json_req(M::POST, "/api/v1/evidence/exports".into(), json!({})),
        },
        Case {
            name: "POST /api/v1/evidence/exports",
            allowed: EVIDENCE_OF_A,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, _| json_req(M::POST, "/api/v1/evidence/exports".into(), json!({"tenant": "clinic-a"})),
        },
        Case {
            name: "GET /api/v1/evidence/exports/{digest}",
            allowed: EVIDENCE_OF_A,
            tenant_scoped: true,
            fresh: Fresh::Export,
            build: |id, _| get(format!("/api/v1/evidence/exports/{id}")),
        },
        Case {
            name: "GET /api/v1/evidence/signoffs",
            allowed: EVIDENCE,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| get("/api/v1/evidence/signoffs".into()),
        },
        Case {
            name: "POST /api/v1/evidence/signoffs",
            allowed: REVIEWERS,
            tenant_scoped: true,
            fresh: Fresh::Export,
            build: |id, _| {
                json_req(
                    M::POST,
                    "/api/v1/evidence/signoffs".into(),
                    json!({"digest": id, "decision": "approved", "comment": "matrix"}),
                )
            },
        },
        Case {
            name: "GET /api/v1/evidence/public-key",
            allowed: EVIDENCE,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| get("/api/v1/evidence/public-key".into()),
        },
        // Last: an approved override is a critical finding in later bundles,
        // which the sign-off case above does not acknowledge.
        Case {
            name: "GET /api/v1/tenants/{tenant}/retry-policy/overrides",
            allowed: READERS,
            tenant_scoped: true,
            fresh: Fresh::Nothing,
            build: |_, _| get("/api/v1/tenants/clinic-a/retry-policy/overrides".into()),
        },
        Case {
            name: "POST /api/v1/tenants/{tenant}/retry-policy/overrides/{id}/approve",
            allowed: ADMIN,
            tenant_scoped: true,
            fresh: Fresh::PendingOverride,
            build: |id, _| {
                json_req(M::POST, format!("/api/v1/tenants/clinic-a/retry-policy/overrides/{id}/approve"), json!({}))
            },
        },
        Case {
            name: "POST /api/v1/tenants/{tenant}/retry-policy/overrides/{id}/reject",
            allowed: ADMIN,
            tenant_scoped: true,
            fresh: Fresh::PendingOverride,
            build: |id, _| {
                json_req(
                    M::POST,
                    format!("/api/v1/tenants/clinic-a/retry-policy/overrides/{id}/reject"),
                    json!({"comment": "matrix"}),
                )
            },
        },
    ]
}

struct World {
    /// clinic-a/hooks' receive URL and an active key's secret.
    hook: (String, String),
    sessions: HashMap<Who, Client>,
    tokens: HashMap<Who, String>,
    anonymous: Client,
    counter: AtomicUsize,
}

/// The server under test: outbox intents that fail go dead at once, and a
/// bulk release pauses after each entry (so one can be caught running).
fn serve(i: &Install) -> Server {
    i.serve_with(&[
        // The relay URL is on loopback: allowed, so sends fail by connection.
        ("SIGNET_RELAY_ALLOW", "127.0.0.0/8"),
        ("SIGNET_OUTBOX_MAX_ATTEMPTS", "1"),
        ("SIGNET_OUTBOX_POLL_MS", "50"),
        ("SIGNET_FAULTS", "stall_bulk_entry_ms=5000"),
    ])
}

fn setup(i: &Install) {
    // Nothing listens on port 9: relayed notifications fail.
    i.cli_json(&["tenant", "create", "clinic-a", "--notify-url", "http://127.0.0.1:9/notify"]);
    i.cli_json(&["tenant", "create", "clinic-b"]);
    i.cli_json(&["endpoint", "create", "clinic-a", "hooks", "--scheme", "standard-webhooks"]);
    i.cli_json(&["endpoint", "create", "clinic-b", "hooks", "--scheme", "standard-webhooks"]);
    for (name, role, tenant) in [
        ("root", "admin", None),
        ("rita", "reviewer", None),
        ("otto", "oncall", None),
        ("carl", "oncall", None),
        ("alice", "clinic-admin", Some("clinic-a")),
        ("bob", "clinic-admin", Some("clinic-b")),
    ] {
        let mut args = vec!["user", "create", name, "--role", role];
        if let Some(t) = tenant {
            args.extend(["--tenant", t]);
        }
        i.cli_json_stdin(&args, PASSWORD);
    }
}

fn who_user(w: Who) -> (&'static str, &'static str, Option<&'static str>) {
    match w {
        Who::Admin => ("root", "admin", None),
        Who::Reviewer => ("rita", "reviewer", None),
        Who::Oncall => ("otto", "oncall", None),
        Who::ClinicOwn => ("alice", "clinic-admin", Some("clinic-a")),
        Who::ClinicOther => ("bob", "clinic-admin", Some("clinic-b")),
        Who::Anonymous => unreachable!(),
    }
}

async fn world(i: &Install, s: &Server) -> World {
    let mut sessions = HashMap::new();
    let mut tokens = HashMap::new();
    for w in EVERYONE.into_iter().filter(|w| *w != Who::Anonymous) {
        let (user, role, tenant) = who_user(w);
        let c = s.client();
        let res = c
            .post(s.url("/fn/login"))
            .header("Origin", &s.base)
            .form(&[("username", user), ("password", PASSWORD)])
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK, "login {user}");
        let cookie = res.headers().get("set-cookie").unwrap().to_str().unwrap().to_owned();
        assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "{cookie}");
        sessions.insert(w, c);
        let mut args = vec!["token", "create", "--name", user, "--role", role];
        if let Some(t) = tenant {
            args.extend(["--tenant", t]);
        }
        tokens.insert(w, i.cli_json(&args)["token"].as_str().unwrap().to_owned());
    }
    let key = i.cli_json(&["key", "provision", "clinic-a", "hooks", "--approve-as", "rita"]);
    let hook = (s.url("/hooks/clinic-a/hooks"), key["secret"].as_str().unwrap().to_owned());
    // A stored bundle for every scope the callers read the latest of.
    for scope in [None, Some("clinic-a"), Some("clinic-b")] {
        export_by_cli(i, scope);
    }
    World { hook, sessions, tokens, anonymous: s.client(), counter: AtomicUsize::new(0) }
}

async fn fresh(i: &Install, s: &Server, w: &World, f: Fresh) -> String {
    let args: &[&str] = match f {
        Fresh::Nothing => return String::new(),
        Fresh::Reminder => return "r-matrix".to_owned(),
        Fresh::Event => {
            let n = w.counter.fetch_add(1, Ordering::SeqCst);
            let body = format!(
                r#"{{"type":"reminder.created","data":{{"reminder_id":"r-e-{n}","send_at":"2027-01-05T09:00:00Z"}}}}"#
            );
            deliver(i, w, &body, &format!("e-{n}"));
            return format!("e-{n}");
        }
        Fresh::Quarantined => return quarantined(i, s, w).await,
        Fresh::DeadIntent => return dead_intent(i, s, w).await,
        Fresh::BulkRelease => return bulk_release(i, s, w, false).await,
        Fresh::InterruptedBulkRelease => return bulk_release(i, s, w, true).await,
        Fresh::IdleDrills => {
            drills_idle(s, w).await;
            return String::new();
        }
        Fresh::DrillRun => return drill_run(s, w).await,
        Fresh::IdleKek => {
            kek_idle(i).await;
            return String::new();
        }
        Fresh::StoppedRewrap => return stopped_rewrap(i).await,
        Fresh::RetirableKek => return retirable_kek(i).await,
        Fresh::Export => return export_by_cli(i, Some("clinic-a")),
        Fresh::PendingOverride => return pending_override(i),
        Fresh::ActiveKey => &["key", "provision", "clinic-a", "hooks", "--approve-as", "rita"],
        Fresh::PendingKey => &["key", "provision", "clinic-a", "hooks"],
    };
    i.cli_json(args)["key_id"].as_str().unwrap().to_owned()
}

/// The pending override of clinic-a, or a new one. The CLI asks for it, so
/// every signed-in caller is a second person; a key provisioned just before
/// is in no approved bundle, so the rollout order refuses and a request is
/// recorded.
fn pending_override(i: &Install) -> String {
    let listed = i.cli_json(&["retry-policy", "overrides", "clinic-a"]);
    if let Some(o) = listed.as_array().unwrap().iter().find(|o| o["status"] == "pending_approval") {
        return o["id"].as_str().unwrap().to_owned();
    }
    i.cli_json(&["key", "provision", "clinic-a", "hooks", "--approve-as", "rita"]);
    let set = ["retry-policy", "set", "clinic-a", "--policy", "enabled", "--reason", "matrix"];
    let o = i.cli_json(&[&set[..], &["--override-reason", "matrix"]].concat());
    o["id"].as_str().unwrap_or_else(|| panic!("no override was recorded: {o}")).to_owned()
}

/// Exports a bundle with the operator CLI (which no per-caller export
/// budget limits) and returns its digest.
fn export_by_cli(i: &Install, tenant: Option<&str>) -> String {
    let out = i.dir.path().join(format!("bundle-{}", uuid::Uuid::new_v4().simple()));
    let out = out.to_str().unwrap();
    let mut args = vec!["evidence", "export", "--out", out];
    if let Some(t) = tenant {
        args.extend(["--tenant", t]);
    }
    i.cli_json(&args)["digest"].as_str().unwrap().to_owned()
}

/// Sends `body` as a provider would, with `event_id`.
fn deliver(i: &Install, w: &World, body: &str, event_id: &str) {
    let (url, secret) = &w.hook;
    i.send_event(url, secret, event_id, body);
}

/// Waits until no drill run is in progress (they run one at a time).
async fn kek_idle(i: &Install) -> sea_orm::DatabaseConnection {
    let db = domain::db::connect(&i.database_url).await.unwrap();
    for _ in 0..600 {
        let running = domain::entity::kek_rewrap::Entity::find()
            .filter(domain::entity::kek_rewrap::Column::Status.eq("running"))
            .all(&db)
            .await
            .unwrap();
        if running.is_empty() {
            return db;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("a KEK rewrap never finished");
}

/// The latest rewrap, marked as stopped by an error (resumable).
async fn stopped_rewrap(i: &Install) -> String {
    use domain::entity::kek_rewrap as job;
    let db = kek_idle(i).await;
    let latest = match job::Entity::find().order_by_desc(job::Column::CreatedAt).one(&db).await.unwrap() {
        Some(j) => j,
        None => {
            let out = i.cli(&["kek", "rewrap"], "");
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            job::Entity::find().order_by_desc(job::Column::CreatedAt).one(&db).await.unwrap().unwrap()
        }
    };
    // Failed, and given up on by the automatic resume (which takes over a
    // failed job once it has been silent a minute, as it may be by now on a
    // slow run): it waits for a person.
    job::Entity::update_many()
        .col_expr(job::Column::Status, sea_orm::sea_query::Expr::value("failed"))
        .col_expr(job::Column::AutoResumes, sea_orm::sea_query::Expr::value(domain::kek::MAX_AUTO_RESUMES))
        .filter(job::Column::Id.eq(&latest.id))
        .exec(&db)
        .await
        .unwrap();
    latest.id
}

/// Rotates (from the shell) and ages the versions: the previous newest is
/// then unused and retirable.
async fn retirable_kek(i: &Install) -> String {
    let db = kek_idle(i).await;
    let rotated = i.cli_json(&["kek", "rotate"]);
    domain::entity::kek_version::Entity::update_many()
        .col_expr(domain::entity::kek_version::Column::CreatedAt, sea_orm::sea_query::Expr::value(0i64))
        .exec(&db)
        .await
        .unwrap();
    (rotated["kek_version"].as_u64().unwrap() - 1).to_string()
}

async fn drills_idle(s: &Server, w: &World) {
    for _ in 0..600 {
        let runs = admin_get(s, w, "/api/v1/drills?limit=1").await;
        if runs.as_array().and_then(|r| r.first()).is_none_or(|r| r["status"] != "running") {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("a drill run never finished");
}

/// A finished drill run of clinic-a: its clinic admin's latest, or a new
/// one (a clinic admin sees only its own tenant's runs).
async fn drill_run(s: &Server, w: &World) -> String {
    drills_idle(s, w).await;
    let own = &w.tokens[&Who::ClinicOwn];
    let runs: Value =
        w.anonymous.get(s.url("/api/v1/drills?limit=1")).bearer_auth(own).send().await.unwrap().json().await.unwrap();
    if let Some(id) = runs.as_array().and_then(|r| r.first()).and_then(|r| r["run_id"].as_str()) {
        return id.to_owned();
    }
    let res = w.anonymous.post(s.url("/api/v1/drills")).bearer_auth(own).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let id = res.json::<Value>().await.unwrap()["run_id"].as_str().unwrap().to_owned();
    drills_idle(s, w).await;
    id
}

/// A JSON GET with the admin's token.
async fn admin_get(s: &Server, w: &World, path: &str) -> Value {
    let res = w.anonymous.get(s.url(path)).bearer_auth(&w.tokens[&Who::Admin]).send().await.unwrap();
    res.json().await.unwrap()
}

/// An OTP request whose notification cannot be relayed, once it is dead.
async fn dead_intent(i: &Install, s: &Server, w: &World) -> String {
    let n = w.counter.fetch_add(1, Ordering::SeqCst);
    deliver(
        i,
        w,
        &format!(r#"{{"type":"otp.requested","data":{{"otp_request_id":"otp-{n}","channel":"sms"}}}}"#),
        &format!("o-{n}"),
    );
    let key = format!("otp:otp-{n}");
    for _ in 0..200 {
        let list = admin_get(s, w, "/api/v1/outbox?tenant=clinic-a&status=dead").await;
        if let Some(item) = list.as_array().unwrap().iter().find(|v| v["idempotency_key"] == key.as_str()) {
            return item["id"].as_str().unwrap().to_owned();
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("intent {key} never went dead");
}

/// A bulk release of clinic-a's open quarantine, started by the admin. With
/// `interrupted`, once its runner is pausing after the first entry, its
/// heartbeat is aged as if the runner's process had died.
async fn bulk_release(i: &Install, s: &Server, w: &World, interrupted: bool) -> String {
    quarantined(i, s, w).await;
    let res = w
        .anonymous
        .post(s.url("/api/v1/quarantine/bulk-releases"))
        .bearer_auth(&w.tokens[&Who::Admin])
        .json(&json!({"filter": {"tenant": "clinic-a"}, "reason": "matrix fixture"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let id = res.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    if interrupted {
        for _ in 0..200 {
            if admin_get(s, w, &format!("/api/v1/quarantine/bulk-releases/{id}")).await["processed"].as_u64() >= Some(1)
            {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        let db = domain::db::connect(&i.database_url).await.unwrap();
        db.execute_raw(sea_orm::Statement::from_string(
            db.get_database_backend(),
            // Silent since the epoch, and given up on by the automatic resume
            // (which would otherwise take it over within two seconds and race
            // the call under test): it waits for a person.
            format!(
                "UPDATE bulk_releases SET updated_at = 0, auto_resumes = {} WHERE id = '{id}'",
                domain::quarantine::bulk_release::MAX_AUTO_RESUMES
            ),
        ))
        .await
        .unwrap();
        db.close().await.unwrap();
        assert_eq!(admin_get(s, w, &format!("/api/v1/quarantine/bulk-releases/{id}")).await["status"], "interrupted");
    }
    id
}

/// A reminder update that arrives before its reminder (quarantined), then
/// the reminder itself: the entry is open and a release will apply.
async fn quarantined(i: &Install, s: &Server, w: &World) -> String {
    let n = w.counter.fetch_add(1, Ordering::SeqCst);
    let event_id = format!("q-{n}");
    deliver(i, w, &format!(r#"{{"type":"reminder.scheduled","data":{{"reminder_id":"r-q-{n}"}}}}"#), &event_id);
    deliver(
        i,
        w,
        &format!(
            r#"{{"type":"reminder.created","data":{{"reminder_id":"r-q-{n}","send_at":"2027-01-05T09:00:00Z"}}}}"#
        ),
        &format!("c-{n}"),
    );
    let list = admin_get(s, w, "/api/v1/quarantine?tenant=clinic-a").await;
    let items = list["items"].as_array().unwrap();
    let entry = items
        .iter()
        .find(|q| q["event_id"] == event_id.as_str())
        .unwrap_or_else(|| panic!("{event_id} not quarantined: {list}"));
    entry["id"].as_str().unwrap().to_owned()
}

fn expected(case: &Case, who: Who) -> Result<(), StatusCode> {
    if case.allowed.contains(&who) {
        Ok(())
    } else if who == Who::Anonymous {
        Err(StatusCode::UNAUTHORIZED)
    } else if who == Who::ClinicOther && case.tenant_scoped {
        Err(StatusCode::NOT_FOUND)
    } else {
        Err(StatusCode::FORBIDDEN)
    }
}

async fn call(s: &Server, w: &World, who: Who, api: bool, req: (Method, String, Body)) -> (StatusCode, String) {
    let (method, path, body) = req;
    let client = if api { &w.anonymous } else { w.sessions.get(&who).unwrap_or(&w.anonymous) };
    let mut r = client.request(method.clone(), s.url(&path));
    if api {
        if let Some(t) = w.tokens.get(&who) {
            r = r.bearer_auth(t);
        }
    } else if method != Method::GET {
        r = r.header("Origin", &s.base);
    }
    r = match body {
        Body::None => r,
        Body::Form(f) => r.form(&f),
        Body::Json(v) => r.json(&v),
    };
    let res = r.send().await.unwrap();
    let status = res.status();
    (status, res.text().await.unwrap_or_default())
}

async fn run_matrix(i: &Install, s: &Server, w: &World, cases: Vec<Case>, api: bool) {
    let mut failures = Vec::new();
    for case in &cases {
        for who in EVERYONE {
            let id = fresh(i, s, w, case.fresh).await;
            let n = w.counter.fetch_add(1, Ordering::SeqCst);
            let (status, body) = call(s, w, who, api, (case.build)(&id, n)).await;
            let ok = match expected(case, who) {
                // A change that repeats the stored values (the same call made
                // for each allowed role) is refused only after authorization.
                Ok(()) => {
                    status.is_success()
                        || (status == StatusCode::UNPROCESSABLE_ENTITY && body.contains("nothing_to_change"))
                }
                Err(want) => status == want,
            };
            if !ok {
                failures.push(format!(
                    "{} as {who:?}: got {status}, expected {:?}: {body}",
                    case.name,
                    expected(case, who)
                ));
            }
        }
    }
    assert!(failures.is_empty(), "role matrix violations:\n{}", failures.join("\n"));
}

both_engines!(server_functions_authorize_every_role, async |i: &Install| {
    setup(i);
    let s = serve(i);
    let w = world(i, &s).await;
    let cases = server_fn_cases();
    // Coverage: every server function in the app is either in the matrix or public.
    let mut declared = BTreeSet::new();
    for entry in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../app/src/api")).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for part in text.split("#[server(").skip(1) {
            let name = part
                .split("endpoint = \"")
                .nth(1)
                .and_then(|r| r.split('"').next())
                .expect("every server fn names its endpoint");
            declared.insert(name.to_owned());
        }
    }
    let covered: BTreeSet<String> =
        cases.iter().map(|c| c.name.to_owned()).chain(PUBLIC_SERVER_FNS.map(str::to_owned)).collect();
    assert_eq!(declared, covered, "the matrix must list every server function");
    run_matrix(i, &s, &w, cases, false).await;

    // Listings never leak another tenant to a clinic admin.
    let (_, tenants) = call(&s, &w, Who::ClinicOther, false, get("/fn/list_tenants".into())).await;
    assert!(!mentions_clinic_a(&tenants), "{tenants}");
    let (_, audit) = call(&s, &w, Who::ClinicOther, false, get("/fn/audit_log".into())).await;
    assert!(!mentions_clinic_a(&audit), "{audit}");
    let (_, queue) = call(&s, &w, Who::ClinicOther, false, get("/fn/review_queue".into())).await;
    assert!(!mentions_clinic_a(&queue), "{queue}");
    let (_, retention) = call(&s, &w, Who::ClinicOther, false, get("/fn/retention_overview".into())).await;
    assert!(!mentions_clinic_a(&retention), "{retention}");
});

/// `clinic-a` as a whole JSON string (plain or escaped), not as the prefix
/// of `clinic-admin`.
fn mentions_clinic_a(text: &str) -> bool {
    text.contains("clinic-a\"") || text.contains("clinic-a\\")
}

both_engines!(public_server_functions_and_csrf, async |i: &Install| {
    setup(i);
    let s = serve(i);
    let c = s.client();
    let who = c.get(s.url("/fn/whoami")).send().await.unwrap();
    assert_eq!(who.status(), 200);
    assert_eq!(who.text().await.unwrap(), "null");
    assert_eq!(c.get(s.url("/fn/setup_open")).send().await.unwrap().text().await.unwrap(), "false");
    // Bad setup token.
    let bad = c
        .post(s.url("/fn/setup_admin"))
        .header("Origin", &s.base)
        .form(&[("token", "setup_wrong"), ("username", "x"), ("password", PASSWORD), ("confirm", PASSWORD)])
        .send()
        .await
        .unwrap();
    assert!(bad.text().await.unwrap().contains("invalid_setup_token"));
    // Wrong password: no cookie.
    let wrong = c
        .post(s.url("/fn/login"))
        .header("Origin", &s.base)
        .form(&[("username", "root"), ("password", "nope nope nope")])
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 422);
    assert!(wrong.headers().get("set-cookie").is_none());
    // A mutating call without a matching Origin is refused before it runs.
    for origin in [None, Some("http://evil.test")] {
        let mut r = c.post(s.url("/fn/login")).form(&[("username", "root"), ("password", PASSWORD)]);
        if let Some(o) = origin {
            r = r.header("Origin", o);
        }
        let res = r.send().await.unwrap();
        assert_eq!(res.status(), 403, "{origin:?}");
        assert!(res.headers().get("set-cookie").is_none());
    }
    // Login, then logout invalidates the session server-side.
    let ok = c
        .post(s.url("/fn/login"))
        .header("Origin", &s.base)
        .form(&[("username", "root"), ("password", PASSWORD)])
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    let cookie = ok.headers().get("set-cookie").unwrap().to_str().unwrap().split(';').next().unwrap().to_owned();
    let me = c.get(s.url("/fn/whoami")).send().await.unwrap().json::<Value>().await.unwrap();
    assert_eq!(me["username"], "root");
    assert_eq!(c.post(s.url("/fn/logout")).header("Origin", &s.base).send().await.unwrap().status(), 200);
    // Replaying the old cookie value no longer works.
    let replay = reqwest::Client::new().get(s.url("/fn/list_tenants")).header("Cookie", &cookie).send().await.unwrap();
    assert_eq!(replay.status(), 401);
});

both_engines!(api_routes_authorize_every_role, async |i: &Install| {
    setup(i);
    let s = serve(i);
    let w = world(i, &s).await;
    // A reminder in clinic-a, delivered the way a provider would.
    let key = i.cli_json(&["key", "provision", "clinic-a", "hooks", "--approve-as", "rita"]);
    let body = i.data_dir().join("reminder.json");
    std::fs::write(
        &body,
        r#"{"type":"reminder.created","data":{"reminder_id":"r-matrix","send_at":"2027-01-05T09:00:00Z"}}"#,
    )
    .unwrap();
    let sent = i.cli(
        &[
            "send",
            &s.url("/hooks/clinic-a/hooks"),
            "--scheme",
            "standard-webhooks",
            "--secret",
            key["secret"].as_str().unwrap(),
            "--file",
            body.to_str().unwrap(),
            "--event-id",
            "evt-matrix",
        ],
        "",
    );
    assert!(sent.status.success(), "{}", String::from_utf8_lossy(&sent.stderr));
    let cases = api_cases();
    let doc: Value = reqwest::get(s.url("/api/v1/openapi.json")).await.unwrap().json().await.unwrap();
    let mut documented = BTreeSet::new();
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for method in ops.as_object().unwrap().keys() {
            documented.insert(format!("{} {path}", method.to_uppercase()));
        }
    }
    let covered: BTreeSet<String> = cases.iter().map(|c| c.name.to_owned()).collect();
    assert_eq!(documented, covered, "the matrix must list every documented API route");
    // The document's refusals are the matrix's: every operation lists 401,
    // and lists 403 exactly when the matrix refuses it to some signed-in role.
    let refused: BTreeSet<&str> = cases
        .iter()
        .filter(|c| SIGNED_IN.iter().any(|who| expected(c, *who) == Err(StatusCode::FORBIDDEN)))
        .map(|c| c.name)
        .collect();
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for (method, op) in ops.as_object().unwrap() {
            let name = format!("{} {path}", method.to_uppercase());
            let responses = &op["responses"];
            assert!(responses.get("401").is_some(), "{name} does not document 401");
            assert_eq!(
                responses.get("403").is_some(),
                refused.contains(name.as_str()),
                "{name}: the document's 403 disagrees with the role matrix"
            );
        }
    }
    run_matrix(i, &s, &w, cases, true).await;
    // Errors have the contract's shape.
    let res = w.anonymous.get(s.url("/api/v1/tenants")).send().await.unwrap();
    assert_eq!(res.status(), 401);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"], "unauthenticated");
    assert!(body["message"].is_string());
    let res = w.anonymous.get(s.url("/api/v1/tenants")).bearer_auth(&w.tokens[&Who::ClinicOther]).send().await.unwrap();
    let listed: Value = res.json().await.unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1, "a clinic admin lists only its own tenant");
    let res =
        w.anonymous.get(s.url("/api/v1/retention")).bearer_auth(&w.tokens[&Who::ClinicOther]).send().await.unwrap();
    let text = res.text().await.unwrap();
    assert!(!mentions_clinic_a(&text), "retention overview leaks another tenant: {text}");
});
