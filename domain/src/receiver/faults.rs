//! Fault points.
//!
//! - Test-only ones, read from `SIGNET_FAULTS` in debug builds and never in
//!   release builds.
//! - Drill faults ([`DrillFault`]), in every build: armed only by the drill
//!   runner in its own process, one at a time, and consumed only by a commit
//!   for the synthetic drill tenant, so neither a request, an environment
//!   variable nor a real tenant's traffic can trigger one.
//!
//! The setting is a comma-separated list without spaces, for example
//! `SIGNET_FAULTS=stall_effect_ms=30000,transient=1`; the names are
//! `stall_effect_ms`, `stall_after_commit_ms`, `transient`,
//! `stall_after_send_ms`, `stall_bulk_entry_ms`, `lost_commit_answers`,
//! `job_step_ms`, `kek_window_rows` and `stall_kek_window_ms`.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU32, Ordering},
    },
    time::Duration,
};

/// A fault for the drill tenant's next claim commit in this process.
#[derive(Debug)]
pub enum DrillFault {
    /// Hold the transaction open after the effect, before COMMIT, until the
    /// process is killed (`interrupted_before_commit`); `reached` is
    /// notified once it is held.
    HoldBeforeCommit { reached: Arc<tokio::sync::Notify> },
    /// Sleep after COMMIT, before answering, so the drill can drop the
    /// connection between the two (`lost_ack`). The sleep starts once the
    /// claim has released its write turn: other tenants' claims go on.
    StallAfterCommit(Duration),
}

/// The armed drill fault, if any (one-shot).
#[derive(Debug, Default)]
pub struct DrillFaults(std::sync::Mutex<Option<DrillFault>>);

impl DrillFaults {
    pub fn arm(&self, fault: DrillFault) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(fault);
    }
    pub fn disarm(&self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
    pub fn is_armed(&self) -> bool {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).is_some()
    }
    pub(crate) fn take(&self) -> Option<DrillFault> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// The drill runner's fault for the drill tenant (every build).
    pub drill: Arc<DrillFaults>,
    /// Sleep inside the claim transaction, after the effect, before commit.
    pub stall_effect: Option<Duration>,
    /// Sleep after commit (and after the write turn is released), before
    /// the answer is returned.
    pub stall_after_commit: Option<Duration>,
    /// Make every claim transaction fail with a transient error.
    pub transient: bool,
    /// Outbox worker: sleep after a send succeeded, before marking it sent.
    pub stall_after_send: Option<Duration>,
    /// Bulk release: sleep after each entry, so a test can kill the runner
    /// midway.
    pub stall_bulk_entry: Option<Duration>,
    /// Fail this many claim transactions after their COMMIT succeeded, with
    /// the error a connection lost before the answer arrived gives.
    pub lost_commit_answers: Arc<AtomicU32>,
    /// Leased background jobs: hold each step this long and log when it
    /// begins and ends, so a test can check no two processes overlap.
    pub job_step: Option<Duration>,
    /// KEK rewrap: windows of this many rows instead of `kek::WINDOW`.
    pub kek_window_rows: Option<u64>,
    /// KEK rewrap: sleep after each window, so a test can kill the runner
    /// midway.
    pub stall_kek_window: Option<Duration>,
}

impl Faults {
    #[cfg(debug_assertions)]
    pub fn from_env() -> Faults {
        let mut f = Faults::default();
        let Ok(spec) = std::env::var("SIGNET_FAULTS") else { return f };
        for item in spec.split(',') {
            match item.split_once('=') {
                Some(("stall_effect_ms", v)) => f.stall_effect = v.parse().ok().map(Duration::from_millis),
                Some(("stall_after_commit_ms", v)) => f.stall_after_commit = v.parse().ok().map(Duration::from_millis),
                Some(("transient", v)) => f.transient = v == "1",
                Some(("stall_after_send_ms", v)) => f.stall_after_send = v.parse().ok().map(Duration::from_millis),
                Some(("stall_bulk_entry_ms", v)) => f.stall_bulk_entry = v.parse().ok().map(Duration::from_millis),
                Some(("job_step_ms", v)) => f.job_step = v.parse().ok().map(Duration::from_millis),
                Some(("kek_window_rows", v)) => f.kek_window_rows = v.parse().ok().filter(|n| *n > 0),
                Some(("stall_kek_window_ms", v)) => f.stall_kek_window = v.parse().ok().map(Duration::from_millis),
                Some(("lost_commit_answers", v)) => {
                    f.lost_commit_answers = Arc::new(AtomicU32::new(v.parse().unwrap_or(0)))
                }
                _ => {}
            }
        }
        if f.stall_effect.is_some()
            || f.stall_after_commit.is_some()
            || f.transient
            || f.stall_after_send.is_some()
            || f.stall_bulk_entry.is_some()
            || f.job_step.is_some()
            || f.kek_window_rows.is_some()
            || f.stall_kek_window.is_some()
            || f.lost_commit_answers.load(Ordering::Relaxed) > 0
        {
            tracing::warn!(?f, "test fault points are active (SIGNET_FAULTS)");
        }
        f
    }

    /// Takes one lost commit answer, if any are left.
    pub fn lose_commit_answer(&self) -> bool {
        self.lost_commit_answers.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1)).is_ok()
    }

    /// Release builds never honour fault points.
    #[cfg(not(debug_assertions))]
    pub fn from_env() -> Faults {
        Faults::default()
    }
}
