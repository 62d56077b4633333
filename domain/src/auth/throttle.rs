//! Failed-login throttling per account and per client address, stored in
//! the database so every instance sees the same counters.

use sea_orm::{
    sea_query::{Expr, ExprTrait, OnConflict},
    ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, Set,
};

use crate::{db, entity::login_throttle, error::DomainResult};

/// Limits for one kind of subject.
#[derive(Clone, Copy, Debug)]
pub struct Limit {
    pub max_failures: i32,
    pub window_ms: i64,
    pub lockout_ms: i64,
}

/// OWASP-style defaults: an account locks for 15 minutes after 5 failures in
/// 15 minutes; an address after 20.
pub const ACCOUNT: Limit = Limit { max_failures: 5, window_ms: 15 * 60_000, lockout_ms: 15 * 60_000 };
pub const ADDRESS: Limit = Limit { max_failures: 20, window_ms: 15 * 60_000, lockout_ms: 15 * 60_000 };

pub fn account_subject(username: &str) -> String {
    format!("user:{}", username.to_ascii_lowercase())
}
pub fn address_subject(ip: &str) -> String {
    format!("ip:{ip}")
}

/// Milliseconds until `subject` may try again; `None` when not locked.
pub async fn locked_for(db: &DatabaseConnection, subject: &str, now: i64) -> DomainResult<Option<i64>> {
    let row = login_throttle::Entity::find_by_id(subject.to_owned()).one(db).await?;
    Ok(row.and_then(|r| r.locked_until).filter(|until| *until > now).map(|until| until - now))
}

/// Counts one failure atomically (an upsert, so concurrent failures are
/// never lost) and locks the subject when it reaches the limit.
pub async fn record_failure(db: &DatabaseConnection, subject: &str, limit: Limit, now: i64) -> DomainResult<()> {
    let txn = db::begin_write(db).await?;
    let cutoff = now - limit.window_ms;
    // Qualified with the table: inside ON CONFLICT DO UPDATE these are the
    // stored row's values.
    let stored = |c: login_throttle::Column| Expr::col((login_throttle::Entity, c));
    let in_window = stored(login_throttle::Column::WindowStartedAt).gt(cutoff);
    login_throttle::Entity::insert(login_throttle::ActiveModel {
        subject: Set(subject.to_owned()),
        failures: Set(1),
        window_started_at: Set(now),
        locked_until: Set(None),
    })
    .on_conflict(
        OnConflict::column(login_throttle::Column::Subject)
            .value(
                login_throttle::Column::Failures,
                Expr::case(in_window.clone(), stored(login_throttle::Column::Failures).add(1)).finally(1),
            )
            .value(
                login_throttle::Column::WindowStartedAt,
                Expr::case(in_window, stored(login_throttle::Column::WindowStartedAt)).finally(now),
            )
            .to_owned(),
    )
    .exec(&txn)
    .await?;
    login_throttle::Entity::update_many()
        .col_expr(login_throttle::Column::LockedUntil, Expr::value(now + limit.lockout_ms))
        .filter(login_throttle::Column::Subject.eq(subject))
        .filter(login_throttle::Column::Failures.gte(limit.max_failures))
        .exec(&txn)
        .await?;
    txn.commit().await?;
    Ok(())
}

/// Forgets an account's failures after a successful login.
pub async fn clear<C: ConnectionTrait>(conn: &C, subject: &str) -> DomainResult<()> {
    login_throttle::Entity::delete_by_id(subject.to_owned()).exec(conn).await?;
    Ok(())
}
