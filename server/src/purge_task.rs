//! The retention purge task in `signet serve`: runs
//! [`domain::retention::purge::run`] shortly after start and then every interval,
//! and reports each run in the metrics (the domain writes the audit entry).

use std::{sync::Arc, time::Duration};

use domain::retention::purge;
use sea_orm::DatabaseConnection;
use tokio::{sync::watch, task::JoinHandle};

use crate::{job_lease::JobLease, metrics::Metrics};

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

/// `first` is the delay before the first run (so start-up is not slowed).
/// Runs only while this process holds `lease` (one purge across processes).
pub fn spawn(
    db: DatabaseConnection,
    metrics: Arc<Metrics>,
    first: Duration,
    every: Duration,
    lease: JobLease,
) -> PurgeHandle {
    let (stop, mut stopped) = watch::channel(false);
    let task = tokio::spawn(async move {
        let mut wait = first;
        loop {
            tokio::select! {
                _ = stopped.changed() => break,
                _ = tokio::time::sleep(wait) => {}
            }
            wait = every;
            // Deletes are idempotent, so a holder that loses the lease in the
            // middle of a run does no harm; it just does not start another.
            let Some(_step) = lease.step().await else { continue };
            match purge::run(&db, domain::clock::now_ms(), purge::DEFAULT_BATCH).await {
                Ok(report) => {
                    metrics.record_purge(&report);
                    if !report.is_empty() {
                        tracing::info!(
                            claims = report.claims_deleted,
                            quarantine = report.quarantine_deleted,
                            bodies = report.bodies_cleared,
                            replay = report.replay_deleted,
                            minute_rollups = report.minute_rollups_deleted,
                            deliveries = report.deliveries_deleted,
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
    });
    PurgeHandle { stop, task }
}
