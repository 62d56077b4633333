//! This process's clock against the database's. Instances that share one
//! database each date what they store by their own clock: a claim's and a
//! replay record's day, the partitions made ahead, the timestamp gate's
//! window. The replay records' day partitions allow instances an hour of
//! disagreement (`retention::partitions::REPLAY_DAY_KEPT_MS`); job leases
//! read the database's clock and need none. `signet serve` measures the
//! offset at start (and refuses to start beyond [`MAX_START_OFFSET_MS`])
//! and every minute after, for its metric and alert; every CLI command
//! refuses too, before it migrates.

use sea_orm::{
    ConnectionTrait, DatabaseConnection, DbBackend,
    sea_query::{Alias, Expr, Query},
};

use crate::{
    clock,
    error::{DomainError, DomainResult},
};

/// Beyond this (either way) `signet serve` does not start, nor does any CLI
/// command run: a tenth of the
/// hour the replay records' days allow, and twice the default timestamp
/// tolerance, past which a provider's fresh messages would be refused.
pub const MAX_START_OFFSET_MS: i64 = 10 * 60 * 1000;

/// The database's clock in unix milliseconds, as an SQL expression.
pub fn db_now(backend: DbBackend) -> Expr {
    match backend {
        DbBackend::Postgres => Expr::cust("CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)"),
        _ => Expr::cust("CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)"),
    }
}

/// One measurement: how far this process's clock is ahead of the
/// database's (negative: behind), to within `uncertainty_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offset {
    pub offset_ms: i64,
    /// Half the query's round trip: the database read its clock somewhere
    /// within it.
    pub uncertainty_ms: i64,
}

impl Offset {
    /// Whether the clocks certainly differ by more than `limit_ms`.
    pub fn beyond(&self, limit_ms: i64) -> bool {
        self.offset_ms.abs() - self.uncertainty_ms > limit_ms
    }
}

/// Reads the database's clock between two reads of this process's, and
/// compares it with their midpoint. On SQLite the database runs in this
/// process, so the offset is that of the query's own time.
pub async fn measure(db: &DatabaseConnection) -> DomainResult<Offset> {
    let query = Query::select().expr_as(db_now(db.get_database_backend()), Alias::new("now")).to_owned();
    let before = clock::now_ms();
    let row = db.query_one(&query).await?;
    let after = clock::now_ms();
    let db_ms: i64 = match row {
        Some(row) => row.try_get("", "now")?,
        None => return Err(sea_orm::DbErr::RecordNotFound("the database's clock".into()).into()),
    };
    Ok(Offset { offset_ms: (before + after) / 2 - db_ms, uncertainty_ms: (after - before + 1) / 2 })
}

/// [`measure`], refused (`clock_offset`) beyond [`MAX_START_OFFSET_MS`]:
/// before this process writes anything dated by its clock.
pub async fn refuse_if_far_off(db: &DatabaseConnection) -> DomainResult<Offset> {
    let o = measure(db).await?;
    if o.beyond(MAX_START_OFFSET_MS) {
        let (secs, way) = (o.offset_ms.abs() / 1000, if o.offset_ms > 0 { "ahead of" } else { "behind" });
        return Err(DomainError::Refused {
            code: "clock_offset",
            message: format!(
                "this machine's clock is {secs} s {way} the database's (at most {} s allowed); fix its time \
                 sync (NTP) and try again",
                MAX_START_OFFSET_MS / 1000
            ),
        });
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::Offset;

    #[test]
    fn only_an_offset_past_the_limit_by_more_than_its_uncertainty_counts() {
        let at = |offset_ms, uncertainty_ms| Offset { offset_ms, uncertainty_ms };
        assert!(at(601_000, 500).beyond(600_000));
        assert!(at(-601_000, 500).beyond(600_000), "behind counts as ahead does");
        assert!(!at(600_400, 500).beyond(600_000), "within the round trip");
        assert!(!at(0, 0).beyond(600_000));
    }
}
