use domain::{
    auth::{
        sessions::{self, SessionPolicy},
        tokens,
        users::{self, NewUser, UserPatch},
        Principal, Role,
    },
    clock,
    crypto::Password,
    entity::{session, user},
    DomainError,
};
use sea_orm::EntityTrait;

use crate::{db_test, fixtures::*, support::TestDb};

fn pw(s: &str) -> Password {
    Password::new(s.to_owned())
}

const GOOD: &str = "correct horse battery";

async fn make_user(t: &TestDb, name: &str, role: Role, tenant: Option<&str>) {
    users::create(&t.db, &Principal::cli(), NewUser { username: name.into(), role, tenant: tenant.map(Into::into), password: pw(GOOD) })
        .await
        .unwrap();
}

db_test!(bootstrap_only_once, async |t: &TestDb| {
    assert!(!users::any_exist(&t.db).await.unwrap());
    let short = users::bootstrap_admin(&t.db, "root".into(), pw("short")).await;
    assert!(matches!(short, Err(DomainError::Invalid { code: "weak_password", .. })));
    let v = users::bootstrap_admin(&t.db, "root".into(), pw(GOOD)).await.unwrap();
    assert_eq!(v.role, Role::Admin);
    let again = users::bootstrap_admin(&t.db, "other".into(), pw(GOOD)).await;
    assert!(matches!(again, Err(DomainError::Conflict { code: "already_set_up", .. })));
    assert_eq!(user::Entity::find().all(&t.db).await.unwrap().len(), 1);
});

db_test!(user_rules, async |t: &TestDb| {
    tenant(t, "clinic-a").await;
    let bad = users::create(&t.db, &Principal::cli(), NewUser { username: "ca".into(), role: Role::ClinicAdmin, tenant: None, password: pw(GOOD) }).await;
    assert!(matches!(bad, Err(DomainError::Invalid { code: "tenant_required", .. })));
    let bad = users::create(&t.db, &Principal::cli(), NewUser { username: "rv".into(), role: Role::Reviewer, tenant: Some("clinic-a".into()), password: pw(GOOD) }).await;
    assert!(matches!(bad, Err(DomainError::Invalid { code: "tenant_not_allowed", .. })));
    make_user(t, "alice", Role::ClinicAdmin, Some("clinic-a")).await;
    let dup = users::create(&t.db, &Principal::cli(), NewUser { username: "alice".into(), role: Role::Oncall, tenant: None, password: pw(GOOD) }).await;
    assert!(matches!(dup, Err(DomainError::Conflict { code: "username_taken", .. })));
    let listed = users::list(&t.db, &admin()).await.unwrap();
    assert_eq!(listed[0].tenant.as_deref(), Some("clinic-a"));
    assert!(!serde_json::to_string(&listed).unwrap().contains("argon2"), "no hashes in views");
    assert!(matches!(users::list(&t.db, &reviewer()).await, Err(DomainError::Forbidden)));
    // The last admin cannot be demoted.
    make_user(t, "root", Role::Admin, None).await;
    let demote = users::update(&t.db, &admin(), "root", UserPatch { role: Some(Role::Oncall), ..Default::default() }).await;
    assert!(matches!(demote, Err(DomainError::Conflict { code: "last_admin", .. })));
});

db_test!(login_sessions_and_logout, async |t: &TestDb| {
    make_user(t, "root", Role::Admin, None).await;
    let policy = SessionPolicy::default();
    let now = clock::now_ms();
    let ok = sessions::login(&t.db, policy, "root", &pw(GOOD), "10.0.0.1", now).await.unwrap();
    assert_eq!(ok.principal.role, Role::Admin);
    // Only the digest is stored.
    let rows = session::Entity::find().all(&t.db).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_ne!(rows[0].id_digest, ok.token.expose());
    assert_eq!(rows[0].id_digest, domain::crypto::sha256_hex(ok.token.expose().as_bytes()));
    let p = sessions::authenticate(&t.db, policy, ok.token.expose(), now + 1000).await.unwrap();
    assert_eq!(p.actor.name(), "root");
    // Idle timeout.
    let idle = sessions::authenticate(&t.db, policy, ok.token.expose(), now + policy.idle_ms + 1).await;
    assert!(matches!(idle, Err(DomainError::Unauthenticated)));
    // Absolute timeout, even while active.
    let s2 = sessions::login(&t.db, policy, "root", &pw(GOOD), "10.0.0.1", now).await.unwrap();
    let mut at = now;
    while at < now + policy.absolute_ms - policy.idle_ms {
        at += policy.idle_ms / 2;
        sessions::authenticate(&t.db, policy, s2.token.expose(), at).await.unwrap();
    }
    let late = sessions::authenticate(&t.db, policy, s2.token.expose(), now + policy.absolute_ms).await;
    assert!(matches!(late, Err(DomainError::Unauthenticated)));
    // Logout ends the session server-side.
    let s3 = sessions::login(&t.db, policy, "root", &pw(GOOD), "10.0.0.1", now).await.unwrap();
    sessions::logout(&t.db, s3.token.expose()).await.unwrap();
    assert!(matches!(sessions::authenticate(&t.db, policy, s3.token.expose(), now).await, Err(DomainError::Unauthenticated)));
});

db_test!(failed_logins_are_throttled_per_account_and_address, async |t: &TestDb| {
    make_user(t, "root", Role::Admin, None).await;
    make_user(t, "other", Role::Oncall, None).await;
    let policy = SessionPolicy::default();
    let now = clock::now_ms();
    for _ in 0..5 {
        let r = sessions::login(&t.db, policy, "root", &pw("wrong password!"), "10.0.0.1", now).await;
        assert!(matches!(r, Err(DomainError::Invalid { code: "bad_credentials", .. })), "{r:?}");
    }
    // Locked even with the right password, from any address.
    let locked = sessions::login(&t.db, policy, "root", &pw(GOOD), "10.9.9.9", now).await;
    assert!(matches!(locked, Err(DomainError::Throttled { .. })), "{locked:?}");
    // Other accounts are unaffected; the lock lifts after the lockout.
    assert!(sessions::login(&t.db, policy, "other", &pw(GOOD), "10.0.0.2", now).await.is_ok());
    assert!(sessions::login(&t.db, policy, "root", &pw(GOOD), "10.0.0.3", now + 16 * 60_000).await.is_ok());
    // An address spraying many accounts is throttled too.
    for i in 0..20 {
        let _ = sessions::login(&t.db, policy, &format!("ghost{i}"), &pw("nope nope nope"), "10.6.6.6", now).await;
    }
    let sprayed = sessions::login(&t.db, policy, "other", &pw(GOOD), "10.6.6.6", now).await;
    assert!(matches!(sprayed, Err(DomainError::Throttled { .. })));
});

db_test!(disabled_users_lose_sessions, async |t: &TestDb| {
    make_user(t, "root", Role::Admin, None).await;
    make_user(t, "bob", Role::Oncall, None).await;
    let policy = SessionPolicy::default();
    let now = clock::now_ms();
    let s = sessions::login(&t.db, policy, "bob", &pw(GOOD), "10.0.0.1", now).await.unwrap();
    users::update(&t.db, &admin(), "bob", UserPatch { disabled: Some(true), ..Default::default() }).await.unwrap();
    assert!(sessions::authenticate(&t.db, policy, s.token.expose(), now).await.is_err());
    assert!(sessions::login(&t.db, policy, "bob", &pw(GOOD), "10.0.0.1", now).await.is_err());
});

db_test!(api_tokens_are_digests_scoped_and_revocable, async |t: &TestDb| {
    let a = tenant(t, "clinic-a").await;
    let created = tokens::create(&t.db, &Principal::cli(), "ci", Role::ClinicAdmin, Some("clinic-a")).await.unwrap();
    assert!(created.token.expose().starts_with("sgt_"));
    let row = domain::entity::api_token::Entity::find().one(&t.db).await.unwrap().unwrap();
    assert_ne!(row.digest, created.token.expose());
    let p = tokens::authenticate(&t.db, created.token.expose(), clock::now_ms()).await.unwrap();
    assert_eq!(p.role, Role::ClinicAdmin);
    assert_eq!(p.tenant_id.as_deref(), Some(a.id.as_str()));
    assert!(tokens::authenticate(&t.db, "sgt_forged", clock::now_ms()).await.is_err());
    tokens::revoke(&t.db, &Principal::cli(), &created.view.id).await.unwrap();
    assert!(tokens::authenticate(&t.db, created.token.expose(), clock::now_ms()).await.is_err());
    let denied = tokens::create(&t.db, &reviewer(), "x", Role::Admin, None).await;
    assert!(matches!(denied, Err(DomainError::Forbidden)));
});
