//! Periodic upkeep: the KEK ring refresh in every process (so `signet kek
//! rotate` on another instance takes effect here), each process's clock
//! against the database's, and the maintenance sweeps in the one holding
//! their lease: shared writes, done once.

use std::{sync::Arc, time::Duration};

use domain::vault::Vault;
use sea_orm::DatabaseConnection;

use super::{Job, Next, Step};

/// How often each runs.
pub const EVERY: Duration = Duration::from_secs(10);

/// Audit windows recorded and stale rows deleted per sign-in throttle
/// sweep (each at most; the global budget lets far fewer appear in 10 s).
const THROTTLE_SWEEP_BATCH: u64 = 200;

/// Steps of holding between two audit chain verifications (5 minutes).
const VERIFY_EVERY: u64 = 30;

/// Reloads the KEK ring from the database (local).
pub struct RingRefresh {
    pub db: DatabaseConnection,
    pub vault: Arc<Vault>,
}

impl Job for RingRefresh {
    async fn step(&mut self, _: &Step) -> Next {
        if let Err(e) = self.vault.refresh(&self.db).await {
            tracing::error!(error = %e, "key ring refresh failed");
        }
        Next::Wait
    }
}

/// How often each process compares its clock with the database's.
pub const CLOCK_EVERY: Duration = Duration::from_secs(60);

/// An offset past which the process says so in its log (the alert rule's
/// threshold, `SignetClockOffset`).
const CLOCK_WARN_MS: i64 = 30_000;

/// Measures this process's clock against the database's for
/// `signet_clock_offset_seconds` (local: each process has its own clock).
pub struct ClockCheck {
    pub db: DatabaseConnection,
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Whether the last measurement was past the warning threshold, so the
    /// log says so when it starts and when it ends, not every minute.
    pub off: bool,
}

impl Job for ClockCheck {
    async fn step(&mut self, _: &Step) -> Next {
        match domain::clock_offset::measure(&self.db).await {
            Ok(o) => {
                self.metrics.clock_offset(o.offset_ms);
                let off = o.beyond(CLOCK_WARN_MS);
                if off && !self.off {
                    tracing::warn!(
                        offset_ms = o.offset_ms,
                        "this machine's clock is off the database's by more than 30 s; fix its time sync"
                    );
                } else if !off && self.off {
                    tracing::info!(offset_ms = o.offset_ms, "this machine's clock agrees with the database's again");
                }
                self.off = off;
            }
            Err(e) => tracing::warn!(error = %e, "could not read the database's clock"),
        }
        Next::Wait
    }
}

/// Verifies the audit chain, marks expired keys, and records ended sign-in
/// failure windows and deletes stale throttle rows
/// (`domain::auth::throttle::sweep`) (leased).
pub struct Maintenance {
    db: DatabaseConnection,
    steps: u64,
}

impl Maintenance {
    pub fn new(db: DatabaseConnection) -> Self {
        Maintenance { db, steps: 0 }
    }
}

impl Job for Maintenance {
    async fn step(&mut self, step: &Step) -> Next {
        let db = &self.db;
        // Every 5 minutes (of holding), verify what the audit log gained and
        // move the verification mark, so a page view's check stays O(new
        // entries) and a broken chain reaches the log without anyone looking.
        if self.steps.is_multiple_of(VERIFY_EVERY) {
            match domain::audit::verify_new(db, true).await {
                Ok(r) if r.ok => {}
                Ok(r) => tracing::error!(
                    seq = r.first_broken.as_ref().map_or(0, |b| b.seq),
                    reason = r.first_broken.as_ref().map_or("", |b| b.reason.as_str()),
                    "the audit chain does not verify"
                ),
                Err(e) => tracing::warn!(error = %e, "audit chain verification failed to run"),
            }
        }
        self.steps += 1;
        if !step.valid() {
            return Next::Wait;
        }
        match domain::registry::keys::sweep_expired(db, domain::clock::now_ms()).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(count = n, "retiring keys expired"),
            Err(e) => tracing::error!(error = %e, "expiry sweep failed"),
        }
        if let Err(e) = domain::auth::throttle::sweep(db, domain::clock::now_ms(), THROTTLE_SWEEP_BATCH).await {
            tracing::error!(error = %e, "sign-in throttle sweep failed");
        }
        Next::Wait
    }
}
