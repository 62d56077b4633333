//! Claims in daily partitions (PostgreSQL, issue 28 item 1): one claim per
//! event holds across days, the purge drops a day of claims only once
//! nothing in it must be kept, and the migration converts existing claims.
//! A claim is moved into an earlier day by setting its `received_at`, which
//! PostgreSQL carries into that day's partition: the clock, for the row.

use std::sync::Arc;

use domain::{
    clock,
    entity::{inbox_claim, quarantine_entry, reminder},
    quarantine,
    receiver::{ClaimOutcome, Outcome, Refusal},
    registry::Scheme,
    retention::{partitions, purge},
};
use migrations::{
    Migrator, MigratorTrait,
    partitioning::{DAY_MS, day_of, partition_name},
};
use sea_orm::{ConnectionTrait, DatabaseConnection, EntityTrait, PaginatorTrait};

use crate::{
    fixtures::*,
    partitions::{scalar_i64, scalar_text},
    receiver::{created, deliver, now_s, setup, signed},
    support::{TestDb, drop_database, fresh_postgres},
};

/// Moves an event's claim to `at` (after giving that day its partition)
/// and returns the partition it now lies in.
async fn age_claim(db: &DatabaseConnection, event_id: &str, at: i64) -> String {
    partitions::cover(db, at, at).await.unwrap();
    db.execute_unprepared(&format!("UPDATE inbox_claims SET received_at = {at} WHERE event_id = '{event_id}'"))
        .await
        .unwrap();
    scalar_text(db, &format!("SELECT tableoid::regclass::text FROM inbox_claims WHERE event_id = '{event_id}'")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_duplicate_of_an_event_in_an_older_partition_answers_duplicate() {
    let Some(t) = TestDb::postgres().await else { return };
    let s = setup(&t, Scheme::StandardWebhooks, None).await;
    let two_days_ago = clock::now_ms() - 2 * DAY_MS;
    // Applied (the group commit's path) and quarantined at admission (the
    // one-event path), both then moved two days back.
    let body = created("r-1");
    let first = deliver(&s, &signed(&s, Scheme::StandardWebhooks, &body, now_s(), "msg_1"), &body).await;
    assert_eq!(first, Outcome::Applied { event_id: "msg_1".into() });
    let poison = b"not json at all".to_vec();
    let held = deliver(&s, &signed(&s, Scheme::StandardWebhooks, &poison, now_s(), "msg_2"), &poison).await;
    assert!(matches!(held, Outcome::Quarantined { .. }), "{held:?}");
    for event in ["msg_1", "msg_2"] {
        assert_eq!(age_claim(&t.db, event, two_days_ago).await, partition_name("inbox_claims", day_of(two_days_ago)));
    }

    let again = deliver(&s, &signed(&s, Scheme::StandardWebhooks, &body, now_s() + 1, "msg_1"), &body).await;
    assert_eq!(again, Outcome::Duplicate { event_id: "msg_1".into(), original: ClaimOutcome::Applied });
    let again = deliver(&s, &signed(&s, Scheme::StandardWebhooks, &poison, now_s() + 1, "msg_2"), &poison).await;
    assert_eq!(again, Outcome::Duplicate { event_id: "msg_2".into(), original: ClaimOutcome::Quarantined });
    let other = created("r-2");
    let conflict = deliver(&s, &signed(&s, Scheme::StandardWebhooks, &other, now_s() + 2, "msg_1"), &other).await;
    assert_eq!(conflict, Outcome::IdentityConflict { event_id: "msg_1".into() });
    assert_eq!(inbox_claim::Entity::find().count(&t.db).await.unwrap(), 2, "no second claim in today's partition");
    assert_eq!(reminder::Entity::find().count(&t.db).await.unwrap(), 1);
    t.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_duplicates_across_the_boundary_yield_one_claim() {
    let Some(t) = TestDb::postgres().await else { return };
    let s = Arc::new(setup(&t, Scheme::StandardWebhooks, None).await);
    let yesterday = clock::now_ms() - DAY_MS;
    let now = now_s();
    // Events claimed yesterday, then redelivered 16 times each at once
    // (distinct signatures), together with as many new events raced
    // 16 times each: each event ends with one claim and one effect.
    let mut handles = Vec::new();
    for e in 0..4 {
        let body = created(&format!("r-old-{e}"));
        let id = format!("msg_old_{e}");
        let o = deliver(&s, &signed(&s, Scheme::StandardWebhooks, &body, now, &id), &body).await;
        assert!(matches!(o, Outcome::Applied { .. }), "{o:?}");
        age_claim(&t.db, &id, yesterday).await;
    }
    for (prefix, e) in (0..4).flat_map(|e| [("old", e), ("new", e)]) {
        for i in 1..=16 {
            let s = s.clone();
            let body = created(&format!("r-{prefix}-{e}"));
            let id = format!("msg_{prefix}_{e}");
            handles.push(tokio::spawn(async move {
                (prefix, deliver(&s, &signed(&s, Scheme::StandardWebhooks, &body, now - i, &id), &body).await)
            }));
        }
    }
    let (mut applied, mut dup) = (0, 0);
    for h in handles {
        match h.await.unwrap() {
            ("new", Outcome::Applied { .. }) => applied += 1,
            (_, Outcome::Duplicate { original: ClaimOutcome::Applied, .. }) => dup += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((applied, dup), (4, 4 * 16 + 4 * 15));
    assert_eq!(inbox_claim::Entity::find().count(&t.db).await.unwrap(), 8);
    assert_eq!(reminder::Entity::find().count(&t.db).await.unwrap(), 8);
    t.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_purge_drops_an_expired_day_of_claims_and_keeps_a_held_claim() {
    let Some(t) = TestDb::postgres().await else { return };
    let s = setup(&t, Scheme::StandardWebhooks, None).await;
    let now = clock::now_ms();
    // Past any dedup retention (the horizon is at most a year).
    let (alone_day, held_day) = (now - 401 * DAY_MS, now - 400 * DAY_MS);
    let poison = b"not json at all".to_vec();
    for (id, body, at) in [
        ("msg_alone", created("r-1"), alone_day),
        ("msg_held", poison.clone(), held_day),
        ("msg_beside", created("r-2"), held_day),
        ("msg_recent", created("r-3"), now),
    ] {
        deliver(&s, &signed(&s, Scheme::StandardWebhooks, &body, now_s(), id), &body).await;
        if at != now {
            age_claim(&t.db, id, at).await;
        }
    }
    let report = purge::run(&t.db, now, purge::DEFAULT_BATCH).await.unwrap();
    let days = partitions::days(&t.db, "inbox_claims").await.unwrap();
    assert!(!days.contains(&day_of(alone_day)), "an expired day of claims is dropped whole");
    assert!(days.contains(&day_of(held_day)), "a day holding an open quarantine entry's claim stays");
    assert_eq!(report.claims_deleted, 1, "its expired row goes one by one");
    let mut left: Vec<String> =
        inbox_claim::Entity::find().all(&t.db).await.unwrap().into_iter().map(|c| c.event_id).collect();
    left.sort();
    assert_eq!(left, ["msg_held", "msg_recent"]);
    // The held claim still makes a redelivery a duplicate, and release
    // can read it.
    let again = deliver(&s, &signed(&s, Scheme::StandardWebhooks, &poison, now_s() + 1, "msg_held"), &poison).await;
    assert_eq!(again, Outcome::Duplicate { event_id: "msg_held".into(), original: ClaimOutcome::Quarantined });

    // Once its entry is resolved, the day goes.
    let entry = quarantine_entry::Entity::find().one(&t.db).await.unwrap().unwrap();
    quarantine::discard(&t.db, &admin(), &entry.id, "not ours").await.unwrap();
    purge::run(&t.db, now, purge::DEFAULT_BATCH).await.unwrap();
    assert!(!partitions::days(&t.db, "inbox_claims").await.unwrap().contains(&day_of(held_day)));
    left = inbox_claim::Entity::find().all(&t.db).await.unwrap().into_iter().map(|c| c.event_id).collect();
    assert_eq!(left, ["msg_recent"]);
    t.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replay_across_a_day_boundary_is_still_refused() {
    let Some(t) = TestDb::postgres().await else { return };
    let s = Arc::new(setup(&t, Scheme::StandardWebhooks, None).await);
    let yesterday = clock::now_ms() - DAY_MS;
    partitions::cover(&t.db, yesterday, yesterday).await.unwrap();
    let body = created("r-1");
    let h = signed(&s, Scheme::StandardWebhooks, &body, now_s(), "msg_1");
    assert_eq!(deliver(&s, &h, &body).await, Outcome::Applied { event_id: "msg_1".into() });
    // The record written now moves to yesterday's partition.
    t.db.execute_unprepared(&format!("UPDATE replay_records SET recorded_at = {yesterday}")).await.unwrap();
    let landed = scalar_text(&t.db, "SELECT tableoid::regclass::text FROM replay_records").await;
    assert_eq!(landed, partition_name("replay_records", day_of(yesterday)));
    assert_eq!(deliver(&s, &h, &body).await, Outcome::Refused(Refusal::Replay));
    // Also when the replay races itself and a new message of the same event.
    let mut handles = Vec::new();
    for _ in 0..8 {
        let (s, h, body) = (s.clone(), h.clone(), body.clone());
        handles.push(tokio::spawn(async move { deliver(&s, &h, &body).await }));
    }
    for h in handles {
        assert_eq!(h.await.unwrap(), Outcome::Refused(Refusal::Replay));
    }
    assert_eq!(scalar_i64(&t.db, "SELECT COUNT(*) FROM replay_records").await, 1, "no second record today");

    // The purge drops yesterday's records once all have expired, not before.
    let report = purge::run(&t.db, clock::now_ms(), purge::DEFAULT_BATCH).await.unwrap();
    assert_eq!(report.replay_deleted, 0, "nothing row by row");
    assert!(partitions::days(&t.db, "replay_records").await.unwrap().contains(&day_of(yesterday)), "not expired yet");
    t.db.execute_unprepared(&format!("UPDATE replay_records SET expires_at = {}", clock::now_ms() - 1)).await.unwrap();
    purge::run(&t.db, clock::now_ms(), purge::DEFAULT_BATCH).await.unwrap();
    assert!(!partitions::days(&t.db, "replay_records").await.unwrap().contains(&day_of(yesterday)));
    assert_eq!(scalar_i64(&t.db, "SELECT COUNT(*) FROM replay_records").await, 0);
    t.close().await;
}

const MIGRATION: &str = "m20261207_000180_partitioned_claims";

/// Every claim and every replay record (but its new `recorded_at`), in a
/// stable text form.
async fn claims(db: &DatabaseConnection) -> Vec<(i64, String)> {
    let mut out = Vec::new();
    for (table, row) in [
        ("inbox_claims", "r::text"),
        ("replay_records", "(r.tenant_id, r.endpoint_id, r.message_digest, r.expires_at)::text"),
    ] {
        let digest = format!("SELECT COALESCE(md5(string_agg({row}, '|' ORDER BY {row})), '') FROM {table} r");
        out.push((scalar_i64(db, &format!("SELECT COUNT(*) FROM {table}")).await, scalar_text(db, &digest).await));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_migrations_convert_existing_claims_and_replay_records_keeping_every_row() {
    let Some((url, cleanup)) = fresh_postgres().await else { return };
    let conn = domain::db::connect(&url).await.unwrap();
    let before = Migrator::migrations().iter().position(|m| m.name() == MIGRATION).expect("the migration is listed");
    Migrator::up(&conn, Some(before as u32)).await.unwrap();
    let now = clock::now_ms();
    let times = [now - 400 * DAY_MS, now - 7 * DAY_MS, now];
    for (i, at) in times.iter().enumerate() {
        conn.execute_unprepared(&format!(
            "INSERT INTO inbox_claims (tenant_id, endpoint_id, event_id, body_digest, event_type, key_id, outcome, \
             received_at, body_ciphertext, kek_version, first_answer, message_digest) VALUES ('t1', 'e1', 'evt-{i}', \
             'digest{i}', 'reminder.created', 'k1', 'applied', {at}, '\\x0102'::bytea, 1, 'applied', 'm{i}')"
        ))
        .await
        .unwrap();
        conn.execute_unprepared(&format!(
            "INSERT INTO replay_records (tenant_id, endpoint_id, message_digest, expires_at) \
             VALUES ('t1', 'e1', 'm{i}', {})",
            at + DAY_MS
        ))
        .await
        .unwrap();
    }
    let kept = claims(&conn).await;
    assert_eq!((kept[0].0, kept[1].0), (3, 3));

    Migrator::up(&conn, Some(2)).await.unwrap();
    assert_eq!(claims(&conn).await, kept, "every row kept, unchanged");
    let today = day_of(now);
    for (table, key) in [
        ("inbox_claims", "tenant_id, endpoint_id, event_id, received_at"),
        ("replay_records", "tenant_id, endpoint_id, message_digest, recorded_at"),
    ] {
        let kind = format!("SELECT relkind::text FROM pg_class WHERE oid = '{table}'::regclass");
        assert_eq!(scalar_text(&conn, &kind).await, "p", "{table}");
        let days = partitions::days(&conn, table).await.unwrap();
        assert!((today..=today + partitions::AHEAD_DAYS).all(|d| days.contains(&d)), "{table}: {days:?}");
        let def = scalar_text(
            &conn,
            &format!(
                "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = '{table}'::regclass \
                 AND contype = 'p'"
            ),
        )
        .await;
        assert_eq!(def, format!("PRIMARY KEY ({key})"));
    }
    let days = partitions::days(&conn, "inbox_claims").await.unwrap();
    assert!(times.iter().all(|at| days.contains(&day_of(*at))), "every day holding claims: {days:?}");
    // Existing replay records were written, for the partitions, now.
    let recorded = scalar_i64(&conn, "SELECT MIN(recorded_at) FROM replay_records").await;
    assert_eq!(day_of(recorded), today);
    for index in ["ix_claims_received", "ix_claims_endpoint_received"] {
        let n = scalar_i64(&conn, &format!("SELECT COUNT(*) FROM pg_class WHERE relname = '{index}'")).await;
        assert_eq!(n, 1, "{index}");
    }

    // And back: the same rows in a plain table keyed by the event.
    Migrator::down(&conn, Some(2)).await.unwrap();
    for table in ["inbox_claims", "replay_records"] {
        let kind = format!("SELECT relkind::text FROM pg_class WHERE oid = '{table}'::regclass");
        assert_eq!(scalar_text(&conn, &kind).await, "r", "{table}");
    }
    assert_eq!(claims(&conn).await, kept, "kept on the way down");
    conn.close().await.ok();
    drop_database(cleanup).await;
}
