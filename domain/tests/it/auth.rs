use domain::{
    DomainError,
    auth::{
        Principal, TenantName, failures,
        sessions::{self, Activity, SessionPolicy},
        throttle, tokens,
        users::{self, NewUser, UserChange},
    },
    clock,
    crypto::Password,
    entity::{login_throttle, session, user},
};
use sea_orm::{EntityTrait, PaginatorTrait};
use views::roles::Role;

use crate::{db_test, fixtures::*, support::TestDb};

fn pw(s: &str) -> Password {
    Password::new(s.to_owned())
}

const GOOD: &str = "correct horse battery";

async fn login(
    t: &TestDb,
    user: &str,
    password: &str,
    ip: &str,
    device: Option<&str>,
    now: i64,
) -> Result<sessions::LoginSuccess, DomainError> {
    let password = pw(password);
    sessions::login(
        &t.db,
        SessionPolicy::default(),
        sessions::LoginAttempt { username: user, password: &password, client_ip: ip, device },
        now,
    )
    .await
}

async fn authenticate(t: &TestDb, token: &str, now: i64) -> Result<domain::auth::Principal, DomainError> {
    sessions::authenticate(&t.db, SessionPolicy::default(), token, now, Activity::User).await
}

async fn make_user(t: &TestDb, name: &str, role: Role, tenant: Option<&str>) {
    users::create(
        &t.db,
        &Principal::cli(),
        NewUser { username: name.into(), role, tenant: TenantName::given(tenant), password: pw(GOOD) },
    )
    .await
    .unwrap();
}

/// Records every ended audit window and deletes every stale row at `now`.
async fn sweep_all(t: &TestDb, now: i64) {
    while throttle::sweep(&t.db, now, 100).await.unwrap() != throttle::Swept::default() {}
}

async fn throttle_rows(t: &TestDb) -> u64 {
    login_throttle::Entity::find().count(&t.db).await.unwrap()
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
    let bad = users::create(
        &t.db,
        &Principal::cli(),
        NewUser { username: "ca".into(), role: Role::ClinicAdmin, tenant: None, password: pw(GOOD) },
    )
    .await;
    assert!(matches!(bad, Err(DomainError::Invalid { code: "tenant_required", .. })));
    let bad = users::create(
        &t.db,
        &Principal::cli(),
        NewUser {
            username: "rv".into(),
            role: Role::Reviewer,
            tenant: TenantName::given(Some("clinic-a")),
            password: pw(GOOD),
        },
    )
    .await;
    assert!(matches!(bad, Err(DomainError::Invalid { code: "tenant_not_allowed", .. })));
    make_user(t, "alice", Role::ClinicAdmin, Some("clinic-a")).await;
    let dup = users::create(
        &t.db,
        &Principal::cli(),
        NewUser { username: "alice".into(), role: Role::Oncall, tenant: None, password: pw(GOOD) },
    )
    .await;
    assert!(matches!(dup, Err(DomainError::Conflict { code: "username_taken", .. })));
    let listed = users::list(&t.db, &admin()).await.unwrap();
    assert_eq!(listed[0].tenant.as_ref().map(|t| t.as_str()), Some("clinic-a"));
    assert!(!serde_json::to_string(&listed).unwrap().contains("argon2"), "no hashes in views");
    assert!(matches!(users::list(&t.db, &reviewer()).await, Err(DomainError::Forbidden)));
    // The last admin cannot be demoted.
    make_user(t, "root", Role::Admin, None).await;
    let demote =
        users::update(&t.db, &admin(), "root", UserChange { role: Some(Role::Oncall), ..Default::default() }).await;
    assert!(matches!(demote, Err(DomainError::Conflict { code: "last_admin", .. })));
});

// The last enabled administrator survives two demotions at once: each locks
// the enabled admin rows before counting them (PostgreSQL `FOR UPDATE`;
// SQLite's write transaction is exclusive).
db_test!(two_concurrent_demotions_never_remove_the_last_admin, async |t: &TestDb| {
    make_user(t, "ada", Role::Admin, None).await;
    make_user(t, "bob", Role::Admin, None).await;
    let demote = |name: &'static str| async move {
        users::update(&t.db, &admin(), name, UserChange { role: Some(Role::Oncall), ..Default::default() }).await
    };
    for round in 0..8 {
        let (a, b) = tokio::join!(demote("ada"), demote("bob"));
        let refused =
            [&a, &b].iter().filter(|r| matches!(r, Err(DomainError::Conflict { code: "last_admin", .. }))).count();
        assert_eq!(refused, 1, "round {round}: exactly one demotion is refused: {a:?} {b:?}");
        let admins = user::Entity::find()
            .all(&t.db)
            .await
            .unwrap()
            .into_iter()
            .filter(|u| u.role == "admin" && !u.disabled)
            .count();
        assert_eq!(admins, 1, "round {round}");
        let demoted = if a.is_ok() { "ada" } else { "bob" };
        users::update(&t.db, &admin(), demoted, UserChange { role: Some(Role::Admin), ..Default::default() })
            .await
            .unwrap();
    }
});

// A stored role this build does not know is never rewritten by an
// unrelated change (which would turn a refused account into a working one).
db_test!(an_unknown_stored_role_is_never_rewritten_in_passing, async |t: &TestDb| {
    use sea_orm::{ConnectionTrait, DbBackend, TransactionTrait};
    make_user(t, "zed", Role::Oncall, None).await;
    // The schema's CHECK knows this build's roles; a newer build's role
    // (after a downgrade) is what this stands for, so step around it.
    let txn = t.db.begin().await.unwrap();
    let backend = txn.get_database_backend();
    let checks: Vec<String> = match backend {
        DbBackend::Postgres => txn
            .query_all_raw(sea_orm::Statement::from_string(
                backend,
                "SELECT conname FROM pg_constraint WHERE conrelid = 'users'::regclass AND contype = 'c'",
            ))
            .await
            .unwrap()
            .iter()
            .map(|r| format!("ALTER TABLE users DROP CONSTRAINT {}", r.try_get::<String>("", "conname").unwrap()))
            .collect(),
        _ => vec!["PRAGMA ignore_check_constraints = ON".to_owned()],
    };
    for stmt in checks.iter().map(String::as_str).chain(["UPDATE users SET role = 'superuser' WHERE username = 'zed'"])
    {
        txn.execute_unprepared(stmt).await.unwrap();
    }
    if backend == DbBackend::Sqlite {
        txn.execute_unprepared("PRAGMA ignore_check_constraints = OFF").await.unwrap();
    }
    txn.commit().await.unwrap();
    let toggled =
        users::update(&t.db, &admin(), "zed", UserChange { disabled: Some(true), ..Default::default() }).await;
    assert!(matches!(toggled, Err(DomainError::Conflict { code: "unknown_role", .. })), "{toggled:?}");
    let row = user::Entity::find().all(&t.db).await.unwrap().into_iter().find(|u| u.username == "zed").unwrap();
    assert_eq!(row.role, "superuser", "left as it was");
    assert!(login(t, "zed", GOOD, "10.0.0.1", None, clock::now_ms()).await.is_err(), "and still signs nobody in");
    let set = users::update(&t.db, &admin(), "zed", UserChange { role: Some(Role::Reviewer), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(set.role, Role::Reviewer);
});

db_test!(login_sessions_and_logout, async |t: &TestDb| {
    make_user(t, "root", Role::Admin, None).await;
    let policy = SessionPolicy::default();
    let now = clock::now_ms();
    let ok = login(t, "root", GOOD, "10.0.0.1", None, now).await.unwrap();
    assert_eq!(ok.principal.role, Role::Admin);
    assert!(ok.device.is_some(), "a first sign-in from a browser gives it a device token");
    // Only the digest is stored.
    let rows = session::Entity::find().all(&t.db).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_ne!(rows[0].id_digest, ok.token.expose());
    assert_eq!(rows[0].id_digest, domain::crypto::sha256_hex(ok.token.expose().as_bytes()));
    let p = authenticate(t, ok.token.expose(), now + 1000).await.unwrap();
    assert_eq!(p.actor.name(), "root");
    // Idle timeout.
    let idle = authenticate(t, ok.token.expose(), now + policy.idle_ms + 1).await;
    assert!(matches!(idle, Err(DomainError::Unauthenticated)));
    // Absolute timeout, even while active.
    let s2 = login(t, "root", GOOD, "10.0.0.1", None, now).await.unwrap();
    let mut at = now;
    while at < now + policy.absolute_ms - policy.idle_ms {
        at += policy.idle_ms / 2;
        authenticate(t, s2.token.expose(), at).await.unwrap();
    }
    let late = authenticate(t, s2.token.expose(), now + policy.absolute_ms).await;
    assert!(matches!(late, Err(DomainError::Unauthenticated)));
    // Logout ends the session server-side.
    let s3 = login(t, "root", GOOD, "10.0.0.1", None, now).await.unwrap();
    sessions::logout(&t.db, s3.token.expose()).await.unwrap();
    assert!(matches!(authenticate(t, s3.token.expose(), now).await, Err(DomainError::Unauthenticated)));
});

db_test!(background_refreshes_never_keep_a_session_alive, async |t: &TestDb| {
    make_user(t, "root", Role::Admin, None).await;
    let policy = SessionPolicy::default();
    let now = clock::now_ms();
    // A dashboard left open: it refreshes every minute, nobody touches it.
    let idle = login(t, "root", GOOD, "10.0.0.1", None, now).await.unwrap();
    let mut at = now;
    while at + 60_000 < now + policy.idle_ms {
        at += 60_000;
        sessions::authenticate(&t.db, policy, idle.token.expose(), at, Activity::Background).await.unwrap();
    }
    let after =
        sessions::authenticate(&t.db, policy, idle.token.expose(), now + policy.idle_ms + 1, Activity::Background)
            .await;
    assert!(matches!(after, Err(DomainError::Unauthenticated)), "the idle timeout ends it: {after:?}");
    // The same refreshes with the person at work keep it.
    let busy = login(t, "root", GOOD, "10.0.0.1", None, now).await.unwrap();
    let mut at = now;
    while at + 60_000 < now + policy.idle_ms {
        at += 60_000;
        authenticate(t, busy.token.expose(), at).await.unwrap();
    }
    assert!(authenticate(t, busy.token.expose(), now + policy.idle_ms + 1).await.is_ok());
});

db_test!(failed_logins_lock_with_a_growing_backoff, async |t: &TestDb| {
    make_user(t, "root", Role::Admin, None).await;
    make_user(t, "other", Role::Oncall, None).await;
    let now = clock::now_ms();
    for i in 0..5 {
        let r = login(t, "root", "wrong password!", &format!("10.0.0.{i}"), None, now).await;
        assert!(matches!(r, Err(DomainError::Invalid { code: "bad_credentials", .. })), "{r:?}");
    }
    // Five wrong guesses lock the account (admins included), even with the
    // right password, from any address; other accounts are unaffected.
    let locked = login(t, "root", GOOD, "10.9.9.9", None, now).await;
    assert!(matches!(locked, Err(DomainError::Throttled { retry_after_secs: 30 })), "{locked:?}");
    assert!(login(t, "other", GOOD, "10.0.0.2", None, now).await.is_ok());
    // The lock lifts after 30 s; the next wrong guess locks for twice as long.
    let again = login(t, "root", "wrong password!", "10.0.0.9", None, now + 31_000).await;
    assert!(matches!(again, Err(DomainError::Invalid { .. })), "{again:?}");
    let locked = login(t, "root", GOOD, "10.9.9.9", None, now + 32_000).await;
    assert!(matches!(locked, Err(DomainError::Throttled { retry_after_secs: 59 | 60 })), "{locked:?}");
    assert!(login(t, "root", GOOD, "10.0.0.3", None, now + 92_000).await.is_ok());
    // A success clears the account's count.
    let r = login(t, "root", "wrong password!", "10.0.0.4", None, now + 93_000).await;
    assert!(matches!(r, Err(DomainError::Invalid { .. })), "{r:?}");
    // An address spraying many accounts is throttled too.
    for i in 0..20 {
        let _ = login(t, &format!("ghost{i}"), "nope nope nope", "10.6.6.6", None, now).await;
    }
    let sprayed = login(t, "other", GOOD, "10.6.6.6", None, now).await;
    assert!(matches!(sprayed, Err(DomainError::Throttled { .. })), "{sprayed:?}");
});

db_test!(an_attacker_cannot_lock_the_owner_out_of_their_own_browser, async |t: &TestDb| {
    make_user(t, "root", Role::Admin, None).await;
    make_user(t, "other", Role::Oncall, None).await;
    let now = clock::now_ms();
    let first = login(t, "root", GOOD, "10.0.0.1", None, now).await.unwrap();
    let device = first.device.expect("a device token");
    // Someone else hammers the account from many addresses for an hour.
    for minute in 0..60 {
        for i in 0..3 {
            let _ =
                login(t, "root", "guess guess guess", &format!("10.7.{minute}.{i}"), None, now + minute * 60_000).await;
        }
    }
    let later = now + 60 * 60_000;
    let stranger = login(t, "root", GOOD, "10.8.0.1", None, later).await;
    assert!(matches!(stranger, Err(DomainError::Throttled { .. })), "an unknown browser is locked out: {stranger:?}");
    // The owner's browser gets in, and keeps its token.
    let owner = login(t, "root", GOOD, "10.0.0.1", Some(device.expose()), later).await.unwrap();
    assert!(owner.device.is_none());
    // Its own wrong guesses still lock it.
    for _ in 0..5 {
        let _ = login(t, "root", "typo typo typo", "10.0.0.1", Some(device.expose()), later).await;
    }
    let own = login(t, "root", GOOD, "10.0.0.1", Some(device.expose()), later).await;
    assert!(matches!(own, Err(DomainError::Throttled { .. })), "{own:?}");
    // Another account's device token is no key to this one.
    let theirs = login(t, "other", GOOD, "10.0.0.5", None, later).await.unwrap().device.unwrap();
    let borrowed = login(t, "root", GOOD, "10.0.0.6", Some(theirs.expose()), later + 1).await;
    assert!(matches!(borrowed, Err(DomainError::Throttled { .. })), "{borrowed:?}");
});

// Behind a reverse proxy every browser has the proxy's address (forwarding
// headers are not trusted): successes never count against it, and failures
// there, which do lock it, never lock out a browser the account signed in
// from before.
db_test!(a_shared_address_never_locks_out_the_owners_browser, async |t: &TestDb| {
    make_user(t, "root", Role::Admin, None).await;
    make_user(t, "other", Role::Oncall, None).await;
    let proxy = "10.4.0.1";
    let now = clock::now_ms();
    let device = login(t, "root", GOOD, proxy, None, now).await.unwrap().device.expect("a device token");
    for i in 0..30 {
        let r = login(t, "other", GOOD, proxy, None, now + i).await;
        assert!(r.is_ok(), "sign-in {i}: successes never count against the address: {r:?}");
    }
    for i in 0..20 {
        let _ = login(t, &format!("ghost{i}"), "nope nope nope", proxy, None, now + 100).await;
    }
    let stranger = login(t, "other", GOOD, proxy, None, now + 200).await;
    assert!(
        matches!(stranger, Err(DomainError::Throttled { .. })),
        "the address is locked for unknown browsers: {stranger:?}"
    );
    let owner = login(t, "root", GOOD, proxy, Some(device.expose()), now + 200).await;
    assert!(owner.is_ok(), "the owner's browser is not: {owner:?}");
});

db_test!(parallel_guesses_are_counted_before_any_is_evaluated, async |t: &TestDb| {
    make_user(t, "root", Role::Admin, None).await;
    let now = clock::now_ms();
    let tries =
        (0..50).map(|i| async move { login(t, "root", "wrong password!", &format!("10.3.0.{i}"), None, now).await });
    let results = futures_util::future::join_all(tries).await;
    let evaluated = results.iter().filter(|r| matches!(r, Err(DomainError::Invalid { .. }))).count();
    let refused = results.iter().filter(|r| matches!(r, Err(DomainError::Throttled { .. }))).count();
    assert!(evaluated <= 5, "at most five of fifty parallel guesses are evaluated, saw {evaluated}");
    assert_eq!(evaluated + refused, 50, "{results:?}");
    sweep_all(t, now + failures::WINDOW_MS).await;
    let audited = audit_entries(t, "session.login_failed").await;
    let counted: i64 = audited.iter().map(|(_, after)| after["failures"].as_i64().unwrap()).sum();
    assert_eq!(counted, evaluated as i64, "each evaluated failure is counted, no refusal is: {audited:?}");
    assert!(audited.len() <= 1, "one entry for the one account in one window: {audited:?}");
});

db_test!(ipv6_addresses_are_throttled_by_their_64, async |t: &TestDb| {
    make_user(t, "root", Role::Admin, None).await;
    let now = clock::now_ms();
    for i in 0..20 {
        let _ = login(t, &format!("ghost{i}"), "nope nope nope", &format!("2001:db8:1:2::{i:x}"), None, now).await;
    }
    let same = login(t, "root", GOOD, "2001:db8:1:2:ffff::9", None, now).await;
    assert!(matches!(same, Err(DomainError::Throttled { .. })), "{same:?}");
    assert!(login(t, "root", GOOD, "2001:db8:1:3::1", None, now).await.is_ok());
});

db_test!(failed_logins_are_audited_without_the_password, async |t: &TestDb| {
    make_user(t, "root", Role::Admin, None).await;
    make_user(t, "bob", Role::Oncall, None).await;
    users::update(&t.db, &admin(), "bob", UserChange { disabled: Some(true), ..Default::default() }).await.unwrap();
    let now = clock::now_ms();
    let secret = "hunter2 hunter2 hunter2";
    let _ = login(t, "root", secret, "10.0.0.1", None, now).await;
    let _ = login(t, "nobody", secret, "10.0.0.2", None, now).await;
    let _ = login(t, "bob", GOOD, "10.0.0.3", None, now).await;
    let _ = login(t, "Robert'); DROP", secret, "10.0.0.4", None, now).await;
    sweep_all(t, now + failures::WINDOW_MS).await;
    let entries = audit_entries(t, "session.login_failed").await;
    let seen: Vec<(String, String, String)> = entries
        .iter()
        .map(|(target, after)| {
            assert_eq!(after["failures"], 1, "{after}");
            (
                target.clone(),
                after["addresses"][0].as_str().unwrap_or("").to_owned(),
                after["reasons"][0].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert!(seen.contains(&("root".into(), "10.0.0.1".into(), "wrong_password".into())), "{seen:?}");
    assert!(seen.contains(&("nobody".into(), "10.0.0.2".into(), "unknown_user".into())), "{seen:?}");
    assert!(seen.contains(&("bob".into(), "10.0.0.3".into(), "disabled".into())), "{seen:?}");
    assert!(seen.contains(&("(not a valid username)".into(), "10.0.0.4".into(), "invalid_input".into())), "{seen:?}");
    let all = format!("{entries:?}");
    assert!(!all.contains("hunter2") && !all.contains(GOOD) && !all.contains("DROP"), "{all}");
});
db_test!(api_tokens_are_digests_scoped_and_revocable, async |t: &TestDb| {
    let a = tenant(t, "clinic-a").await;
    let created =
        tokens::create(&t.db, &Principal::cli(), "ci", Role::ClinicAdmin, TenantName::given(Some("clinic-a")).as_ref())
            .await
            .unwrap();
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

// Item 24.3: failures are audited once per subject and window, with a count;
// a window closes at the subject's next failure after it ended, at its
// next success (before the `session.login` entry), or at the sweep.
db_test!(failures_are_audited_once_per_subject_and_window_with_a_count, async |t: &TestDb| {
    make_user(t, "root", Role::Admin, None).await;
    let now = clock::now_ms();
    for i in 0..4 {
        let r = login(t, "root", "wrong password!", &format!("10.0.0.{}", i % 3), None, now + i).await;
        assert!(matches!(r, Err(DomainError::Invalid { .. })), "{r:?}");
    }
    let _ = login(t, "nobody", "wrong password!", "10.0.0.9", None, now).await;
    assert!(audit_entries(t, "session.login_failed").await.is_empty(), "the windows are still open");
    throttle::sweep(&t.db, now + failures::WINDOW_MS - 1, 100).await.unwrap();
    assert!(audit_entries(t, "session.login_failed").await.is_empty(), "not yet ended");
    let swept = throttle::sweep(&t.db, now + failures::WINDOW_MS, 100).await.unwrap();
    assert_eq!(swept.windows_closed, 2);
    let entries = audit_entries(t, "session.login_failed").await;
    assert_eq!(entries.len(), 2, "{entries:?}");
    let (target, after) = &entries.iter().find(|(target, _)| target == "root").unwrap();
    assert_eq!(target, "root");
    assert_eq!(after["failures"], 4);
    assert_eq!(after["addresses"], serde_json::json!(["10.0.0.0", "10.0.0.1", "10.0.0.2"]));
    assert_eq!(after["more_addresses"], false);
    assert_eq!(after["reasons"], serde_json::json!(["wrong_password"]));
    assert_eq!(after["first"], clock::rfc3339(now));
    assert_eq!(after["last"], clock::rfc3339(now + 3));
    throttle::sweep(&t.db, now + 2 * failures::WINDOW_MS, 100).await.unwrap();
    assert_eq!(audit_entries(t, "session.login_failed").await.len(), 2, "a window is recorded once");

    // The next failure after a window ended records it at once and opens
    // the next one.
    let later = now + 3 * failures::WINDOW_MS;
    let _ = login(t, "nobody", "wrong password!", "10.0.0.9", None, later).await;
    let _ = login(t, "nobody", "wrong password!", "10.0.0.9", None, later + failures::WINDOW_MS).await;
    let nobody: Vec<_> =
        audit_entries(t, "session.login_failed").await.into_iter().filter(|e| e.0 == "nobody").collect();
    assert_eq!(nobody.len(), 2, "{nobody:?}");
    assert_eq!(nobody[1].1["failures"], 1);

    // A success records the open window before its own entry, and leaves
    // no throttle row behind it.
    let at = later + 10 * failures::WINDOW_MS;
    sweep_all(t, at).await;
    assert_eq!(throttle_rows(t).await, 0, "stale rows are gone");
    for i in 0..2 {
        let _ = login(t, "root", "wrong password!", "10.5.0.1", None, at + i).await;
    }
    assert!(login(t, "root", GOOD, "10.5.0.2", None, at + 2).await.is_ok());
    let failed = audit_entries(t, "session.login_failed").await;
    assert_eq!(failed.last().unwrap().1["failures"], 2);
    let seqs = |action: &'static str| async move {
        use sea_orm::{ColumnTrait, QueryFilter};
        domain::entity::audit_entry::Entity::find()
            .filter(domain::entity::audit_entry::Column::Action.eq(action))
            .all(&t.db)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.seq)
            .max()
            .unwrap()
    };
    assert!(seqs("session.login_failed").await < seqs("session.login").await, "failures first, then the success");
    let mut rows: Vec<String> =
        login_throttle::Entity::find().all(&t.db).await.unwrap().into_iter().map(|r| r.subject).collect();
    rows.sort();
    assert_eq!(rows, ["global", "ip:10.5.0.1"], "only the failures keep a count");
});

// Item 24.3: sixty addresses (127.0.0.0/8 on the host) failing twenty times
// each with a new name every time: the global budget caps what is counted,
// so audit entries and throttle rows stay bounded, and the owner's browser
// still gets in.
db_test!(rotating_addresses_and_names_cannot_grow_storage, async |t: &TestDb| {
    make_user(t, "root", Role::Admin, None).await;
    let hour = 3_600_000;
    // Inside one clock hour, so one global budget applies throughout.
    let start = clock::now_ms() / hour * hour + hour;
    let device = login(t, "root", GOOD, "10.0.0.1", None, start).await.unwrap().device.expect("a device token");
    let (mut refused, mut failed) = (0, 0);
    for a in 0..60 {
        for i in 0..20 {
            let at = start + a * 30_000 + i;
            match login(t, &format!("ghost-{a}-{i}"), "guess guess guess", &format!("127.0.{a}.1"), None, at).await {
                Err(DomainError::Throttled { .. }) => refused += 1,
                Err(DomainError::Invalid { code: "bad_credentials", .. }) => failed += 1,
                other => panic!("{other:?}"),
            }
        }
    }
    let budget = throttle::GLOBAL.max_failures as u64;
    assert_eq!(failed, budget, "the global budget is what gets evaluated");
    assert_eq!(refused, 1200 - budget);
    let rows = throttle_rows(t).await;
    assert!(rows <= 1 + 2 * budget, "one global row, an address and a name per counted failure: {rows}");
    let end = start + 30 * 60_000;
    sweep_all(t, end + failures::WINDOW_MS).await;
    let entries = audit_entries(t, "session.login_failed").await;
    assert!(entries.len() as u64 <= budget, "{} audit entries", entries.len());
    // Every browser without a device token waits for the next hour; the
    // owner's does not.
    let stranger = login(t, "root", GOOD, "10.8.0.1", None, end).await;
    assert!(matches!(stranger, Err(DomainError::Throttled { .. })), "{stranger:?}");
    let owner = login(t, "root", GOOD, "10.0.0.1", Some(device.expose()), end).await;
    assert!(owner.is_ok(), "the owner's browser gets in: {owner:?}");
    assert!(login(t, "root", GOOD, "10.8.0.1", None, start + hour).await.is_ok(), "the next hour, anyone");
    // An hour later everything is swept away; the audit log keeps its entries.
    sweep_all(t, start + 3 * hour).await;
    assert_eq!(throttle_rows(t).await, 0);
    assert_eq!(audit_entries(t, "session.login_failed").await.len(), entries.len());
});

// Item 24.3: the sweep deletes rows idle for an hour, after their audit
// window is recorded, at most `batch` per call; a row still in use stays.
db_test!(stale_throttle_rows_are_swept_in_bounded_batches, async |t: &TestDb| {
    let now = clock::now_ms();
    for i in 0..30 {
        let _ = login(t, &format!("ghost{i}"), "nope nope nope", &format!("10.2.0.{i}"), None, now).await;
    }
    assert_eq!(throttle_rows(t).await, 61, "the global row, thirty addresses, thirty names");
    assert_eq!(throttle::sweep(&t.db, now + 1, 10).await.unwrap(), throttle::Swept::default(), "all in use");
    let mut closed = 0;
    loop {
        let swept = throttle::sweep(&t.db, now + failures::WINDOW_MS, 10).await.unwrap();
        assert!(swept.windows_closed <= 10 && swept.rows_deleted == 0, "{swept:?}");
        if swept.windows_closed == 0 {
            break;
        }
        closed += swept.windows_closed;
    }
    assert_eq!(closed, 30);
    assert_eq!(audit_entries(t, "session.login_failed").await.len(), 30);
    let late = now + throttle::FORGET_AFTER_MS + 1;
    let _ = login(t, "fresh", "nope nope nope", "10.2.1.1", None, late).await;
    let mut deleted = 0;
    loop {
        let swept = throttle::sweep(&t.db, late, 10).await.unwrap();
        assert!(swept.rows_deleted <= 10, "{swept:?}");
        if swept.rows_deleted == 0 {
            break;
        }
        deleted += swept.rows_deleted;
    }
    assert_eq!(deleted, 60, "thirty addresses, thirty names");
    let mut left: Vec<String> =
        login_throttle::Entity::find().all(&t.db).await.unwrap().into_iter().map(|r| r.subject).collect();
    left.sort();
    assert_eq!(left, ["global", "ip:10.2.1.1", "user:fresh"], "the attempt just made keeps its rows");
});

// Nobody can be made to act for the drills' synthetic tenant: not a new
// user, not an existing one moved to it, not a token.
db_test!(nothing_binds_to_the_drill_tenant, async |t: &TestDb| {
    let fx = domain::evidence::drills::fixture(&t.db, &t.vault).await.unwrap();
    drop(fx);
    let drill = domain::evidence::drill_fixture::DRILL_TENANT;
    let new = users::create(
        &t.db,
        &Principal::cli(),
        NewUser {
            username: "drill-ca".into(),
            role: Role::ClinicAdmin,
            tenant: TenantName::given(Some(drill)),
            password: pw(GOOD),
        },
    )
    .await;
    assert!(matches!(new, Err(DomainError::Invalid { code: "synthetic_tenant", .. })), "{new:?}");
    tenant(t, "clinic-a").await;
    make_user(t, "alice", Role::ClinicAdmin, Some("clinic-a")).await;
    let moved = users::update(
        &t.db,
        &admin(),
        "alice",
        UserChange { tenant: Some(TenantName::given(Some(drill))), ..Default::default() },
    )
    .await;
    assert!(matches!(moved, Err(DomainError::Invalid { code: "synthetic_tenant", .. })), "{moved:?}");
    let token =
        tokens::create(&t.db, &Principal::cli(), "drill", Role::ClinicAdmin, TenantName::given(Some(drill)).as_ref())
            .await;
    assert!(matches!(token, Err(DomainError::Invalid { code: "synthetic_tenant", .. })), "{:?}", token.err());
    let listed = users::list(&t.db, &admin()).await.unwrap();
    assert_eq!(
        listed.iter().map(|u| (u.username.as_str(), u.tenant.as_ref().map(|t| t.as_str()))).collect::<Vec<_>>(),
        [("alice", Some("clinic-a"))]
    );
    assert!(tokens::list(&t.db, &admin()).await.unwrap().is_empty());
});
