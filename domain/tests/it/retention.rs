//! Retention decisions and the purge on both engines: decisions are
//! versioned and never below the redelivery horizon, the purge never touches
//! a claim inside the horizon or an open quarantine entry, and purging while
//! events arrive loses none of them.

use std::sync::{Arc, LazyLock};
use views::ids::{EndpointSlug, TenantSlug};
use views::{
    quarantine::{QuarantineReason, QuarantineStatus},
    roles::Role,
    scheme::Scheme,
};

use domain::{
    audit::{self, AuditFilter},
    clock,
    entity::{
        endpoint, event_body, event_rollup, inbox_claim as claim, key_failure_rollup, key_use_rollup,
        quarantine_entry as qentry, replay_record, retention_version,
    },
    error::DomainError,
    receiver::Outcome,
    retention::{self, DAY_SECS, HOUR_SECS, RetentionChange, partitions, purge},
    stats::gauges,
};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, Set, Statement};
use serde_json::json;

use crate::{
    db_test,
    fixtures::*,
    receiver::{deliver, now_s, setup, signed},
    support::TestDb,
};

/// A change with the manual-resend risk accepted: these tests are about the
/// automatic horizon (`manual_resend` tests the refusal).
fn change(dedup: Option<i64>, body: Option<i64>, reason: &str) -> RetentionChange {
    RetentionChange { dedup_secs: dedup, body_secs: body, reason: reason.into(), accept_risk: true }
}

fn code(e: DomainError) -> &'static str {
    e.code()
}

/// The endpoint most of these tests decide for.
static CLINIC_A: LazyLock<TenantSlug> = LazyLock::new(|| "clinic-a".parse().unwrap());
static REMINDERS: LazyLock<EndpointSlug> = LazyLock::new(|| "reminders".parse().unwrap());

db_test!(decisions_are_versioned_and_never_below_the_horizon, async |t: &TestDb| {
    let a = tenant(t, "clinic-a").await;
    endpoint(t, "clinic-a", "reminders", None).await;
    let v = retention::get(&t.db, &admin(), &CLINIC_A, &REMINDERS).await.unwrap();
    // 90 d: Svix's manual resend window (payloads kept 90 days) is longer
    // than the 30-day default.
    assert_eq!((v.current.version, v.current.dedup_secs, v.current.body_secs), (1, 90 * DAY_SECS, 7 * DAY_SECS));
    assert_eq!(v.horizon_secs, 2 * DAY_SECS, "Svix's schedule spans about 27.6 h; the seeded horizon is 2 d");
    assert_eq!(v.current.actor, "admin-user", "the creator accepted the defaults");

    let below =
        retention::set(&t.db, &admin(), &CLINIC_A, &REMINDERS, &change(Some(12 * HOUR_SECS), None, "shorter")).await;
    assert_eq!(below.map_err(code).unwrap_err(), "below_redelivery_horizon");
    let outlives =
        retention::set(&t.db, &admin(), &CLINIC_A, &REMINDERS, &change(Some(2 * DAY_SECS), Some(3 * DAY_SECS), "x"))
            .await;
    assert_eq!(outlives.map_err(code).unwrap_err(), "body_outlives_claim");
    let no_reason =
        retention::set(&t.db, &admin(), &CLINIC_A, &REMINDERS, &change(Some(2 * DAY_SECS), None, " ")).await;
    assert_eq!(no_reason.map_err(code).unwrap_err(), "reason_required");

    // A clinic admin decides for its own endpoints only; on-call cannot.
    let own = user(Role::ClinicAdmin, Some(&a.id));
    let v = retention::set(
        &t.db,
        &own,
        &CLINIC_A,
        &REMINDERS,
        &change(Some(2 * DAY_SECS), Some(DAY_SECS), "data minimisation"),
    )
    .await
    .unwrap();
    assert_eq!((v.current.version, v.current.dedup_secs, v.current.body_secs), (2, 2 * DAY_SECS, DAY_SECS));
    assert_eq!(v.current.horizon_secs, 2 * DAY_SECS, "the horizon in force is kept with the decision");
    assert_eq!(v.history.len(), 2);
    let other = user(Role::ClinicAdmin, Some("someone-else"));
    assert!(matches!(
        retention::set(&t.db, &other, &CLINIC_A, &REMINDERS, &change(None, None, "x")).await,
        Err(DomainError::NotFound)
    ));
    let oncall = user(Role::Oncall, None);
    assert!(matches!(
        retention::set(&t.db, &oncall, &CLINIC_A, &REMINDERS, &change(None, None, "x")).await,
        Err(DomainError::Forbidden)
    ));
    // Nothing refused was recorded.
    assert_eq!(retention_version::Entity::find().count(&t.db).await.unwrap(), 2);

    let entries =
        audit::list(&t.db, &admin(), &AuditFilter { action: Some("retention.set".into()), ..Default::default() })
            .await
            .unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].actor, "clinic-admin-user");
});

db_test!(horizon_changes_are_versioned_and_guarded, async |t: &TestDb| {
    let a = tenant(t, "clinic-a").await;
    endpoint(t, "clinic-a", "reminders", None).await;
    retention::set(&t.db, &admin(), &CLINIC_A, &REMINDERS, &change(Some(2 * DAY_SECS), Some(DAY_SECS), "short"))
        .await
        .unwrap();

    let too_high =
        retention::set_horizon(&t.db, &admin(), "standard-webhooks", 3 * DAY_SECS, "provider retries longer now").await;
    let err = too_high.unwrap_err();
    assert_eq!(err.code(), "retention_below_new_horizon");
    assert!(err.public_message().contains("clinic-a/reminders"), "names the endpoint to fix: {}", err.public_message());
    assert!(matches!(
        retention::set_horizon(&t.db, &user(Role::ClinicAdmin, Some(&a.id)), "standard-webhooks", 2 * DAY_SECS, "x")
            .await,
        Err(DomainError::Forbidden)
    ));
    assert_eq!(
        retention::set_horizon(&t.db, &admin(), "standard-webhooks", 60, "x").await.map_err(code).unwrap_err(),
        "invalid_horizon"
    );
    assert_eq!(
        retention::set_horizon(&t.db, &admin(), "smtp", DAY_SECS, "x").await.map_err(code).unwrap_err(),
        "invalid_scheme"
    );

    retention::set(
        &t.db,
        &admin(),
        &CLINIC_A,
        &REMINDERS,
        &change(Some(5 * DAY_SECS), None, "room for the new horizon"),
    )
    .await
    .unwrap();
    let h = retention::set_horizon(&t.db, &admin(), "standard-webhooks", 3 * DAY_SECS, "provider retries longer now")
        .await
        .unwrap();
    assert_eq!((h.version, h.horizon_secs), (4, 3 * DAY_SECS));
    assert_eq!(h.manual_resend_secs, 90 * DAY_SECS, "a person's change keeps the sender's manual window");
    let o = retention::overview(&t.db, &reviewer()).await.unwrap();
    let sw = o.horizons.iter().find(|h| h.scheme == "standard-webhooks").unwrap();
    assert_eq!((sw.version, sw.horizon_secs), (4, 3 * DAY_SECS));
    assert_eq!(o.horizon_history.iter().filter(|h| h.scheme == "standard-webhooks").count(), 4);
    assert_eq!(o.endpoints.len(), 1);
    assert_eq!(o.endpoints[0].effective_dedup_secs, 5 * DAY_SECS);
    // Now the floor is 3 days.
    let below = retention::set(&t.db, &admin(), &CLINIC_A, &REMINDERS, &change(Some(2 * DAY_SECS), None, "x")).await;
    assert_eq!(below.map_err(code).unwrap_err(), "below_redelivery_horizon");
});

/// A claim of `age_secs` on the endpoint, with a stored body.
async fn old_claim(t: &TestDb, tenant_id: &str, endpoint_id: &str, event_id: &str, age_secs: i64) {
    stored_claim(t, tenant_id, endpoint_id, event_id, clock::now_ms() - age_secs * 1000, vec![1, 2, 3]).await;
}

async fn quarantined(
    t: &TestDb,
    tenant_id: &str,
    endpoint_id: &str,
    event_id: &str,
    created_at: i64,
    status: QuarantineStatus,
) {
    qentry::Entity::insert(qentry::ActiveModel {
        id: Set(format!("q-{event_id}")),
        tenant_id: Set(tenant_id.into()),
        endpoint_id: Set(endpoint_id.into()),
        event_id: Set(event_id.into()),
        reason: Set(QuarantineReason::ReminderNotFound),
        status: Set(status),
        created_at: Set(created_at),
        ..Default::default()
    })
    .exec_without_returning(&t.db)
    .await
    .unwrap();
}

/// `None` without a claim, else its body if still stored.
async fn body_of(t: &TestDb, tenant_id: &str, endpoint_id: &str, event_id: &str) -> Option<Option<Vec<u8>>> {
    let claim = claim::Entity::find_by_id((tenant_id.to_owned(), endpoint_id.to_owned(), event_id.to_owned()))
        .one(&t.db)
        .await
        .unwrap()?;
    Some(domain::bodies::of(&t.db, &claim).await.unwrap().map(|b| b.body_ciphertext))
}

db_test!(purge_keeps_what_the_guarantees_need, async |t: &TestDb| {
    let a = tenant(t, "clinic-a").await;
    endpoint(t, "clinic-a", "reminders", None).await;
    let ep = endpoint::Entity::find().one(&t.db).await.unwrap().unwrap();
    retention::set(&t.db, &admin(), &CLINIC_A, &REMINDERS, &change(Some(2 * DAY_SECS), Some(DAY_SECS), "short"))
        .await
        .unwrap();
    let (tid, eid) = (a.id.as_str(), ep.id.as_str());
    // One clock read for every age below and the purge: which days the
    // drop takes then does not depend on the hour the test runs.
    let now = clock::now_ms();
    let aged = |hours: i64| now - hours * HOUR_SECS * 1000;
    for (id, hours) in [("fresh", 23), ("body-expired", 25), ("claim-expired", 49), ("open-quarantine", 49)] {
        stored_claim(t, tid, eid, id, aged(hours), vec![1, 2, 3]).await;
    }
    quarantined(t, tid, eid, "open-quarantine", aged(49), QuarantineStatus::Open).await;
    stored_claim(t, tid, eid, "released", aged(49), vec![1, 2, 3]).await;
    quarantined(t, tid, eid, "released", aged(49), QuarantineStatus::Released).await;
    for (digest, expires) in [("expired", now - 1_000), ("live", now + 600_000)] {
        replay_record::Entity::insert(replay_record::ActiveModel {
            tenant_id: Set(tid.into()),
            endpoint_id: Set(eid.into()),
            message_digest: Set(digest.into()),
            signed_at: Set(0),
            expires_at: Set(expires),
        })
        .exec_without_returning(&t.db)
        .await
        .unwrap();
    }

    // Minute rollups: one three days old (goes), one from now (stays). On
    // PostgreSQL that day needs its partitions first: there is no default.
    let old_minute = now / 60_000 - 3 * 1440;
    retention::partitions::cover(&t.db, old_minute * 60_000, old_minute * 60_000).await.unwrap();
    for minute in [old_minute, now / 60_000] {
        event_rollup::Entity::insert(event_rollup::ActiveModel {
            minute: Set(minute),
            tenant_id: Set(tid.into()),
            endpoint_id: Set(eid.into()),
            outcome: Set("applied".into()),
            reason: Set(String::new()),
            count: Set(1),
        })
        .exec_without_returning(&t.db)
        .await
        .unwrap();
    }

    // PostgreSQL: the bodies' days go whole once past the (longest) body
    // retention of a day, and the body of "body-expired" (25 h old) only
    // with its day: with the drop between midnight and 1 am, else within
    // the next day (`purge::body_cutoff_ms`).
    let body_days: std::collections::BTreeSet<i64> = [72, 49, 25, 23]
        .into_iter()
        .map(|h| partitions::day_of(now - h * HOUR_SECS * 1000))
        .chain([partitions::day_of(old_minute * 60_000)])
        .collect();
    let bodies_dropped = body_days.iter().filter(|d| (*d + 1) * partitions::DAY_MS <= now - DAY_SECS * 1000).count();
    let expired_day_dropped =
        (partitions::day_of(now - 25 * HOUR_SECS * 1000) + 1) * partitions::DAY_MS <= now - DAY_SECS * 1000;
    let replay_days = replay_days_past(t, now).await;
    let report = purge::run(&t.db, now, 2).await.unwrap();
    assert_eq!(
        report,
        purge::PurgeReport {
            claims_deleted: 2,
            quarantine_deleted: 1,
            // SQLite: the bodies go before their claims, each counted:
            // body-expired's, claim-expired's and released's.
            bodies_cleared: if t.is_postgres() { 0 } else { 3 },
            replay_deleted: 1,
            // PostgreSQL drops that day's partitions whole instead: the
            // delivery log's, the minute rollups' and the minute gauge
            // samples', all past their 2-day retention, and the bodies'.
            minute_rollups_deleted: if t.is_postgres() { 0 } else { 1 },
            hourly_rollups_deleted: 0,
            deliveries_deleted: 0,
            partitions_dropped: if t.is_postgres() { 3 + bodies_dropped as u64 + replay_days } else { 0 },
            // The open entry's body, filed 49 h ago, goes to today's day.
            bodies_carried: if t.is_postgres() { 1 } else { 0 },
        },
        "batches of 2 still finish the work"
    );
    assert_eq!(body_of(t, tid, eid, "fresh").await, Some(Some(vec![1, 2, 3])), "inside body retention: untouched");
    let expired = body_of(t, tid, eid, "body-expired").await;
    if t.is_postgres() && !expired_day_dropped {
        assert_eq!(expired, Some(Some(vec![1, 2, 3])), "left for its day's drop");
    } else {
        assert_eq!(expired, Some(None), "claim kept, body deleted");
    }
    assert_eq!(body_of(t, tid, eid, "claim-expired").await, None, "past dedup retention: deleted");
    assert_eq!(
        body_of(t, tid, eid, "open-quarantine").await,
        Some(Some(vec![1, 2, 3])),
        "open quarantine keeps claim and body"
    );
    assert_eq!(body_of(t, tid, eid, "released").await, None);
    assert_eq!(qentry::Entity::find().count(&t.db).await.unwrap(), 1, "only the open entry remains");
    assert_eq!(replay_record::Entity::find().count(&t.db).await.unwrap(), 1, "the live replay record stays");
    assert_eq!(event_rollup::Entity::find().count(&t.db).await.unwrap(), 1, "the current minute's rollup stays");

    let entries =
        audit::list(&t.db, &admin(), &AuditFilter { action: Some("retention.purge".into()), ..Default::default() })
            .await
            .unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].actor, "system");
    // Nothing left to do: no second audit entry.
    assert!(purge::run(&t.db, now, 2).await.unwrap().is_empty());
    let entries =
        audit::list(&t.db, &admin(), &AuditFilter { action: Some("retention.purge".into()), ..Default::default() })
            .await
            .unwrap();
    assert_eq!(entries.len(), 1);
});

db_test!(a_row_a_batch_cannot_delete_does_not_stop_the_rest, async |t: &TestDb| {
    // A claim whose tenant is not its endpoint's (the write path never
    // writes one): the select names it (by endpoint and age), the delete by
    // the key does not take it. Oldest, it comes first in every batch; were
    // a short delete the end of the loop, every run would stop there.
    let a = tenant(t, "clinic-a").await;
    let b = tenant(t, "clinic-b").await;
    endpoint(t, "clinic-a", "reminders", None).await;
    let ep = endpoint::Entity::find().one(&t.db).await.unwrap().unwrap();
    retention::set(&t.db, &admin(), &CLINIC_A, &REMINDERS, &change(Some(2 * DAY_SECS), Some(DAY_SECS), "short"))
        .await
        .unwrap();
    old_claim(t, &b.id, &ep.id, "stray", 3 * DAY_SECS + 2 * HOUR_SECS).await;
    for i in 0..5 {
        old_claim(t, &a.id, &ep.id, &format!("old-{i}"), 3 * DAY_SECS + HOUR_SECS).await;
    }
    old_claim(t, &a.id, &ep.id, "fresh", HOUR_SECS).await;
    let report = purge::run(&t.db, clock::now_ms(), 2).await.unwrap();
    assert_eq!(report.claims_deleted, 5, "every deletable claim, in batches of 2");
    let mut left: Vec<String> =
        claim::Entity::find().all(&t.db).await.unwrap().into_iter().map(|c| c.event_id).collect();
    left.sort();
    assert_eq!(left, ["fresh", "stray"]);
});

/// The bodies left, as `(endpoint, received_at, event_id, filed_at)`, sorted.
async fn bodies_left(t: &TestDb) -> Vec<(String, i64, String, i64)> {
    let mut left: Vec<_> = event_body::Entity::find()
        .all(&t.db)
        .await
        .unwrap()
        .into_iter()
        .map(|b| (b.endpoint_id, b.received_at, b.event_id, b.filed_at))
        .collect();
    left.sort();
    left
}

db_test!(a_span_delete_takes_the_batch_and_only_rows_as_deletable, async |t: &TestDb| {
    // Each batch delete names the batch by a span of a key and a list of
    // ids; what else it matches must be as deletable as the batch.
    let now = clock::now_ms();
    retention::partitions::cover(&t.db, now - 3 * partitions::DAY_MS, now).await.unwrap();
    let (t1, t2, t3, t5) = (now - 3_000, now - 2_000, now - 1_000, now - 5_000);
    let body = |ep: &str, received: i64, id: &str, filed: i64| event_body::ActiveModel {
        endpoint_id: Set(ep.into()),
        received_at: Set(received),
        tenant_id: Set("t-1".into()),
        event_id: Set(id.into()),
        filed_at: Set(filed),
        kek_version: Set(1),
        body_ciphertext: Set(vec![1]),
    };
    let all = [
        body("ep-1", t1, "a", t1),
        body("ep-1", t1, "a", now - 500), // "a" carried forward, filed later
        body("ep-1", t3, "c", t3),
        body("ep-1", t2, "b", t2), // inside the span, not named
        body("ep-2", t2, "a", t2), // another endpoint's
        body("ep-1", t5, "c", t5), // named, before the span
    ];
    let (ep1, ep2) = ("ep-1".to_owned(), "ep-2".to_owned());
    let fill = async || {
        event_body::Entity::delete_many().exec(&t.db).await.unwrap();
        event_body::Entity::insert_many(all.clone()).exec_without_returning(&t.db).await.unwrap();
    };

    // The body purge's batch names rows with their filed time: the carried
    // copy, filed after the batch's span, is a row of a later batch.
    fill().await;
    let batch: Vec<purge::BodyKey> = vec![(t1, "a".into(), t1), (t3, "c".into(), t3)];
    let n = purge::body_deleting_statement("ep-1", &batch).exec(&t.db).await.unwrap().rows_affected;
    assert_eq!(n, 2);
    let left = bodies_left(t).await;
    let expect = vec![
        (ep1.clone(), t5, "c".to_owned(), t5),
        (ep1.clone(), t1, "a".to_owned(), now - 500),
        (ep1.clone(), t2, "b".to_owned(), t2),
        (ep2.clone(), t2, "a".to_owned(), t2),
    ];
    assert_eq!(left, {
        let mut e = expect;
        e.sort();
        e
    });

    // A claim batch takes every body of its claims, filed whenever since.
    fill().await;
    let claims: Vec<purge::ClaimKey> = vec![("a".into(), t1), ("c".into(), t3)];
    let n = purge::claim_bodies_deleting_statement("ep-1", &claims).exec(&t.db).await.unwrap().rows_affected;
    assert_eq!(n, 3);
    let left = bodies_left(t).await;
    let expect = vec![
        (ep1.clone(), t5, "c".to_owned(), t5),
        (ep1.clone(), t2, "b".to_owned(), t2),
        (ep2.clone(), t2, "a".to_owned(), t2),
    ];
    assert_eq!(left, {
        let mut e = expect;
        e.sort();
        e
    });

    // Replay records: any expired record kept by expiry in the span with a
    // named digest goes, whatever its endpoint; a signed one on PostgreSQL
    // waits for its day's drop.
    let record = |ep: &str, digest: &str, signed_at: i64, expires_at: i64| replay_record::ActiveModel {
        tenant_id: Set("t-1".into()),
        endpoint_id: Set(ep.into()),
        message_digest: Set(digest.into()),
        signed_at: Set(signed_at),
        expires_at: Set(expires_at),
    };
    let records = [
        record("ep-1", "x", 0, t1),
        record("ep-1", "z", 0, t3),
        record("ep-2", "x", 0, t2),  // another endpoint's, expired: as deletable
        record("ep-1", "y", 0, t2),  // inside the span, not named
        record("ep-3", "x", 0, t5),  // named, before the span
        record("ep-4", "z", t2, t2), // signed
    ];
    replay_record::Entity::insert_many(records).exec_without_returning(&t.db).await.unwrap();
    let backend = t.db.get_database_backend();
    let batch = vec![(t1, "x".to_owned()), (t3, "z".to_owned())];
    let n = purge::replay_deleting_statement(backend, &batch).exec(&t.db).await.unwrap().rows_affected;
    let mut left: Vec<(String, String)> = replay_record::Entity::find()
        .all(&t.db)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.endpoint_id, r.message_digest))
        .collect();
    left.sort();
    let mut expect = vec![("ep-1".to_owned(), "y".to_owned()), ("ep-3".to_owned(), "x".to_owned())];
    if t.is_postgres() {
        expect.push(("ep-4".to_owned(), "z".to_owned()));
    }
    expect.sort();
    assert_eq!(left, expect);
    assert_eq!(n, if t.is_postgres() { 3 } else { 4 });
});

db_test!(purge_never_deletes_inside_the_horizon, async |t: &TestDb| {
    // Stripe redelivers for 3 days (horizon 4 d with margin). Even a decision
    // below that on record (written behind the domain's back) does not let
    // the purge in.
    setup(t, Scheme::Stripe, None).await;
    let ep = endpoint::Entity::find().filter(endpoint::Column::Slug.eq("hooks")).one(&t.db).await.unwrap().unwrap();
    retention_version::Entity::update_many()
        .col_expr(retention_version::Column::DedupSecs, sea_orm::sea_query::Expr::value(HOUR_SECS))
        .col_expr(retention_version::Column::BodySecs, sea_orm::sea_query::Expr::value(HOUR_SECS))
        .filter(retention_version::Column::EndpointId.eq(&ep.id))
        .exec(&t.db)
        .await
        .unwrap();
    let tid = ep.tenant_id.clone();
    for (id, age) in [("3d", 3 * DAY_SECS), ("4d-minus-1m", 4 * DAY_SECS - 60), ("4d-plus-1m", 4 * DAY_SECS + 60)] {
        old_claim(t, &tid, &ep.id, id, age).await;
    }
    let report = purge::run(&t.db, clock::now_ms(), 100).await.unwrap();
    assert_eq!(report.claims_deleted, 1);
    assert!(body_of(t, &tid, &ep.id, "3d").await.is_some());
    assert!(body_of(t, &tid, &ep.id, "4d-minus-1m").await.is_some(), "one minute inside the horizon: kept");
    assert!(body_of(t, &tid, &ep.id, "4d-plus-1m").await.is_none());
});

db_test!(purge_under_concurrent_intake_loses_no_claims, async |t: &TestDb| {
    let s = Arc::new(setup(t, Scheme::StandardWebhooks, None).await);
    let ep = endpoint::Entity::find().filter(endpoint::Column::Slug.eq("hooks")).one(&t.db).await.unwrap().unwrap();
    // Past the default retention (90 d for Standard Webhooks: Svix's manual
    // resend window).
    for i in 0..600 {
        old_claim(t, &ep.tenant_id, &ep.id, &format!("old-{i}"), 91 * DAY_SECS).await;
    }
    let purger = {
        let db = t.db.clone();
        tokio::spawn(async move {
            let mut total = 0;
            // Small batches so purge transactions interleave with intake.
            for _ in 0..50 {
                total += purge::run(&db, clock::now_ms(), 20).await.unwrap().claims_deleted;
                if total == 600 {
                    break;
                }
            }
            total
        })
    };
    let mut workers = Vec::new();
    for w in 0..16 {
        let s = s.clone();
        workers.push(tokio::spawn(async move {
            for i in 0..13 {
                let id = format!("msg_{w}_{i}");
                let body =
                    json!({"type": "reminder.created", "data": {"reminder_id": id, "send_at": "2027-01-05T09:00:00Z"}})
                        .to_string();
                let h = signed(&s, Scheme::StandardWebhooks, body.as_bytes(), now_s(), &id);
                let o = deliver(&s, &h, body.as_bytes()).await;
                assert!(matches!(o, Outcome::Applied { .. }), "{o:?}");
            }
        }));
    }
    for w in workers {
        w.await.unwrap();
    }
    assert_eq!(purger.await.unwrap(), 600, "every old claim purged");
    let left: Vec<claim::Model> =
        claim::Entity::find().filter(claim::Column::EndpointId.eq(&ep.id)).all(&t.db).await.unwrap();
    assert_eq!(left.len(), 16 * 13, "every new claim is still there");
    assert!(left.iter().all(|c| c.event_id.starts_with("msg_")));
    let bodies = event_body::Entity::find().filter(event_body::Column::EndpointId.eq(&ep.id)).count(&t.db).await;
    assert_eq!(bodies.unwrap(), 16 * 13, "and every new claim's body");
    // And each still answers its redelivery as a duplicate.
    let id = "msg_7_3";
    let body =
        json!({"type": "reminder.created", "data": {"reminder_id": id, "send_at": "2027-01-05T09:00:00Z"}}).to_string();
    // A timestamp ahead of every original's (inside the tolerance): a new
    // signature, so not a replay, however slowly the intake above ran.
    let h = signed(&s, Scheme::StandardWebhooks, body.as_bytes(), now_s() + 60, id);
    let o = deliver(&s, &h, body.as_bytes()).await;
    assert!(matches!(o, Outcome::Duplicate { .. }), "{o:?}");
});

db_test!(seeded_horizons_name_their_source_and_short_decisions_are_flagged, async |t: &TestDb| {
    let o = retention::overview(&t.db, &admin()).await.unwrap();
    let by_scheme = |s: &str| o.horizons.iter().find(|h| h.scheme == s).unwrap().clone();
    let sw = by_scheme("standard-webhooks");
    assert_eq!(sw.horizon_secs, 2 * DAY_SECS);
    assert!(sw.source.as_deref().is_some_and(|s| s.contains("27.6 h")), "{sw:?}");
    assert!(by_scheme("stripe").source.as_deref().is_some_and(|s| s.contains("3 days")));
    assert!(by_scheme("github").source.as_deref().is_some_and(|s| s.contains("redelivered by hand")));
    // An endpoint decided at the horizon; the horizon then rises (as a
    // migration does): the decision is flagged, and left as it was.
    tenant(t, "clinic-a").await;
    endpoint(t, "clinic-a", "reminders", None).await;
    retention::set(
        &t.db,
        &admin(),
        &CLINIC_A,
        &REMINDERS,
        &change(Some(2 * DAY_SECS), Some(DAY_SECS), "at the horizon"),
    )
    .await
    .unwrap();
    assert!(!retention::get(&t.db, &admin(), &CLINIC_A, &REMINDERS).await.unwrap().below_horizon);
    domain::entity::redelivery_horizon::Entity::insert(domain::entity::redelivery_horizon::ActiveModel {
        scheme: Set("standard-webhooks".into()),
        version: Set(sw.version + 1),
        horizon_secs: Set(3 * DAY_SECS),
        actor: Set("system".into()),
        reason: Set("a later schedule".into()),
        created_at: Set(clock::now_ms()),
        source: Set(Some("test".into())),
        manual_resend_secs: Set(sw.manual_resend_secs),
        manual_resend_source: Set(sw.manual_resend_source.clone()),
    })
    .exec_without_returning(&t.db)
    .await
    .unwrap();
    let v = retention::get(&t.db, &admin(), &CLINIC_A, &REMINDERS).await.unwrap();
    assert!(v.below_horizon);
    assert_eq!(v.current.dedup_secs, 2 * DAY_SECS, "not changed silently");
    assert_eq!(v.effective_dedup_secs, 3 * DAY_SECS, "the purge keeps claims for the horizon meanwhile");
});

// Each scheme's horizon records its automatic retry window and its manual
// resend window, with their sources; a dedup retention below the manual
// window is refused unless the risk is accepted, which is audited and a
// `retention_below_manual_resend` finding until the retention is raised.
db_test!(a_retention_below_the_manual_resend_window_needs_the_risk_accepted, async |t: &TestDb| {
    let o = retention::overview(&t.db, &admin()).await.unwrap();
    let window = |s: &str| {
        let h = o.horizons.iter().find(|h| h.scheme == s).unwrap();
        (h.horizon_secs, h.manual_resend_secs, h.manual_resend_source.clone().unwrap_or_default())
    };
    let (auto, manual, source) = window("stripe");
    assert_eq!((auto, manual), (4 * DAY_SECS, 30 * DAY_SECS));
    assert!(source.contains("last 30 days") && source.contains("docs.stripe.com"), "{source}");
    let (auto, manual, source) = window("github");
    assert_eq!((auto, manual), (4 * DAY_SECS, 3 * DAY_SECS));
    assert!(source.contains("past 3 days") && source.contains("docs.github.com"), "{source}");
    let (auto, manual, source) = window("standard-webhooks");
    assert_eq!((auto, manual), (2 * DAY_SECS, 90 * DAY_SECS));
    assert!(source.contains("docs.svix.com/retries") && source.contains("90 days"), "{source}");

    tenant(t, "clinic-a").await;
    endpoint(t, "clinic-a", "reminders", None).await;
    let v = retention::get(&t.db, &admin(), &CLINIC_A, &REMINDERS).await.unwrap();
    assert_eq!(
        (v.current.dedup_secs, v.manual_resend_secs, v.below_manual_resend),
        (90 * DAY_SECS, 90 * DAY_SECS, false)
    );
    let findings = || async {
        let e = domain::evidence::bundle::collect(&t.db, &t.vault, &reviewer(), None).await.unwrap();
        e.findings
            .into_iter()
            .filter(|f| f.id == "retention_below_manual_resend")
            .map(|f| (f.severity, f.subject))
            .collect::<Vec<_>>()
    };
    assert_eq!(findings().await, []);

    let unaccepted = RetentionChange { accept_risk: false, ..change(Some(30 * DAY_SECS), None, "shorter") };
    let err = retention::set(&t.db, &admin(), &CLINIC_A, &REMINDERS, &unaccepted).await.unwrap_err();
    assert_eq!(err.code(), "below_manual_resend");
    assert!(err.public_message().contains("90 d") && err.public_message().contains("accept_risk"), "{err:?}");
    assert_eq!(retention_version::Entity::find().count(&t.db).await.unwrap(), 1, "nothing recorded");

    let accepted =
        retention::set(&t.db, &admin(), &CLINIC_A, &REMINDERS, &change(Some(30 * DAY_SECS), None, "minimise"))
            .await
            .unwrap();
    assert!(accepted.below_manual_resend);
    assert_eq!(findings().await, [("warning".to_owned(), "clinic-a/reminders".to_owned())]);
    let audited = audit_entries(t, "retention.set").await;
    assert_eq!(audited.last().unwrap().1["accepted_risk"], json!(true));
    assert_eq!(audited.last().unwrap().1["manual_resend_secs"], json!(90 * DAY_SECS));
    // A body-only change leaves the accepted decision as it is.
    let body_only = RetentionChange { accept_risk: false, ..change(None, Some(DAY_SECS), "fewer bodies") };
    retention::set(&t.db, &admin(), &CLINIC_A, &REMINDERS, &body_only).await.unwrap();

    let raised = RetentionChange { accept_risk: false, ..change(Some(90 * DAY_SECS), None, "cover manual resends") };
    let v = retention::set(&t.db, &admin(), &CLINIC_A, &REMINDERS, &raised).await.unwrap();
    assert!(!v.below_manual_resend);
    assert_eq!(findings().await, []);
    assert_eq!(audit_entries(t, "retention.set").await.last().unwrap().1["accepted_risk"], json!(false));
});

/// Hours of the rows left in one hourly table.
async fn hours_left(t: &TestDb, table: &str, column: &str, extra: &str) -> Vec<i64> {
    let sql = format!("SELECT DISTINCT {column} FROM {table} {extra} ORDER BY {column}");
    let rows = t.db.query_all_raw(Statement::from_string(t.db.get_database_backend(), sql)).await.unwrap();
    rows.iter().map(|r| r.try_get_by_index::<i64>(0).unwrap()).collect()
}

db_test!(hourly_rollups_go_after_their_retention_and_the_last_week_stays, async |t: &TestDb| {
    const HOUR_MS: i64 = 3_600_000;
    let now = clock::now_ms();
    let expired = now - partitions::HOURLY_ROLLUPS_KEPT_MS - 2 * DAY_SECS * 1000;
    let week_ago = now - 7 * DAY_SECS * 1000;
    for at in [expired, week_ago] {
        partitions::cover(&t.db, at, at).await.unwrap();
        gauges::sample(&t.db, at).await.unwrap();
        let (hour, key, tenant, ep) = (at / HOUR_MS, "key-1", "tenant-1", "ep-1");
        key_use_rollup::Entity::insert(key_use_rollup::ActiveModel {
            hour: Set(hour),
            key_id: Set(key.into()),
            tenant_id: Set(tenant.into()),
            endpoint_id: Set(ep.into()),
            count: Set(3),
        })
        .exec_without_returning(&t.db)
        .await
        .unwrap();
        key_failure_rollup::Entity::insert(key_failure_rollup::ActiveModel {
            hour: Set(hour),
            key_id: Set(key.into()),
            tenant_id: Set(tenant.into()),
            endpoint_id: Set(ep.into()),
            reason: Set("bad_signature".into()),
            count: Set(1),
        })
        .exec_without_returning(&t.db)
        .await
        .unwrap();
        let sql = format!(
            "INSERT INTO event_rollups_hourly (hour, tenant_id, endpoint_id, outcome, reason, count) \
             VALUES ({hour}, '{tenant}', '{ep}', 'applied', '', 5)"
        );
        t.db.execute_unprepared(&sql).await.unwrap();
    }

    let report = purge::run(&t.db, now, purge::DEFAULT_BATCH).await.unwrap();
    if t.is_postgres() {
        assert_eq!(report.hourly_rollups_deleted, 0, "PostgreSQL drops the expired days whole");
        for table in ["event_rollups_hourly", "key_use_rollups", "key_failure_rollups", "gauge_samples_hour"] {
            let days = partitions::days(&t.db, table).await.unwrap();
            assert!(!days.contains(&partitions::day_of(expired)), "{table}: the expired day is dropped");
            assert!(days.contains(&partitions::day_of(week_ago)), "{table}: last week's day stays");
        }
    } else {
        // One row in each rollup table, and the two total gauges' hour samples.
        assert_eq!(report.hourly_rollups_deleted, 5);
    }
    let week_hour = week_ago / HOUR_MS;
    assert_eq!(hours_left(t, "event_rollups_hourly", "hour", "").await, [week_hour]);
    assert_eq!(hours_left(t, "key_use_rollups", "hour", "").await, [week_hour]);
    assert_eq!(hours_left(t, "key_failure_rollups", "hour", "").await, [week_hour]);
    assert_eq!(hours_left(t, "gauge_samples", "bucket", "WHERE unit = 'hour'").await, [week_hour]);

    // Run again: nothing more goes.
    let again = purge::run(&t.db, now, purge::DEFAULT_BATCH).await.unwrap();
    assert_eq!(again.hourly_rollups_deleted, 0);
    assert_eq!(hours_left(t, "key_use_rollups", "hour", "").await, [week_hour]);
});

/// The plan `stmt` gets, one line per row (with a sequential scan ruled
/// out on PostgreSQL: an empty table is cheapest to read whole, and the
/// question is whether the index serves the statement at all).
async fn plan_of(t: &TestDb, stmt: Statement) -> Vec<String> {
    use sea_orm::TransactionTrait;
    let txn = t.db.begin().await.unwrap();
    let explain = if t.is_postgres() {
        txn.execute_unprepared("SET LOCAL enable_seqscan = off").await.unwrap();
        "EXPLAIN"
    } else {
        "EXPLAIN QUERY PLAN"
    };
    let rows = txn.query_all_raw(Statement { sql: format!("{explain} {}", stmt.sql), ..stmt }).await.unwrap();
    let column = if t.is_postgres() { 0 } else { 3 };
    let plan = rows.iter().map(|r| r.try_get_by_index::<String>(column).unwrap()).collect();
    txn.rollback().await.unwrap();
    plan
}

db_test!(body_deleting_reads_the_bodies_by_endpoint_and_age, async |t: &TestDb| {
    // Without the age index a batch reads every stored body of every
    // endpoint (docs/benchmarks.md#retention-purge).
    use sea_orm::QueryTrait;
    let stmt = purge::body_deleting_query("ep-1", clock::now_ms(), 500).build(t.db.get_database_backend());
    let plan = plan_of(t, stmt).await;
    // The key, which leads with (endpoint_id, received_at): each day's
    // partition's copy on PostgreSQL, the table itself on SQLite.
    let index = if t.is_postgres() {
        "_pkey"
    } else {
        "INDEX sqlite_autoindex_event_bodies_1 (endpoint_id=? AND received_at<?)"
    };
    assert!(plan.iter().any(|line| line.contains("event_bodies") && line.contains(index)), "{plan:#?}");
});

db_test!(a_purge_batch_deletes_through_the_key_with_lists_of_values, async |t: &TestDb| {
    // A full batch, as the purge deletes it. Bounded by the age alone, a
    // body batch read the endpoint's whole range of old bodies (SQLite,
    // quadratic in a day's bodies); as an OR of one term per row, SQLite's
    // planner compared every term with every other (docs/benchmarks.md
    // #retention-purge). On PostgreSQL the batch's filed span names the only
    // partitions the statement plans.
    use sea_orm::QueryTrait;
    let backend = t.db.get_database_backend();
    let now = clock::now_ms();
    let rows: Vec<purge::BodyKey> =
        (0..purge::DEFAULT_BATCH as i64).map(|i| (now - i, format!("evt-{i}"), now - i)).collect();
    let plan = plan_of(t, purge::body_deleting_statement("ep-1", &rows).build(backend)).await;
    assert!(!plan.iter().any(|line| line.contains("MULTI-INDEX OR") || line.contains("BitmapOr")), "{plan:#?}");
    let ids: Vec<&str> = rows.iter().map(|r| r.1.as_str()).collect();
    if t.is_postgres() {
        // With rows and statistics the planner has a choice to make.
        t.db.execute_unprepared(
            "INSERT INTO inbox_claims (tenant_id, endpoint_id, event_id, body_digest, key_id, outcome, received_at) \
             SELECT 't-1', 'ep-' || (i % 40), 'evt-' || i, 'd', 'k', 'applied', i FROM generate_series(1, 40000) i; \
             ANALYZE inbox_claims",
        )
        .await
        .unwrap();
    }
    let claims = plan_of(t, purge::claim_deleting_statement("t-1", "ep-1", &ids).build(backend)).await;
    // The select reads the endpoint's range of its age index, never the
    // age index of every endpoint (`ix_claims_received`, the events list's).
    let select = purge::claim_deleting_query(backend, "ep-1", 20_000, purge::DEFAULT_BATCH).build(backend);
    let select = plan_of(t, select).await;
    let range = if t.is_postgres() {
        "Index Cond: ((ROW((endpoint_id)::text, received_at) < ROW('ep-1'::text, '20000'::bigint))"
    } else {
        "SEARCH inbox_claims USING INDEX ix_claims_endpoint_received (endpoint_id=? AND received_at<?)"
    };
    assert!(select.iter().any(|line| line.contains(range)), "{select:#?}");
    assert!(!select.iter().any(|line| line.contains("ix_claims_received ")), "{select:#?}");
    // A batch of claims three days old, and their bodies.
    let claim_keys: Vec<purge::ClaimKey> = rows.iter().map(|r| (r.1.clone(), r.0 - 3 * partitions::DAY_MS)).collect();
    let expired: Vec<(i64, String)> = rows.iter().map(|r| (r.0, format!("digest-{}", r.1))).collect();
    let replay = plan_of(t, purge::replay_deleting_statement(backend, &expired).build(backend)).await;
    if t.is_postgres() {
        let parts: std::collections::BTreeSet<&str> = plan
            .iter()
            .filter_map(|line| line.split_whitespace().find(|w| w.starts_with("event_bodies_p2")))
            .map(|w| w.trim_end_matches("_pkey"))
            .collect();
        assert!(parts.len() <= 2, "only the batch's days (today, maybe yesterday): {parts:?}\n{plan:#?}");
        assert!(plan.iter().any(|line| line.contains("Index") && line.contains("_pkey")), "{plan:#?}");
        // The list is one array, not 500 terms, read through an index of
        // the endpoint's claims (which one depends on their number).
        assert!(claims.iter().any(|line| line.contains("event_id)::text = ANY (")), "{claims:#?}");
        assert!(!claims.iter().any(|line| line.contains("Seq Scan")), "{claims:#?}");
        // The claims' bodies: no partition of a day before the batch's
        // (a body is filed no earlier than it was received).
        retention::partitions::cover(&t.db, now - 5 * partitions::DAY_MS, now).await.unwrap();
        let stmt = purge::claim_bodies_deleting_statement("ep-1", &claim_keys).build(backend);
        let plan = plan_of(t, stmt).await;
        let first = partitions::day_of(claim_keys.iter().map(|c| c.1).min().unwrap());
        let days: Vec<i64> = plan
            .iter()
            .flat_map(|line| line.split_whitespace())
            .filter_map(|w| migrations::partitioning::partition_day("event_bodies", w.trim_end_matches("_pkey")))
            .collect();
        assert!(days.contains(&first), "{plan:#?}");
        assert!(days.iter().all(|d| *d >= first), "no older day: {plan:#?}");
        // Only the records kept by expiry: the unsigned partition, by its index.
        assert!(replay.iter().any(|line| line.contains("ix_replay_unsigned_expires")), "{replay:#?}");
        assert!(!replay.iter().any(|line| line.contains("replay_records_p2")), "{replay:#?}");
    } else {
        let span = "INDEX sqlite_autoindex_event_bodies_1 (endpoint_id=? AND received_at>? AND received_at<?)";
        assert!(plan.iter().any(|line| line.contains(span)), "{plan:#?}");
        let key = "INDEX sqlite_autoindex_inbox_claims_1 (tenant_id=? AND endpoint_id=? AND event_id=?)";
        assert!(claims.iter().any(|line| line.contains(key)), "{claims:#?}");
        let span = "INDEX ix_replay_expires (expires_at>? AND expires_at<?)";
        assert!(replay.iter().any(|line| line.contains(span)), "{replay:#?}");
        let stmt = purge::claim_bodies_deleting_statement("ep-1", &claim_keys).build(backend);
        let plan = plan_of(t, stmt).await;
        let span = "INDEX sqlite_autoindex_event_bodies_1 (endpoint_id=? AND received_at>? AND received_at<?)";
        assert!(plan.iter().any(|line| line.contains(span)), "the claims' bodies by their span: {plan:#?}");
        // The delivery log (row by row on SQLite only): one key lookup per id.
        let ids = ids.into_iter().map(str::to_owned).collect();
        let stmt = purge::delivery_deleting_statement("t-1", ids).build(backend);
        let plan = plan_of(t, stmt).await;
        let key = "SEARCH delivery_log USING INDEX sqlite_autoindex_delivery_log_1 (tenant_id=? AND id=?)";
        assert!(plan.iter().any(|line| line.contains(key)), "{plan:#?}");
    }
});
