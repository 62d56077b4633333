//! The retention purge task in `signet serve`: keeps the PostgreSQL
//! partitions ahead ([`domain::retention::partitions::upkeep`]) and runs
//! [`domain::retention::purge::run`] shortly after start and then every
//! interval, and reports each run in the metrics (the domain writes the
//! audit entry).
//!
//! The task ticks at least every [`UPKEEP_EVERY`] even when the purge runs
//! less often or not at all: without a default partition, writes need
//! tomorrow's partitions whatever the purge setting.

use std::{sync::Arc, time::Duration};

use domain::retention::{partitions, purge};
use sea_orm::DatabaseConnection;
use tokio::{sync::watch, task::JoinHandle, time::Instant};

use crate::{job_lease::JobLease, metrics::Metrics};

/// The longest time between two partition upkeeps.
pub const UPKEEP_EVERY: Duration = Duration::from_secs(3_600);

pub struct PurgeHandle {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl PurgeHandle {
    /// Lets a running batch finish, then ends the task.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// `first` is the delay before the first tick (so start-up is not slowed);
/// `every` the purge's interval, `None` for upkeep only. Runs only while this
/// process holds `lease` (one purge and upkeep across processes).
pub fn spawn(
    db: DatabaseConnection,
    metrics: Arc<Metrics>,
    first: Duration,
    every: Option<Duration>,
    lease: JobLease,
) -> PurgeHandle {
    let (stop, mut stopped) = watch::channel(false);
    let tick = every.map_or(UPKEEP_EVERY, |e| e.min(UPKEEP_EVERY));
    let task = tokio::spawn(async move {
        let mut wait = first;
        let mut last_purge: Option<Instant> = None;
        loop {
            tokio::select! {
                _ = stopped.changed() => break,
                _ = tokio::time::sleep(wait) => {}
            }
            wait = tick;
            // Deletes and drops are idempotent, so a holder that loses the
            // lease in the middle of a run does no harm; it just does not
            // start another.
            let Some(_step) = lease.step().await else { continue };
            let purge_due = every.is_some_and(|e| last_purge.is_none_or(|at| at.elapsed() >= e));
            if purge_due {
                last_purge = Some(Instant::now());
            }
            run_once(&db, &metrics, purge_due).await;
        }
    });
    PurgeHandle { stop, task }
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
