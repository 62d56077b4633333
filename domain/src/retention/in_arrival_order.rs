//! SQLite's claim and body purge, in arrival order across endpoints.
//!
//! SQLite stores a table's rows in insertion order, and the receiver inserts
//! the claims (and their bodies) of every endpoint as they arrive, so each
//! page holds the rows of many endpoints. A batch of one endpoint's 500
//! oldest rows touches about 500 pages, and each page is written again (to
//! the WAL, then checkpointed) for every endpoint with a row on it. Taken in
//! arrival order across endpoints instead, a batch deletes rows that sit
//! together: a day's purge at 1 M stored events wrote 0.63 GB instead of
//! 2.50 GB (docs/benchmarks.md#sqlites-purge-in-arrival-order).
//!
//! The order comes from the claims' age index `(received_at)`; a body
//! belongs to its claim (received with it; on SQLite never filed again), so
//! the bodies' batches walk the same index. Endpoints are taken in groups of
//! equal cutoff, each group's walk starting at its oldest row that may go and
//! ending at the cutoff, so a walk reads other groups' rows only within its
//! own span (in a steady state, a day), at most an hour of arrivals per
//! batch. Rows an open quarantine entry holds are passed over. Each batch is
//! one short write transaction, as before; `purge::run` then sweeps bodies
//! by their own age, for any no claim leads to.

use std::collections::BTreeMap;

use sea_orm::{
    ColumnTrait, DatabaseConnection, EntityTrait, FromQueryResult, Order, QueryFilter, QueryOrder, QuerySelect,
    sea_query::{Expr, Func},
};
use views::quarantine::QuarantineStatus;

use super::purge::{ClaimKey, claim_bodies_deleting_statement, claim_deleting_statement};
use crate::{
    db,
    entity::{event_body as body, inbox_claim as claim},
    error::DomainResult,
};

/// Endpoints whose rows go before one cutoff: `(endpoint_id, tenant_id)`.
pub(super) type Group = Vec<(String, String)>;

/// The claims of `endpoints` may go from here: arrival time and rowid, both
/// exclusive of what a batch already took.
#[derive(Debug, Clone, Copy)]
struct Position {
    received_at: i64,
    rowid: i64,
}

#[derive(Debug, FromQueryResult)]
struct Row {
    rowid: i64,
    tenant_id: String,
    endpoint_id: String,
    event_id: String,
    received_at: i64,
}

/// Rows of `table` (claims or bodies) held by no open quarantine entry
/// (correlated: the entry's unique key is the claim's).
fn not_held(table: &str) -> Expr {
    Expr::cust_with_values(
        format!(
            "NOT EXISTS (SELECT 1 FROM quarantine q WHERE q.tenant_id = {table}.tenant_id \
             AND q.endpoint_id = {table}.endpoint_id AND q.event_id = {table}.event_id AND q.status = ?)"
        ),
        [QuarantineStatus::Open.as_str()],
    )
}

/// One batch's select: the next `batch` claims of `endpoints` after `from`
/// and before `cutoff`, in arrival order, through the age index (whose
/// entries end in the rowid, so the order needs no sort). Public to the
/// module's test of its plan.
pub fn batch_query(
    endpoints: &[&str],
    from_at: i64,
    from_rowid: i64,
    cutoff: i64,
    batch: u64,
) -> sea_orm::Select<claim::Entity> {
    claim::Entity::find()
        .select_only()
        .expr_as(Expr::cust("inbox_claims.rowid"), "rowid")
        .columns([
            claim::Column::TenantId,
            claim::Column::EndpointId,
            claim::Column::EventId,
            claim::Column::ReceivedAt,
        ])
        .filter(claim::Column::ReceivedAt.gte(from_at))
        .filter(claim::Column::ReceivedAt.lt(cutoff))
        // (received_at, rowid) after the last batch's last row.
        .filter(Expr::cust_with_values(
            "(inbox_claims.received_at > ? OR inbox_claims.rowid > ?)",
            [from_at, from_rowid],
        ))
        // Unary `+`: the endpoints' list must not draw SQLite to their age
        // index `(endpoint_id, received_at)`, which reads every endpoint's
        // span and sorts it (it did, without statistics). One JSON array,
        // not a variable per endpoint: a statement takes at most 32,766.
        .filter(Expr::cust_with_values(
            "+inbox_claims.endpoint_id IN (SELECT value FROM json_each(?))",
            [serde_json::to_string(endpoints).unwrap_or_default()],
        ))
        .filter(not_held("inbox_claims"))
        .order_by(claim::Column::ReceivedAt, Order::Asc)
        .order_by(Expr::cust("inbox_claims.rowid"), Order::Asc)
        .limit(batch)
}

/// Where a group's walk starts: the oldest arrival among `endpoints` of a
/// claim (or with `bodies` a body) held by no open entry, one read per
/// endpoint through its own age index. A held row does not start the walk,
/// which would otherwise read everything between it and the cutoff on
/// every run.
async fn start(db: &DatabaseConnection, endpoints: &Group, bodies: bool) -> DomainResult<Option<Position>> {
    let mut oldest: Option<i64> = None;
    for (endpoint_id, tenant_id) in endpoints {
        let at: Option<i64> = if bodies {
            body::Entity::find()
                .select_only()
                .expr(Func::min(Expr::col(body::Column::ReceivedAt)))
                .filter(body::Column::EndpointId.eq(endpoint_id))
                .filter(body::Column::TenantId.eq(tenant_id))
                .filter(not_held("event_bodies"))
                .into_tuple()
                .one(db)
                .await?
                .flatten()
        } else {
            claim::Entity::find()
                .select_only()
                .expr(Func::min(Expr::col(claim::Column::ReceivedAt)))
                .filter(claim::Column::EndpointId.eq(endpoint_id))
                .filter(claim::Column::TenantId.eq(tenant_id))
                .filter(not_held("inbox_claims"))
                .into_tuple()
                .one(db)
                .await?
                .flatten()
        };
        oldest = [oldest, at].into_iter().flatten().min();
    }
    Ok(oldest.map(|received_at| Position { received_at, rowid: i64::MIN }))
}

/// What goes with a batch: the claims themselves, or only their bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Take {
    Claims,
    Bodies,
}

/// Deletes, in batches of `batch`, the claims (with their bodies) or the
/// bodies of `endpoints` received before `cutoff`; returns how many rows of
/// that kind went.
pub(super) async fn purge(
    db: &DatabaseConnection,
    endpoints: &Group,
    cutoff: i64,
    take: Take,
    batch: u64,
) -> DomainResult<u64> {
    let Some(mut from) = start(db, endpoints, take == Take::Bodies).await? else { return Ok(0) };
    let ids: Vec<&str> = endpoints.iter().map(|(e, _)| e.as_str()).collect();
    let tenant_of: BTreeMap<&str, &str> = endpoints.iter().map(|(e, t)| (e.as_str(), t.as_str())).collect();
    let mut deleted = 0;
    while from.received_at < cutoff {
        // An hour's slice at most: the select reads the age index under the
        // write lock, and passes over other groups' rows (and held ones) to
        // fill its batch; unbounded, a group of quiet endpoints with a long
        // span behind it (a retention just shortened) would read millions.
        let upto = cutoff.min(from.received_at.saturating_add(SLICE_MS));
        let txn = db::begin_write(db).await?;
        let rows = batch_query(&ids, from.received_at, from.rowid, upto, batch).into_model::<Row>().all(&txn).await?;
        let mut by_endpoint: BTreeMap<(&str, &str), Vec<ClaimKey>> = BTreeMap::new();
        // A row whose tenant is not its endpoint's (the write path never
        // writes one) is walked past, as the per-endpoint deletes by the
        // key leave it.
        for r in rows.iter().filter(|r| tenant_of.get(r.endpoint_id.as_str()) == Some(&r.tenant_id.as_str())) {
            by_endpoint.entry((&r.endpoint_id, &r.tenant_id)).or_default().push((r.event_id.clone(), r.received_at));
        }
        for ((endpoint_id, tenant_id), keys) in &by_endpoint {
            let bodies = claim_bodies_deleting_statement(endpoint_id, keys).exec(&txn).await?.rows_affected;
            if take == Take::Bodies {
                deleted += bodies;
            } else {
                let event_ids: Vec<&str> = keys.iter().map(|k| k.0.as_str()).collect();
                deleted += claim_deleting_statement(tenant_id, endpoint_id, &event_ids).exec(&txn).await?.rows_affected;
            }
        }
        txn.commit().await?;
        from = match rows.last() {
            Some(last) if rows.len() as u64 == batch => Position { received_at: last.received_at, rowid: last.rowid },
            // The slice is done: the next one, until the cutoff.
            _ => Position { received_at: upto, rowid: i64::MIN },
        };
    }
    Ok(deleted)
}

/// The longest span of arrivals one batch's select reads.
const SLICE_MS: i64 = 3_600_000;

/// Which endpoints share each cutoff: one walk per distinct cutoff.
pub(super) fn groups<'a>(cutoffs: impl Iterator<Item = (&'a str, &'a str, i64)>) -> BTreeMap<i64, Group> {
    let mut groups: BTreeMap<i64, Group> = BTreeMap::new();
    for (endpoint_id, tenant_id, cutoff) in cutoffs {
        groups.entry(cutoff).or_default().push((endpoint_id.to_owned(), tenant_id.to_owned()));
    }
    groups
}
