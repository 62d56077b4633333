//! The rollout order as a gate (issue 23 item 3) on both engines: enabling
//! retries needs a drill run that passed on this build within the age limit
//! and an approved bundle covering the tenant's live keys at their current
//! scope; the refusal names what is missing; disabling is never gated; a
//! rollback that would enable retries is gated too.

use domain::{
    entity::drill_run,
    error::DomainError,
    registry::keys::{self, Approval, ProvisionRequest},
    retry_policy,
    rollout::Rollout,
};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, sea_query::Expr};
use views::retry_policy::RetryPolicy;

use crate::{db_test, fixtures::*, support::TestDb};

async fn enable(t: &TestDb, gate: &Rollout<'_>, slug: &str) -> Result<String, String> {
    match retry_policy::set(&t.db, gate, &admin(), &slug.parse().unwrap(), RetryPolicy::Enabled, "cohort 1").await {
        Ok(v) => Ok(v.policy.as_str().to_owned()),
        Err(DomainError::Conflict { code: "rollout_order", message }) => Err(message),
        Err(e) => panic!("unexpected {e:?}"),
    }
}

async fn age_drills(t: &TestDb, days: i64) {
    let at = domain::clock::now_ms() - days * 86_400_000;
    drill_run::Entity::update_many()
        .col_expr(drill_run::Column::FinishedAt, Expr::value(at))
        .col_expr(drill_run::Column::StartedAt, Expr::value(at))
        .filter(drill_run::Column::Status.eq("finished"))
        .exec(&t.db)
        .await
        .unwrap();
}

db_test!(enabling_retries_waits_for_drills_on_this_build_and_an_approved_bundle, async |t: &TestDb| {
    let first = active_key(t).await.key.key_id;
    let refused = enable(t, &gate(t), "clinic-a").await.unwrap_err();
    assert!(refused.contains("no drill run passed on this build"), "{refused}");
    assert!(refused.contains("clinic-a: no approved evidence bundle"), "{refused}");
    // Disabling is the rollback switch: never gated.
    retry_policy::set(&t.db, &gate(t), &admin(), &"clinic-a".parse().unwrap(), RetryPolicy::Disabled, "incident")
        .await
        .unwrap();

    // A passing run on another binary does not count.
    record_passing_drill(t).await;
    drill_run::Entity::update_many()
        .col_expr(drill_run::Column::BinarySha256, Expr::value("0".repeat(64)))
        .exec(&t.db)
        .await
        .unwrap();
    let refused = enable(t, &gate(t), "clinic-a").await.unwrap_err();
    assert!(refused.contains("no drill run passed on this build"), "{refused}");

    // One on this build counts until it is older than the limit.
    record_passing_drill(t).await;
    approve_current_bundle(t).await;
    age_drills(t, 8).await;
    let refused = enable(t, &gate(t), "clinic-a").await.unwrap_err();
    assert!(refused.contains("in the last 7 days"), "{refused}");
    assert!(!refused.contains("approved"), "the bundle covers the key: {refused}");
    let lenient = Rollout { vault: &t.vault, drill_max_age_days: 30 };
    assert_eq!(enable(t, &lenient, "clinic-a").await.unwrap(), "enabled");
    retry_policy::set(&t.db, &gate(t), &admin(), &"clinic-a".parse().unwrap(), RetryPolicy::Disabled, "incident")
        .await
        .unwrap();

    // A key the approved bundle does not hold is named.
    record_passing_drill(t).await;
    let second = keys::provision(
        &t.db,
        &t.vault,
        &admin(),
        &"clinic-a".parse().unwrap(),
        &"reminders".parse().unwrap(),
        ProvisionRequest::default(),
        Approval::ApproveAs { reviewer: "rev".into(), comment: "ok".into() },
    )
    .await
    .unwrap()
    .key
    .key_id;
    let refused = enable(t, &gate(t), "clinic-a").await.unwrap_err();
    assert!(refused.contains("no approved bundle covers its current keys"), "{refused}");
    assert!(refused.contains(second.as_str()) && !refused.contains(first.as_str()), "{refused}");
    assert!(!refused.contains("no drill run"), "{refused}");
    // Nothing was written by the refusals.
    assert_eq!(retry_policy::get(&t.db, &admin(), &"clinic-a".parse().unwrap()).await.unwrap().version, 4);

    // A rollback that would restore `enabled` is an enabling too.
    let back = retry_policy::rollback(&t.db, &gate(t), &admin(), &"clinic-a".parse().unwrap(), "undo").await;
    assert!(matches!(&back, Err(DomainError::Conflict { code: "rollout_order", .. })), "{back:?}");

    approve_current_bundle(t).await;
    assert_eq!(enable(t, &gate(t), "clinic-a").await.unwrap(), "enabled");
    assert_eq!(retry_policy::get(&t.db, &admin(), &"clinic-a".parse().unwrap()).await.unwrap().version, 5);
});

db_test!(a_key_whose_scope_changed_since_the_approval_is_not_covered, async |t: &TestDb| {
    let key = active_key(t).await.key.key_id;
    tenant(t, "clinic-b").await;
    meet_rollout_order(t).await;
    // A cohort is checked as a whole: clinic-b has no key and is covered.
    let n = retry_policy::set_cohort(
        &t.db,
        &gate(t),
        &admin(),
        &["clinic-a".parse().unwrap(), "clinic-b".parse().unwrap()],
        RetryPolicy::Enabled,
        "cohort 1",
    )
    .await
    .unwrap();
    assert_eq!(n, 2);
    retry_policy::set(&t.db, &gate(t), &admin(), &"clinic-a".parse().unwrap(), RetryPolicy::Disabled, "incident")
        .await
        .unwrap();
    // The stored scope hash moves (as a scope change moves it): the approved
    // bundle holds the key under its old scope.
    domain::entity::signing_key::Entity::update_many()
        .col_expr(domain::entity::signing_key::Column::ScopeHash, Expr::value("f".repeat(64)))
        .filter(domain::entity::signing_key::Column::Id.eq(key.as_str()))
        .exec(&t.db)
        .await
        .unwrap();
    let refused = enable(t, &gate(t), "clinic-a").await.unwrap_err();
    assert!(refused.contains(key.as_str()), "{refused}");
    assert!(!refused.contains("clinic-b"), "{refused}");
});

/// Endpoint `slug` of `tenant` signed with `scheme`, and an approved key.
async fn scheme_endpoint(t: &TestDb, tenant: &str, slug: &str, scheme: views::scheme::Scheme) {
    domain::registry::endpoints::create(
        &t.db,
        &admin(),
        &tenant.parse().unwrap(),
        domain::registry::endpoints::NewEndpoint {
            slug: slug.into(),
            scheme,
            event_types: None,
            tolerance_secs: None,
            max_body_bytes: None,
            hmac_profile: None,
        },
    )
    .await
    .unwrap();
    keys::provision(
        &t.db,
        &t.vault,
        &admin(),
        &tenant.parse().unwrap(),
        &slug.parse().unwrap(),
        ProvisionRequest::default(),
        Approval::ApproveAs { reviewer: "rev".into(), comment: "ok".into() },
    )
    .await
    .unwrap();
}

// Runs stored before schemes were recorded signed with standard-webhooks
// only: they count for it and for nothing else. The refusal names each
// scheme no counting run verified, with the endpoints using it.
db_test!(the_gate_names_each_scheme_no_counting_drill_run_verified, async |t: &TestDb| {
    use views::scheme::Scheme;
    active_key(t).await;
    tenant(t, "clinic-b").await;
    scheme_endpoint(t, "clinic-b", "payments", Scheme::Stripe).await;
    scheme_endpoint(t, "clinic-b", "repo", Scheme::Github).await;
    approve_current_bundle(t).await;
    record_drill_covering(t, None).await;
    // clinic-a signs with standard-webhooks only: the old run covers it.
    assert_eq!(enable(t, &gate(t), "clinic-a").await.unwrap(), "enabled");
    let refused = enable(t, &gate(t), "clinic-b").await.unwrap_err();
    assert!(refused.contains("verified the stripe scheme (used by clinic-b/payments)"), "{refused}");
    assert!(refused.contains("verified the github scheme (used by clinic-b/repo)"), "{refused}");
    assert!(!refused.contains("standard-webhooks") && !refused.contains("approved"), "{refused}");
    // A run that verified stripe only: github is still named.
    record_drill_covering(t, Some(r#"["standard-webhooks","stripe"]"#)).await;
    let refused = enable(t, &gate(t), "clinic-b").await.unwrap_err();
    assert!(!refused.contains("stripe") && refused.contains("the github scheme"), "{refused}");
    // Counting runs cover a cohort together; a failed run covers nothing.
    record_drill_covering(t, Some(r#"["github"]"#)).await;
    drill_run::Entity::update_many()
        .col_expr(drill_run::Column::Passed, Expr::value(false))
        .filter(drill_run::Column::Schemes.eq(r#"["github"]"#))
        .exec(&t.db)
        .await
        .unwrap();
    assert!(enable(t, &gate(t), "clinic-b").await.unwrap_err().contains("the github scheme"));
    record_drill_covering(t, Some(r#"["github"]"#)).await;
    assert_eq!(enable(t, &gate(t), "clinic-b").await.unwrap(), "enabled");
});

// A refusal names at most ten endpoints per scheme, and counts the rest.
db_test!(an_uncovered_scheme_names_ten_endpoints_and_counts_the_rest, async |t: &TestDb| {
    use domain::registry::endpoints::{self, NewEndpoint};
    tenant(t, "clinic-c").await;
    for n in 0..12 {
        let new = NewEndpoint {
            slug: format!("repo-{n:02}"),
            scheme: views::scheme::Scheme::Github,
            event_types: None,
            tolerance_secs: None,
            max_body_bytes: None,
            hmac_profile: None,
        };
        endpoints::create(&t.db, &admin(), &"clinic-c".parse().unwrap(), new).await.unwrap();
    }
    approve_current_bundle(t).await;
    record_drill_covering(t, None).await;
    let refused = enable(t, &gate(t), "clinic-c").await.unwrap_err();
    assert!(refused.contains("clinic-c/repo-09 and 2 more)"), "{refused}");
    assert!(refused.contains("clinic-c/repo-00") && !refused.contains("repo-10"), "{refused}");
});
