//! Every finding kind has a test that makes it appear and then disappear,
//! through the real paths (a drill run, a key's age, the retry policy), read
//! by `bundle::collect` on both engines. Kinds covered elsewhere:
//! `constraint_missing` and `drill_failed` (evidence.rs),
//! `audit_chain_broken` (audit_chain.rs), `retention_below_horizon`
//! (retention.rs), `kek_seal_count_high` (kek.rs), `cohort_breach`
//! (cohort_check.rs).

use domain::{
    clock,
    entity::{drill_run, signing_key},
    evidence::{bundle, runs},
    receiver::faults::DrillFaults,
    registry::keys,
    retry_policy,
};
use sea_orm::{EntityTrait, sea_query::Expr};
use views::retry_policy::RetryPolicy;

use crate::{
    db_test,
    evidence::{InProcess, Unreachable},
    fixtures::*,
    support::TestDb,
};

const DAY_MS: i64 = 86_400_000;

/// The (severity, subject) of each finding with this id in a fresh read.
async fn found(t: &TestDb, id: &str) -> Vec<(String, String)> {
    let e = bundle::collect(&t.db, &t.vault, &reviewer(), None).await.unwrap();
    e.findings.into_iter().filter(|f| f.id == id).map(|f| (f.severity, f.subject)).collect()
}

db_test!(drills_missing_appears_until_a_run_finishes, async |t: &TestDb| {
    active_key(t).await;
    assert_eq!(found(t, "drills_missing").await, [("warning".to_owned(), "drills".to_owned())]);
    runs::run(&t.db, &t.vault, &reviewer(), &Unreachable(DrillFaults::default())).await.unwrap();
    assert_eq!(found(t, "drills_missing").await, []);
});

db_test!(drills_stale_appears_when_the_run_ages_and_clears_with_a_new_run, async |t: &TestDb| {
    active_key(t).await;
    let transport = Unreachable(DrillFaults::default());
    runs::run(&t.db, &t.vault, &reviewer(), &transport).await.unwrap();
    assert_eq!(found(t, "drills_stale").await, []);
    let aged = clock::now_ms() - (bundle::DRILL_STALE_DAYS + 1) * DAY_MS;
    drill_run::Entity::update_many()
        .col_expr(drill_run::Column::StartedAt, Expr::value(aged))
        .exec(&t.db)
        .await
        .unwrap();
    let stale = found(t, "drills_stale").await;
    assert_eq!(stale.len(), 1, "{stale:?}");
    assert_eq!(stale[0].0, "warning");
    runs::run(&t.db, &t.vault, &reviewer(), &transport).await.unwrap();
    assert_eq!(found(t, "drills_stale").await, []);
});

db_test!(key_past_rotation_age_appears_for_an_old_live_key_and_clears_when_revoked, async |t: &TestDb| {
    let k = active_key(t).await;
    assert_eq!(found(t, "key_past_rotation_age").await, []);
    let old = clock::now_ms() - (bundle::MAX_KEY_AGE_DAYS + 1) * DAY_MS;
    signing_key::Entity::update_many()
        .col_expr(signing_key::Column::CreatedAt, Expr::value(old))
        .exec(&t.db)
        .await
        .unwrap();
    assert_eq!(found(t, "key_past_rotation_age").await, [("warning".to_owned(), k.key.key_id.to_string())]);
    keys::revoke(&t.db, &admin(), &k.key.key_id, "past its rotation age").await.unwrap();
    assert_eq!(found(t, "key_past_rotation_age").await, []);
});

db_test!(retries_without_drill_appears_when_enabled_and_clears_after_a_passing_run, async |t: &TestDb| {
    active_key(t).await;
    assert_eq!(found(t, "retries_without_drill").await, []);
    // The rollout gate needs a passing run before enabling; this one ran an
    // hour before, so none has passed since the enabling.
    record_passing_drill(t).await;
    let hour_ago = clock::now_ms() - 3_600_000;
    drill_run::Entity::update_many()
        .col_expr(drill_run::Column::StartedAt, Expr::value(hour_ago))
        .col_expr(drill_run::Column::FinishedAt, Expr::value(hour_ago))
        .exec(&t.db)
        .await
        .unwrap();
    approve_current_bundle(t).await;
    retry_policy::set(&t.db, &gate(t), &admin(), &"clinic-a".parse().unwrap(), RetryPolicy::Enabled, "cohort 1")
        .await
        .unwrap();
    assert_eq!(found(t, "retries_without_drill").await, [("warning".to_owned(), "clinic-a".to_owned())]);
    // A failing run does not count; a passing one does.
    runs::run(&t.db, &t.vault, &reviewer(), &Unreachable(DrillFaults::default())).await.unwrap();
    assert_eq!(found(t, "retries_without_drill").await.len(), 1);
    let run = runs::run(&t.db, &t.vault, &reviewer(), &InProcess::new(t)).await.unwrap();
    assert_eq!(run.passed, Some(true));
    assert_eq!(found(t, "retries_without_drill").await, []);
});

db_test!(audit_chain_broken_appears_for_an_edited_entry_and_clears_when_restored, async |t: &TestDb| {
    use domain::entity::audit_entry;
    use sea_orm::{ColumnTrait, ConnectionTrait, QueryFilter, QueryOrder};
    active_key(t).await;
    assert_eq!(found(t, "audit_chain_broken").await, []);
    let first = audit_entry::Entity::find().order_by_asc(audit_entry::Column::Seq).one(&t.db).await.unwrap().unwrap();
    let bypass = if t.is_postgres() {
        "ALTER TABLE audit_log DISABLE TRIGGER USER"
    } else {
        "DROP TRIGGER audit_log_no_update; DROP TRIGGER audit_log_no_delete"
    };
    t.db.execute_unprepared(bypass).await.unwrap();
    let set_after = |after: Option<String>| {
        audit_entry::Entity::update_many()
            .col_expr(audit_entry::Column::After, Expr::value(after))
            .filter(audit_entry::Column::Seq.eq(first.seq))
            .exec(&t.db)
    };
    // Each read starts from the beginning of the chain, not the mark.
    let forget_mark = || t.db.execute_unprepared("DELETE FROM audit_verified");
    set_after(Some(r#"{"edited":true}"#.into())).await.unwrap();
    forget_mark().await.unwrap();
    assert_eq!(found(t, "audit_chain_broken").await, [("critical".to_owned(), "audit".to_owned())]);
    set_after(first.after.clone()).await.unwrap();
    forget_mark().await.unwrap();
    assert_eq!(found(t, "audit_chain_broken").await, []);
});

db_test!(rollout_override_appears_after_an_approval_until_drills_and_a_signoff_postdate_it, async |t: &TestDb| {
    use crate::break_glass::{request, second_admin};
    use domain::break_glass;
    // Sleeps around the approval keep "before" and "after" it strict.
    let pause = || tokio::time::sleep(std::time::Duration::from_millis(5));
    let approve = async |slug: &str| {
        let req = request(t, slug).await;
        assert_eq!(found(t, "rollout_override").await, [], "a pending request is not an override yet");
        pause().await;
        break_glass::approve(&t.db, &second_admin(), &slug.parse().unwrap(), &req.id, None, "").await.unwrap();
        pause().await;
    };
    active_key(t).await;
    approve("clinic-a").await;
    assert_eq!(found(t, "rollout_override").await, [("critical".to_owned(), "clinic-a".to_owned())]);
    // A sign-off alone does not clear it; the drills after it do.
    approve_current_bundle(t).await;
    assert_eq!(found(t, "rollout_override").await.len(), 1);
    record_passing_drill(t).await;
    assert_eq!(found(t, "rollout_override").await, []);

    // A tenant whose key no approved bundle holds: refused again, overridden.
    tenant(t, "clinic-b").await;
    endpoint(t, "clinic-b", "hooks", None).await;
    keys::provision(
        &t.db,
        &t.vault,
        &admin(),
        &"clinic-b".parse().unwrap(),
        &"hooks".parse().unwrap(),
        keys::ProvisionRequest::default(),
        keys::Approval::ApproveAs { reviewer: "rev".into(), comment: "ok".into() },
    )
    .await
    .unwrap();
    approve("clinic-b").await;
    assert_eq!(found(t, "rollout_override").await, [("critical".to_owned(), "clinic-b".to_owned())]);
    // The drills alone do not clear it; the sign-off after it does.
    record_passing_drill(t).await;
    assert_eq!(found(t, "rollout_override").await.len(), 1);
    approve_current_bundle(t).await;
    assert_eq!(found(t, "rollout_override").await, []);
});
