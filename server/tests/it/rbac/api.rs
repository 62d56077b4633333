//! The matrix of the `/api/v1` routes, in the order they run.

use reqwest::Method;
use serde_json::json;

use super::case::{
    ADMIN, Body, Case, EVIDENCE, EVIDENCE_OF_A, Fresh, GLOBAL, MANAGERS, READERS, REVIEWERS, SIGNED_IN, TRIAGE, get,
    json_req,
};

pub(super) fn api_cases() -> Vec<Case> {
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
            name: "POST /api/v1/quarantine/bulk-releases/{id}/cancel",
            allowed: TRIAGE,
            tenant_scoped: true,
            fresh: Fresh::InterruptedBulkRelease,
            build: |id, _| (Method::POST, format!("/api/v1/quarantine/bulk-releases/{id}/cancel"), Body::None),
        },
        Case {
            name: "GET /api/v1/jobs",
            allowed: GLOBAL,
            tenant_scoped: false,
            fresh: Fresh::Nothing,
            build: |_, _| get("/api/v1/jobs".into()),
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
