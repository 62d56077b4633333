//! Daily range partitions on PostgreSQL (issue 28 item 1): the tables that
//! grow with traffic and need no uniqueness across days, their upkeep and the
//! purge's drop rule. SQLite has no partitions: every function here does
//! nothing there, and its purge keeps deleting rows in batches.
//!
//! There is no default partition: a row outside every partition fails its
//! insert loudly rather than landing in a catch-all nothing ever drops. So
//! [`upkeep`] runs before the server serves and then on the purge's tick,
//! keeping today and [`AHEAD_DAYS`] more. Everything that adds or drops a
//! partition holds one advisory lock ([`LOCK_KEY`]), so instances starting or
//! purging at once take turns, and waits at most [`LOCK_TIMEOUT`] for the
//! parent table's lock (a long dashboard query must not queue intake behind
//! the upkeep); a run that gives up is retried on the next tick.

use std::collections::BTreeSet;

use migrations::partitioning::{self, LOCK_KEY};
pub use migrations::partitioning::{DAY_MS, day_of, partition_name};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement, TransactionTrait};

use crate::{error::DomainResult, retention::purge::MINUTE_ROLLUPS_KEPT_MS};

/// Days after today that always have their partitions. The upkeep runs at
/// least hourly, so writes meet a missing partition only after three days
/// of failed upkeep (`signet_partition_upkeep_runs_total{result="error"}`).
pub const AHEAD_DAYS: i64 = 3;
const _: () = assert!(AHEAD_DAYS >= 2, "issue 28: partitions at least two days ahead");
/// How long adding or dropping a partition waits for its parent's lock.
pub const LOCK_TIMEOUT: &str = "5s";

/// How long a table's rows are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Never purged (the hourly rollups and gauge samples).
    Always,
    /// A fixed period in milliseconds.
    For(i64),
    /// Per endpoint, its dedup retention: a day goes once the longest of
    /// them has passed.
    LongestDedup,
    /// Until every row of the day has expired: a past day goes once none of
    /// its rows has this column (ms) at or after now.
    UntilExpired(&'static str),
}

/// A table partitioned by UTC day of `column`, which counts `unit_ms`.
#[derive(Debug, Clone, Copy)]
pub struct Partitioned {
    pub table: &'static str,
    pub column: &'static str,
    pub unit_ms: i64,
    pub keep: Keep,
    /// Whether some rows must outlive their day's retention (the claims of
    /// open quarantine entries): a day holding one is not dropped.
    pub held: bool,
}

const fn ranged(table: &'static str, column: &'static str, unit_ms: i64, keep: Keep) -> Partitioned {
    Partitioned { table, column, unit_ms, keep, held: false }
}

/// Every range-partitioned table (`gauge_samples` is listed by unit into
/// its two range-partitioned halves). The migrations
/// `m20261206_000100_partitioned_logs` and `m20261207_000180_partitioned_claims`
/// created them.
pub const PARTITIONED: [Partitioned; 9] = [
    ranged("delivery_log", "answered_at", 1, Keep::LongestDedup),
    ranged("event_rollups", "minute", 60_000, Keep::For(MINUTE_ROLLUPS_KEPT_MS)),
    ranged("event_rollups_hourly", "hour", 3_600_000, Keep::Always),
    ranged("key_use_rollups", "hour", 3_600_000, Keep::Always),
    ranged("key_failure_rollups", "hour", 3_600_000, Keep::Always),
    ranged("gauge_samples_minute", "bucket", 60_000, Keep::For(MINUTE_ROLLUPS_KEPT_MS)),
    ranged("gauge_samples_hour", "bucket", 3_600_000, Keep::Always),
    CLAIMS,
    // `recorded_at` is set by the database (m20261207_000181).
    ranged("replay_records", "recorded_at", 1, Keep::UntilExpired("expires_at")),
];

/// The claims and their sealed bodies (`received_at` in ms). A claim of an
/// open quarantine entry must outlive its retention (release needs it, and
/// it keeps the event's redeliveries duplicates): its day stays, and the
/// purge deletes that day's other rows one by one meanwhile.
pub const CLAIMS: Partitioned =
    Partitioned { table: "inbox_claims", column: "received_at", unit_ms: 1, keep: Keep::LongestDedup, held: true };

/// The first instant of the oldest day that is not yet past a retention of
/// `keep_ms` at `now_ms`: every row before it lies in a day the purge drops
/// (or keeps for a held row).
pub fn retained_from(now_ms: i64, keep_ms: i64) -> i64 {
    partitioning::day_of(now_ms.saturating_sub(keep_ms)) * DAY_MS
}

fn on_postgres(db: &DatabaseConnection) -> bool {
    db.get_database_backend() == DbBackend::Postgres
}

/// Creates the partitions of today (at `now_ms`) and the [`AHEAD_DAYS`]
/// after it that are missing; returns how many it created.
pub async fn upkeep(db: &DatabaseConnection, now_ms: i64) -> DomainResult<u64> {
    let today = partitioning::day_of(now_ms);
    cover_days(db, today, today + AHEAD_DAYS).await
}

/// Creates the missing partitions of every day from `from_ms` to `to_ms`
/// (both included): for loading or seeding rows dated in the past.
pub async fn cover(db: &DatabaseConnection, from_ms: i64, to_ms: i64) -> DomainResult<u64> {
    cover_days(db, partitioning::day_of(from_ms), partitioning::day_of(to_ms)).await
}

async fn cover_days(db: &DatabaseConnection, first: i64, last: i64) -> DomainResult<u64> {
    if !on_postgres(db) {
        return Ok(0);
    }
    let mut created = 0;
    for t in &PARTITIONED {
        // Read without the lock first: most runs find nothing to do and
        // should not queue behind another instance's work.
        let have = days(db, t.table).await?;
        if (first..=last).all(|d| have.contains(&d)) {
            continue;
        }
        let txn = locked(db).await?;
        let have = days(&txn, t.table).await?;
        for day in (first..=last).filter(|d| !have.contains(d)) {
            txn.execute_unprepared(&partitioning::create_sql(t.table, t.unit_ms, day)).await?;
            created += 1;
        }
        txn.commit().await?;
    }
    if created > 0 {
        tracing::info!(created, "partitions created");
    }
    Ok(created)
}

/// Drops every partition whose whole day is past its table's retention at
/// `now_ms`; `longest_dedup_ms` is the longest dedup retention of any
/// endpoint. Returns the partitions dropped.
pub(crate) async fn drop_expired(db: &DatabaseConnection, now_ms: i64, longest_dedup_ms: i64) -> DomainResult<u64> {
    if !on_postgres(db) {
        return Ok(0);
    }
    let mut dropped = 0;
    for t in &PARTITIONED {
        let keep_ms = match t.keep {
            Keep::Always => continue,
            Keep::For(ms) => ms,
            Keep::LongestDedup => longest_dedup_ms,
            Keep::UntilExpired(_) => 0,
        };
        // A row is past retention when older than the cutoff; a day's rows
        // all are once the day has ended by then.
        let cutoff = now_ms.saturating_sub(keep_ms);
        let expired: Vec<i64> = days(db, t.table).await?.into_iter().filter(|d| (d + 1) * DAY_MS <= cutoff).collect();
        for day in expired {
            let txn = locked(db).await?;
            let name = partitioning::partition_name(t.table, day);
            if let Some(why) = kept_by_a_row(&txn, t, &name, now_ms).await? {
                txn.commit().await?;
                tracing::info!(partition = %name, why, "partition kept past its retention");
                continue;
            }
            txn.execute_unprepared(&format!("DROP TABLE IF EXISTS {name}")).await?;
            txn.commit().await?;
            tracing::info!(partition = %name, "partition dropped");
            dropped += 1;
        }
    }
    Ok(dropped)
}

/// Why the past-retention partition `name` of `t` must stay, if it must:
/// it holds a claim of an open quarantine entry, or a record not yet
/// expired. The parent is locked first (the drop would lock it anyway), so
/// no row changes between this check and the drop.
async fn kept_by_a_row<C: ConnectionTrait>(
    conn: &C,
    t: &Partitioned,
    name: &str,
    now_ms: i64,
) -> DomainResult<Option<&'static str>> {
    let (sql, why) = match t.keep {
        Keep::UntilExpired(column) => {
            (format!("SELECT 1 AS kept FROM {name} WHERE {column} >= {now_ms} LIMIT 1"), "a row not yet expired")
        }
        // Entries are opened with their claim, received now: none appears
        // in a past day.
        _ if t.held => (
            format!(
                "SELECT 1 AS kept FROM {name} c JOIN quarantine q ON q.tenant_id = c.tenant_id \
                 AND q.endpoint_id = c.endpoint_id AND q.event_id = c.event_id WHERE q.status = 'open' LIMIT 1"
            ),
            "a claim of an open quarantine entry",
        ),
        _ => return Ok(None),
    };
    conn.execute_unprepared(&format!("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE", t.table)).await?;
    Ok(conn.query_one_raw(Statement::from_string(DbBackend::Postgres, sql)).await?.map(|_| why))
}

/// A transaction holding the partition lock, with the parent lock's wait
/// bounded.
async fn locked(db: &DatabaseConnection) -> DomainResult<sea_orm::DatabaseTransaction> {
    let txn = db.begin().await?;
    // Unbounded: the holder's own statements are bounded by the timeout.
    txn.execute_unprepared(&format!("SELECT pg_advisory_xact_lock({LOCK_KEY})")).await?;
    txn.execute_unprepared(&format!("SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")).await?;
    Ok(txn)
}

/// The days `parent` has partitions for (by their names).
pub async fn days<C: ConnectionTrait>(conn: &C, parent: &str) -> DomainResult<BTreeSet<i64>> {
    let rows = conn
        .query_all_raw(Statement::from_sql_and_values(DbBackend::Postgres, partitioning::LIST_SQL, [parent.into()]))
        .await?;
    let mut out = BTreeSet::new();
    for row in rows {
        let name: String = row.try_get("", "name")?;
        if let Some(day) = partitioning::partition_day(parent, &name) {
            out.insert(day);
        }
    }
    Ok(out)
}
