//! The retention purge over endpoints with different retentions whose rows
//! are interleaved in arrival order, as the receiver files them (SQLite
//! walks them in that order across endpoints, `retention::in_arrival_order`;
//! PostgreSQL goes endpoint by endpoint): each row goes at its own
//! endpoint's time, an open quarantine entry keeps its claim and body, and
//! batches of 3 still finish. On SQLite the walk reads the claims' age index
//! in order, with no sort.

use domain::{
    clock,
    entity::{event_body, inbox_claim as claim, quarantine_entry as qentry},
    retention::{self, DAY_SECS, HOUR_SECS, RetentionChange, in_arrival_order, purge},
};
use sea_orm::{ConnectionTrait, EntityTrait, QueryTrait, Set, Statement};
use views::quarantine::{QuarantineReason, QuarantineStatus};

use crate::{db_test, fixtures::*, support::TestDb};

const HOUR_MS: i64 = HOUR_SECS * 1000;

fn keep(dedup_days: i64, body_days: i64) -> RetentionChange {
    RetentionChange {
        dedup_secs: Some(dedup_days * DAY_SECS),
        body_secs: Some(body_days * DAY_SECS),
        reason: "test".into(),
        accept_risk: true,
    }
}

db_test!(interleaved_endpoints_each_keep_their_own_retention, async |t: &TestDb| {
    let a = tenant(t, "clinic-a").await;
    let clinic = "clinic-a".parse().unwrap();
    // (slug, dedup days, body days)
    let kept = [("short", 2, 1), ("long", 5, 3)];
    let mut ids = Vec::new();
    for (slug, dedup, body) in kept {
        endpoint(t, "clinic-a", slug, None).await;
        retention::set(&t.db, &admin(), &clinic, &slug.parse().unwrap(), &keep(dedup, body)).await.unwrap();
        let sql = format!("SELECT id FROM endpoints WHERE slug = '{slug}'");
        let row = t.db.query_one_raw(Statement::from_string(t.db.get_database_backend(), sql)).await;
        ids.push(row.unwrap().unwrap().try_get_by_index::<String>(0).unwrap());
    }
    let now = clock::now_ms();
    // One claim an hour for six days, the endpoints taking turns; each
    // half an hour past its hour, so no age sits on a cutoff.
    let age_h = |h: i64| h as f64 + 0.5;
    for h in 0..144 {
        let e = (h % 2) as usize;
        stored_claim(t, &a.id, &ids[e], &format!("{}-{h}", kept[e].0), now - h * HOUR_MS - HOUR_MS / 2, vec![h as u8])
            .await;
    }
    // Five at one instant, past the short retention: batches of 3 split
    // them, and the walk goes on from the row, not only the time.
    for i in 0..5 {
        stored_claim(t, &a.id, &ids[0], &format!("tie-{i}"), now - 60 * HOUR_MS, vec![9]).await;
    }
    // Past both of its endpoint's retentions, held by an open entry.
    qentry::Entity::insert(qentry::ActiveModel {
        id: Set("q-held".into()),
        tenant_id: Set(a.id.clone()),
        endpoint_id: Set(ids[0].clone()),
        event_id: Set("short-100".into()),
        reason: Set(QuarantineReason::ReminderNotFound),
        status: Set(QuarantineStatus::Open),
        created_at: Set(now - 100 * HOUR_MS),
        ..Default::default()
    })
    .exec_without_returning(&t.db)
    .await
    .unwrap();

    let first = purge::run(&t.db, now, 3).await.unwrap();
    assert_eq!(first.claims_deleted, 5 + 47 + 12, "the ties, the short endpoint's 47 and the long one's 12");
    let again = purge::run(&t.db, now, 3).await.unwrap();
    assert_eq!((again.claims_deleted, again.bodies_cleared), (0, 0), "nothing twice");
    let mut claims: Vec<String> =
        claim::Entity::find().all(&t.db).await.unwrap().into_iter().map(|c| c.event_id).collect();
    let mut bodies: Vec<String> =
        event_body::Entity::find().all(&t.db).await.unwrap().into_iter().map(|b| b.event_id).collect();
    claims.sort();
    bodies.sort();
    let (mut want_claims, mut want_bodies) = (Vec::new(), Vec::new());
    for h in 0..144 {
        let (slug, dedup, body) = kept[(h % 2) as usize];
        let id = format!("{slug}-{h}");
        let held = id == "short-100";
        if held || age_h(h) < (dedup * 24) as f64 {
            want_claims.push(id.clone());
            if held || age_h(h) < (body * 24) as f64 {
                want_bodies.push(id);
            }
        }
    }
    want_claims.sort();
    want_bodies.sort();
    assert_eq!(claims, want_claims, "each claim at its own endpoint's time; the held one stays");
    if t.is_postgres() {
        // The longest body retention's bodies wait for their day's drop
        // (`purge::body_cutoff_ms`): only a claim's own deletion is exact.
        assert!(bodies.iter().all(|b| claims.contains(b)), "no body outlives its claim");
        assert!(want_bodies.iter().all(|b| bodies.contains(b)), "no body goes early");
    } else {
        assert_eq!(bodies, want_bodies, "each body at its own endpoint's time; the held one stays");
    }
});

db_test!(the_arrival_order_walk_reads_the_age_index_in_order, async |t: &TestDb| {
    if t.is_postgres() {
        return; // SQLite's path only.
    }
    let backend = t.db.get_database_backend();
    let select = in_arrival_order::batch_query(&["ep-1", "ep-2"], 1_000, i64::MIN, 2_000, purge::DEFAULT_BATCH);
    let stmt = select.build(backend);
    let rows = t.db.query_all_raw(Statement { sql: format!("EXPLAIN QUERY PLAN {}", stmt.sql), ..stmt }).await.unwrap();
    let plan: Vec<String> = rows.iter().map(|r| r.try_get_by_index::<String>(3).unwrap()).collect();
    assert!(plan.iter().any(|l| l.contains("inbox_claims USING INDEX ix_claims_received")), "{plan:#?}");
    assert!(!plan.iter().any(|l| l.contains("TEMP B-TREE")), "no sort: {plan:#?}");
});
