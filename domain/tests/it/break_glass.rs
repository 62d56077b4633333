//! Break-glass for the rollout order (issue 23 item 3) on both engines: a
//! refused enabling with an override reason becomes a pending request
//! naming what is missing; a second person approves it (never the
//! requester), which enables retries; a request is decided once, expires
//! after a day, and only callers who may set the policy see or decide it.

use domain::{
    auth::{Actor, Principal},
    break_glass::{self, OVERRIDE_TTL_MS, SetOutcome},
    entity::{audit_entry, rollout_override},
    error::DomainError,
    retry_policy,
};
use sea_orm::{EntityTrait, QueryOrder, sea_query::Expr};
use views::{
    retry_policy::{RetryPolicy, RolloutOverrideView},
    roles::Role,
};

use crate::{db_test, fixtures::*, support::TestDb};

pub fn second_admin() -> Principal {
    Principal {
        actor: Actor::User { id: "id-second".into(), username: "second-admin".into() },
        role: Role::Admin,
        tenant_id: None,
    }
}

/// Sets clinic-a's policy as `who` with a break-glass reason (change reason "r").
async fn set_as(t: &TestDb, who: &Principal, policy: RetryPolicy, why: &str) -> Result<SetOutcome, DomainError> {
    break_glass::set(&t.db, &gate(t), who, &"clinic-a".parse().unwrap(), policy, "r", Some(why)).await
}

/// Asks for an override of clinic-a's gate as `admin()`; it must be pending.
pub async fn request(t: &TestDb, slug: &str) -> RolloutOverrideView {
    let out = break_glass::set(
        &t.db,
        &gate(t),
        &admin(),
        &slug.parse().unwrap(),
        RetryPolicy::Enabled,
        "cohort 1",
        Some("outage: providers give up"),
    )
    .await
    .expect("override request");
    match out {
        SetOutcome::Requested(v) => *v,
        SetOutcome::Changed(v) => panic!("the gate passed: {v:?}"),
    }
}

fn code(e: DomainError) -> &'static str {
    match e {
        DomainError::Conflict { code, .. } | DomainError::Invalid { code, .. } | DomainError::Refused { code, .. } => {
            code
        }
        DomainError::NotFound => "not_found",
        DomainError::Forbidden => "forbidden",
        other => panic!("unexpected {other:?}"),
    }
}

async fn last_seq(t: &TestDb) -> i64 {
    audit_entry::Entity::find().order_by_desc(audit_entry::Column::Seq).one(&t.db).await.unwrap().map_or(0, |e| e.seq)
}

db_test!(a_second_person_approves_an_override_and_retries_are_enabled, async |t: &TestDb| {
    active_key(t).await;
    let seq = last_seq(t).await;
    let req = request(t, "clinic-a").await;
    assert_eq!((req.status.as_str(), req.requested_by.as_str()), ("pending_approval", "admin-user"));
    assert!(req.missing.iter().any(|m| m.contains("no drill run passed on this build")), "{:?}", req.missing);
    assert!(req.missing.iter().any(|m| m.contains("clinic-a: no approved evidence bundle")), "{:?}", req.missing);
    assert_eq!(
        retry_policy::get(&t.db, &admin(), &"clinic-a".parse().unwrap()).await.unwrap().policy,
        RetryPolicy::Disabled
    );
    assert_eq!(audit_entries(t, "retry_policy.override_request").await.len(), 1);
    assert!(domain::audit::anchor::sensitive_after(&t.db, seq).await.unwrap(), "moves the checkpoint anchor");
    // One pending request per tenant.
    let again = set_as(t, &admin(), RetryPolicy::Enabled, "again").await;
    assert_eq!(code(again.unwrap_err()), "override_pending");

    // Four eyes: not the requester, signed in or named by the CLI.
    let own = break_glass::approve(&t.db, &admin(), &"clinic-a".parse().unwrap(), &req.id, None, "").await;
    assert_eq!(code(own.unwrap_err()), "self_approval");
    let named =
        break_glass::approve(&t.db, &admin(), &"clinic-a".parse().unwrap(), &req.id, Some("someone-else"), "").await;
    assert_eq!(code(named.unwrap_err()), "self_approval");
    let cli =
        break_glass::approve(&t.db, &Principal::cli(), &"clinic-a".parse().unwrap(), &req.id, Some("admin-user"), "")
            .await;
    assert_eq!(code(cli.unwrap_err()), "self_approval");
    assert_eq!(
        retry_policy::get(&t.db, &admin(), &"clinic-a".parse().unwrap()).await.unwrap().policy,
        RetryPolicy::Disabled
    );

    let seq = last_seq(t).await;
    let ok =
        break_glass::approve(&t.db, &second_admin(), &"clinic-a".parse().unwrap(), &req.id, None, "on call agrees")
            .await
            .unwrap();
    assert_eq!((ok.status.as_str(), ok.decided_by.as_deref()), ("approved", Some("second-admin")));
    let policy = retry_policy::get(&t.db, &admin(), &"clinic-a".parse().unwrap()).await.unwrap();
    assert_eq!((policy.policy.as_str(), Some(policy.version)), ("enabled", ok.policy_version));
    assert!(policy.history[0].reason.contains(&req.id), "{}", policy.history[0].reason);
    assert!(policy.history[0].reason.contains("outage: providers give up"), "{}", policy.history[0].reason);
    assert_eq!(audit_entries(t, "retry_policy.override_approve").await.len(), 1);
    assert!(domain::audit::anchor::sensitive_after(&t.db, seq).await.unwrap());

    // Decided once.
    let twice = break_glass::approve(&t.db, &second_admin(), &"clinic-a".parse().unwrap(), &req.id, None, "").await;
    assert_eq!(code(twice.unwrap_err()), "override_decided");
    let late = break_glass::reject(&t.db, &second_admin(), &"clinic-a".parse().unwrap(), &req.id, None, "no").await;
    assert_eq!(code(late.unwrap_err()), "override_decided");
    let listed = break_glass::list(&t.db, &reviewer(), &"clinic-a".parse().unwrap()).await.unwrap();
    assert_eq!(listed.iter().map(|o| o.status.as_str()).collect::<Vec<_>>(), ["approved"]);
});

db_test!(an_override_can_be_rejected_expires_and_is_not_needed_when_the_gate_passes, async |t: &TestDb| {
    active_key(t).await;
    let req = request(t, "clinic-a").await;
    let bare = break_glass::reject(&t.db, &second_admin(), &"clinic-a".parse().unwrap(), &req.id, None, " ").await;
    assert_eq!(code(bare.unwrap_err()), "reason_required");
    // The requester may withdraw it.
    let no = break_glass::reject(&t.db, &admin(), &"clinic-a".parse().unwrap(), &req.id, None, "drills first")
        .await
        .unwrap();
    assert_eq!((no.status.as_str(), no.comment.as_deref()), ("rejected", Some("drills first")));
    assert_eq!(audit_entries(t, "retry_policy.override_reject").await.len(), 1);
    assert_eq!(
        retry_policy::get(&t.db, &admin(), &"clinic-a".parse().unwrap()).await.unwrap().policy,
        RetryPolicy::Disabled
    );

    // A day without a decision: expired, and a new request may be made.
    let req = request(t, "clinic-a").await;
    rollout_override::Entity::update_many()
        .col_expr(rollout_override::Column::ExpiresAt, Expr::value(domain::clock::now_ms() - 1))
        .exec(&t.db)
        .await
        .unwrap();
    let late = break_glass::approve(&t.db, &second_admin(), &"clinic-a".parse().unwrap(), &req.id, None, "").await;
    assert_eq!(code(late.unwrap_err()), "override_expired");
    let listed = break_glass::list(&t.db, &admin(), &"clinic-a".parse().unwrap()).await.unwrap();
    assert_eq!(listed[0].status, "expired");
    assert_eq!(
        retry_policy::get(&t.db, &admin(), &"clinic-a".parse().unwrap()).await.unwrap().policy,
        RetryPolicy::Disabled
    );
    let fresh = request(t, "clinic-a").await;
    let window = domain::clock::parse_rfc3339(&fresh.expires_at).unwrap()
        - domain::clock::parse_rfc3339(&fresh.created_at).unwrap();
    assert_eq!(window, OVERRIDE_TTL_MS);
    let unknown =
        break_glass::approve(&t.db, &second_admin(), &"clinic-a".parse().unwrap(), &domain::ids::new_id(), None, "")
            .await;
    assert_eq!(code(unknown.unwrap_err()), "not_found");

    // Bad input.
    // Disabling is never gated: with an override reason it is an ordinary
    // change, and no request is recorded.
    let off = set_as(t, &admin(), RetryPolicy::Disabled, "x").await.unwrap();
    assert!(matches!(&off, SetOutcome::Changed(v) if v.policy == RetryPolicy::Disabled), "{off:?}");
    assert_eq!(code(set_as(t, &admin(), RetryPolicy::Enabled, "  ").await.unwrap_err()), "invalid_override_reason");
    let long = "x".repeat(domain::text::MAX_REASON_CHARS + 1);
    let too_long = set_as(t, &admin(), RetryPolicy::Enabled, &long).await;
    assert_eq!(code(too_long.unwrap_err()), "invalid_override_reason");

    // Once the order is met, the reason is not needed: an ordinary change.
    meet_rollout_order(t).await;
    let out = set_as(t, &admin(), RetryPolicy::Enabled, "x").await.unwrap();
    assert!(matches!(&out, SetOutcome::Changed(v) if v.policy == RetryPolicy::Enabled), "{out:?}");
    assert_eq!(break_glass::list(&t.db, &admin(), &"clinic-a".parse().unwrap()).await.unwrap().len(), 3);
});

db_test!(only_callers_who_may_set_the_policy_ask_or_decide, async |t: &TestDb| {
    active_key(t).await;
    let b = tenant(t, "clinic-b").await;
    let a = domain::registry::tenants::find(&t.db, &admin(), &"clinic-a".parse().unwrap()).await.unwrap();
    let req = request(t, "clinic-a").await;
    let other = user(Role::ClinicAdmin, Some(&b.id));
    let own = user(Role::ClinicAdmin, Some(&a.id));
    assert_eq!(
        code(break_glass::approve(&t.db, &other, &"clinic-a".parse().unwrap(), &req.id, None, "").await.unwrap_err()),
        "not_found"
    );
    assert_eq!(code(break_glass::list(&t.db, &other, &"clinic-a".parse().unwrap()).await.unwrap_err()), "not_found");
    assert_eq!(
        code(break_glass::approve(&t.db, &own, &"clinic-a".parse().unwrap(), &req.id, None, "").await.unwrap_err()),
        "forbidden"
    );
    assert_eq!(
        code(
            break_glass::reject(&t.db, &reviewer(), &"clinic-a".parse().unwrap(), &req.id, None, "no")
                .await
                .unwrap_err()
        ),
        "forbidden"
    );
    let ask = set_as(t, &oncall(), RetryPolicy::Enabled, "x").await;
    assert_eq!(code(ask.unwrap_err()), "forbidden");
    // An id of another tenant names nothing here.
    let elsewhere = break_glass::approve(&t.db, &second_admin(), &"clinic-b".parse().unwrap(), &req.id, None, "").await;
    assert_eq!(code(elsewhere.unwrap_err()), "not_found");
    assert_eq!(
        break_glass::list(&t.db, &admin(), &"clinic-a".parse().unwrap()).await.unwrap()[0].status,
        "pending_approval"
    );
});
