//! The live cohort check (issue 23 item 3, after enabling) on both engines:
//! a clean cohort counts the events claimed since retries were enabled and
//! names no breach; a tenant with retries disabled has no section; breaches
//! injected past dropped constraints are each named, with a critical
//! `cohort_breach` finding that goes once they are gone.

use std::time::Duration;

use domain::{evidence::bundle, receiver::Outcome, retry_policy};
use sea_orm::ConnectionTrait;
use serde_json::json;
use views::{evidence::CohortCheck, retry_policy::RetryPolicy, scheme::Scheme};

use crate::{
    db_test,
    fixtures::*,
    receiver::{created, deliver, now_s, setup, signed},
    support::TestDb,
};

async fn evidence(t: &TestDb) -> views::evidence::Evidence {
    bundle::collect(&t.db, &t.vault, &reviewer(), None).await.unwrap()
}

async fn cohort(t: &TestDb, slug: &str) -> Option<CohortCheck> {
    evidence(t).await.cohort_check.into_iter().find(|c| c.tenant == slug)
}

async fn breach_findings(t: &TestDb) -> Vec<(String, String, String)> {
    evidence(t)
        .await
        .findings
        .into_iter()
        .filter(|f| f.id == "cohort_breach")
        .map(|f| (f.severity, f.subject, f.message))
        .collect()
}

fn scheduled(reminder: &str) -> Vec<u8> {
    json!({"type": "reminder.scheduled", "data": {"reminder_id": reminder, "send_at": "2027-01-06T09:00:00Z"}})
        .to_string()
        .into_bytes()
}

fn otp(request: &str) -> Vec<u8> {
    json!({"type": "otp.requested", "data": {"otp_request_id": request, "channel": "sms"}}).to_string().into_bytes()
}

/// Delivers `body` as event `id` and expects it applied.
async fn applied(s: &crate::receiver::Setup, id: &str, body: &[u8]) {
    let outcome = deliver(s, &signed(s, Scheme::StandardWebhooks, body, now_s(), id), body).await;
    assert_eq!(outcome, Outcome::Applied { event_id: id.into() });
}

/// Rebuilds `table` without its keys and indexes (as a damaged or
/// hand-edited database might be), keeping its rows.
async fn drop_constraints(t: &TestDb, table: &str) {
    for sql in [
        format!("CREATE TABLE loose_{table} AS SELECT * FROM {table}"),
        format!("DROP TABLE {table}"),
        format!("ALTER TABLE loose_{table} RENAME TO {table}"),
    ] {
        t.db.execute_unprepared(&sql).await.unwrap();
    }
}

db_test!(a_clean_cohort_counts_its_events_and_a_disabled_tenant_has_no_section, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    // Before enabling: not part of the check.
    applied(&s, "before-1", &created("r-before")).await;
    assert!(cohort(t, "clinic-a").await.is_none(), "retries are disabled: no section");
    tokio::time::sleep(Duration::from_millis(20)).await;
    enable_retries(t, "clinic-a").await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    // evt-1's first delivery is signed at `first`; its retry below one
    // second earlier, so the two are different signed messages (a retry,
    // not a replay) however long the deliveries in between take.
    let (first, body) = (now_s(), created("r-1"));
    let outcome = deliver(&s, &signed(&s, Scheme::StandardWebhooks, &body, first, "evt-1"), &body).await;
    assert_eq!(outcome, Outcome::Applied { event_id: "evt-1".into() });
    applied(&s, "evt-2", &created("r-2")).await;
    applied(&s, "evt-3", &scheduled("r-1")).await;
    applied(&s, "evt-4", &otp("req-1")).await;
    // A duplicate delivery is answered from the claim and adds nothing.
    let again = deliver(&s, &signed(&s, Scheme::StandardWebhooks, &body, first - 1, "evt-1"), &body).await;
    assert!(matches!(again, Outcome::Duplicate { .. }), "{again:?}");
    // Enabling again (a second `enabled` version) does not restart the check.
    retry_policy::set(&t.db, &gate(t), &admin(), &"clinic-a".parse().unwrap(), RetryPolicy::Enabled, "again")
        .await
        .unwrap();

    let c = cohort(t, "clinic-a").await.expect("a section for clinic-a");
    let history = retry_policy::get(&t.db, &admin(), &"clinic-a".parse().unwrap()).await.unwrap().history;
    let enabling = history.iter().find(|v| v.version == 2).unwrap();
    assert_eq!((enabling.policy.as_str(), c.enabled_since.as_str()), ("enabled", enabling.created_at.as_str()));
    assert_eq!(c.events_checked, 4);
    assert_eq!(c.breaches_total, 0);
    assert!(c.breaches.is_empty());
    assert!(breach_findings(t).await.is_empty());
    let html = evidence_html::render(&evidence(t).await, "x");
    assert!(html.contains("Live cohort check"), "the printable page shows it");

    retry_policy::set(&t.db, &gate(t), &admin(), &"clinic-a".parse().unwrap(), RetryPolicy::Disabled, "incident")
        .await
        .unwrap();
    assert!(evidence(t).await.cohort_check.is_empty(), "disabled again: no section");
});

db_test!(each_breach_is_named_and_the_finding_comes_and_goes, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    enable_retries(t, "clinic-a").await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    applied(&s, "evt-a", &created("r-a")).await;
    applied(&s, "evt-b", &scheduled("r-a")).await;
    applied(&s, "evt-c", &otp("req-1")).await;
    assert_eq!(cohort(t, "clinic-a").await.unwrap().breaches_total, 0);

    drop_constraints(t, "inbox_claims").await;
    drop_constraints(t, "outbox_intents").await;
    let injected = [
        "INSERT INTO inbox_claims (tenant_id, endpoint_id, event_id, body_digest, event_type, key_id, outcome, \
         received_at) SELECT tenant_id, endpoint_id, event_id, 'injected', event_type, key_id, outcome, \
         received_at + 1 FROM inbox_claims WHERE event_id = 'evt-a'",
        "INSERT INTO outbox_intents (id, tenant_id, kind, idempotency_key, payload_ciphertext, kek_version, status, \
         attempts, next_attempt_at, created_at) SELECT 'injected-' || id, tenant_id, kind, idempotency_key, \
         payload_ciphertext, kek_version, status, attempts, next_attempt_at, created_at + 1 FROM outbox_intents",
    ];
    for sql in injected {
        t.db.execute_unprepared(sql).await.unwrap();
    }

    let c = cohort(t, "clinic-a").await.unwrap();
    assert_eq!(c.events_checked, 3, "three events, one of them claimed twice");
    assert_eq!(c.breaches_total, 3, "{:?}", c.breaches);
    let named: Vec<(&str, Option<&str>, Option<&str>, &str)> = c
        .breaches
        .iter()
        .map(|b| (b.check.as_str(), b.event_id.as_deref(), b.endpoint.as_deref(), b.what.as_str()))
        .collect();
    assert!(
        named.contains(&("duplicate_claim", Some("evt-a"), Some("hooks"), "2 claim rows for one event")),
        "{named:?}"
    );
    assert!(
        named.contains(&(
            "repeated_transition",
            Some("evt-b"),
            Some("hooks"),
            "2 reminder transitions applied (2 reminder_notice intents)"
        )),
        "{named:?}"
    );
    assert!(
        named.contains(&("duplicate_intent", None, None, "2 otp intents under idempotency key otp:req-1")),
        "{named:?}"
    );
    let findings = breach_findings(t).await;
    assert_eq!(findings.len(), 1, "{findings:?}");
    let (severity, subject, message) = &findings[0];
    assert_eq!((severity.as_str(), subject.as_str()), ("critical", "clinic-a"));
    for part in ["3 event(s)", "duplicate_claim hooks/evt-a", "repeated_transition hooks/evt-b", "otp:req-1"] {
        assert!(message.contains(part), "{part} not in {message}");
    }
    let html = evidence_html::render(&evidence(t).await, "x");
    assert!(html.contains("duplicate_claim hooks/evt-a: 2 claim rows for one event"), "the printable page names it");

    // Gone once the rows are.
    t.db.execute_unprepared("DELETE FROM inbox_claims WHERE body_digest = 'injected'").await.unwrap();
    t.db.execute_unprepared("DELETE FROM outbox_intents WHERE id LIKE 'injected-%'").await.unwrap();
    let c = cohort(t, "clinic-a").await.unwrap();
    assert_eq!((c.events_checked, c.breaches_total), (3, 0));
    assert!(breach_findings(t).await.is_empty());
});
