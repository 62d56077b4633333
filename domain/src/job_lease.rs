//! Job leases: at most one `signet serve` process at a time runs each
//! background job of a deployment whose processes share one database.
//!
//! One row per job in `job_leases` (holder, epoch, expiry). Taking a free or
//! expired lease is one `INSERT … ON CONFLICT (job) DO UPDATE … WHERE the
//! lease has expired`: the database decides which of several processes
//! wins, on both engines. Every change of holder adds one to `epoch`, and a
//! renewal names the epoch it holds, so a holder that was paused past its
//! expiry (and replaced) finds its renewal matching nothing and stops.
//! Expiry is measured by the database's clock, so processes on hosts whose
//! clocks disagree still agree on when a lease is free.
//!
//! Why a table and not PostgreSQL advisory locks: a session lock lives on
//! one pooled connection that the pool may recycle or share, it does not
//! exist on SQLite, and a lock that dies with its connection gives no epoch
//! to fence a stale holder with. A table works the same on both engines
//! and can be read by an operator (`SELECT * FROM job_leases`).

use sea_orm::{
    ConnectionTrait, DatabaseConnection,
    sea_query::{Alias, Expr, ExprTrait, OnConflict, Query},
};

use crate::{clock_offset::db_now, error::DomainResult};

const TABLE: &str = "job_leases";

fn col(name: &str) -> Expr {
    Expr::col((Alias::new(TABLE), Alias::new(name)))
}

/// Takes `job` for `holder` for `ttl_ms` if no one holds it (or its holder
/// let it expire). Returns the new epoch when taken, `None` when another
/// holder's lease is still running.
pub async fn acquire(db: &DatabaseConnection, job: &str, holder: &str, ttl_ms: i64) -> DomainResult<Option<i64>> {
    let backend = db.get_database_backend();
    let expires = db_now(backend).add(ttl_ms);
    let stmt = Query::insert()
        .into_table(Alias::new(TABLE))
        .columns(["job", "holder", "epoch", "expires_at"].map(Alias::new))
        .values_panic([job.into(), holder.into(), 1i64.into(), expires])
        .on_conflict(
            OnConflict::column(Alias::new("job"))
                .update_columns([Alias::new("holder"), Alias::new("expires_at")])
                .value(Alias::new("epoch"), col("epoch").add(1))
                .action_and_where(col("expires_at").lte(db_now(backend)))
                .to_owned(),
        )
        .to_owned();
    if db.execute(&stmt).await?.rows_affected() == 0 {
        return Ok(None);
    }
    Ok(current(db, job).await?.filter(|l| l.holder == holder).map(|l| l.epoch))
}

/// Extends `holder`'s lease on `job` (at `epoch`) to `ttl_ms` from now.
/// `false`: the lease was lost (expired and taken, or released).
pub async fn renew(db: &DatabaseConnection, job: &str, holder: &str, epoch: i64, ttl_ms: i64) -> DomainResult<bool> {
    let backend = db.get_database_backend();
    let stmt = Query::update()
        .table(Alias::new(TABLE))
        .value(Alias::new("expires_at"), db_now(backend).add(ttl_ms))
        .and_where(Expr::col(Alias::new("job")).eq(job))
        .and_where(Expr::col(Alias::new("holder")).eq(holder))
        .and_where(Expr::col(Alias::new("epoch")).eq(epoch))
        .and_where(Expr::col(Alias::new("expires_at")).gt(db_now(backend)))
        .to_owned();
    Ok(db.execute(&stmt).await?.rows_affected() == 1)
}

/// Gives the lease up at once (on drain), so another process need not wait
/// for it to expire.
pub async fn release(db: &DatabaseConnection, job: &str, holder: &str, epoch: i64) -> DomainResult<()> {
    let stmt = Query::update()
        .table(Alias::new(TABLE))
        .value(Alias::new("expires_at"), 0i64)
        .and_where(Expr::col(Alias::new("job")).eq(job))
        .and_where(Expr::col(Alias::new("holder")).eq(holder))
        .and_where(Expr::col(Alias::new("epoch")).eq(epoch))
        .to_owned();
    db.execute(&stmt).await?;
    Ok(())
}

/// A lease as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub holder: String,
    pub epoch: i64,
    pub expires_at: i64,
}

/// The stored lease of `job`, if it was ever taken.
pub async fn current(db: &DatabaseConnection, job: &str) -> DomainResult<Option<Lease>> {
    let stmt = Query::select()
        .columns(["holder", "epoch", "expires_at"].map(Alias::new))
        .from(Alias::new(TABLE))
        .and_where(Expr::col(Alias::new("job")).eq(job))
        .to_owned();
    let Some(row) = db.query_one(&stmt).await? else { return Ok(None) };
    Ok(Some(Lease {
        holder: row.try_get("", "holder")?,
        epoch: row.try_get("", "epoch")?,
        expires_at: row.try_get("", "expires_at")?,
    }))
}

/// A stored lease, and whether it is held now by the database's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub job: String,
    pub lease: Lease,
    pub held: bool,
}

/// Every stored lease, by job name.
pub async fn all(db: &DatabaseConnection) -> DomainResult<Vec<Held>> {
    let stmt = Query::select()
        .columns(["job", "holder", "epoch", "expires_at"].map(Alias::new))
        .expr_as(db_now(db.get_database_backend()), Alias::new("now"))
        .from(Alias::new(TABLE))
        .order_by(Alias::new("job"), sea_orm::Order::Asc)
        .to_owned();
    let mut leases = Vec::new();
    for row in db.query_all(&stmt).await? {
        let lease = Lease {
            holder: row.try_get("", "holder")?,
            epoch: row.try_get("", "epoch")?,
            expires_at: row.try_get("", "expires_at")?,
        };
        let now: i64 = row.try_get("", "now")?;
        leases.push(Held { job: row.try_get("", "job")?, held: lease.expires_at > now, lease });
    }
    Ok(leases)
}
