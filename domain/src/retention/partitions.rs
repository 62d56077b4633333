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

use crate::error::DomainResult;

/// Per-minute rollups are kept two days.
pub const MINUTE_ROLLUPS_KEPT_MS: i64 = 2 * 86_400_000;
/// Hourly rollups (events, key uses and failures) and hourly gauge samples
/// are kept 400 days. Signet's own readers look back at most a week (the
/// dashboards' 7-day window, the evidence's per-key counts); the rest is a
/// year and a month for an operator comparing a season with last year's.
pub const HOURLY_ROLLUPS_KEPT_MS: i64 = 400 * 86_400_000;
const _: () = assert!(
    HOURLY_ROLLUPS_KEPT_MS >= (crate::stats::WEEK_HOURS + 24) * 3_600_000,
    "the hourly rollups must outlive the longest window that reads them"
);

/// A day of replay records (by signed timestamp) goes this long after it
/// ends: no message signed in it passes the timestamp gate after the
/// longest tolerance; doubled, for instances whose clocks differ.
pub const REPLAY_DAY_KEPT_MS: i64 = 2 * MAX_TOLERANCE_MS;
const MAX_TOLERANCE_MS: i64 = crate::registry::MAX_TOLERANCE_SECS * 1000;
const _: () = assert!(REPLAY_DAY_KEPT_MS > MAX_TOLERANCE_MS, "the upkeep must never re-create a day the purge dropped");

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
    /// A fixed period in milliseconds.
    For(i64),
    /// Per endpoint, its dedup retention: a day goes once the longest of
    /// them has passed.
    LongestDedup,
    /// Per endpoint, its body retention: a day goes once the longest of
    /// them has passed, after carrying the bodies an open quarantine entry
    /// still holds forward into today's partition ([`CARRY_FORWARD`]).
    LongestBody,
}

/// A table partitioned by UTC day of `column`, which counts `unit_ms`.
#[derive(Debug, Clone, Copy)]
pub struct Partitioned {
    pub table: &'static str,
    pub column: &'static str,
    pub unit_ms: i64,
    pub keep: Keep,
    /// How long before now a row may still be dated (ms): the upkeep keeps
    /// the day that was then too. Replay records are dated by the sender's
    /// clock, up to the longest tolerance before a midnight just passed.
    pub dated_back_ms: i64,
}

/// Every range-partitioned table (`gauge_samples` is listed by unit into
/// its two range-partitioned halves). The migrations
/// `m20261206_000100_partitioned_logs`, `m20261207_000220_event_bodies` and
/// `m20261207_000230_partitioned_replay` created them. `replay_records` has
/// one more partition, `replay_records_unsigned` (`signed_at` below 1),
/// which is never dropped: its rows go by expiry.
pub const PARTITIONED: [Partitioned; 9] = [
    Partitioned {
        table: "delivery_log",
        column: "answered_at",
        unit_ms: 1,
        keep: Keep::LongestDedup,
        dated_back_ms: 0,
    },
    Partitioned { table: "event_bodies", column: "filed_at", unit_ms: 1, keep: Keep::LongestBody, dated_back_ms: 0 },
    Partitioned {
        table: "replay_records",
        column: "signed_at",
        unit_ms: 1,
        keep: Keep::For(REPLAY_DAY_KEPT_MS),
        dated_back_ms: MAX_TOLERANCE_MS,
    },
    Partitioned {
        table: "event_rollups",
        column: "minute",
        unit_ms: 60_000,
        keep: Keep::For(MINUTE_ROLLUPS_KEPT_MS),
        dated_back_ms: 0,
    },
    Partitioned {
        table: "event_rollups_hourly",
        column: "hour",
        unit_ms: 3_600_000,
        keep: Keep::For(HOURLY_ROLLUPS_KEPT_MS),
        dated_back_ms: 0,
    },
    Partitioned {
        table: "key_use_rollups",
        column: "hour",
        unit_ms: 3_600_000,
        keep: Keep::For(HOURLY_ROLLUPS_KEPT_MS),
        dated_back_ms: 0,
    },
    Partitioned {
        table: "key_failure_rollups",
        column: "hour",
        unit_ms: 3_600_000,
        keep: Keep::For(HOURLY_ROLLUPS_KEPT_MS),
        dated_back_ms: 0,
    },
    Partitioned {
        table: "gauge_samples_minute",
        column: "bucket",
        unit_ms: 60_000,
        keep: Keep::For(MINUTE_ROLLUPS_KEPT_MS),
        dated_back_ms: 0,
    },
    Partitioned {
        table: "gauge_samples_hour",
        column: "bucket",
        unit_ms: 3_600_000,
        keep: Keep::For(HOURLY_ROLLUPS_KEPT_MS),
        dated_back_ms: 0,
    },
];

fn on_postgres(db: &DatabaseConnection) -> bool {
    db.get_database_backend() == DbBackend::Postgres
}

/// Creates the partitions of today (at `now_ms`) and the [`AHEAD_DAYS`]
/// after it that are missing, and yesterday's for a table whose rows may be
/// dated before midnight while it is still within `dated_back_ms` of it (a
/// server restarted just after midnight, days after its last upkeep);
/// returns how many it created.
pub async fn upkeep(db: &DatabaseConnection, now_ms: i64) -> DomainResult<u64> {
    let today = partitioning::day_of(now_ms);
    cover_days(db, |t| (partitioning::day_of(now_ms - t.dated_back_ms), today + AHEAD_DAYS)).await
}

/// Creates the missing partitions of every day from `from_ms` to `to_ms`
/// (both included): for loading or seeding rows dated in the past.
pub async fn cover(db: &DatabaseConnection, from_ms: i64, to_ms: i64) -> DomainResult<u64> {
    cover_days(db, |_| (partitioning::day_of(from_ms), partitioning::day_of(to_ms))).await
}

/// Creates the missing partitions of each table's `days` (first and last).
async fn cover_days(db: &DatabaseConnection, days_of: impl Fn(&Partitioned) -> (i64, i64)) -> DomainResult<u64> {
    if !on_postgres(db) {
        return Ok(0);
    }
    let mut created = 0;
    for t in &PARTITIONED {
        let (first, last) = days_of(t);
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

/// The longest retentions of any endpoint, which decide when a day of the
/// tables kept per endpoint can go.
#[derive(Debug, Clone, Copy, Default)]
pub struct Longest {
    pub dedup_ms: i64,
    pub body_ms: i64,
}

/// Before a day of `event_bodies` is dropped, the bodies an open quarantine
/// entry holds are filed again, now (`$1`, today's partition): a release
/// needs them, whatever their age. `{part}` is the day's partition. The
/// rows are read `FOR SHARE`: a KEK rewrap resealing one of them commits
/// first, and its new ciphertext is the one copied.
const CARRY_FORWARD: &str = "INSERT INTO event_bodies (tenant_id, endpoint_id, event_id, received_at, filed_at, \
                             kek_version, body_ciphertext) \
                             SELECT b.tenant_id, b.endpoint_id, b.event_id, b.received_at, $1, b.kek_version, \
                             b.body_ciphertext FROM {part} b WHERE EXISTS (SELECT 1 FROM quarantine q \
                             WHERE q.tenant_id = b.tenant_id AND q.endpoint_id = b.endpoint_id \
                             AND q.event_id = b.event_id AND q.status = 'open') FOR SHARE OF b";

/// What one run of [`drop_expired`] did.
#[derive(Debug, Clone, Copy, Default)]
pub struct Dropped {
    pub partitions: u64,
    /// Bodies of open quarantine entries filed again before their day went.
    pub bodies_carried: u64,
}

/// Drops every partition whose whole day is past its table's retention at
/// `now_ms`. [`super::purge::run`] starts with it; public so that
/// `dashbench --daily-purges` can time the drops apart from the row deletes.
pub async fn drop_expired(db: &DatabaseConnection, now_ms: i64, longest: Longest) -> DomainResult<Dropped> {
    let mut dropped = Dropped::default();
    if !on_postgres(db) {
        return Ok(dropped);
    }
    for t in &PARTITIONED {
        let keep_ms = match t.keep {
            Keep::For(ms) => ms,
            Keep::LongestDedup => longest.dedup_ms,
            Keep::LongestBody => longest.body_ms,
        };
        // A row is past retention when older than the cutoff; a day's rows
        // all are once the day has ended by then.
        let cutoff = now_ms.saturating_sub(keep_ms);
        let expired: Vec<i64> = days(db, t.table).await?.into_iter().filter(|d| (d + 1) * DAY_MS <= cutoff).collect();
        for day in expired {
            let txn = locked(db).await?;
            let name = partitioning::partition_name(t.table, day);
            if !present(&txn, &name).await? {
                // Another instance dropped it between the read and the lock.
                txn.commit().await?;
                continue;
            }
            let mut carried = 0;
            if t.keep == Keep::LongestBody {
                let sql = CARRY_FORWARD.replace("{part}", &name);
                carried = txn
                    .execute_raw(Statement::from_sql_and_values(DbBackend::Postgres, sql, [now_ms.into()]))
                    .await?
                    .rows_affected();
            }
            txn.execute_unprepared(&format!("DROP TABLE IF EXISTS {name}")).await?;
            txn.commit().await?;
            tracing::info!(partition = %name, carried, "partition dropped");
            dropped.partitions += 1;
            dropped.bodies_carried += carried;
        }
    }
    Ok(dropped)
}

async fn present<C: ConnectionTrait>(conn: &C, table: &str) -> DomainResult<bool> {
    let row = conn
        .query_one_raw(Statement::from_sql_and_values(
            DbBackend::Postgres,
            "SELECT to_regclass($1) IS NOT NULL AS present",
            [table.into()],
        ))
        .await?;
    Ok(row.map(|r| r.try_get::<bool>("", "present")).transpose()?.unwrap_or(false))
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
