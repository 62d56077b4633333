//! Sealed bodies in `event_bodies` (issue 28 item 1): one per claim, inserted
//! with it on both claim paths; the migration moves existing bodies out of
//! the claims and back; on PostgreSQL a day of bodies goes as one partition
//! drop once past the longest body retention, the bodies of open quarantine
//! entries are carried forward first, and shorter retentions still delete
//! their own bodies at their time.

use domain::{
    bodies, clock,
    crypto::Aad,
    entity::{event_body, inbox_claim, quarantine_entry},
    receiver::Outcome,
    retention::{self, DAY_SECS, HOUR_SECS, RetentionChange, partitions, purge},
};
use migrations::{Migrator, MigratorTrait, partitioning::DAY_MS};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, Set, Statement};
use views::{
    quarantine::{QuarantineReason, QuarantineStatus},
    scheme::Scheme,
};

use crate::{
    db_test,
    fixtures::*,
    receiver::{created, deliver, now_s, setup, signed},
    support::TestDb,
};

const MIGRATION: &str = "m20261207_000220_event_bodies";

async fn count(t: &TestDb, sql: &str) -> i64 {
    let row = t.db.query_one_raw(Statement::from_string(t.db.get_database_backend(), sql)).await.unwrap().unwrap();
    row.try_get_by_index::<i64>(0).unwrap()
}

db_test!(every_claim_has_its_body_sealed_beside_it, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    // Sixteen at once take the batch path; one alone the single path.
    let mut tasks = Vec::new();
    let shared = std::sync::Arc::new(s);
    // Signed a second apart from the redelivery below: a retry, never a
    // replay of the same signed message.
    let at = now_s();
    for i in 0..16 {
        let s = shared.clone();
        tasks.push(tokio::spawn(async move {
            let body = created(&format!("r-{i}"));
            let id = format!("evt-{i}");
            deliver(&s, &signed(&s, Scheme::StandardWebhooks, &body, at, &id), &body).await
        }));
    }
    for task in tasks {
        assert!(matches!(task.await.unwrap(), Outcome::Applied { .. }));
    }
    for claim in inbox_claim::Entity::find().all(&t.db).await.unwrap() {
        let body = bodies::of(&t.db, &claim).await.unwrap().expect("a body");
        assert_eq!((body.received_at, body.filed_at), (claim.received_at, claim.received_at));
        let aad = Aad::event_body(&claim.tenant_id, &claim.endpoint_id, &claim.event_id);
        let opened = t.vault.open(&t.db, &aad, &body.body_ciphertext).await.unwrap();
        let i = claim.event_id.strip_prefix("evt-").unwrap();
        assert_eq!(&opened[..], &created(&format!("r-{i}"))[..], "its own body, under its own AAD");
    }
    assert_eq!(event_body::Entity::find().count(&t.db).await.unwrap(), 16);
    // A duplicate stores nothing more.
    let body = created("r-3");
    let again = deliver(&shared, &signed(&shared, Scheme::StandardWebhooks, &body, at - 1, "evt-3"), &body).await;
    assert!(matches!(again, Outcome::Duplicate { .. }), "{again:?}");
    assert_eq!(event_body::Entity::find().count(&t.db).await.unwrap(), 16);
});

db_test!(the_migration_moves_the_bodies_out_of_the_claims_and_back, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    let at = now_s();
    for i in 0..3 {
        let body = created(&format!("r-{i}"));
        let id = format!("evt-{i}");
        deliver(&s, &signed(&s, Scheme::StandardWebhooks, &body, at, &id), &body).await;
    }
    let before: Vec<(String, Vec<u8>, i32)> = event_body::Entity::find()
        .all(&t.db)
        .await
        .unwrap()
        .into_iter()
        .map(|b| (b.event_id, b.body_ciphertext, b.kek_version))
        .collect();
    assert_eq!(before.len(), 3);
    let names: Vec<String> = Migrator::migrations().iter().map(|m| m.name().to_owned()).collect();
    let pos = names.iter().position(|n| n == MIGRATION).expect("the migration is listed");
    Migrator::down(&t.db, Some((names.len() - pos) as u32)).await.unwrap();
    assert_eq!(count(t, "SELECT COUNT(*) FROM inbox_claims WHERE body_ciphertext IS NOT NULL").await, 3);
    // A claim whose body retention already cleared it stays without one.
    t.db.execute_unprepared(
        "UPDATE inbox_claims SET body_ciphertext = NULL, kek_version = NULL WHERE event_id = 'evt-2'",
    )
    .await
    .unwrap();

    // One received five days ago: its day gets a partition of its own.
    let five_days_ago = clock::now_ms() - 5 * DAY_MS;
    t.db.execute_unprepared(&format!("UPDATE inbox_claims SET received_at = {five_days_ago} WHERE event_id = 'evt-1'"))
        .await
        .unwrap();

    Migrator::up(&t.db, None).await.unwrap();
    let old = event_body::Entity::find().filter(event_body::Column::EventId.eq("evt-1")).one(&t.db).await;
    let old = old.unwrap().expect("the old body moved");
    assert_eq!((old.received_at, old.filed_at), (five_days_ago, five_days_ago), "filed in its claim's day");
    if t.is_postgres() {
        let days = partitions::days(&t.db, "event_bodies").await.unwrap();
        assert!(days.contains(&partitions::day_of(five_days_ago)), "{days:?}");
    }
    let after: Vec<(String, Vec<u8>, i32)> = event_body::Entity::find()
        .all(&t.db)
        .await
        .unwrap()
        .into_iter()
        .map(|b| (b.event_id, b.body_ciphertext, b.kek_version))
        .collect();
    let mut expected = before.clone();
    expected.retain(|(id, ..)| id != "evt-2");
    let mut after_sorted = after;
    after_sorted.sort();
    expected.sort();
    assert_eq!(after_sorted, expected, "every stored body moved, byte for byte");
    let index = "SELECT COUNT(*) FROM pg_indexes WHERE indexname = 'ix_claims_sealed_age'";
    let sqlite_index = "SELECT COUNT(*) FROM sqlite_master WHERE name = 'ix_claims_sealed_age'";
    assert_eq!(count(t, if t.is_postgres() { index } else { sqlite_index }).await, 0);
    // And a moved body still opens and still releases nothing twice: the
    // duplicate of a moved claim is a duplicate.
    let body = created("r-0");
    let again = deliver(&s, &signed(&s, Scheme::StandardWebhooks, &body, at - 1, "evt-0"), &body).await;
    assert!(matches!(again, Outcome::Duplicate { .. }), "{again:?}");
    let claim = inbox_claim::Entity::find().filter(inbox_claim::Column::EventId.eq("evt-0")).one(&t.db).await;
    let stored = bodies::of(&t.db, &claim.unwrap().unwrap()).await.unwrap().unwrap();
    let aad = Aad::event_body(&stored.tenant_id, &stored.endpoint_id, &stored.event_id);
    assert_eq!(&t.vault.open(&t.db, &aad, &stored.body_ciphertext).await.unwrap()[..], &body[..]);
});

/// A claim received at `at` with the body `[n]`, filed in its day.
async fn claim_at(t: &TestDb, tenant_id: &str, endpoint_id: &str, event_id: &str, at: i64, n: u8) {
    stored_claim(t, tenant_id, endpoint_id, event_id, at, vec![n]).await;
}

async fn body(t: &TestDb, event_id: &str) -> Option<Vec<u8>> {
    let claim = inbox_claim::Entity::find().filter(inbox_claim::Column::EventId.eq(event_id)).one(&t.db).await;
    let claim = claim.unwrap().expect("the claim stays");
    bodies::of(&t.db, &claim).await.unwrap().map(|b| b.body_ciphertext)
}

fn keep(body_days: i64) -> RetentionChange {
    RetentionChange {
        dedup_secs: Some(20 * DAY_SECS),
        body_secs: Some(body_days * DAY_SECS),
        reason: "test".into(),
        accept_risk: true,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_day_of_bodies_goes_whole_and_an_open_quarantine_keeps_its_body() {
    let Some(t) = TestDb::postgres().await else { return };
    let t = &t;
    let a = tenant(t, "clinic-a").await;
    endpoint(t, "clinic-a", "long", None).await;
    endpoint(t, "clinic-a", "short", None).await;
    let clinic = "clinic-a".parse().unwrap();
    retention::set(&t.db, &admin(), &clinic, &"long".parse().unwrap(), &keep(3)).await.unwrap();
    retention::set(&t.db, &admin(), &clinic, &"short".parse().unwrap(), &keep(1)).await.unwrap();
    let ids = |slug: &str| format!("SELECT id FROM endpoints WHERE slug = '{slug}'");
    let id_of = async |slug: &str| {
        let row = t.db.query_one_raw(Statement::from_string(t.db.get_database_backend(), ids(slug))).await;
        row.unwrap().unwrap().try_get_by_index::<String>(0).unwrap()
    };
    let (long, short) = (id_of("long").await, id_of("short").await);
    let tid = a.id.as_str();

    let now = clock::now_ms();
    // Noon six days ago: past the longest body retention (3 days) by more
    // than its whole day.
    let old = (partitions::day_of(now) - 6) * DAY_MS + 12 * HOUR_SECS * 1000;
    claim_at(t, tid, &long, "l-old", old, 1).await;
    claim_at(t, tid, &long, "l-held", old, 2).await;
    claim_at(t, tid, &short, "s-old", old, 3).await;
    quarantine_entry::Entity::insert(quarantine_entry::ActiveModel {
        id: Set("q-held".into()),
        tenant_id: Set(tid.into()),
        endpoint_id: Set(long.clone()),
        event_id: Set("l-held".into()),
        reason: Set(QuarantineReason::ReminderNotFound),
        status: Set(QuarantineStatus::Open),
        created_at: Set(old),
        ..Default::default()
    })
    .exec_without_returning(&t.db)
    .await
    .unwrap();
    // A day and a half ago: past the short endpoint's day, inside the
    // long one's three.
    let mid = now - 36 * HOUR_SECS * 1000;
    claim_at(t, tid, &long, "l-mid", mid, 4).await;
    claim_at(t, tid, &short, "s-mid", mid, 5).await;
    // The start of today: inside the short endpoint's day whatever the hour,
    // and in a day that is still open three days from now. (Two hours back
    // fell in yesterday before 02:00 UTC, whose day went whole below.)
    claim_at(t, tid, &short, "s-new", partitions::day_of(now) * DAY_MS, 6).await;

    let r = purge::run(&t.db, now, purge::DEFAULT_BATCH).await.unwrap();
    assert!(!partitions::days(&t.db, "event_bodies").await.unwrap().contains(&partitions::day_of(old)));
    assert_eq!(r.bodies_carried, 1, "the open entry's body, filed again before its day went");
    assert_eq!(r.bodies_cleared, 1, "only s-mid row by row: its day stays for the long endpoint");
    assert_eq!(body(t, "l-old").await, None, "dropped with its day");
    assert_eq!(body(t, "s-old").await, None);
    assert_eq!(body(t, "l-held").await, Some(vec![2]), "carried forward, byte for byte");
    let carried = event_body::Entity::find().filter(event_body::Column::EventId.eq("l-held")).all(&t.db).await;
    let carried = carried.unwrap();
    assert_eq!(carried.len(), 1, "one filing");
    assert_eq!(carried[0].received_at, old, "retention still counts from the claim");
    assert!(carried[0].filed_at >= now - 1000, "filed today");
    assert_eq!(body(t, "s-mid").await, None, "the short retention goes at its own time");
    assert_eq!(body(t, "l-mid").await, Some(vec![4]));
    assert_eq!(body(t, "s-new").await, Some(vec![6]));
    let again = purge::run(&t.db, now, purge::DEFAULT_BATCH).await.unwrap();
    assert_eq!((again.bodies_carried, again.bodies_cleared), (0, 0), "nothing twice");

    // Three days later, across the day boundaries: l-mid's day is past the
    // long retention and goes whole; s-new goes row by row; the held body
    // stays while its entry is open.
    let later = now + 3 * DAY_MS;
    partitions::upkeep(&t.db, later).await.unwrap();
    let r = purge::run(&t.db, later, purge::DEFAULT_BATCH).await.unwrap();
    assert_eq!(body(t, "l-mid").await, None, "dropped with its day");
    assert_eq!(body(t, "s-new").await, None);
    assert_eq!(r.bodies_cleared, 1, "s-new only");
    assert_eq!(body(t, "l-held").await, Some(vec![2]), "still held");

    // Resolved, the held body goes at the next run: it is long past its
    // retention, and no drop of its new day would come soon enough.
    quarantine_entry::Entity::update_many()
        .col_expr(quarantine_entry::Column::Status, sea_orm::sea_query::Expr::value("released"))
        .filter(quarantine_entry::Column::Id.eq("q-held"))
        .exec(&t.db)
        .await
        .unwrap();
    let r = purge::run(&t.db, later, purge::DEFAULT_BATCH).await.unwrap();
    assert_eq!((r.bodies_cleared, r.bodies_carried), (1, 0));
    assert_eq!(body(t, "l-held").await, None);
    assert_eq!(event_body::Entity::find().count(&t.db).await.unwrap(), 0);
}

#[test]
fn only_the_longest_body_retention_waits_for_its_day() {
    const DAY: i64 = DAY_MS;
    // PostgreSQL: the endpoint with the longest retention leaves its bodies
    // to the drop (up to a day late); a shorter one deletes at its time.
    assert_eq!(purge::body_cutoff_ms(true, 7 * DAY, 7 * DAY), 8 * DAY);
    assert_eq!(purge::body_cutoff_ms(true, 2 * DAY, 7 * DAY), 2 * DAY);
    // Under a day there is little to delete: kept exactly.
    assert_eq!(purge::body_cutoff_ms(true, 0, 0), 0);
    assert_eq!(purge::body_cutoff_ms(true, HOUR_SECS * 1000, HOUR_SECS * 1000), HOUR_SECS * 1000);
    // SQLite has no partitions: always exact.
    assert_eq!(purge::body_cutoff_ms(false, 7 * DAY, 7 * DAY), 7 * DAY);
}
