//! Daily partitions on PostgreSQL (issue 28 item 1): the upkeep keeps them
//! ahead, idempotently and safely from several instances at once; writes on
//! either side of a day boundary land in their day's partition and a write
//! past every partition fails; the purge drops a day only once all of it is
//! past retention; the migration converts existing tables keeping every row.
//! On SQLite nothing is partitioned and the upkeep does nothing.

use std::collections::BTreeSet;

use domain::{
    clock, db,
    entity::{delivery_log, event_rollup},
    retention::{
        self, DAY_SECS, RetentionChange,
        partitions::{self, AHEAD_DAYS, PARTITIONED},
        purge,
    },
    stats::gauges,
};
use migrations::{
    Migrator, MigratorTrait,
    partitioning::{DAY_MS, day_of, partition_name},
};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, EntityTrait, PaginatorTrait, Set, Statement};

use crate::{
    db_test,
    fixtures::*,
    support::{TestDb, drop_database, fresh_postgres},
};

async fn all_days(db: &DatabaseConnection) -> Vec<(&'static str, BTreeSet<i64>)> {
    let mut out = Vec::new();
    for t in &PARTITIONED {
        out.push((t.table, partitions::days(db, t.table).await.unwrap()));
    }
    out
}

async fn scalar_i64(db: &DatabaseConnection, sql: &str) -> i64 {
    let row = db.query_one_raw(Statement::from_string(DbBackend::Postgres, sql)).await.unwrap().unwrap();
    row.try_get_by_index::<i64>(0).unwrap()
}

async fn scalar_text(db: &DatabaseConnection, sql: &str) -> String {
    let row = db.query_one_raw(Statement::from_string(DbBackend::Postgres, sql)).await.unwrap().unwrap();
    row.try_get_by_index::<String>(0).unwrap()
}

fn log_row(tenant_id: &str, endpoint_id: &str, event_id: &str, at: i64) -> delivery_log::ActiveModel {
    delivery_log::ActiveModel {
        id: Set(domain::ids::new_id()),
        tenant_id: Set(tenant_id.into()),
        endpoint_id: Set(endpoint_id.into()),
        event_id: Set(event_id.into()),
        answered_at: Set(at),
        status: Set(200),
        answer: Set("applied".into()),
        key_id: Set(None),
        scheme: Set("standard-webhooks".into()),
        message_digest: Set(None),
    }
}

async fn insert_log(db: &DatabaseConnection, row: delivery_log::ActiveModel) -> Result<(), sea_orm::DbErr> {
    delivery_log::Entity::insert(row).exec_without_returning(db).await.map(|_| ())
}

/// The partition a delivery-log row landed in.
async fn partition_of(db: &DatabaseConnection, event_id: &str) -> String {
    scalar_text(db, &format!("SELECT tableoid::regclass::text FROM delivery_log WHERE event_id = '{event_id}'")).await
}

db_test!(upkeep_keeps_partitions_ahead_and_is_idempotent, async |t: &TestDb| {
    let now = clock::now_ms();
    if !t.is_postgres() {
        assert_eq!(partitions::upkeep(&t.db, now).await.unwrap(), 0, "SQLite has no partitions");
        return;
    }
    let today = day_of(now);
    // The migration already covered today and the horizon (its last day
    // left out: the migration ran yesterday if midnight came in between).
    for (table, days) in all_days(&t.db).await {
        assert!((today..today + AHEAD_DAYS).all(|d| days.contains(&d)), "{table}: {days:?}");
    }
    // Ten days on, the clock is past that horizon: one run adds every day
    // through the new one, a second adds nothing.
    let later = now + 10 * DAY_MS;
    let created = partitions::upkeep(&t.db, later).await.unwrap();
    assert_eq!(created, (AHEAD_DAYS as u64 + 1) * PARTITIONED.len() as u64 + replay_yesterday(later));
    assert_eq!(partitions::upkeep(&t.db, later).await.unwrap(), 0, "idempotent");
    for (table, days) in all_days(&t.db).await {
        let ahead = today + 10..=today + 10 + AHEAD_DAYS;
        assert!(ahead.clone().all(|d| days.contains(&d)), "{table}: {days:?}");
        assert!(days.contains(&(today + 10 + 2)), "{table}: at least two days ahead");
        assert!(!days.contains(&(today + 11 + AHEAD_DAYS)), "{table}: nothing beyond the horizon");
    }
});

/// 1 when an upkeep at `at` also keeps yesterday's replay records: in the
/// first hour of a day, a message signed before midnight still passes.
fn replay_yesterday(at: i64) -> u64 {
    u64::from(day_of(at - 3_600_000) < day_of(at))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_upkeep_just_after_midnight_keeps_yesterdays_replay_records() {
    let Some(t) = TestDb::postgres().await else { return };
    // Twenty days on, half an hour past midnight: as a server restarted then,
    // long after its last upkeep.
    let midnight = (day_of(clock::now_ms()) + 20) * DAY_MS;
    partitions::upkeep(&t.db, midnight + 1_800_000).await.unwrap();
    let yesterday = day_of(midnight) - 1;
    assert!(partitions::days(&t.db, "replay_records").await.unwrap().contains(&yesterday), "signed before midnight");
    assert!(!partitions::days(&t.db, "delivery_log").await.unwrap().contains(&yesterday), "dated by our own clock");
    // Three hours past midnight the purge drops it (two hours after its
    // end), and the upkeep no longer keeps it.
    let later = midnight + 3 * 3_600_000;
    partitions::upkeep(&t.db, later).await.unwrap();
    purge::run(&t.db, later, purge::DEFAULT_BATCH).await.unwrap();
    assert!(!partitions::days(&t.db, "replay_records").await.unwrap().contains(&yesterday), "dropped");
    assert_eq!(partitions::upkeep(&t.db, later).await.unwrap(), 0, "and not made again");
    t.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_upkeeps_on_one_database_all_succeed() {
    let Some(t) = TestDb::postgres().await else { return };
    let later = clock::now_ms() + 30 * DAY_MS;
    // Separate pools: as separate `signet serve` processes would connect.
    let mut pools = Vec::new();
    for _ in 0..4 {
        pools.push(db::connect(&t.url).await.unwrap());
    }
    let runs = pools.iter().map(|p| partitions::upkeep(p, later));
    let results = futures_util::future::join_all(runs).await;
    let mut created = 0;
    for r in results {
        created += r.expect("every concurrent upkeep succeeds");
    }
    assert_eq!(
        created,
        (AHEAD_DAYS as u64 + 1) * PARTITIONED.len() as u64 + replay_yesterday(later),
        "each partition created once"
    );
    let today = day_of(later);
    for (table, days) in all_days(&t.db).await {
        assert!((today..=today + AHEAD_DAYS).all(|d| days.contains(&d)), "{table}: {days:?}");
    }
    for p in pools {
        p.close().await.ok();
    }
    t.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_cross_a_day_boundary_and_none_lands_past_the_partitions() {
    let Some(t) = TestDb::postgres().await else { return };
    let a = tenant(&t, "clinic-a").await;
    // The clock moves to just before a midnight past today's horizon.
    let midnight = (day_of(clock::now_ms()) + AHEAD_DAYS + 5) * DAY_MS;
    let before = midnight - 1_000;
    let refused = insert_log(&t.db, log_row(&a.id, "ep", "evt-early", before)).await;
    assert!(refused.is_err(), "no partition holds that day yet, and there is no default partition");
    assert_eq!(delivery_log::Entity::find().count(&t.db).await.unwrap(), 0, "nothing landed anywhere");

    partitions::upkeep(&t.db, before).await.unwrap();
    insert_log(&t.db, log_row(&a.id, "ep", "evt-before", before)).await.unwrap();
    gauges::sample(&t.db, before).await.unwrap();
    // A second later, past midnight.
    let after = midnight + 1_000;
    partitions::upkeep(&t.db, after).await.unwrap();
    insert_log(&t.db, log_row(&a.id, "ep", "evt-after", after)).await.unwrap();
    gauges::sample(&t.db, after).await.unwrap();

    let (day_before, day_after) = (day_of(before), day_of(after));
    assert_eq!(day_after, day_before + 1);
    assert_eq!(partition_of(&t.db, "evt-before").await, partition_name("delivery_log", day_before));
    assert_eq!(partition_of(&t.db, "evt-after").await, partition_name("delivery_log", day_after));
    for (unit, per_ms) in [("minute", 60_000), ("hour", 3_600_000)] {
        for (at, day) in [(before, day_before), (after, day_after)] {
            let landed = scalar_text(
                &t.db,
                &format!(
                    "SELECT DISTINCT tableoid::regclass::text FROM gauge_samples WHERE unit = '{unit}' AND bucket = {}",
                    at / per_ms
                ),
            )
            .await;
            assert_eq!(landed, partition_name(&format!("gauge_samples_{unit}"), day), "{unit} at {at}");
        }
    }
    t.close().await;
}

fn dedup(secs: i64) -> RetentionChange {
    RetentionChange { dedup_secs: Some(secs), body_secs: Some(0), reason: "test".into(), accept_risk: true }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn purge_drops_a_day_only_once_all_of_it_is_past_retention() {
    let Some(t) = TestDb::postgres().await else { return };
    let a = tenant(&t, "clinic-a").await;
    endpoint(&t, "clinic-a", "short", None).await;
    endpoint(&t, "clinic-a", "long", None).await;
    retention::set(&t.db, &admin(), &"clinic-a".parse().unwrap(), &"short".parse().unwrap(), &dedup(2 * DAY_SECS))
        .await
        .unwrap();
    retention::set(&t.db, &admin(), &"clinic-a".parse().unwrap(), &"long".parse().unwrap(), &dedup(10 * DAY_SECS))
        .await
        .unwrap();
    let now = clock::now_ms();
    let (five_ago, one_ago) = (now - 5 * DAY_MS, now - DAY_MS);
    partitions::cover(&t.db, five_ago, one_ago).await.unwrap();
    for (ep, event) in [("short", "evt-short"), ("long", "evt-long")] {
        insert_log(&t.db, log_row(&a.id, ep, event, five_ago)).await.unwrap();
    }
    for (at, reason) in [(five_ago, "old"), (one_ago, "recent")] {
        event_rollup::Entity::insert(event_rollup::ActiveModel {
            minute: Set(at / 60_000),
            tenant_id: Set(a.id.clone()),
            endpoint_id: Set("ep".into()),
            outcome: Set("applied".into()),
            reason: Set(reason.into()),
            count: Set(1),
        })
        .exec_without_returning(&t.db)
        .await
        .unwrap();
    }

    let replay_days = replay_days_past(&t, now).await;
    assert!(replay_days >= 4, "days -5 to -2 of the replay records at least");
    let report = purge::run(&t.db, now, purge::DEFAULT_BATCH).await.unwrap();
    // Five days ago: past the minute rollups' and gauge samples' 2 days, but
    // not past the longest dedup retention (10 d), so the log's day stays
    // whole, the short endpoint's row with it. Both keep no bodies: every
    // past day of theirs goes.
    assert_eq!(
        report.partitions_dropped,
        11 + replay_days,
        "days -5 to -3 of the minute rollups and minute gauge samples, -5 to -1 of the bodies, the replay records' \
         past days"
    );
    assert_eq!((report.deliveries_deleted, report.minute_rollups_deleted), (0, 0), "nothing row by row");
    assert_eq!(delivery_log::Entity::find().count(&t.db).await.unwrap(), 2);
    let log_days = partitions::days(&t.db, "delivery_log").await.unwrap();
    assert!(log_days.contains(&day_of(five_ago)));
    let rollup_days = partitions::days(&t.db, "event_rollups").await.unwrap();
    assert!(!rollup_days.contains(&day_of(five_ago)), "expired day dropped");
    assert!(rollup_days.contains(&day_of(one_ago)), "a day with rows in retention stays");
    let left: Vec<String> =
        event_rollup::Entity::find().all(&t.db).await.unwrap().into_iter().map(|r| r.reason).collect();
    assert_eq!(left, ["recent"]);

    // Eleven days later even the long endpoint's row is past retention.
    let report = purge::run(&t.db, now + 6 * DAY_MS, purge::DEFAULT_BATCH).await.unwrap();
    assert!(report.partitions_dropped >= 1);
    assert!(!partitions::days(&t.db, "delivery_log").await.unwrap().contains(&day_of(five_ago)));
    assert_eq!(delivery_log::Entity::find().count(&t.db).await.unwrap(), 0);
    t.close().await;
}

const MIGRATION: &str = "m20261206_000100_partitioned_logs";

/// Every row of each converted table, in a stable text form.
async fn contents(db: &DatabaseConnection) -> Vec<(String, i64, String)> {
    let mut out = Vec::new();
    for table in [
        "delivery_log",
        "event_rollups",
        "event_rollups_hourly",
        "key_use_rollups",
        "key_failure_rollups",
        "gauge_samples",
    ] {
        let n = scalar_i64(db, &format!("SELECT COUNT(*) FROM {table}")).await;
        let digest = scalar_text(
            db,
            &format!("SELECT COALESCE(md5(string_agg(r::text, '|' ORDER BY r::text)), '') FROM {table} r"),
        )
        .await;
        out.push((table.to_owned(), n, digest));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_migration_converts_existing_tables_keeping_every_row() {
    let Some((url, cleanup)) = fresh_postgres().await else { return };
    let conn = db::connect(&url).await.unwrap();
    let before = Migrator::migrations().iter().position(|m| m.name() == MIGRATION).expect("the migration is listed");
    Migrator::up(&conn, Some(before as u32)).await.unwrap();
    let now = clock::now_ms();
    // Rows a year old, last week's and today's, in every table.
    let times = [now - 400 * DAY_MS, now - 7 * DAY_MS, now];
    for (i, at) in times.iter().enumerate() {
        let (minute, hour) = (at / 60_000, at / 3_600_000);
        for sql in [
            format!(
                "INSERT INTO delivery_log (id, tenant_id, endpoint_id, event_id, answered_at, status, answer, key_id, \
                 scheme, message_digest) VALUES ('d{i}', 't1', 'e1', 'evt-{i}', {at}, 200, 'applied', NULL, \
                 'standard-webhooks', 'digest{i}')"
            ),
            format!(
                "INSERT INTO event_rollups (minute, tenant_id, endpoint_id, outcome, reason, count) \
                 VALUES ({minute}, 't1', 'e1', 'applied', '', {i})"
            ),
            format!(
                "INSERT INTO event_rollups_hourly (hour, tenant_id, endpoint_id, outcome, reason, count) \
                 VALUES ({hour}, 't1', 'e1', 'applied', '', {i})"
            ),
            format!(
                "INSERT INTO key_use_rollups (hour, key_id, tenant_id, endpoint_id, count) \
                 VALUES ({hour}, 'k1', 't1', 'e1', {i})"
            ),
            format!(
                "INSERT INTO key_failure_rollups (hour, key_id, tenant_id, endpoint_id, reason, count) \
                 VALUES ({hour}, 'k1', 't1', 'e1', 'mismatch', {i})"
            ),
            format!(
                "INSERT INTO gauge_samples (unit, bucket, tenant_id, name, value) \
                 VALUES ('minute', {minute}, '', 'outbox_pending', {i}), ('hour', {hour}, 't1', 'outbox_pending', {i})"
            ),
        ] {
            conn.execute_unprepared(&sql).await.unwrap();
        }
    }
    let kept = contents(&conn).await;
    assert!(kept.iter().all(|(_, n, _)| *n >= 3), "{kept:?}");

    Migrator::up(&conn, Some(1)).await.unwrap();
    assert_eq!(contents(&conn).await, kept, "every row kept, unchanged");
    for table in ["delivery_log", "event_rollups", "gauge_samples", "gauge_samples_minute", "key_use_rollups"] {
        let kind =
            scalar_text(&conn, &format!("SELECT relkind::text FROM pg_class WHERE oid = '{table}'::regclass")).await;
        assert_eq!(kind, "p", "{table} is partitioned");
    }
    // Every table this migration converts (`event_bodies` and
    // `replay_records` come later).
    for t in PARTITIONED.iter().filter(|t| !["event_bodies", "replay_records"].contains(&t.table)) {
        let days = partitions::days(&conn, t.table).await.unwrap();
        let today = day_of(now);
        assert!((today..=today + AHEAD_DAYS).all(|d| days.contains(&d)), "{}: {days:?}", t.table);
    }
    let log_days = partitions::days(&conn, "delivery_log").await.unwrap();
    assert!(log_days.contains(&day_of(times[0])), "the year-old row's day has its partition");
    // Every key holds the tenant and the partition column; the other
    // indexes came across.
    for (table, key) in [
        ("delivery_log", "tenant_id, id, answered_at"),
        ("key_use_rollups", "hour, tenant_id, key_id"),
        ("key_failure_rollups", "hour, tenant_id, key_id, reason"),
        ("gauge_samples", "unit, tenant_id, bucket, name"),
    ] {
        let def = scalar_text(
            &conn,
            &format!(
                "SELECT pg_get_constraintdef(oid) FROM pg_constraint \
                 WHERE conrelid = '{table}'::regclass AND contype = 'p'"
            ),
        )
        .await;
        assert_eq!(def, format!("PRIMARY KEY ({key})"));
    }
    for index in ["idx_delivery_log_event", "idx_delivery_log_age", "ix_rollups_tenant", "ix_rollups_hourly_tenant"] {
        let n = scalar_i64(&conn, &format!("SELECT COUNT(*) FROM pg_class WHERE relname = '{index}'")).await;
        assert_eq!(n, 1, "{index}");
    }
    // Writes go on as before, and a duplicate is still one row.
    conn.execute_unprepared(&format!(
        "INSERT INTO key_use_rollups (hour, key_id, tenant_id, endpoint_id, count) VALUES ({}, 'k1', 't1', 'e1', 1) \
         ON CONFLICT (hour, tenant_id, key_id) DO UPDATE SET count = key_use_rollups.count + 1",
        now / 3_600_000
    ))
    .await
    .unwrap();
    assert_eq!(scalar_i64(&conn, "SELECT COUNT(*) FROM key_use_rollups").await, 3);

    // And back: the same rows in plain tables.
    Migrator::down(&conn, Some(1)).await.unwrap();
    let kind = scalar_text(&conn, "SELECT relkind::text FROM pg_class WHERE oid = 'delivery_log'::regclass").await;
    assert_eq!(kind, "r");
    assert_eq!(contents(&conn).await[0], kept[0], "the delivery log kept on the way down");
    conn.close().await.ok();
    drop_database(cleanup).await;
}
