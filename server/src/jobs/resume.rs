//! The automatic resume in `signet serve` (issue 28 item 3): a KEK rewrap or
//! a bulk release whose process died, or that failed, is taken over and run
//! on in this process ([`domain::kek::resume_stale`],
//! [`domain::quarantine::bulk_release::resume_stale`]).
//!
//! Its own job lease (`job_resume`), not a turn of the maintenance tick:
//! that tick verifies the audit chain every five minutes, which can take a
//! while on a large log, and a stuck job should not wait behind it; a lease
//! costs one row and a renewal every third of its duration. The lease keeps
//! the crowd of processes from racing each tick; what makes a take-over
//! happen once is the jobs' own compare-and-set (`domain::jobs`), which
//! holds even if two processes' rounds overlap as the lease moves. A job
//! taken over runs in this process under its own runner token, fenced by
//! that token and not by this lease, so it runs on if the lease moves; if
//! this process dies, the job's heartbeat goes stale and the next holder
//! resumes it.

use std::{sync::Arc, time::Duration};

use domain::{kek, quarantine::bulk_release, receiver::faults::Faults, vault::Vault};
use sea_orm::DatabaseConnection;

use super::{Job, Next, Step};

/// How often the holder looks for stale jobs: two indexed reads.
pub const EVERY: Duration = Duration::from_secs(2);

/// How long each kind of job's runner may be silent before it is resumed.
pub use domain::jobs::StaleAfter;

/// Looks for stale jobs; `process` names this process in the audit entries
/// of the resumes.
pub struct Resume {
    pub db: DatabaseConnection,
    pub vault: Arc<Vault>,
    pub faults: Faults,
    pub stale: StaleAfter,
    pub process: String,
}

impl Job for Resume {
    async fn step(&mut self, step: &Step) -> Next {
        let (db, vault) = (&self.db, &self.vault);
        match kek::resume_stale(db, vault, self.stale.kek_ms, &self.process).await {
            Ok(Some(job)) => {
                tracing::info!(job = %job.id, source = %job.source, "resumed a stopped KEK rewrap");
                kek::spawn(db.clone(), vault.clone(), job.id, &self.faults);
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "could not look for a stopped KEK rewrap"),
        }
        if !step.valid() {
            return Next::Wait;
        }
        match bulk_release::resume_stale(db, vault, self.stale.bulk_ms, &self.process, &self.faults).await {
            Ok(ids) => {
                for job in ids {
                    tracing::info!(job = %job, "resumed a stopped bulk release");
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not look for stopped bulk releases"),
        }
        Next::Wait
    }
}
