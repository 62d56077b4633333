//! Once across processes: each background job that writes shared state runs
//! in at most one `signet serve` process at a time (issue 28 item 3).
//!
//! The runner ([`super::Runner`]) starts a [`Keeper`] task per leased job takes the job's lease when it is free
//! ([`domain::job_lease`]), renews it every third of its duration while this
//! process lives, and releases it on drain. A process that is killed stops
//! renewing; once its lease expires another process takes the job over and
//! carries on from the database (each job keeps its progress there).
//!
//! The runner asks [`JobLease::step`] before each round of work, and the
//! job asks [`Step::valid`] before each action a stale holder could harm (an outbox
//! send). Both read a local deadline: the instant before the last
//! successful take or renewal plus the lease's duration, which passes no
//! later than the database's expiry. So a process that stopped renewing
//! (its database is unreachable, it was paused) stops working before
//! another process can take the job.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use domain::receiver::faults::Faults;
use sea_orm::DatabaseConnection;
use tokio::{sync::watch, task::JoinHandle, time::Instant};

/// The outbox relay (per-intent leases keep one send per intent; this one
/// keeps one relay loop, so processes do not race to claim batches).
pub const OUTBOX_RELAY: &str = "outbox_relay";
/// The retention purge (and whatever else runs in its tick).
pub const RETENTION_PURGE: &str = "retention_purge";
/// The dashboards' gauge samples.
pub const GAUGE_SAMPLES: &str = "gauge_samples";
/// Audit chain verification (it moves the shared verification mark), the
/// key expiry sweep and the sign-in throttle sweep.
pub const MAINTENANCE: &str = "maintenance";
/// The automatic resume of stopped KEK rewraps and bulk releases
/// (`resume_task`).
pub const JOB_RESUME: &str = "job_resume";
/// Every leased job, as the status view lists them (`GET /api/v1/jobs`,
/// `signet jobs`).
pub const LEASED: [&str; 5] = [OUTBOX_RELAY, RETENTION_PURGE, GAUGE_SAMPLES, MAINTENANCE, JOB_RESUME];

#[derive(Clone, Copy)]
struct Tenure {
    epoch: i64,
    valid_until: Instant,
}

struct Shared {
    job: &'static str,
    state: Mutex<Option<Tenure>>,
    /// Test fault point (`job_step_ms`): hold each step this long.
    step_pause: Option<Duration>,
}

impl Shared {
    fn tenure(&self) -> Option<Tenure> {
        let now = Instant::now();
        self.state.lock().unwrap_or_else(|p| p.into_inner()).filter(|t| now < t.valid_until)
    }

    fn set(&self, t: Option<Tenure>) {
        *self.state.lock().unwrap_or_else(|p| p.into_inner()) = t;
    }
}

/// This process's view of one job's lease; cheap to clone.
#[derive(Clone)]
pub struct JobLease {
    shared: Arc<Shared>,
}

/// Permission for one round of a job's work: at one epoch of its lease, or
/// always for a job every process runs for itself.
pub struct Step {
    held: Option<(Arc<Shared>, i64)>,
}

impl Step {
    /// A step of a job that is not leased.
    pub(super) fn local() -> Self {
        Step { held: None }
    }

    /// Whether this process still holds the job at the epoch the step began
    /// with; a holder that lost it must do nothing more.
    pub fn valid(&self) -> bool {
        self.held.as_ref().is_none_or(|(shared, epoch)| shared.tenure().is_some_and(|t| t.epoch == *epoch))
    }
}

impl JobLease {
    /// A step of the job if this process holds it now, else `None` (another
    /// process runs it; ask again at the next tick).
    pub async fn step(&self) -> Option<Step> {
        let t = self.shared.tenure()?;
        let step = Step { held: Some((self.shared.clone(), t.epoch)) };
        if let Some(pause) = self.shared.step_pause {
            // Test fault: the pause stands for a step's work. Its end is
            // logged only once the tenure is confirmed to have covered it
            // (the instant is read before the check); a step whose tenure
            // ran out during the pause is logged as abandoned and does
            // nothing more (the holder was too slow to renew, and another
            // process may already run the job under a later epoch).
            let job = self.shared.job;
            tracing::info!(job, epoch = t.epoch, at_ms = domain::clock::now_ms(), "job step begin");
            tokio::time::sleep(pause).await;
            let at_ms = domain::clock::now_ms();
            if !step.valid() {
                tracing::info!(job, epoch = t.epoch, at_ms, "job step abandoned");
                return None;
            }
            tracing::info!(job, epoch = t.epoch, at_ms, "job step end");
        }
        Some(step)
    }
}

/// Keeps one job's lease; [`Keeper::stop`] releases it.
pub struct Keeper {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Keeper {
    /// Stops renewing and releases the lease, so another process can take
    /// the job at once.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// Starts keeping `job`'s lease for `holder` (this process), with leases of
/// `ttl`; returns once the first attempt to take it is answered, so a lone
/// process runs its jobs from its first tick. `faults` (tests only) may hold
/// each step.
pub async fn keep(
    db: DatabaseConnection,
    job: &'static str,
    holder: String,
    ttl: Duration,
    faults: &Faults,
) -> (JobLease, Keeper) {
    let shared = Arc::new(Shared { job, state: Mutex::new(None), step_pause: faults.job_step });
    let (stop, mut stopped) = watch::channel(false);
    let keeper = shared.clone();
    keep_once(&db, &keeper, &holder, ttl).await;
    let task = tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stopped.changed() => break,
                _ = tokio::time::sleep(ttl / 3) => {}
            }
            keep_once(&db, &keeper, &holder, ttl).await;
        }
        let held = keeper.state.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = held {
            match domain::job_lease::release(&db, job, &holder, t.epoch).await {
                Ok(()) => tracing::info!(job, epoch = t.epoch, "released the job lease"),
                Err(e) => tracing::warn!(job, error = %e, "could not release the job lease; it expires"),
            }
        }
    });
    (JobLease { shared }, Keeper { stop, task })
}

/// Renews the lease if held, else tries to take it.
async fn keep_once(db: &DatabaseConnection, shared: &Shared, holder: &str, ttl: Duration) {
    let (job, ttl_ms) = (shared.job, ttl.as_millis() as i64);
    let before = Instant::now();
    let held = *shared.state.lock().unwrap_or_else(|p| p.into_inner());
    match held {
        Some(t) => match domain::job_lease::renew(db, job, holder, t.epoch, ttl_ms).await {
            Ok(true) => shared.set(Some(Tenure { epoch: t.epoch, valid_until: before + ttl })),
            Ok(false) => {
                shared.set(None);
                tracing::warn!(job, epoch = t.epoch, "lost the job lease; another process runs the job");
            }
            // Held until the local deadline; the next renewal may succeed.
            Err(e) => tracing::warn!(job, error = %e, "could not renew the job lease"),
        },
        None => match domain::job_lease::acquire(db, job, holder, ttl_ms).await {
            Ok(Some(epoch)) => {
                shared.set(Some(Tenure { epoch, valid_until: before + ttl }));
                tracing::info!(job, epoch, holder, "took the job lease");
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(job, error = %e, "could not take the job lease"),
        },
    }
}

/// This process's name in `job_leases.holder`: its pid (for people reading
/// the table) and a random part (pids are reused).
pub fn holder_id() -> String {
    format!("pid{}-{}", std::process::id(), domain::ids::new_id())
}
