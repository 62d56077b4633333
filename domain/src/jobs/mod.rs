//! What every resumable job shares (a KEK rewrap, a bulk release): the
//! bookkeeping of its run, written once; each job keeps only its own step.
//!
//! A job is a row that names one runner (a random token). Every write of a
//! step is conditional on that token, and moves the row's heartbeat
//! (`updated_at`), so a runner that was superseded writes nothing more and
//! stops at its next step. A `running` job whose heartbeat is older than the
//! caller's threshold reads as `interrupted` (its process died, or it hangs).
//! Taking a job over (a person's Resume, or the system's automatic resume)
//! is one compare-and-set on the status and heartbeat that were read, so of
//! two resumers one wins and a runner that was only slow stops. The system
//! resumes a job at most [`MAX_AUTO_RESUMES`] times in a row. A person's
//! [`cancel`] ends a job for good: it gives the row a runner no one holds,
//! so the runner stops at its next step, and nothing resumes it again.
//!
//! [`overview`] is the one view of every background job (`GET /api/v1/jobs`,
//! `signet jobs`).

mod overview;

pub use overview::{StaleAfter, overview};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QuerySelect,
    sea_query::{Expr, ExprTrait},
};
use serde_json::json;
use views::jobs::RunStatus;

use crate::{
    audit::{self, Change},
    auth::{Actor, Authorized},
    clock, db,
    error::{DomainError, DomainResult},
    ids,
};

/// The system resumes a job on its own at most this many times in a row
/// (counted in `auto_resumes`, which a person's start or resume sets back to
/// zero), so a job that fails, or kills its process, every time stops
/// looping and waits for a person.
pub const MAX_AUTO_RESUMES: i32 = 3;

/// The conflicts a job's resume or cancel answers, in its own words.
pub struct Conflicts {
    /// Resuming or canceling a job that has finished.
    pub finished: (&'static str, &'static str),
    /// Resuming or canceling a job that was canceled.
    pub canceled: (&'static str, &'static str),
    /// Resuming a job whose runner still reports; its code also answers the
    /// two below.
    pub running: (&'static str, &'static str),
    /// Another resumer took the job first.
    pub resumed_elsewhere: &'static str,
    /// Another job of the kind runs (where a unique index allows one).
    pub another_running: &'static str,
}

/// A table of jobs: which of its columns hold the run's bookkeeping.
pub trait Runs: EntityTrait {
    const ID: Self::Column;
    const STATUS: Self::Column;
    const RUNNER: Self::Column;
    const ERROR: Self::Column;
    /// The heartbeat.
    const UPDATED_AT: Self::Column;
    const FINISHED_AT: Self::Column;
    const AUTO_RESUMES: Self::Column;
    const CONFLICTS: Conflicts;
    fn run(m: &Self::Model) -> Run<'_>;
}

/// A job's bookkeeping as read.
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    pub id: &'a str,
    pub status: RunStatus,
    pub runner: &'a str,
    pub updated_at: i64,
    pub auto_resumes: i32,
}

impl Run<'_> {
    /// The status as seen at `now`: `running` with a heartbeat older than
    /// `stale_ms` reads as interrupted.
    pub fn status_at(&self, now: i64, stale_ms: i64) -> RunStatus {
        let silent = now - self.updated_at > stale_ms;
        if self.status == RunStatus::Running && silent { RunStatus::Interrupted } else { self.status }
    }

    /// Whether `runner` still owns the job and it still runs: if not, the
    /// runner stops quietly.
    pub fn runs_as(&self, runner: &str) -> bool {
        self.runner == runner && self.status == RunStatus::Running
    }

    /// Whether the system may take the job over now: its runner has been
    /// silent for `stale_ms` (a `running` job whose process died, or a
    /// `failed` one, which so waits as long before it is tried again) and
    /// it has resumed it fewer than [`MAX_AUTO_RESUMES`] times in a row.
    pub fn auto_resumable(&self, now: i64, stale_ms: i64) -> bool {
        now - self.updated_at > stale_ms
            && self.auto_resumes < MAX_AUTO_RESUMES
            && matches!(self.status, RunStatus::Running | RunStatus::Failed)
    }
}

/// [`Run::auto_resumable`] as a query's condition.
pub fn auto_resumable<J: Runs>(now: i64, stale_ms: i64) -> Condition {
    Condition::all()
        .add(J::STATUS.is_in([RunStatus::Running, RunStatus::Failed]))
        .add(J::UPDATED_AT.lt(now - stale_ms))
        .add(J::AUTO_RESUMES.lt(MAX_AUTO_RESUMES))
}

/// Refuses to resume a job that finished, or whose runner still reports.
pub fn check_resumable<J: Runs>(run: &Run<'_>, now: i64, stale_ms: i64) -> DomainResult<()> {
    let c = J::CONFLICTS;
    match run.status_at(now, stale_ms) {
        RunStatus::Interrupted | RunStatus::Failed => Ok(()),
        RunStatus::Finished => Err(DomainError::conflict(c.finished.0, c.finished.1)),
        RunStatus::Canceled => Err(DomainError::conflict(c.canceled.0, c.canceled.1)),
        RunStatus::Running => Err(DomainError::conflict(c.running.0, c.running.1)),
    }
}

/// Refuses to cancel a job that has ended (finished or canceled).
fn check_cancelable<J: Runs>(status: RunStatus) -> DomainResult<()> {
    let c = J::CONFLICTS;
    match status {
        RunStatus::Finished => Err(DomainError::conflict(c.finished.0, c.finished.1)),
        RunStatus::Canceled => Err(DomainError::conflict(c.canceled.0, c.canceled.1)),
        RunStatus::Running | RunStatus::Failed | RunStatus::Interrupted => Ok(()),
    }
}

/// Cancels `run` (running, interrupted or failed) and audits `change` as
/// `actor` in the same transaction. A compare-and-set from `running` or
/// `failed` to `canceled` that also replaces the runner token: every write
/// of the runner names its token, so it stops at its next step, and what it
/// committed stays. Neither a person's resume nor the system's takes a
/// canceled job ([`check_resumable`], [`auto_resumable`]), and it holds no
/// "one running" index. A conflict when the job has ended, even meanwhile.
pub async fn cancel<J: Runs>(
    db: &DatabaseConnection,
    run: &Run<'_>,
    actor: &Actor,
    change: Change<'_>,
) -> DomainResult<()> {
    check_cancelable::<J>(run.status)?;
    let now = clock::now_ms();
    let txn = db::begin_write(db).await?;
    let canceled = J::update_many()
        .col_expr(J::STATUS, Expr::value(RunStatus::Canceled))
        .col_expr(J::RUNNER, Expr::value(ids::new_id()))
        .col_expr(J::UPDATED_AT, Expr::value(now))
        .col_expr(J::FINISHED_AT, Expr::value(Some(now)))
        .filter(J::ID.eq(run.id))
        .filter(J::STATUS.is_in([RunStatus::Running, RunStatus::Failed]))
        .exec(&txn)
        .await?;
    if canceled.rows_affected == 0 {
        txn.rollback().await?;
        // It ended after it was read: say how.
        let status: Option<RunStatus> =
            J::find().select_only().column(J::STATUS).filter(J::ID.eq(run.id)).into_tuple().one(db).await?;
        check_cancelable::<J>(status.ok_or(DomainError::NotFound)?)?;
        let c = J::CONFLICTS;
        return Err(DomainError::conflict(c.finished.0, c.finished.1));
    }
    audit::record(&txn, actor, change).await?;
    txn.commit().await?;
    Ok(())
}

/// Who takes a job over.
#[derive(Clone, Copy)]
pub enum Resumer<'a> {
    /// A person (audited as them): the job's budget of automatic resumes
    /// starts again.
    Person(&'a Authorized),
    /// The automatic resume in `process` (audited as `system`).
    System { process: &'a str },
}

/// Gives `run` a new runner if it is still as it was read (a compare-and-set
/// on its status and heartbeat), with `also`'s columns set beside, and
/// audits `change` in the same transaction. Its `after` gains the previous
/// runner and, for the system, `"automatic": true`, the resuming process
/// and the previous status. A conflict when another resumer won, or the
/// runner reported meanwhile.
pub async fn take_over<J: Runs>(
    db: &DatabaseConnection,
    run: &Run<'_>,
    by: Resumer<'_>,
    also: impl FnOnce(sea_orm::UpdateMany<J>) -> sea_orm::UpdateMany<J>,
    mut change: Change<'_>,
) -> DomainResult<()> {
    let c = J::CONFLICTS;
    let after = change.after.get_or_insert_with(|| json!({}));
    after["previous_runner"] = json!(run.runner);
    let (auto_resumes, actor) = match by {
        Resumer::Person(auth) => (Expr::value(0), auth.actor()),
        Resumer::System { process } => {
            after["automatic"] = json!(true);
            after["process"] = json!(process);
            after["previous_status"] = json!(run.status);
            (Expr::col(J::AUTO_RESUMES).add(1), &Actor::System)
        }
    };
    let update = J::update_many()
        .col_expr(J::RUNNER, Expr::value(ids::new_id()))
        .col_expr(J::STATUS, Expr::value(RunStatus::Running))
        .col_expr(J::ERROR, Expr::value(Option::<String>::None))
        .col_expr(J::UPDATED_AT, Expr::value(clock::now_ms()))
        .col_expr(J::AUTO_RESUMES, auto_resumes);
    let txn = db::begin_write(db).await?;
    let taken = also(update)
        .filter(J::ID.eq(run.id))
        .filter(J::STATUS.eq(run.status))
        .filter(J::UPDATED_AT.eq(run.updated_at))
        .exec(&txn)
        .await
        .map_err(db::conflict_if_unique(c.running.0, c.another_running))?;
    if taken.rows_affected == 0 {
        txn.rollback().await?;
        return Err(DomainError::conflict(c.running.0, c.resumed_elsewhere));
    }
    audit::record(&txn, actor, change).await?;
    txn.commit().await?;
    Ok(())
}

/// Records `e` on the job (`failed`, resumable) while `runner` still runs it.
pub async fn fail<J: Runs>(db: &DatabaseConnection, id: &str, runner: &str, e: &DomainError) -> DomainResult<()> {
    J::update_many()
        .col_expr(J::STATUS, Expr::value(RunStatus::Failed))
        .col_expr(J::ERROR, Expr::value(Some(e.public_message())))
        .col_expr(J::UPDATED_AT, Expr::value(clock::now_ms()))
        .filter(J::ID.eq(id))
        .filter(J::RUNNER.eq(runner))
        .filter(J::STATUS.eq(RunStatus::Running))
        .exec(db)
        .await?;
    Ok(())
}

/// Marks the job finished in the caller's transaction while it runs (as
/// `runner`, if given); `false` if it no longer does, so the caller audits
/// the finish once.
pub async fn finish<J: Runs, C: ConnectionTrait>(conn: &C, id: &str, runner: Option<&str>) -> DomainResult<bool> {
    let now = clock::now_ms();
    let mut update = J::update_many()
        .col_expr(J::STATUS, Expr::value(RunStatus::Finished))
        .col_expr(J::FINISHED_AT, Expr::value(Some(now)))
        .col_expr(J::UPDATED_AT, Expr::value(now))
        .filter(J::ID.eq(id))
        .filter(J::STATUS.eq(RunStatus::Running));
    if let Some(r) = runner {
        update = update.filter(J::RUNNER.eq(r));
    }
    Ok(update.exec(conn).await?.rows_affected > 0)
}

/// Implements [`Runs`] for the entity of module `$m` (in scope), whose
/// columns bear the usual names.
macro_rules! runs {
    ($m:ident, $conflicts:expr) => {
        impl $crate::jobs::Runs for $m::Entity {
            const ID: $m::Column = $m::Column::Id;
            const STATUS: $m::Column = $m::Column::Status;
            const RUNNER: $m::Column = $m::Column::Runner;
            const ERROR: $m::Column = $m::Column::Error;
            const UPDATED_AT: $m::Column = $m::Column::UpdatedAt;
            const FINISHED_AT: $m::Column = $m::Column::FinishedAt;
            const AUTO_RESUMES: $m::Column = $m::Column::AutoResumes;
            const CONFLICTS: $crate::jobs::Conflicts = $conflicts;
            fn run(m: &$m::Model) -> $crate::jobs::Run<'_> {
                $crate::jobs::Run {
                    id: &m.id,
                    status: m.status,
                    runner: &m.runner,
                    updated_at: m.updated_at,
                    auto_resumes: m.auto_resumes,
                }
            }
        }
    };
}
pub(crate) use runs;
