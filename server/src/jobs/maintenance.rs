//! Periodic upkeep: the KEK ring refresh in every process (so `signet kek
//! rotate` on another instance takes effect here), and the maintenance
//! sweeps in the one holding their lease: shared writes, done once.

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
