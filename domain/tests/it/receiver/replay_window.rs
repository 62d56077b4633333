//! Replay records follow the endpoint's tolerance when it is raised.

use domain::{
    clock,
    receiver::{Outcome, Refusal},
    registry::endpoints,
};
use sea_orm::{EntityTrait, PaginatorTrait};
use views::scheme::Scheme;

use super::{created, deliver, now_s, setup, signed};
use crate::{db_test, fixtures::*, support::TestDb};

async fn set_tolerance(t: &TestDb, secs: i64) {
    let patch = endpoints::EndpointPatch { tolerance_secs: Some(secs), ..Default::default() };
    endpoints::update(&t.db, &admin(), &"clinic-a".parse().unwrap(), &"hooks".parse().unwrap(), patch).await.unwrap();
}

db_test!(raising_the_tolerance_keeps_replay_records_for_the_wider_window, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    let body = created("r-1");
    let h = signed(&s, Scheme::StandardWebhooks, &body, now_s() - 250, "m1");
    assert!(matches!(deliver(&s, &h, &body).await, Outcome::Applied { .. }));
    set_tolerance(t, 900).await;
    // 700 s on, the record a 300 s window needed (600 s) would be purged; the
    // message is still inside the new 900 s window, so the record must not be.
    domain::retention::purge::run(&t.db, clock::now_ms() + 700_000, 100).await.unwrap();
    let s = s.reloaded(t);
    assert_eq!(deliver(&s, &h, &body).await, Outcome::Refused(Refusal::Replay));
});

db_test!(a_message_that_left_the_old_window_stays_out_after_a_raise, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    set_tolerance(t, 5).await;
    let s = s.reloaded(t);
    let body = created("r-1");
    let h = signed(&s, Scheme::StandardWebhooks, &body, now_s() - 3, "m1");
    assert!(matches!(deliver(&s, &h, &body).await, Outcome::Applied { .. }));
    // Its record expires (10 s) and is purged (on PostgreSQL it stays until
    // its day is dropped); the message leaves the window.
    domain::retention::purge::run(&t.db, clock::now_ms() + 20_000, 100).await.unwrap();
    let held = if t.is_postgres() { 1 } else { 0 };
    assert_eq!(domain::entity::replay_record::Entity::find().count(&t.db).await.unwrap(), held);
    tokio::time::sleep(std::time::Duration::from_millis(3100)).await;
    set_tolerance(t, 300).await;
    let s = s.reloaded(t);
    assert_eq!(deliver(&s, &h, &body).await, Outcome::Refused(Refusal::TimestampStale));
    // A message signed since is inside the new window.
    let fresh = signed(&s, Scheme::StandardWebhooks, &body, now_s(), "m2");
    assert!(matches!(deliver(&s, &fresh, &body).await, Outcome::Applied { .. } | Outcome::Quarantined { .. }));
});
