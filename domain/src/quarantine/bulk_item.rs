//! One bulk release item's outcome, counted on its job once. Both the bulk
//! runner and a single release (which may settle an item of a running job)
//! record through here.

use sea_orm::{
    ColumnTrait, DatabaseTransaction, EntityTrait, QueryFilter,
    sea_query::{Expr, ExprTrait},
};

use crate::{
    clock,
    entity::{bulk_release as job, bulk_release_item as item},
    error::DomainResult,
};

pub(super) const OUT_RELEASED: &str = "released";
pub(super) const OUT_STILL_FAILING: &str = "still_failing";
pub(super) const OUT_ALREADY_RESOLVED: &str = "already_resolved";

/// Stores one entry's outcome and counts it, unless another runner already
/// did; either way the job's heartbeat moves.
pub(super) async fn record_in(
    txn: &DatabaseTransaction,
    it: &item::Model,
    outcome: &str,
    error: Option<String>,
) -> DomainResult<()> {
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
            OUT_RELEASED => job::Column::Released,
            OUT_ALREADY_RESOLVED => job::Column::AlreadyResolved,
            _ => job::Column::StillFailing,
        };
        update = update
            .col_expr(job::Column::Processed, Expr::col(job::Column::Processed).add(1))
            .col_expr(counter, Expr::col(counter).add(1));
    }
    update.filter(job::Column::Id.eq(&it.job_id)).exec(txn).await?;
    Ok(())
}
