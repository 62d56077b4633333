//! One runner for the background jobs of `signet serve` (issue 27 item 4):
//! the loop, its pace, its stop and once across processes are written here
//! once; each job keeps only its step ([`Job`]).
//!
//! A job is either leased, because it writes shared state (it runs in one
//! process at a time: [`lease`]), or local, run by every process for itself
//! (the KEK ring refresh, the per-process telemetry flush, the audit
//! checkpoints). Before each step of a leased job the runner asks its lease,
//! and skips the step if another process holds it; the step gets the
//! [`Step`], to ask again before an action a stale holder could harm.
//! Progress and resume are each job's own, in the database (an outbox
//! intent's lease, a purge's idempotent batches, a KEK rewrap's or bulk
//! release's run: `domain::jobs`), so a job taken over by another process,
//! or run again after a restart, carries on where it stopped.

pub mod lease;
pub mod maintenance;
pub mod purge;
pub mod resume;
pub mod telemetry;

use std::{future::Future, time::Duration};

use domain::receiver::faults::Faults;
pub use lease::{GAUGE_SAMPLES, JOB_RESUME, JobLease, LEASED, MAINTENANCE, OUTBOX_RELAY, RETENTION_PURGE, Step};
use sea_orm::DatabaseConnection;
use tokio::{sync::watch, task::JoinHandle};

/// What a step asks of the runner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Wait for the job's next tick.
    Wait,
    /// Step again at once: work is waiting (a full batch).
    Now,
}

/// One job's own work, a step at a time.
pub trait Job: Send + 'static {
    fn step(&mut self, step: &Step) -> impl Future<Output = Next> + Send;
}

/// When a job steps, and how it ends on drain.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    /// Before the first step (so start-up is not slowed).
    pub first: Duration,
    /// Between steps.
    pub every: Duration,
    /// `true`: the step in progress finishes before the job ends (an outbox
    /// send, a purge batch). `false`: it is aborted, its database work being
    /// transactional (a transaction stopped at an await rolls back whole).
    pub finish_on_stop: bool,
}

impl Pace {
    /// From start-up, every `every`, aborted on drain.
    pub fn every(every: Duration) -> Self {
        Pace { first: Duration::ZERO, every, finish_on_stop: false }
    }
}

/// The background jobs of this process, and the leases it holds for them.
pub struct Runner {
    db: DatabaseConnection,
    holder: String,
    ttl: Duration,
    faults: Faults,
    stop: watch::Sender<bool>,
    keepers: Vec<lease::Keeper>,
    tasks: Vec<(JoinHandle<()>, bool)>,
}

impl Runner {
    /// `holder` names this process in `job_leases`; leases last `ttl`.
    /// `faults` (tests only) may hold each leased step.
    pub fn new(db: DatabaseConnection, holder: String, ttl: Duration, faults: Faults) -> Self {
        let (stop, _) = watch::channel(false);
        Runner { db, holder, ttl, faults, stop, keepers: Vec::new(), tasks: Vec::new() }
    }

    /// Runs `job` while this process holds the lease `name`. Returns once
    /// the first attempt to take it is answered, so a lone process runs its
    /// jobs from their first step.
    pub async fn leased(&mut self, name: &'static str, pace: Pace, job: impl Job) {
        let (lease, keeper) = lease::keep(self.db.clone(), name, self.holder.clone(), self.ttl, &self.faults).await;
        self.keepers.push(keeper);
        self.spawn(Some(lease), pace, job);
    }

    /// Runs `job` in this process whatever other processes do.
    pub fn local(&mut self, pace: Pace, job: impl Job) {
        self.spawn(None, pace, job);
    }

    fn spawn(&mut self, lease: Option<JobLease>, pace: Pace, mut job: impl Job) {
        let mut stopped = self.stop.subscribe();
        let task = tokio::spawn(async move {
            let mut wait = pace.first;
            loop {
                tokio::select! {
                    _ = stopped.changed() => break,
                    _ = tokio::time::sleep(wait) => {}
                }
                wait = pace.every;
                let step = match &lease {
                    Some(lease) => match lease.step().await {
                        Some(step) => step,
                        // Another process runs it; ask again at the next tick.
                        None => continue,
                    },
                    None => Step::local(),
                };
                if job.step(&step).await == Next::Now {
                    wait = Duration::ZERO;
                }
                drop(step);
                if *stopped.borrow() {
                    break;
                }
            }
        });
        self.tasks.push((task, pace.finish_on_stop));
    }

    /// Aborts the jobs that need not finish their step, lets the others
    /// finish theirs, then releases the leases so another process takes the
    /// jobs at once.
    pub async fn stop(self) {
        for (task, finish) in &self.tasks {
            if !finish {
                task.abort();
            }
        }
        let _ = self.stop.send(true);
        for (task, _) in self.tasks {
            let _ = task.await;
        }
        for keeper in self.keepers {
            keeper.stop().await;
        }
    }
}
