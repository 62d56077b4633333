//! Replay records by day of their signed timestamp (issue 28 item 1,
//! m20261207_000230): every copy of a signed message names the same day, so
//! a replay meets its record however late it comes; on PostgreSQL a day goes
//! whole once nothing signed in it can pass the timestamp gate; records of
//! schemes that sign no timestamp, and those from before the upgrade, keep
//! `signed_at = 0` and go by expiry.

use domain::{
    clock,
    entity::{endpoint, replay_record},
    receiver::{Outcome, Refusal},
    registry::endpoints,
    retention::{
        self, DAY_SECS, RetentionChange,
        partitions::{self, DAY_MS, REPLAY_DAY_KEPT_MS},
        purge,
    },
};
use migrations::{Migrator, MigratorTrait};
use sea_orm::{ConnectionTrait, EntityTrait, PaginatorTrait, Set, Statement};
use views::scheme::Scheme;

use crate::{
    db_test,
    fixtures::admin,
    receiver::{created, deliver, now_s, setup, signed},
    support::TestDb,
};

const MIGRATION: &str = "m20261207_000230_partitioned_replay";

/// The partition holding the record of `digest` (PostgreSQL).
async fn partition_of(t: &TestDb, digest: &str) -> String {
    let sql = "SELECT tableoid::regclass::text AS part FROM replay_records WHERE message_digest = $1";
    let stmt = Statement::from_sql_and_values(t.db.get_database_backend(), sql, [digest.into()]);
    t.db.query_one_raw(stmt).await.unwrap().unwrap().try_get::<String>("", "part").unwrap()
}

async fn records(t: &TestDb) -> Vec<replay_record::Model> {
    replay_record::Entity::find().all(&t.db).await.unwrap()
}

db_test!(a_signed_message_is_filed_under_its_signed_time_and_its_replay_refused, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    let body = created("r-1");
    let ts = now_s() - 250;
    let h = signed(&s, Scheme::StandardWebhooks, &body, ts, "m1");
    assert!(matches!(deliver(&s, &h, &body).await, Outcome::Applied { .. }));
    let rec = records(t).await.pop().expect("a replay record");
    assert_eq!(rec.signed_at, ts * 1000, "the signed timestamp, which the digest covers, not the arrival");
    if t.is_postgres() {
        let day = partitions::partition_name("replay_records", partitions::day_of(ts * 1000));
        assert_eq!(partition_of(t, &rec.message_digest).await, day);
    }
    assert_eq!(deliver(&s, &h, &body).await, Outcome::Refused(Refusal::Replay));
    assert_eq!(records(t).await.len(), 1);
});

db_test!(a_body_signed_without_a_timestamp_is_kept_by_expiry, async |t: &TestDb| {
    let s = setup(t, Scheme::Github, None).await;
    let body = created("r-1");
    let h = signed(&s, Scheme::Github, &body, now_s(), "gh-1");
    assert!(matches!(deliver(&s, &h, &body).await, Outcome::Applied { .. }));
    let rec = records(t).await.pop().expect("a replay record");
    assert_eq!(rec.signed_at, 0, "GitHub signs no timestamp");
    assert!(rec.expires_at > clock::now_ms() + 86_400_000, "kept for the dedup retention");
    if t.is_postgres() {
        assert_eq!(partition_of(t, &rec.message_digest).await, "replay_records_unsigned");
    }
    // The same signed body under another delivery id is a replay.
    let again = signed(&s, Scheme::Github, &body, now_s(), "gh-2");
    assert_eq!(deliver(&s, &again, &body).await, Outcome::Refused(Refusal::Replay));
});

db_test!(a_longer_retention_extends_the_records_of_bodies_signed_alone, async |t: &TestDb| {
    // GitHub: a longer dedup retention keeps its body records longer.
    let s = setup(t, Scheme::Github, None).await;
    let body = created("r-1");
    assert!(matches!(
        deliver(&s, &signed(&s, Scheme::Github, &body, now_s(), "gh-1"), &body).await,
        Outcome::Applied { .. }
    ));
    let before = records(t).await.pop().unwrap().expires_at;
    let longer = RetentionChange {
        dedup_secs: Some(400 * DAY_SECS),
        body_secs: None,
        reason: "a longer window".into(),
        accept_risk: true,
    };
    retention::set(&t.db, &admin(), &"clinic-a".parse().unwrap(), &"hooks".parse().unwrap(), &longer).await.unwrap();
    assert!(records(t).await.pop().unwrap().expires_at > before, "extended with the retention");
});

db_test!(a_wider_tolerance_leaves_the_signed_days_to_their_drop, async |t: &TestDb| {
    // A wider tolerance extends a signed record's expiry on SQLite, which
    // deletes by it; on PostgreSQL its day goes whole and it is left as is.
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    let body = created("r-2");
    let h = signed(&s, Scheme::StandardWebhooks, &body, now_s(), "m2");
    assert!(matches!(deliver(&s, &h, &body).await, Outcome::Applied { .. }));
    let before = records(t).await.pop().unwrap().expires_at;
    let patch = endpoints::EndpointPatch { tolerance_secs: Some(900), ..Default::default() };
    endpoints::update(&t.db, &admin(), &"clinic-a".parse().unwrap(), &"hooks".parse().unwrap(), patch).await.unwrap();
    let after = records(t).await.pop().unwrap().expires_at;
    if t.is_postgres() {
        assert_eq!(after, before, "kept by its day");
    } else {
        assert_eq!(after, before + 2 * 600 * 1000, "twice the widening");
    }
});

db_test!(a_message_recorded_before_the_upgrade_is_still_refused_after_it, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    let body = created("r-1");
    let h = signed(&s, Scheme::StandardWebhooks, &body, now_s() - 10, "m1");
    assert!(matches!(deliver(&s, &h, &body).await, Outcome::Applied { .. }));

    // Back before the migration: the record no longer knows its signed time.
    let names: Vec<String> = Migrator::migrations().iter().map(|m| m.name().to_owned()).collect();
    let pos = names.iter().position(|n| n == MIGRATION).expect("the migration is listed");
    Migrator::down(&t.db, Some((names.len() - pos) as u32)).await.unwrap();
    let stmt = Statement::from_string(t.db.get_database_backend(), "SELECT COUNT(*) AS n FROM replay_records");
    let held = t.db.query_one_raw(stmt).await.unwrap().unwrap().try_get::<i64>("", "n").unwrap();
    assert_eq!(held, 1, "the record went back with the key it had");
    Migrator::up(&t.db, None).await.unwrap();

    let rec = records(t).await.pop().expect("the record came through");
    assert_eq!(rec.signed_at, 0, "copied without a signed time");
    let ep = endpoint::Entity::find().one(&t.db).await.unwrap().unwrap();
    let from = ep.replay_partitioned_from.expect("set by the upgrade");
    assert!(from >= now_s() + 7_000, "two hours on: {from}");
    let s = s.reloaded(t);
    assert_eq!(deliver(&s, &h, &body).await, Outcome::Refused(Refusal::Replay), "its old record still refuses it");

    // Signed since, but before the endpoint's records are filed by day: kept
    // as the old ones were, and refused again.
    let body2 = created("r-2");
    let h2 = signed(&s, Scheme::StandardWebhooks, &body2, now_s(), "m2");
    assert!(matches!(deliver(&s, &h2, &body2).await, Outcome::Applied { .. }));
    assert_eq!(deliver(&s, &h2, &body2).await, Outcome::Refused(Refusal::Replay));
    assert!(records(t).await.iter().all(|r| r.signed_at == 0));

    // Once nothing signed before that time can pass the gate (simulated by
    // moving the time back), a new message is filed under its own time.
    endpoint::Entity::update(endpoint::ActiveModel {
        id: Set(ep.id.clone()),
        replay_partitioned_from: Set(Some(now_s() - 60)),
        ..Default::default()
    })
    .exec(&t.db)
    .await
    .unwrap();
    let s = s.reloaded(t);
    let body3 = created("r-3");
    let ts3 = now_s();
    let h3 = signed(&s, Scheme::StandardWebhooks, &body3, ts3, "m3");
    assert!(matches!(deliver(&s, &h3, &body3).await, Outcome::Applied { .. }));
    assert_eq!(deliver(&s, &h3, &body3).await, Outcome::Refused(Refusal::Replay));
    assert!(records(t).await.iter().any(|r| r.signed_at == ts3 * 1000));
});

/// A record as the receiver files it.
async fn record(t: &TestDb, tenant_id: &str, endpoint_id: &str, digest: &str, signed_at: i64, expires_at: i64) {
    replay_record::Entity::insert(replay_record::ActiveModel {
        tenant_id: Set(tenant_id.into()),
        endpoint_id: Set(endpoint_id.into()),
        message_digest: Set(digest.into()),
        signed_at: Set(signed_at),
        expires_at: Set(expires_at),
    })
    .exec_without_returning(&t.db)
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_day_of_replay_records_goes_once_nothing_signed_in_it_can_pass_the_gate() {
    let Some(t) = TestDb::postgres().await else { return };
    let t = &t;
    setup(t, Scheme::StandardWebhooks, None).await;
    let ep = endpoint::Entity::find().one(&t.db).await.unwrap().unwrap();
    let (tid, eid) = (ep.tenant_id.as_str(), ep.id.as_str());
    let day = partitions::day_of(clock::now_ms()) - 2;
    partitions::cover(&t.db, day * DAY_MS, day * DAY_MS).await.unwrap();
    let end = (day + 1) * DAY_MS;
    // Signed a second before the day ended; its expiry (a wider window kept
    // it longer) does not hold the day: the gate refuses it anyway.
    record(t, tid, eid, "signed", end - 1_000, end + 10 * DAY_MS).await;
    record(t, tid, eid, "unsigned-expired", 0, end).await;
    record(t, tid, eid, "unsigned-live", 0, end + 10 * DAY_MS).await;

    let r = purge::run(&t.db, end + REPLAY_DAY_KEPT_MS - 1, purge::DEFAULT_BATCH).await.unwrap();
    assert!(partitions::days(&t.db, "replay_records").await.unwrap().contains(&day), "a message of it could pass");
    assert_eq!(r.replay_deleted, 1, "the expired unsigned record, row by row");
    assert_eq!(records(t).await.len(), 2);

    let r = purge::run(&t.db, end + REPLAY_DAY_KEPT_MS, purge::DEFAULT_BATCH).await.unwrap();
    assert!(!partitions::days(&t.db, "replay_records").await.unwrap().contains(&day), "dropped whole");
    assert!(r.partitions_dropped >= 1);
    assert_eq!(r.replay_deleted, 0, "nothing signed is deleted row by row");
    let left: Vec<String> = records(t).await.into_iter().map(|r| r.message_digest).collect();
    assert_eq!(left, vec!["unsigned-live".to_owned()], "the unsigned partition is never dropped");
    assert_eq!(replay_record::Entity::find().count(&t.db).await.unwrap(), 1);
    t.db.execute_unprepared("SELECT 1 FROM replay_records_unsigned").await.unwrap();
}
