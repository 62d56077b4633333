//! Failed-login throttling, stored in the database so every instance sees
//! the same counters.
//!
//! Threat model notes:
//! - An attempt is *reserved* before its password is hashed: one atomic
//!   upsert counts it and reads whether the subject is locked. Parallel
//!   guesses therefore cannot all slip in before the first failure is
//!   recorded; at most [`Limit::max_failures`] are ever evaluated before a
//!   lock, and the rest answer "too many attempts" without argon2.
//! - A success clears the account's (or device's) count and takes back its
//!   own reservations on the address and the global budget, so successes
//!   never count against either; a failure keeps the reservation as its
//!   count. A lock begins with the attempt that reaches the limit and grows
//!   with every further counted attempt (30 s, 1 min, 2 min … at most
//!   15 min). Attempts refused while locked are not counted, so hammering a
//!   locked account does not lengthen its lock.
//! - Subjects: the client's address (IPv6 grouped by /64, since one host
//!   holds a whole /64), and either the account (`user:`) or, when the
//!   browser presents a device token this account was signed in with before
//!   (`device:`), that device alone, without the address: behind a NAT, or
//!   a proxy not listed as trusted, every client shares one address, and an
//!   attacker's failures
//!   there must not lock out the owner's own browser. An attacker without
//!   the owner's browser can lock the account, and the address, only for
//!   browsers the account has never been used from: the owner's own device
//!   is throttled on its own failures alone, so nobody can lock the real
//!   owner out for good.
//! - A global budget ([`GLOBAL`]) caps the attempts counted for browsers
//!   without such a device token, whatever address or name they use: an
//!   attacker rotating addresses (a whole IPv6 /48, or 127.0.0.0/8 on the
//!   host) and names spends it, and then every browser without a device
//!   token waits for the next clock hour, while the owner's own browser is
//!   still throttled on its own failures alone. It is reserved first, so an
//!   attempt it refuses writes no other row.
//! - Rows stay bounded: every row but a device's is made by a counted
//!   attempt, and the global budget bounds those; a row taken back to no
//!   failures goes at once, and [`sweep`] (run every 10 s by `signet serve`)
//!   deletes rows idle for [`FORGET_AFTER_MS`], in batches, after their
//!   audit window (`failures`) is recorded.

use std::net::IpAddr;

use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryTrait, Set,
    sea_query::{Expr, ExprTrait, OnConflict, Order, Query},
};

use super::failures;
use crate::{db, entity::login_throttle, error::DomainResult};

/// Limits for one kind of subject.
#[derive(Clone, Copy, Debug)]
pub struct Limit {
    /// Counted attempts without a success before the subject locks.
    pub max_failures: i32,
    /// `None`: each counted attempt past the limit doubles the lock, and
    /// the count is forgotten after an idle hour. `Some(ms)`: a budget per
    /// clock period of that length (from the epoch), locked once spent
    /// until the period ends.
    pub period_ms: Option<i64>,
}

/// OWASP-style defaults: an account or device locks after 5 failures; an
/// address after 20 (it may sit behind one NAT with many people).
pub const ACCOUNT: Limit = Limit { max_failures: 5, period_ms: None };
pub const ADDRESS: Limit = Limit { max_failures: 20, period_ms: None };
/// Attempts counted per clock hour for all browsers without a device token
/// together.
pub const GLOBAL: Limit = Limit { max_failures: 50, period_ms: Some(60 * 60_000) };
/// The subject of the global budget.
pub const GLOBAL_SUBJECT: &str = "global";

/// The first lock's length; each further counted attempt doubles it.
const FIRST_LOCK_MS: i64 = 30_000;
/// No lock is longer than this.
const MAX_LOCK_MS: i64 = 15 * 60_000;
/// A subject with no attempt for this long starts counting afresh (and its
/// row is deleted by [`sweep`]).
pub const FORGET_AFTER_MS: i64 = 60 * 60_000;

pub fn account_subject(username: &str) -> String {
    format!("user:{}", username.to_ascii_lowercase())
}

pub fn device_subject(device_digest: &str) -> String {
    format!("device:{device_digest}")
}

/// The address a limit applies to: IPv4 as is (IPv4-mapped IPv6 too),
/// IPv6 by its /64, since one host commonly holds a whole /64.
pub fn address_subject(ip: &str) -> String {
    match ip.parse::<IpAddr>() {
        Ok(IpAddr::V6(v6)) => match v6.to_ipv4_mapped() {
            Some(v4) => format!("ip:{v4}"),
            None => {
                let s = v6.segments();
                format!("ip:{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
            }
        },
        Ok(IpAddr::V4(v4)) => format!("ip:{v4}"),
        // Never from a socket; kept apart from real addresses.
        Err(_) => "ip:unknown".to_owned(),
    }
}

/// When a lock set now ends, once `failures` reached the limit.
fn lock_until(now: i64, failures: i32, limit: Limit) -> i64 {
    match limit.period_ms {
        Some(period) => period_start(now, period) + period,
        None => now + lock_ms(failures, limit),
    }
}

fn period_start(now: i64, period: i64) -> i64 {
    now - now.rem_euclid(period)
}

/// How long a growing lock lasts once `failures` reached the limit.
fn lock_ms(failures: i32, limit: Limit) -> i64 {
    let over = (failures - limit.max_failures).clamp(0, 20);
    std::cmp::min(FIRST_LOCK_MS << over, MAX_LOCK_MS)
}

/// Reserves one attempt for `subject`: counts it, and locks the subject when
/// this attempt reaches the limit. `Err(ms)` when the subject is locked (the
/// attempt was not counted and must not be evaluated).
pub async fn reserve(db: &DatabaseConnection, subject: &str, limit: Limit, now: i64) -> DomainResult<Result<(), i64>> {
    let txn = db::begin_write(db).await?;
    // Qualified with the table: inside ON CONFLICT DO UPDATE these are the
    // stored row's values.
    let stored = |c: login_throttle::Column| Expr::col((login_throttle::Entity, c));
    let locked = stored(login_throttle::Column::LockedUntil).gt(now);
    let recent = match limit.period_ms {
        Some(period) => stored(login_throttle::Column::LastAttemptAt).gte(period_start(now, period)),
        None => stored(login_throttle::Column::LastAttemptAt).gt(now - FORGET_AFTER_MS),
    };
    let mut stmt = login_throttle::Entity::insert(login_throttle::ActiveModel {
        subject: Set(subject.to_owned()),
        failures: Set(1),
        last_attempt_at: Set(now),
        locked_until: Set(None),
        window_at: Set(None),
        window_last_at: Set(None),
        window_failures: Set(0),
        window_target: Set(None),
        window_addresses: Set(None),
        window_reasons: Set(None),
    })
    .on_conflict(
        OnConflict::column(login_throttle::Column::Subject)
            .value(
                login_throttle::Column::Failures,
                Expr::case(locked.clone(), stored(login_throttle::Column::Failures))
                    .case(recent, stored(login_throttle::Column::Failures).add(1))
                    .finally(1),
            )
            .value(
                login_throttle::Column::LastAttemptAt,
                Expr::case(locked, stored(login_throttle::Column::LastAttemptAt)).finally(now),
            )
            .to_owned(),
    )
    .into_query();
    stmt.returning(Query::returning().columns([login_throttle::Column::Failures, login_throttle::Column::LockedUntil]));
    let row = txn
        .query_one(&stmt)
        .await?
        .ok_or_else(|| sea_orm::DbErr::RecordNotFound("login_throttle upsert returned nothing".into()))?;
    let failures: i32 = row.try_get("", "failures")?;
    let locked_until: Option<i64> = row.try_get("", "locked_until")?;
    if let Some(until) = locked_until.filter(|u| *u > now) {
        txn.commit().await?;
        return Ok(Err(until - now));
    }
    if failures >= limit.max_failures {
        let until = lock_until(now, failures, limit);
        login_throttle::Entity::update_many()
            .col_expr(login_throttle::Column::LockedUntil, Expr::value(until))
            .filter(login_throttle::Column::Subject.eq(subject))
            .exec(&txn)
            .await?;
        if subject == GLOBAL_SUBJECT {
            tracing::warn!(
                until = %crate::clock::rfc3339(until),
                "the sign-in budget for browsers without a device token is spent; they are refused until then"
            );
        }
    }
    txn.commit().await?;
    Ok(Ok(()))
}

/// Takes back a reservation: its attempt was not evaluated after all
/// (another subject of the same attempt was locked), or it succeeded and
/// must not count against a subject that a success does not clear (the
/// address, the global budget). A lock that this very reservation set, by
/// reaching the limit, goes with it: an attempt that is not counted locks
/// nothing. A row left with no failures, no lock and no audit window to
/// record is deleted: it says nothing a missing row does not.
pub async fn release<C: ConnectionTrait>(conn: &C, subject: &str, limit: Limit) -> DomainResult<()> {
    let gone = login_throttle::Entity::delete_many()
        .filter(login_throttle::Column::Subject.eq(subject))
        .filter(login_throttle::Column::Failures.lte(1))
        .filter(login_throttle::Column::WindowAt.is_null())
        .exec(conn)
        .await?;
    if gone.rows_affected > 0 {
        return Ok(());
    }
    let failures = Expr::col(login_throttle::Column::Failures);
    login_throttle::Entity::update_many()
        .col_expr(login_throttle::Column::Failures, failures.clone().sub(1))
        .col_expr(
            login_throttle::Column::LockedUntil,
            Expr::case(failures.sub(1).lt(limit.max_failures), Expr::value(Option::<i64>::None))
                .finally(Expr::col(login_throttle::Column::LockedUntil))
                .into(),
        )
        .filter(login_throttle::Column::Subject.eq(subject))
        .filter(login_throttle::Column::Failures.gt(0))
        .exec(conn)
        .await?;
    Ok(())
}

/// Forgets a subject's failures after a successful login, recording its
/// open audit window first.
pub async fn clear<C: ConnectionTrait>(conn: &C, subject: &str) -> DomainResult<()> {
    if let Some(row) = failures::locked_row(conn, subject).await? {
        failures::close(conn, &row).await?;
    }
    login_throttle::Entity::delete_by_id(subject.to_owned()).exec(conn).await?;
    Ok(())
}

/// What one [`sweep`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// Audit windows that had ended and were recorded.
    pub windows_closed: u64,
    /// Rows idle for [`FORGET_AFTER_MS`] and deleted.
    pub rows_deleted: u64,
}

/// Records ended audit windows, then deletes rows idle for
/// [`FORGET_AFTER_MS`] that hold no lock and no open window: at most
/// `batch` of each, so one sweep is bounded work.
pub async fn sweep(db: &DatabaseConnection, now: i64, batch: u64) -> DomainResult<Swept> {
    let windows_closed = failures::close_ended(db, now, batch).await?;
    // Repeated outside the sub-select, so a row a sign-in is counting at
    // this moment (PostgreSQL re-checks these on the row it waited for)
    // stays.
    let stale = || {
        Condition::all()
            .add(login_throttle::Column::LastAttemptAt.lt(now - FORGET_AFTER_MS))
            .add(login_throttle::Column::WindowAt.is_null())
            .add(
                Condition::any()
                    .add(login_throttle::Column::LockedUntil.is_null())
                    .add(login_throttle::Column::LockedUntil.lte(now)),
            )
    };
    let some = Query::select()
        .column(login_throttle::Column::Subject)
        .from(login_throttle::Entity)
        .cond_where(stale())
        .order_by(login_throttle::Column::LastAttemptAt, Order::Asc)
        .limit(batch)
        .to_owned();
    let rows_deleted = login_throttle::Entity::delete_many()
        .filter(stale())
        .filter(login_throttle::Column::Subject.in_subquery(some))
        .exec(db)
        .await?
        .rows_affected;
    Ok(Swept { windows_closed, rows_deleted })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_addresses_are_grouped_by_64() {
        assert_eq!(address_subject("2001:db8:1:2:aaaa::1"), address_subject("2001:db8:1:2:ffff:1:2:3"));
        assert_ne!(address_subject("2001:db8:1:2::1"), address_subject("2001:db8:1:3::1"));
        assert_eq!(address_subject("2001:db8:1:2::1"), "ip:2001:db8:1:2::/64");
        assert_eq!(address_subject("::ffff:192.0.2.7"), "ip:192.0.2.7");
        assert_eq!(address_subject("192.0.2.7"), "ip:192.0.2.7");
        assert_ne!(address_subject("192.0.2.7"), address_subject("192.0.2.8"));
        assert_eq!(address_subject("not an address"), "ip:unknown");
    }

    #[test]
    fn locks_grow_from_30_seconds_to_15_minutes() {
        assert_eq!(lock_ms(5, ACCOUNT), 30_000);
        assert_eq!(lock_ms(6, ACCOUNT), 60_000);
        assert_eq!(lock_ms(7, ACCOUNT), 120_000);
        assert_eq!(lock_ms(50, ACCOUNT), MAX_LOCK_MS);
        assert_eq!(lock_ms(20, ADDRESS), 30_000);
    }

    #[test]
    fn the_global_budget_locks_until_its_hour_ends() {
        let hour = 3_600_000;
        assert_eq!(lock_until(5 * hour + 1, 50, GLOBAL), 6 * hour);
        assert_eq!(lock_until(5 * hour, 80, GLOBAL), 6 * hour);
        assert_eq!(lock_until(5 * hour, 5, ACCOUNT), 5 * hour + 30_000);
    }
}
