//! Browser sessions: a random token in an `HttpOnly; SameSite=Strict`
//! cookie; only its SHA-256 digest is stored. Sessions end on logout
//! (server-side), after an idle period, and at an absolute lifetime.

use sea_orm::{ActiveModelTrait, ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, Set};

use super::{throttle, Actor, Principal};
use crate::{
    audit::{self, Change},
    crypto::{random_token, sha256_hex, verify_password, verify_password_dummy, Password, RandomToken},
    db,
    entity::{session, user},
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

/// A successful login: the cookie value (shown to the browser once) and who
/// signed in.
#[derive(Debug)]
pub struct LoginSuccess {
    pub token: RandomToken,
    pub principal: Principal,
}

const BAD_CREDENTIALS: &str = "invalid username or password";
/// Longer passwords are refused before hashing (argon2 would take them, at
/// a cost the caller chooses).
const MAX_PASSWORD_BYTES: usize = 1024;

/// At most this many argon2 verifications run at once (19 MiB each); the
/// rest wait their turn without holding an async worker.
const HASH_SLOTS: usize = 2;

/// Verifies on the blocking pool, bounded by [`HASH_SLOTS`], so a burst of
/// sign-ins never stalls the async workers that take webhooks. `None` (no
/// such user) verifies against a dummy hash at the same cost.
async fn password_matches(password: &Password, phc: Option<String>) -> bool {
    static SLOTS: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();
    let slots = SLOTS.get_or_init(|| tokio::sync::Semaphore::new(HASH_SLOTS));
    let Ok(_slot) = slots.acquire().await else { return false };
    let password = Password::new(password.expose().to_owned());
    tokio::task::spawn_blocking(move || match phc {
        Some(phc) => verify_password(&password, &phc),
        None => {
            verify_password_dummy(&password);
            false
        }
    })
    .await
    .unwrap_or(false)
}

/// Checks credentials with per-account and per-address throttling. Unknown
/// users cost the same argon2 work as known ones.
pub async fn login(
    db: &DatabaseConnection,
    policy: SessionPolicy,
    username: &str,
    password: &Password,
    client_ip: &str,
    now: i64,
) -> DomainResult<LoginSuccess> {
    let address = throttle::address_subject(client_ip);
    // No stored username can fail validation, so such a name is a wrong
    // guess that never reaches the account throttle table (which would
    // otherwise store whatever text a client sends, at any length). It
    // still costs the argon2 time and counts against the address.
    if super::users::validate_username(username).is_err() || password.expose().len() > MAX_PASSWORD_BYTES {
        if let Some(wait) = throttle::locked_for(db, &address, now).await? {
            return Err(DomainError::Throttled { retry_after_secs: (wait + 999) / 1000 });
        }
        password_matches(password, None).await;
        throttle::record_failure(db, &address, throttle::ADDRESS, now).await?;
        tracing::info!("login failed");
        return Err(DomainError::invalid("bad_credentials", BAD_CREDENTIALS));
    }
    let account = throttle::account_subject(username);
    for subject in [&account, &address] {
        if let Some(wait) = throttle::locked_for(db, subject, now).await? {
            tracing::warn!(subject = %subject_kind(subject), "login refused: throttled");
            return Err(DomainError::Throttled { retry_after_secs: (wait + 999) / 1000 });
        }
    }
    let found = user::Entity::find().filter(user::Column::Username.eq(username)).one(db).await?;
    // Every path costs one argon2 verification: a disabled or unknown
    // account answers no faster than a wrong password for a real one.
    let matches = password_matches(password, found.as_ref().map(|u| u.password_hash.clone())).await;
    let ok_user = found.filter(|u| matches && !u.disabled);
    let Some(u) = ok_user else {
        throttle::record_failure(db, &account, throttle::ACCOUNT, now).await?;
        throttle::record_failure(db, &address, throttle::ADDRESS, now).await?;
        tracing::info!("login failed");
        return Err(DomainError::invalid("bad_credentials", BAD_CREDENTIALS));
    };
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
    throttle::clear(&txn, &account).await?;
    let principal = principal_for(&u)?;
    record_session_event(&txn, &u, "session.login").await?;
    txn.commit().await?;
    Ok(LoginSuccess { token, principal })
}

/// Audits a sign-in or sign-out as the user themself.
async fn record_session_event<C: sea_orm::ConnectionTrait>(conn: &C, u: &user::Model, action: &str) -> DomainResult<()> {
    let change = Change { action, target_kind: "user", target_id: &u.username, tenant_id: u.tenant_id.as_deref(), before: None, after: None };
    let actor = Actor::User { id: u.id.clone(), username: u.username.clone() };
    audit::record(conn, &actor, change).await.map(|_| ())
}

fn subject_kind(subject: &str) -> &'static str {
    if subject.starts_with("ip:") { "address" } else { "account" }
}

/// The user's principal. Fails closed: a role this build does not know, or a
/// clinic admin bound to no tenant, is no principal at all (never a weaker
/// role, never every tenant).
pub(super) fn principal_for(u: &user::Model) -> DomainResult<Principal> {
    let actor = Actor::User { id: u.id.clone(), username: u.username.clone() };
    Principal::checked(actor, &u.role, u.tenant_id.clone())
}

/// Resolves a session cookie to its principal, enforcing both timeouts.
pub async fn authenticate(db: &DatabaseConnection, policy: SessionPolicy, token: &str, now: i64) -> DomainResult<Principal> {
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
    if now - s.last_seen_at >= TOUCH_EVERY_MS {
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
