//! Browser sessions: a random token in an `HttpOnly; SameSite=Strict`
//! cookie; only its SHA-256 digest is stored. Sessions end on logout
//! (server-side), after an idle period, and at an absolute lifetime.

use sea_orm::{ActiveModelTrait, ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, Set};

use super::{
    Actor, Principal,
    failures::{self, Failure},
    throttle,
};
use crate::{
    audit::{self, Change},
    crypto::{Password, RandomToken, random_token, sha256_hex, verify_password, verify_password_dummy},
    db,
    entity::{login_device, session, user},
    error::{DomainError, DomainResult},
};

/// Session lifetimes.
#[derive(Clone, Copy, Debug)]
pub struct SessionPolicy {
    pub idle_ms: i64,
    pub absolute_ms: i64,
}

impl Default for SessionPolicy {
    /// 30 minutes idle, 12 hours absolute.
    fn default() -> Self {
        SessionPolicy { idle_ms: 30 * 60_000, absolute_ms: 12 * 3_600_000 }
    }
}

/// `last_seen_at` is refreshed at most this often, to keep reads cheap.
const TOUCH_EVERY_MS: i64 = 60_000;

/// A successful login: the cookie values (shown to the browser once) and
/// who signed in.
#[derive(Debug)]
pub struct LoginSuccess {
    pub token: RandomToken,
    pub principal: Principal,
    /// A new device token for the browser to keep, when it presented none
    /// that is this account's (see `throttle`).
    pub device: Option<RandomToken>,
}

/// One sign-in attempt as it arrives.
pub struct LoginAttempt<'a> {
    pub username: &'a str,
    pub password: &'a Password,
    /// The client's address: the socket peer, or, when the peer is a trusted
    /// reverse proxy, the address it reported (`app::client_addr`).
    pub client_ip: &'a str,
    /// The device token from the browser's cookie, if any.
    pub device: Option<&'a str>,
}

const BAD_CREDENTIALS: &str = "invalid username or password";
/// Longer passwords are a failed attempt that never reaches the account
/// throttle table; they are verified against the dummy hash only, so their
/// cost is the same as any other guess.
const MAX_PASSWORD_BYTES: usize = 1024;
/// Device tokens unused for this long are forgotten.
const DEVICE_TTL_MS: i64 = 180 * 86_400_000;

/// Verifies on the hash pool. `None` (no such user) verifies against a
/// dummy hash at the same cost.
async fn password_matches(password: &Password, phc: Option<String>) -> bool {
    VERIFICATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let password = Password::new(password.expose().to_owned());
    super::hash_pool::run(move || match phc {
        Some(phc) => verify_password(&password, &phc),
        None => {
            verify_password_dummy(&password);
            false
        }
    })
    .await
    .unwrap_or(false)
}

static VERIFICATIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// argon2 verifications made by sign-ins in this process (every evaluated
/// attempt makes exactly one; for tests and diagnostics).
pub fn password_verifications() -> u64 {
    VERIFICATIONS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Why a sign-in failed, as the audit log records it (the caller is only
/// ever told "invalid username or password").
fn failure_reason(found: Option<&user::Model>, matches: bool) -> &'static str {
    match found {
        None => "unknown_user",
        Some(u) if u.disabled => "disabled",
        Some(_) if !matches => "wrong_password",
        Some(_) => "refused",
    }
}

/// Reserves the attempt on every subject in order (see `throttle`); if one
/// is locked, the reservations already made are taken back.
async fn reserve_all(db: &DatabaseConnection, subjects: &[(&str, throttle::Limit)], now: i64) -> DomainResult<()> {
    for (i, (subject, limit)) in subjects.iter().enumerate() {
        if let Err(wait) = throttle::reserve(db, subject, *limit, now).await? {
            for (earlier, limit) in &subjects[..i] {
                throttle::release(db, earlier, *limit).await?;
            }
            tracing::warn!(subject = %subject_kind(subject), "login refused: throttled");
            return Err(DomainError::Throttled { retry_after_secs: (wait + 999) / 1000 });
        }
    }
    Ok(())
}

/// Checks credentials with global, per-address and per-account throttling
/// (or per-device alone, for a browser this account signed in from),
/// reserved before the password is hashed. Every evaluated attempt costs
/// one argon2 verification, whether the account exists, is disabled or is
/// real. Failures are logged, and audited once per subject and window with
/// a count (`failures`; never the password).
pub async fn login(
    db: &DatabaseConnection,
    policy: SessionPolicy,
    attempt: LoginAttempt<'_>,
    now: i64,
) -> DomainResult<LoginSuccess> {
    let LoginAttempt { username, password, client_ip, device } = attempt;
    let address = throttle::address_subject(client_ip);
    // No stored username can fail validation, so such a name is a wrong
    // guess that never reaches the account throttle table (which would
    // otherwise store whatever text a client sends, at any length). It
    // still costs the argon2 time and counts against the address.
    if super::users::validate_username(username).is_err() || password.expose().len() > MAX_PASSWORD_BYTES {
        reserve_all(db, &[(throttle::GLOBAL_SUBJECT, throttle::GLOBAL), (&address, throttle::ADDRESS)], now).await?;
        password_matches(password, None).await;
        let failure =
            Failure { subject: &address, target: failures::NOT_A_USERNAME, address: &address, reason: "invalid_input" };
        record_failure(db, failure, now).await?;
        return Err(DomainError::invalid("bad_credentials", BAD_CREDENTIALS));
    }
    let found = user::Entity::find().filter(user::Column::Username.eq(username)).one(db).await?;
    // A browser this account signed in from before is throttled on its own
    // failures, not the account's: nobody else can lock it out.
    let known_device = match (device, &found) {
        (Some(token), Some(u)) => login_device::Entity::find_by_id(sha256_hex(token.as_bytes()))
            .one(db)
            .await?
            .filter(|d| d.user_id == u.id && now - d.last_used_at < DEVICE_TTL_MS),
        _ => None,
    };
    // The owner's own browser answers for its own failures only: neither
    // the account's, nor the address's (which a proxy may make everyone's),
    // nor the global budget's. The global budget goes first: an attempt it
    // refuses writes no other row.
    let account = match &known_device {
        Some(d) => throttle::device_subject(&d.digest),
        None => throttle::account_subject(username),
    };
    let unknown_browser = known_device.is_none();
    let mut subjects = Vec::with_capacity(3);
    if unknown_browser {
        subjects.push((throttle::GLOBAL_SUBJECT, throttle::GLOBAL));
        subjects.push((address.as_str(), throttle::ADDRESS));
    }
    subjects.push((account.as_str(), throttle::ACCOUNT));
    reserve_all(db, &subjects, now).await?;
    // Every path costs one argon2 verification: a disabled or unknown
    // account answers no faster than a wrong password for a real one.
    let matches = password_matches(password, found.as_ref().map(|u| u.password_hash.clone())).await;
    let Some(u) = found.as_ref().filter(|u| matches && !u.disabled) else {
        let reason = failure_reason(found.as_ref(), matches);
        record_failure(db, Failure { subject: &account, target: username, address: &address, reason }, now).await?;
        return Err(DomainError::invalid("bad_credentials", BAD_CREDENTIALS));
    };
    let u = u.clone();
    let token = random_token("");
    let txn = db::begin_write(db).await?;
    session::ActiveModel {
        id_digest: Set(token.digest().to_owned()),
        user_id: Set(u.id.clone()),
        created_at: Set(now),
        last_seen_at: Set(now),
        expires_at: Set(now + policy.absolute_ms),
    }
    .insert(&txn)
    .await?;
    let mut active: user::ActiveModel = u.clone().into();
    active.last_login_at = Set(Some(now));
    active.update(&txn).await?;
    // Throttle rows before the audit head (which `clear` may take), as
    // every other writer of both takes them: no lock cycle on PostgreSQL.
    if unknown_browser {
        throttle::release(&txn, &address, throttle::ADDRESS).await?;
        throttle::release(&txn, throttle::GLOBAL_SUBJECT, throttle::GLOBAL).await?;
    }
    throttle::clear(&txn, &account).await?;
    let new_device = match &known_device {
        Some(d) => {
            login_device::Entity::update_many()
                .col_expr(login_device::Column::LastUsedAt, sea_orm::sea_query::Expr::value(now))
                .filter(login_device::Column::Digest.eq(&d.digest))
                .exec(&txn)
                .await?;
            None
        }
        None => {
            login_device::Entity::delete_many()
                .filter(login_device::Column::UserId.eq(&u.id))
                .filter(login_device::Column::LastUsedAt.lt(now - DEVICE_TTL_MS))
                .exec(&txn)
                .await?;
            let t = random_token("");
            login_device::ActiveModel {
                digest: Set(t.digest().to_owned()),
                user_id: Set(u.id.clone()),
                created_at: Set(now),
                last_used_at: Set(now),
            }
            .insert(&txn)
            .await?;
            Some(t)
        }
    };
    let principal = principal_for(&u)?;
    record_session_event(&txn, &u, "session.login").await?;
    txn.commit().await?;
    Ok(LoginSuccess { token, principal, device: new_device })
}

/// Logs a failed sign-in and counts it in its subject's audit window
/// (`failures`): the name tried (only when it is a valid username, so no
/// attacker text reaches the log), the address and why. Never the password.
async fn record_failure(db: &DatabaseConnection, f: Failure<'_>, now: i64) -> DomainResult<()> {
    tracing::info!(username = %f.target, address = %f.address, reason = f.reason, "login failed");
    failures::record(db, f, now).await
}

/// Audits a sign-in or sign-out as the user themself.
async fn record_session_event<C: sea_orm::ConnectionTrait>(
    conn: &C,
    u: &user::Model,
    action: &str,
) -> DomainResult<()> {
    let change = Change {
        action,
        target_kind: "user",
        target_id: &u.username,
        tenant_id: u.tenant_id.as_deref(),
        before: None,
        after: None,
    };
    let actor = Actor::User { id: u.id.clone(), username: u.username.clone() };
    audit::record(conn, &actor, change).await.map(|_| ())
}

fn subject_kind(subject: &str) -> &'static str {
    if subject == throttle::GLOBAL_SUBJECT {
        "global"
    } else if subject.starts_with("ip:") {
        "address"
    } else {
        "account"
    }
}

/// The user's principal. Fails closed: a role this build does not know, or a
/// clinic admin bound to no tenant, is no principal at all (never a weaker
/// role, never every tenant).
pub(super) fn principal_for(u: &user::Model) -> DomainResult<Principal> {
    let actor = Actor::User { id: u.id.clone(), username: u.username.clone() };
    Principal::checked(actor, &u.role, u.tenant_id.clone())
}

/// Whether a request is the person at work, or a page refreshing itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activity {
    /// Counts towards the idle timeout.
    User,
    /// A dashboard's or progress page's own refresh: authenticated, but it
    /// never keeps an idle session alive.
    Background,
}

/// Resolves a session cookie to its principal, enforcing both timeouts.
/// Only [`Activity::User`] requests move the idle timer.
pub async fn authenticate(
    db: &DatabaseConnection,
    policy: SessionPolicy,
    token: &str,
    now: i64,
    activity: Activity,
) -> DomainResult<Principal> {
    let digest = sha256_hex(token.as_bytes());
    let Some(s) = session::Entity::find_by_id(digest.clone()).one(db).await? else {
        return Err(DomainError::Unauthenticated);
    };
    if now >= s.expires_at || now - s.last_seen_at >= policy.idle_ms {
        session::Entity::delete_by_id(digest).exec(db).await?;
        return Err(DomainError::Unauthenticated);
    }
    let Some(u) = user::Entity::find_by_id(s.user_id.clone()).one(db).await? else {
        return Err(DomainError::Unauthenticated);
    };
    if u.disabled {
        return Err(DomainError::Unauthenticated);
    }
    if activity == Activity::User && now - s.last_seen_at >= TOUCH_EVERY_MS {
        session::Entity::update_many()
            .col_expr(session::Column::LastSeenAt, sea_orm::sea_query::Expr::value(now))
            .filter(session::Column::IdDigest.eq(digest))
            .exec(db)
            .await?;
    }
    principal_for(&u)
}

/// Ends a session server-side. Unknown tokens are ignored.
pub async fn logout(db: &DatabaseConnection, token: &str) -> DomainResult<()> {
    let digest = sha256_hex(token.as_bytes());
    let txn = db::begin_write(db).await?;
    if let Some(s) = session::Entity::find_by_id(digest.clone()).one(&txn).await? {
        session::Entity::delete_by_id(digest).exec(&txn).await?;
        if let Some(u) = user::Entity::find_by_id(s.user_id).one(&txn).await? {
            record_session_event(&txn, &u, "session.logout").await?;
        }
    }
    txn.commit().await?;
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::{auth::users, crypto::MasterKey};
    use views::roles::Role;

    /// The only test in this binary that signs in, so the counter is its own.
    #[tokio::test]
    async fn every_evaluated_attempt_costs_one_verification_whoever_it_names() {
        let dir = tempfile::tempdir().unwrap();
        let db = db::connect(&format!("sqlite://{}/t.db?mode=rwc", dir.path().display())).await.unwrap();
        db::migrate(&db).await.unwrap();
        let _vault = crate::startup::open_vault(&db, MasterKey::generate().0).await.unwrap();
        let good = Password::new("correct horse battery".into());
        for (name, role) in [("real", Role::Oncall), ("gone", Role::Oncall)] {
            let new = users::NewUser {
                username: name.into(),
                role,
                tenant: None,
                password: Password::new(good.expose().into()),
            };
            users::create(&db, &Principal::cli(), new).await.unwrap();
        }
        let patch = users::UserChange { disabled: Some(true), ..Default::default() };
        users::update(&db, &Principal::cli(), "gone", patch).await.unwrap();
        let wrong = Password::new("not the password".into());
        let long = Password::new("x".repeat(2000));
        let now = crate::clock::now_ms();
        for (i, (username, password)) in [
            ("real", &wrong),
            ("nobody", &wrong),
            ("gone", &good),
            ("Not A Name!", &wrong),
            ("real", &long),
            ("real", &good),
        ]
        .into_iter()
        .enumerate()
        {
            let ip = format!("10.1.0.{i}");
            let before = password_verifications();
            let r = login(
                &db,
                SessionPolicy::default(),
                LoginAttempt { username, password, client_ip: &ip, device: None },
                now,
            )
            .await;
            assert_eq!(password_verifications() - before, 1, "{username}: exactly one argon2 verification");
            assert_eq!(r.is_ok(), i == 5, "{username}: {r:?}");
            // An impossible name or an oversized password never reaches the
            // account throttle table: only the address counts it.
            if i == 3 || i == 4 {
                let subjects: Vec<String> = crate::entity::login_throttle::Entity::find()
                    .all(&db)
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|r| r.subject)
                    .collect();
                assert!(subjects.contains(&format!("ip:{ip}")), "{subjects:?}");
                let real =
                    crate::entity::login_throttle::Entity::find_by_id("user:real".to_owned()).one(&db).await.unwrap();
                assert_eq!(
                    real.map(|r| r.failures),
                    Some(1),
                    "only the earlier wrong password counted for the account"
                );
                assert!(!subjects.iter().any(|s| s.to_ascii_lowercase().contains("not a name")), "{subjects:?}");
            }
        }
    }
}
