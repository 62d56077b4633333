//! Quarantined updates for bulk releases to act on, and what their tests
//! read back: shared by the bulk-release and the job-resume tests.

use domain::{
    auth::users::{self, NewUser},
    crypto::Password,
    entity::{audit_entry, bulk_release as job, bulk_release_item as item},
    receiver::Outcome,
};
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, sea_query::Expr};
use serde_json::json;
use views::{quarantine::QuarantineFilter, roles::Role, scheme::Scheme};

use crate::{
    fixtures::admin,
    receiver::{Setup, created, deliver, now_s, setup, signed},
    support::TestDb,
};

/// clinic-a with `n` quarantined updates (`upd-0`…) whose reminders have
/// since arrived, so a bulk release can apply every one.
pub(crate) async fn releasable(t: &TestDb, n: usize) -> Setup {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    quarantine_updates(&s, n).await;
    create_reminders(&s, 0..n).await;
    s
}

pub(crate) async fn send(s: &Setup, body: &[u8], msg: &str) -> Outcome {
    deliver(s, &signed(s, Scheme::StandardWebhooks, body, now_s(), msg), body).await
}

/// `n` reminder updates that arrive before their reminders: quarantined
/// `reminder_not_found`, event ids `upd-0`…
pub(crate) async fn quarantine_updates(s: &Setup, n: usize) {
    for i in 0..n {
        let body = json!({"type": "reminder.scheduled", "data": {"reminder_id": format!("r-{i}")}}).to_string();
        assert!(matches!(send(s, body.as_bytes(), &format!("upd-{i}")).await, Outcome::Quarantined { .. }));
    }
}

/// The missing reminders arrive, so those updates can apply.
pub(crate) async fn create_reminders(s: &Setup, ids: std::ops::Range<usize>) {
    for i in ids {
        assert!(matches!(send(s, &created(&format!("r-{i}")), &format!("new-{i}")).await, Outcome::Applied { .. }));
    }
}

pub(crate) fn not_found_filter() -> QuarantineFilter {
    QuarantineFilter {
        tenant: Some("clinic-a".into()),
        reason: Some("reminder_not_found".into()),
        ..Default::default()
    }
}

pub(crate) async fn audit_count(t: &TestDb, action: &str) -> u64 {
    audit_entry::Entity::find().filter(audit_entry::Column::Action.eq(action)).count(&t.db).await.unwrap()
}

/// A real on-call user: spawned runners re-read their principal from the
/// database each round.
pub(crate) async fn stored_oncall(t: &TestDb, name: &str) -> domain::auth::Principal {
    let u = users::create(
        &t.db,
        &admin(),
        NewUser {
            username: name.into(),
            role: Role::Oncall,
            tenant: None,
            password: Password::new("a long enough password".into()),
        },
    )
    .await
    .unwrap();
    domain::auth::Principal {
        actor: domain::auth::Actor::User { id: u.id, username: u.username },
        role: Role::Oncall,
        tenant_id: None,
    }
}

/// How many of the job's entries no runner has handled yet.
pub(crate) async fn pending_items(t: &TestDb, job_id: &str) -> u64 {
    item::Entity::find()
        .filter(item::Column::JobId.eq(job_id))
        .filter(item::Column::Outcome.is_null())
        .count(&t.db)
        .await
        .unwrap()
}

/// The job's runner "dies": its heartbeat is older than `stale_ms`.
pub(crate) async fn silence_bulk(t: &TestDb, job_id: &str, stale_ms: i64) {
    job::Entity::update_many()
        .col_expr(job::Column::UpdatedAt, Expr::value(domain::clock::now_ms() - stale_ms - 1_000))
        .filter(job::Column::Id.eq(job_id))
        .exec(&t.db)
        .await
        .unwrap();
}
