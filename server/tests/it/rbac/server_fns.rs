//! The matrix of the console's server functions, in the order they run.

use super::case::{
    ADMIN, Case, EVIDENCE, EVIDENCE_OF_A, Fresh, MANAGERS, PASSWORD, READERS, REVIEWERS, SIGNED_IN, TRIAGE, form, get,
};

pub(super) fn server_fn_cases() -> Vec<Case> {
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
            name: "cancel_bulk_release",
            allowed: TRIAGE,
            tenant_scoped: true,
            fresh: Fresh::InterruptedBulkRelease,
            build: |id, _| form("/fn/cancel_bulk_release", vec![("id", id.into())]),
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
            name: "cancel_rewrap",
            allowed: ADMIN,
            tenant_scoped: false,
            fresh: Fresh::StoppedRewrap,
            build: |id, _| form("/fn/cancel_rewrap", vec![("id", id.into())]),
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
pub(super) const PUBLIC_SERVER_FNS: [&str; 5] = ["whoami", "setup_open", "login", "logout", "setup_admin"];
