//! Gates 6 and 9: the one claim interface. A delivery expected to apply
//! first joins a group commit (`batch`); anything else, and anything a batch
//! hands back, takes the one-event transaction (`single`), with retries for
//! transient failures and, when they run out, the tenant's fallback.
//!
//! Calls go one way, down: this module holds the entry points and the retry
//! loop; `batch` and `single` the two kinds of transaction; `rows`,
//! `context`, `log` and `rollbacks` the helpers they share, which call
//! nothing above them.

mod batch;
mod context;
mod log;
mod rollbacks;
mod rows;
mod single;

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

pub use batch::BatchStats;
use batch::{Batcher, Reply};
use context::ClaimContext;
pub use context::Traffic;
pub use log::DeliveryLogStats;
pub use rollbacks::Rollbacks;
use sea_orm::{DatabaseConnection, DbErr};

use super::{
    admission::{Admission, Held},
    faults::Faults,
    outcome::{Outcome, Refusal},
};
use crate::{db, vault::Vault};
use views::quarantine::QuarantineReason;

/// How often a transient database failure is retried before giving up.
const TRANSIENT_ATTEMPTS: u32 = 3;

/// Concurrent claim batches on PostgreSQL: while some commit, the next
/// collects. On the 2-core bench machine 1, 2, 3, 4 and 8 workers gave the
/// same throughput within its noise. SQLite has one writer, so one.
const PG_BATCH_WORKERS: usize = 4;

pub(super) struct Claims {
    ctx: Arc<ClaimContext>,
    batcher: Batcher,
    log: log::DeliveryLog,
    /// Claim attempts repeated after a transient failure or a lost
    /// connection (for `/metrics`).
    retries: AtomicU64,
}

impl Claims {
    /// Starts the claim workers (inside a tokio runtime).
    pub fn start(db: DatabaseConnection, vault: Arc<Vault>, faults: Faults) -> Claims {
        let ctx = Arc::new(ClaimContext::new(db, vault, faults));
        let workers = if ctx.is_sqlite() { 1 } else { PG_BATCH_WORKERS };
        Claims {
            batcher: Batcher::start(ctx.clone(), workers),
            log: log::DeliveryLog::start(ctx.clone()),
            ctx,
            retries: AtomicU64::new(0),
        }
    }

    /// Queues a delivery-log row (never waits; see `log`).
    pub fn log(&self, row: crate::entity::delivery_log::ActiveModel) {
        self.log.record(row);
    }

    pub async fn flush_log(&self) {
        self.log.flush().await;
    }

    pub fn log_stats(&self) -> &DeliveryLogStats {
        &self.log.stats
    }

    pub fn faults(&self) -> &Faults {
        &self.ctx.faults
    }

    pub fn batch_stats(&self) -> &BatchStats {
        &self.batcher.stats
    }

    pub fn retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }

    pub fn rollbacks(&self) -> &Rollbacks {
        &self.ctx.rollbacks
    }

    /// Gates 6 to 9 for an admitted, quarantined or refused delivery.
    /// `span` (the claim span) is told whether the claim joined a batch.
    pub async fn settle(&self, admission: Admission, span: &tracing::Span) -> Outcome {
        // A drill delivery with a drill fault armed takes the one-event
        // path, where the fault sits, so it never holds up others' commit.
        let drill_fault = admission.verified().endpoint().synthetic && self.ctx.faults.drill.is_armed();
        let (admission, prior) = match admission {
            Admission::Admitted(job) if !drill_fault => match self.batcher.claim(job, span).await {
                Some(Reply::Done(outcome)) => {
                    span.record("path", "batch");
                    return outcome;
                }
                Some(Reply::Alone(job, prior)) => (Admission::Admitted(*job), prior),
                None => {
                    tracing::error!("the claim workers stopped before answering");
                    return Outcome::Unavailable;
                }
            },
            other => (other, None),
        };
        span.record("path", "alone");
        self.alone(&admission, prior, Traffic::Live).await
    }

    /// Gates 6 to 9 for a test delivery: the one-event path, rolled back at
    /// the end (see [`Traffic::Test`]).
    pub async fn rehearse(&self, admission: Admission) -> Outcome {
        self.alone(&admission, None, Traffic::Test).await
    }

    /// The one-event path. `prior` is the error of a failed batch this
    /// delivery was in: that batch may have committed.
    async fn alone(&self, a: &Admission, prior: Option<DbErr>, traffic: Traffic) -> Outcome {
        let mut last: Option<DbErr> = prior;
        let (mut attempt, mut lost) = (0, 0);
        while attempt < TRANSIENT_ATTEMPTS {
            let queued = self.ctx.write_turn(a.verified().endpoint().synthetic).await;
            let result = single::attempt(&self.ctx, a, traffic).await;
            drop(queued);
            let result = match result {
                Ok((outcome, after)) => {
                    after.wait().await;
                    Ok(outcome)
                }
                Err(e) => {
                    self.ctx.rolled_back_for(traffic, rollbacks::RollbackReason::Error);
                    Err(e)
                }
            };
            match result {
                // A failed earlier attempt may have committed before its
                // answer was lost: then the replay record this retry trips
                // over is its own, and the event's claim says what happened.
                Ok(Outcome::Refused(Refusal::Replay)) if last.is_some() => {
                    return single::replayed_after_failure(&self.ctx, a).await;
                }
                Ok(outcome) => return outcome,
                Err(e) if db::is_lost_connection(&e) && lost < db::lost_connection_retries(&self.ctx.db) => {
                    tracing::info!(error = %e, "the database had closed a pooled connection; retrying on another");
                    self.retries.fetch_add(1, Ordering::Relaxed);
                    lost += 1;
                    last = Some(e);
                }
                Err(e) if db::is_transient(&e) => {
                    tracing::warn!(attempt, error = %e, "transient failure while claiming; retrying");
                    self.retries.fetch_add(1, Ordering::Relaxed);
                    last = Some(e);
                    tokio::time::sleep(Duration::from_millis(20 * 2u64.pow(attempt))).await;
                    attempt += 1;
                }
                Err(e) => {
                    tracing::error!(error = %e, "claim transaction failed");
                    return Outcome::Unavailable;
                }
            }
        }
        self.exhausted(a, last, traffic).await
    }

    /// Transient failures ran out. A tenant with retries enabled asks the
    /// provider to come back (503); otherwise the event is kept rather than
    /// lost, if the database can still record it.
    async fn exhausted(&self, a: &Admission, last: Option<DbErr>, traffic: Traffic) -> Outcome {
        let ep = a.verified().endpoint();
        if ep.retries_enabled {
            tracing::error!(error = ?last, tenant = %ep.tenant_slug, "transient failures exhausted; answering 503");
            return Outcome::Unavailable;
        }
        let (held_id, event_type) = match a {
            // Gate 8 first: an event its key may not send is refused, never
            // kept for a release to apply later.
            Admission::Refused(_, refusal) => return Outcome::Refused(*refusal),
            Admission::Admitted(job) => (&job.event_id, Some(job.envelope.event_type.as_str())),
            Admission::Quarantine(Held { event_id, event_type, .. }, _) => (event_id, event_type.as_deref()),
        };
        match single::quarantine(&self.ctx, a.verified(), held_id, event_type, QuarantineReason::Transient, traffic)
            .await
        {
            Ok(outcome) => outcome,
            Err(e) => {
                self.ctx.rolled_back_for(traffic, rollbacks::RollbackReason::Error);
                tracing::error!(error = %e, "could not quarantine after transient failures");
                Outcome::Unavailable
            }
        }
    }
}
