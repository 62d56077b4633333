//! Failed sign-ins in the audit log: one entry per subject and window, with
//! a count, so a flood of failures cannot grow the append-only log without
//! bound.
//!
//! A failure's audit subject is its account subject (`user:<name>`, or
//! `device:<digest>` for a browser the account signed in from before), or
//! its address when the name tried is not a valid username. The first
//! failure of a subject opens a window of [`WINDOW_MS`]; it and every later
//! failure in the window are counted in the subject's throttle row (the
//! name tried, up to [`WINDOW_ADDRESSES`] distinct addresses, the distinct
//! reasons, first and last time). The audit log is append-only, so nothing
//! there is ever updated: the window's one `session.login_failed` entry is
//! appended when the window closes, which happens at the first of
//! - the subject's next failure after the window ended (which opens the next
//!   window),
//! - a successful sign-in of the subject (before its `session.login` entry,
//!   in the same transaction),
//! - [`close_ended`], which `signet serve` runs every 10 s.
//!
//! Every failure is still logged (not audited) as it happens.

use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DbBackend, EntityTrait, QueryFilter, QueryOrder, QuerySelect,
    Set, sea_query::Expr,
};

use super::Actor;
use crate::{
    audit::{self, Change},
    clock, db,
    entity::login_throttle,
    error::DomainResult,
};

/// How long one audit window of a subject lasts.
pub const WINDOW_MS: i64 = 15 * 60_000;
/// Distinct addresses kept per window (more are marked, not listed).
pub const WINDOW_ADDRESSES: usize = 8;
/// The audit target of a failure whose name is not a valid username.
pub const NOT_A_USERNAME: &str = "(not a valid username)";
const MORE: &str = "…";

/// One evaluated, failed sign-in.
#[derive(Debug, Clone, Copy)]
pub struct Failure<'a> {
    /// The audit subject (see the module documentation).
    pub subject: &'a str,
    /// The name tried when valid, else [`NOT_A_USERNAME`].
    pub target: &'a str,
    /// The throttle's form of the client address (`ip:…`).
    pub address: &'a str,
    pub reason: &'a str,
}

/// Counts a failure in its subject's window, closing an ended window first.
pub async fn record(db: &DatabaseConnection, f: Failure<'_>, now: i64) -> DomainResult<()> {
    let txn = db::begin_write(db).await?;
    // The row was made by the attempt's reservation, unless a success of the
    // same subject cleared it meanwhile.
    login_throttle::Entity::insert(login_throttle::ActiveModel {
        subject: Set(f.subject.to_owned()),
        failures: Set(0),
        last_attempt_at: Set(now),
        locked_until: Set(None),
        window_at: Set(None),
        window_last_at: Set(None),
        window_failures: Set(0),
        window_target: Set(None),
        window_addresses: Set(None),
        window_reasons: Set(None),
    })
    .on_conflict_do_nothing_on([login_throttle::Column::Subject])
    .exec_without_returning(&txn)
    .await?;
    let Some(mut row) = locked_row(&txn, f.subject).await? else {
        return Ok(());
    };
    if row.window_at.is_some_and(|at| at + WINDOW_MS <= now) {
        close(&txn, &row).await?;
        row.window_at = None;
    }
    let address = f.address.trim_start_matches("ip:");
    let (at, failures, addresses, reasons) = match row.window_at {
        Some(at) => (
            at,
            row.window_failures.saturating_add(1),
            with_address(row.window_addresses.as_deref().unwrap_or(""), address),
            with_item(row.window_reasons.as_deref().unwrap_or(""), f.reason),
        ),
        None => (now, 1, address.to_owned(), f.reason.to_owned()),
    };
    login_throttle::Entity::update_many()
        .col_expr(login_throttle::Column::WindowAt, Expr::value(at))
        .col_expr(login_throttle::Column::WindowLastAt, Expr::value(now))
        .col_expr(login_throttle::Column::WindowFailures, Expr::value(failures))
        .col_expr(login_throttle::Column::WindowTarget, Expr::value(f.target))
        .col_expr(login_throttle::Column::WindowAddresses, Expr::value(addresses))
        .col_expr(login_throttle::Column::WindowReasons, Expr::value(reasons))
        .filter(login_throttle::Column::Subject.eq(f.subject))
        .exec(&txn)
        .await?;
    txn.commit().await?;
    Ok(())
}

/// Appends the window of every subject whose window ended, at most `batch`
/// of them, each in its own short transaction. Returns how many.
pub async fn close_ended(db: &DatabaseConnection, now: i64, batch: u64) -> DomainResult<u64> {
    let ended: Vec<String> = login_throttle::Entity::find()
        .select_only()
        .column(login_throttle::Column::Subject)
        .filter(login_throttle::Column::WindowAt.lte(now - WINDOW_MS))
        .order_by_asc(login_throttle::Column::WindowAt)
        .limit(batch)
        .into_tuple()
        .all(db)
        .await?;
    let mut closed = 0;
    for subject in ended {
        let txn = db::begin_write(db).await?;
        // Another instance may have closed it meanwhile.
        if let Some(row) = locked_row(&txn, &subject).await?
            && row.window_at.is_some_and(|at| at + WINDOW_MS <= now)
        {
            close(&txn, &row).await?;
            closed += 1;
        }
        txn.commit().await?;
    }
    Ok(closed)
}

/// Appends `row`'s open window, if any, and empties it; the caller holds
/// the row's lock (or SQLite's write transaction).
pub(super) async fn close<C: ConnectionTrait>(conn: &C, row: &login_throttle::Model) -> DomainResult<()> {
    let Some(at) = row.window_at else { return Ok(()) };
    let addresses: Vec<&str> = list(row.window_addresses.as_deref()).collect();
    let more = addresses.last() == Some(&MORE);
    let addresses = &addresses[..addresses.len() - usize::from(more)];
    let target = row.window_target.as_deref().unwrap_or(NOT_A_USERNAME);
    let change = Change {
        action: "session.login_failed",
        target_kind: "user",
        target_id: target,
        tenant_id: None,
        before: None,
        after: Some(serde_json::json!({
            "failures": row.window_failures,
            "first": clock::rfc3339(at),
            "last": clock::rfc3339(row.window_last_at.unwrap_or(at)),
            "addresses": addresses,
            "more_addresses": more,
            "reasons": list(row.window_reasons.as_deref()).collect::<Vec<_>>(),
        })),
    };
    audit::record(conn, &Actor::System, change).await?;
    login_throttle::Entity::update_many()
        .col_expr(login_throttle::Column::WindowAt, Expr::value(Option::<i64>::None))
        .col_expr(login_throttle::Column::WindowLastAt, Expr::value(Option::<i64>::None))
        .col_expr(login_throttle::Column::WindowFailures, Expr::value(0))
        .col_expr(login_throttle::Column::WindowTarget, Expr::value(Option::<String>::None))
        .col_expr(login_throttle::Column::WindowAddresses, Expr::value(Option::<String>::None))
        .col_expr(login_throttle::Column::WindowReasons, Expr::value(Option::<String>::None))
        .filter(login_throttle::Column::Subject.eq(&row.subject))
        .exec(conn)
        .await?;
    Ok(())
}

/// The subject's row, locked until the transaction ends (PostgreSQL `FOR
/// UPDATE`; SQLite's write transaction is exclusive already).
pub(super) async fn locked_row<C: ConnectionTrait>(
    conn: &C,
    subject: &str,
) -> DomainResult<Option<login_throttle::Model>> {
    let mut q = login_throttle::Entity::find_by_id(subject.to_owned());
    if conn.get_database_backend() == DbBackend::Postgres {
        q = q.lock_exclusive();
    }
    Ok(q.one(conn).await?)
}

fn list(stored: Option<&str>) -> impl Iterator<Item = &str> {
    stored.unwrap_or("").split(',').filter(|s| !s.is_empty())
}

fn with_item(stored: &str, item: &str) -> String {
    if list(Some(stored)).any(|s| s == item) { stored.to_owned() } else { join(stored, item) }
}

/// Adds a distinct address; past [`WINDOW_ADDRESSES`], marks that there
/// were more instead.
fn with_address(stored: &str, address: &str) -> String {
    let known: Vec<&str> = list(Some(stored)).collect();
    if known.contains(&address) || known.last() == Some(&MORE) {
        stored.to_owned()
    } else if known.len() >= WINDOW_ADDRESSES {
        join(stored, MORE)
    } else {
        join(stored, address)
    }
}

fn join(stored: &str, item: &str) -> String {
    if stored.is_empty() { item.to_owned() } else { format!("{stored},{item}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_distinct_and_capped() {
        let mut s = String::new();
        for i in 0..20 {
            s = with_address(&s, &format!("10.0.0.{}", i % 12));
        }
        let items: Vec<&str> = list(Some(&s)).collect();
        assert_eq!(items.len(), WINDOW_ADDRESSES + 1, "{s}");
        assert_eq!(items.last(), Some(&MORE));
        assert_eq!(with_item("wrong_password", "wrong_password"), "wrong_password");
        assert_eq!(with_item("wrong_password", "disabled"), "wrong_password,disabled");
    }
}
