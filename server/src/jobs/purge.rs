//! The retention purge job in `signet serve`: keeps the PostgreSQL
//! partitions ahead ([`domain::retention::partitions::upkeep`]) and runs
//! [`domain::retention::purge::run`] shortly after start and then every
//! interval, and reports each run in the metrics (the domain writes the
//! audit entry).
//!
//! The job ticks at least every [`UPKEEP_EVERY`] even when the purge runs
//! less often or not at all: without a default partition, writes need
//! tomorrow's partitions whatever the purge setting.

use std::{sync::Arc, time::Duration};

use domain::retention::{partitions, purge};
use sea_orm::DatabaseConnection;
use tokio::time::Instant;

use super::{Job, Next, Pace, Step};
use crate::metrics::Metrics;

/// The longest time between two partition upkeeps.
pub const UPKEEP_EVERY: Duration = Duration::from_secs(3_600);

/// The partition upkeep, and the purge every `every` (`None`: upkeep only).
pub struct Purge {
    db: DatabaseConnection,
    metrics: Arc<Metrics>,
    every: Option<Duration>,
    last_purge: Option<Instant>,
}

impl Purge {
    pub fn new(db: DatabaseConnection, metrics: Arc<Metrics>, every: Option<Duration>) -> Self {
        Purge { db, metrics, every, last_purge: None }
    }

    /// `first` is the delay before the first tick; a drain lets a running
    /// batch finish.
    pub fn pace(&self, first: Duration) -> Pace {
        let every = self.every.map_or(UPKEEP_EVERY, |e| e.min(UPKEEP_EVERY));
        Pace { first, every, finish_on_stop: true }
    }
}

impl Job for Purge {
    // Deletes and drops are idempotent, so a holder that loses the lease in
    // the middle of a run does no harm; it just does not start another.
    async fn step(&mut self, _: &Step) -> Next {
        let purge_due = self.every.is_some_and(|e| self.last_purge.is_none_or(|at| at.elapsed() >= e));
        if purge_due {
            self.last_purge = Some(Instant::now());
        }
        run_once(&self.db, &self.metrics, purge_due).await;
        Next::Wait
    }
}

/// One tick: the partition upkeep, then the purge when it is due.
async fn run_once(db: &DatabaseConnection, metrics: &Metrics, purge_due: bool) {
    let now = domain::clock::now_ms();
    match partitions::upkeep(db, now).await {
        Ok(_) => metrics.record_partition_upkeep(true),
        Err(e) => {
            metrics.record_partition_upkeep(false);
            tracing::error!(error = %e, "partition upkeep failed; the next tick retries");
        }
    }
    if !purge_due {
        return;
    }
    match purge::run(db, now, purge::DEFAULT_BATCH).await {
        Ok(report) => {
            metrics.record_purge(&report);
            if !report.is_empty() {
                tracing::info!(
                    claims = report.claims_deleted,
                    quarantine = report.quarantine_deleted,
                    bodies = report.bodies_cleared,
                    replay = report.replay_deleted,
                    minute_rollups = report.minute_rollups_deleted,
                    hourly_rollups = report.hourly_rollups_deleted,
                    deliveries = report.deliveries_deleted,
                    partitions = report.partitions_dropped,
                    bodies_carried = report.bodies_carried,
                    "retention purge"
                );
            }
        }
        Err(e) => {
            metrics.record_purge_failure();
            tracing::error!(error = %e, "retention purge failed; the next run retries");
        }
    }
}
