//! One bulk release item's outcome, counted on its job once, and only while
//! the runner recording it still runs the job: a canceled job, or one taken
//! over, gets nothing more from its old runner (the release an outcome
//! commits with rolls back).

use sea_orm::{
    ColumnTrait, DatabaseTransaction, EntityTrait, QueryFilter,
    sea_query::{Expr, ExprTrait},
};

use crate::{
    clock,
    entity::{bulk_release as job, bulk_release_item as item},
    error::{DomainError, DomainResult},
};
use views::{jobs::RunStatus, quarantine::BulkItemOutcome};

/// The conflict [`record_in`] answers once its runner no longer runs the job.
pub(super) const STOPPED: &str = "bulk_release_stopped";

/// One item, as the runner `runner` handles it.
pub(super) struct Mark<'a> {
    pub item: &'a item::Model,
    pub runner: &'a str,
}

/// Stores one entry's outcome and counts it, unless another runner already
/// did; either way the job's heartbeat moves. A [`STOPPED`] conflict, for
/// the caller to roll back, when `runner` no longer runs the job.
pub(super) async fn record_in(
    txn: &DatabaseTransaction,
    mark: &Mark<'_>,
    outcome: BulkItemOutcome,
    error: Option<String>,
) -> DomainResult<()> {
    let it = mark.item;
    let marked = item::Entity::update_many()
        .col_expr(item::Column::Outcome, Expr::value(outcome))
        .col_expr(item::Column::Error, Expr::value(error))
        .filter(item::Column::JobId.eq(&it.job_id))
        .filter(item::Column::Position.eq(it.position))
        .filter(item::Column::Outcome.is_null())
        .exec(txn)
        .await?;
    let mut update = job::Entity::update_many().col_expr(job::Column::UpdatedAt, Expr::value(clock::now_ms()));
    if marked.rows_affected == 1 {
        let counter = match outcome {
            BulkItemOutcome::Released => job::Column::Released,
            BulkItemOutcome::AlreadyResolved => job::Column::AlreadyResolved,
            BulkItemOutcome::StillFailing => job::Column::StillFailing,
        };
        update = update
            .col_expr(job::Column::Processed, Expr::col(job::Column::Processed).add(1))
            .col_expr(counter, Expr::col(counter).add(1));
    }
    let ran = update
        .filter(job::Column::Id.eq(&it.job_id))
        .filter(job::Column::Runner.eq(mark.runner))
        .filter(job::Column::Status.eq(RunStatus::Running))
        .exec(txn)
        .await?;
    if ran.rows_affected == 0 {
        return Err(DomainError::conflict(STOPPED, "this bulk release was canceled or taken over"));
    }
    Ok(())
}
