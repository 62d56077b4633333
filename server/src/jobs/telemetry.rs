//! Batched writes of per-minute rollups and per-key usage (every 5 s) and
//! the `/metrics` gauges (every 15 s), which every process does for its own
//! counts and scrape; and the dashboards' gauge samples (every 15 s), which
//! are shared and written by the one process holding their lease.

use std::time::Duration;

use sea_orm::DatabaseConnection;

use super::{Job, Next, Step};
use crate::http::hooks::HookState;

/// How often the counts are flushed.
pub const FLUSH_EVERY: Duration = Duration::from_secs(5);
/// How often the gauges are read and sampled.
pub const GAUGES_EVERY: Duration = Duration::from_secs(15);

/// This process's counts and gauges (local).
pub struct Flush {
    db: DatabaseConnection,
    hooks: HookState,
    steps: u64,
}

impl Flush {
    pub fn new(db: DatabaseConnection, hooks: HookState) -> Self {
        Flush { db, hooks, steps: 0 }
    }
}

impl Job for Flush {
    async fn step(&mut self, _: &Step) -> Next {
        if let Err(e) = self.hooks.telemetry.flush(&self.db).await {
            tracing::error!(error = %e, "telemetry flush failed; counts kept for the next one");
        }
        if self.steps.is_multiple_of(GAUGES_EVERY.as_secs() / FLUSH_EVERY.as_secs())
            && let Err(e) = self.hooks.metrics.refresh_gauges(&self.db).await
        {
            tracing::warn!(error = %e, "gauge refresh failed");
        }
        self.steps += 1;
        Next::Wait
    }
}

/// The dashboards' gauge samples (leased).
pub struct GaugeSamples {
    pub db: DatabaseConnection,
}

impl Job for GaugeSamples {
    async fn step(&mut self, _: &Step) -> Next {
        if let Err(e) = domain::stats::gauges::sample(&self.db, domain::clock::now_ms()).await {
            tracing::warn!(error = %e, "gauge sample for the dashboards failed");
        }
        Next::Wait
    }
}
