//! The retention purge: deletes what the guarantees no longer need, in
//! small batches so intake never waits long behind it.
//!
//! Per endpoint, with `dedup = max(decided dedup retention, the scheme's
//! current horizon)` (the horizon wins even over a stale decision), bodies
//! first (their retention is never longer than the claims'):
//! - claims received before `now - dedup` are deleted, except those of an
//!   open quarantine entry (release still needs them); resolved quarantine
//!   entries that old go with them (the audit log keeps their story), and
//!   so does any body still stored;
//! - bodies (`event_bodies`) of claims received before `now - body
//!   retention` are deleted, except those of an open quarantine entry (on
//!   PostgreSQL see [`body_cutoff_ms`]); a claim row is never updated;
//! - delivery-log rows answered before `now - dedup` are deleted (the log
//!   tells an event's story while its claim can still decide duplicates);
//!
//! Then replay records past their expiry (received + 2 x tolerance; the
//! dedup retention where no timestamp is signed) go,
//! per-minute rollups and gauge samples older than [`MINUTE_ROLLUPS_KEPT_MS`] (dashboards read
//! them for the last hour only), and hourly rollups and gauge samples older
//! than [`HOURLY_ROLLUPS_KEPT_MS`].
//!
//! On PostgreSQL the bodies, the delivery log, the replay records of signed
//! timestamps and every rollup and gauge table are partitioned by day
//! ([`super::partitions`]): whole days are dropped instead, first. A day of
//! replay records goes once no message signed in it can pass the timestamp
//! gate ([`partitions::REPLAY_DAY_KEPT_MS`]). The delivery log's go once the longest dedup
//! retention of any endpoint has passed (so no row goes before its own
//! endpoint's retention; one with a shorter retention stays until then).
//! The bodies' go once the longest body retention has passed; the bodies of
//! endpoints with a shorter one are deleted row by row at their own time,
//! and those of open quarantine entries are filed again, into today, first.
//!
//! On SQLite the claims and bodies go in arrival order across the endpoints
//! that share a cutoff instead of endpoint by endpoint
//! ([`super::in_arrival_order`]: a page holds the rows of many endpoints).
//!
//! Each batch is its own short transaction. On PostgreSQL the batch's rows
//! are taken `FOR UPDATE SKIP LOCKED`, so several instances purging at once
//! split the work and a row a receiver is writing is left for the next run.
//! Only old rows are ever selected, so a claim being inserted now is never a
//! candidate.

use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DbBackend, EntityTrait, QueryFilter, QueryOrder, QuerySelect,
    sea_query::{Alias, Expr, LockBehavior, LockType, Query},
};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::{
    audit::{self, Change},
    auth::Actor,
    db,
    entity::{
        delivery_log, endpoint, event_body as body, event_rollup as rollup, inbox_claim as claim,
        quarantine_entry as qentry, replay_record as replay,
    },
    error::DomainResult,
    retention::{
        self, in_arrival_order,
        partitions::{self, DAY_MS, HOURLY_ROLLUPS_KEPT_MS, MINUTE_ROLLUPS_KEPT_MS},
    },
    stats::gauges,
};
use views::quarantine::QuarantineStatus;

/// Rows per batch (one transaction each).
pub const DEFAULT_BATCH: u64 = 500;

/// What one purge run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PurgeReport {
    pub claims_deleted: u64,
    pub quarantine_deleted: u64,
    /// Bodies deleted row by row (those of a dropped day are not counted).
    pub bodies_cleared: u64,
    pub replay_deleted: u64,
    pub minute_rollups_deleted: u64,
    /// Hourly rollup and gauge rows (SQLite; absent from reports written
    /// before hourly retention).
    #[serde(default)]
    pub hourly_rollups_deleted: u64,
    /// Delivery-log rows (absent from reports written before the log).
    #[serde(default)]
    pub deliveries_deleted: u64,
    /// Daily partitions dropped whole (PostgreSQL; their rows are not
    /// counted above).
    #[serde(default)]
    pub partitions_dropped: u64,
    /// Bodies of open quarantine entries filed again, into today's
    /// partition, before their day was dropped (PostgreSQL).
    #[serde(default)]
    pub bodies_carried: u64,
}

impl PurgeReport {
    pub fn is_empty(&self) -> bool {
        *self == PurgeReport::default()
    }
}

fn ms(secs: i64) -> i64 {
    secs.saturating_mul(1000)
}

/// Runs one purge at `now_ms` and records a `retention.purge` audit entry
/// when anything was removed.
pub async fn run(db: &DatabaseConnection, now_ms: i64, batch: u64) -> DomainResult<PurgeReport> {
    let horizons = retention::current_horizons(db).await?;
    let decisions = retention::current_decisions(db).await?;
    let mut report = PurgeReport::default();
    let partitioned = db.get_database_backend() == DbBackend::Postgres;
    // Each endpoint's (dedup, body) retention in ms. No decision on record:
    // the defaults. The horizon floors dedup; dedup caps the body's.
    let kept: Vec<(endpoint::Model, i64, i64)> = endpoint::Entity::find()
        .all(db)
        .await?
        .into_iter()
        .map(|e| {
            let horizon = horizons.get(&e.scheme).map_or(retention::MAX_HORIZON_SECS, |h| h.horizon_secs);
            let (dedup, body) = decisions
                .get(&e.id)
                .map_or((retention::DEFAULT_DEDUP_SECS, retention::DEFAULT_BODY_SECS), |d| (d.dedup_secs, d.body_secs));
            let dedup = dedup.max(horizon);
            (e, ms(dedup), ms(body.min(dedup)))
        })
        .collect();
    let longest = partitions::Longest {
        dedup_ms: kept.iter().map(|k| k.1).max().unwrap_or(0),
        body_ms: kept.iter().map(|k| k.2).max().unwrap_or(0),
    };
    // Whole days first (PostgreSQL): the row deletes below then meet only
    // what no drop takes. A drop that fails (it waits at most 5 s for its
    // parent's lock) does not hold up the row deletes, which keep every
    // retention (a day late for the longest bodies) until a drop succeeds;
    // the run reports the failure at its end.
    let drop_failure = match partitions::drop_expired(db, now_ms, longest).await {
        Ok(dropped) => {
            report.partitions_dropped = dropped.partitions;
            report.bodies_carried = dropped.bodies_carried;
            None
        }
        Err(e) => {
            tracing::warn!(error = %e, "dropping expired partitions failed; the row deletes go on");
            Some(e)
        }
    };
    if partitioned {
        for (e, dedup_ms, body_ms) in &kept {
            // Bodies first: their retention is never longer than the claims',
            // so the claims' batches below meet few bodies still stored.
            let body_cutoff = now_ms - body_cutoff_ms(partitioned, *body_ms, longest.body_ms);
            report.bodies_cleared +=
                purge_batches("bodies", batch, |b| delete_bodies(db, &e.id, body_cutoff, b)).await?;
            let claim_cutoff = now_ms - dedup_ms;
            report.quarantine_deleted += delete_resolved_quarantine(db, &e.id, claim_cutoff).await?;
            report.claims_deleted += purge_batches("claims", batch, |b| delete_claims(db, e, claim_cutoff, b)).await?;
        }
    } else {
        // SQLite: the claims and bodies in arrival order across endpoints
        // (`in_arrival_order`), bodies first as above; the rest per endpoint.
        use in_arrival_order::{Take, groups, purge};
        let bodies = groups(kept.iter().map(|(e, _, body_ms)| (e.id.as_str(), e.tenant_id.as_str(), now_ms - body_ms)));
        for (cutoff, endpoints) in &bodies {
            report.bodies_cleared += purge(db, endpoints, *cutoff, Take::Bodies, batch).await?;
        }
        // Then by their own age: a body the walk cannot reach through its
        // claim (none that the write path files; one restored or edited by
        // hand) still goes, and does not hold the next walk's start back.
        // After the walk this is one empty select per endpoint.
        for (e, _, body_ms) in &kept {
            let body_cutoff = now_ms - body_ms;
            report.bodies_cleared +=
                purge_batches("bodies", batch, |b| delete_bodies(db, &e.id, body_cutoff, b)).await?;
        }
        let claims =
            groups(kept.iter().map(|(e, dedup_ms, _)| (e.id.as_str(), e.tenant_id.as_str(), now_ms - dedup_ms)));
        for (e, dedup_ms, _) in &kept {
            report.quarantine_deleted += delete_resolved_quarantine(db, &e.id, now_ms - dedup_ms).await?;
        }
        for (cutoff, endpoints) in &claims {
            report.claims_deleted += purge(db, endpoints, *cutoff, Take::Claims, batch).await?;
        }
        for (e, dedup_ms, _) in &kept {
            let claim_cutoff = now_ms - dedup_ms;
            report.deliveries_deleted +=
                purge_batches("delivery log", batch, |b| delete_deliveries(db, e, claim_cutoff, b)).await?;
        }
    }
    report.replay_deleted += purge_batches("replay records", batch, |b| delete_replay(db, now_ms, b)).await?;
    if !partitioned {
        report.minute_rollups_deleted = delete_minute_rollups(db, now_ms).await?;
        report.hourly_rollups_deleted = delete_hourly_rollups(db, now_ms).await?;
    }
    if !report.is_empty() {
        audit::record(
            db,
            &Actor::System,
            Change {
                action: "retention.purge",
                target_kind: "retention",
                target_id: "all",
                tenant_id: None,
                before: None,
                after: Some(json!(report)),
            },
        )
        .await?;
    }
    match drop_failure {
        Some(e) => Err(e),
        None => Ok(report),
    }
}

/// How old a body must be for the row-by-row purge to delete it. On
/// PostgreSQL the bodies of the endpoints with the longest body retention
/// go with their day's partition, dropped once the whole day is past that
/// retention: up to a day after the body's own time. Deleting them at their
/// exact time would delete a day of rows one by one every run, which is
/// what the drop is for; so these rows are left that day, and only a body
/// no drop will take (one carried forward for a quarantine entry since
/// resolved) is deleted a day late. Retentions under a day are kept exactly
/// (there is little to delete). Every other endpoint's bodies, and every
/// body on SQLite, go at their exact time.
pub fn body_cutoff_ms(partitioned: bool, body_ms: i64, longest_body_ms: i64) -> i64 {
    if partitioned && body_ms >= longest_body_ms && longest_body_ms >= DAY_MS { body_ms + DAY_MS } else { body_ms }
}

/// One statement: after the first run each run removes about an hour of
/// rows, and no receiver ever writes rows this old.
async fn delete_minute_rollups(db: &DatabaseConnection, now_ms: i64) -> DomainResult<u64> {
    let cutoff = now_ms - MINUTE_ROLLUPS_KEPT_MS;
    let rollups =
        rollup::Entity::delete_many().filter(rollup::Column::Minute.lt(cutoff / 60_000)).exec(db).await?.rows_affected;
    Ok(rollups + gauges::purge_minutes(db, cutoff).await?)
}

/// The hourly rollup tables, each keyed by its `hour` (the hourly gauge
/// samples live in `gauge_samples`, by unit).
const HOURLY_ROLLUPS: [&str; 3] = ["event_rollups_hourly", "key_use_rollups", "key_failure_rollups"];

/// The same for the hourly tables: after the first run each run removes
/// about an hour of rows per tenant, endpoint and key.
async fn delete_hourly_rollups(db: &DatabaseConnection, now_ms: i64) -> DomainResult<u64> {
    // Here only: at module level its `max`/`min` would shadow `Ord`'s.
    use sea_orm::ExprTrait;
    let cutoff_hour = (now_ms - HOURLY_ROLLUPS_KEPT_MS) / 3_600_000;
    let mut deleted = 0;
    for table in HOURLY_ROLLUPS {
        let mut q = Query::delete();
        q.from_table(Alias::new(table)).and_where(Expr::col(Alias::new("hour")).lt(cutoff_hour));
        deleted += db.execute(&q).await?.rows_affected();
    }
    Ok(deleted + gauges::purge_hours(db, cutoff_hour * 3_600_000).await?)
}

/// What one batch did: the rows its select named, and the rows its delete
/// deleted (a span delete may take more than it named).
struct Batch {
    selected: u64,
    deleted: u64,
}

impl Batch {
    fn of(selected: usize, deleted: u64) -> DomainResult<Batch> {
        Ok(Batch { selected: selected as u64, deleted })
    }
}

/// Repeats `step` while its batches come back full and delete something.
/// A full batch that deleted nothing would come back the same forever, so
/// it ends the loop; one that deleted fewer rows than it named (a row
/// whose tenant is not its endpoint's, which the write path never writes)
/// does not, or every later run would stop there one batch short. The
/// shortfall, summed over the batches (a row left is named again by the
/// next), is logged once, at the end.
async fn purge_batches<F, Fut>(what: &'static str, batch: u64, mut step: F) -> DomainResult<u64>
where
    F: FnMut(u64) -> Fut,
    Fut: std::future::Future<Output = DomainResult<Batch>>,
{
    let (mut total, mut short) = (0, 0);
    loop {
        let b = step(batch).await?;
        total += b.deleted;
        short += b.selected.saturating_sub(b.deleted);
        if b.selected < batch || b.deleted == 0 {
            if short > 0 {
                tracing::warn!(
                    what,
                    short,
                    "purge batches deleted fewer rows than they named (a row left counts once per batch that named it)"
                );
            }
            return Ok(total);
        }
    }
}

fn skip_locked<S: QuerySelect>(db: &DatabaseConnection, q: S) -> S {
    if db.get_database_backend() == DbBackend::Postgres {
        q.lock_with_behavior(LockType::Update, LockBehavior::SkipLocked)
    } else {
        q
    }
}

/// Event ids of this endpoint's open quarantine entries, as a subquery.
fn open_quarantine(endpoint_id: &str) -> sea_orm::sea_query::SelectStatement {
    Query::select()
        .column(qentry::Column::EventId)
        .from(qentry::Entity)
        .and_where(qentry::Column::EndpointId.eq(endpoint_id))
        .and_where(qentry::Column::Status.eq(QuarantineStatus::Open))
        .to_owned()
}

// Every delete below names its batch by lists of values (`IN`), never by
// an OR of one term per row: SQLite compares an OR's terms with each other
// while planning (quadratic in the batch: most of a 10 M-event purge's CPU
// with 500 terms), and a statement of the same shape stays in the
// connection's statement cache. The rows of one endpoint all belong to its
// tenant. The selects leave the tenant out (named, it drew PostgreSQL to
// the claims' key, read in event id order, instead of the age index).

/// The lowest and highest of `at` over a batch's rows: the span of a key a
/// batch delete is bounded by (empty: a span that matches nothing).
fn span<T>(rows: &[T], at: impl Fn(&T) -> i64) -> (i64, i64) {
    rows.iter().map(at).fold((i64::MAX, i64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)))
}

/// One claim-deleting batch's select, as [`delete_claims`] runs it
/// (without the row locks): up to `batch` of an endpoint's claims received
/// before `cutoff` and not held by an open quarantine entry, as
/// `(event_id, received_at)`, read through the endpoint's age index
/// `(endpoint_id, received_at)`. On PostgreSQL the age is bounded as a row
/// value, `(endpoint_id, received_at) < (endpoint, cutoff)`, which only that
/// index can take: given `received_at < cutoff`, PostgreSQL chose the index
/// on the age alone (the events list's) and read every endpoint's old
/// claims for each batch, 517 ms a batch at 30 M stored claims against
/// 1 ms, and a day's purge took 254 to 286 s
/// (docs/benchmarks.md#a-hundred-million-claims). SQLite takes the plain
/// bound through the endpoint's index, and not the row value's upper end.
/// Public so a test can hold its plan to that.
pub fn claim_deleting_query(
    backend: DbBackend,
    endpoint_id: &str,
    cutoff: i64,
    batch: u64,
) -> sea_orm::Select<claim::Entity> {
    use sea_orm::ExprTrait;
    let older = if backend == DbBackend::Postgres {
        let key = Expr::tuple([Expr::col(claim::Column::EndpointId), Expr::col(claim::Column::ReceivedAt)]);
        key.lt(Expr::tuple([Expr::val(endpoint_id), Expr::val(cutoff)]))
    } else {
        Expr::col(claim::Column::ReceivedAt).lt(cutoff)
    };
    claim::Entity::find()
        .select_only()
        .column(claim::Column::EventId)
        .column(claim::Column::ReceivedAt)
        .filter(claim::Column::EndpointId.eq(endpoint_id))
        .filter(older)
        .filter(claim::Column::EventId.not_in_subquery(open_quarantine(endpoint_id)))
        .limit(batch)
}

/// A claim's key within its endpoint, as far as the purge needs it:
/// `(event_id, received_at)` (the tenant is the endpoint's).
pub type ClaimKey = (String, i64);

/// The claims `event_ids` of one tenant's endpoint: one key lookup each.
pub fn claim_deleting_statement(
    tenant_id: &str,
    endpoint_id: &str,
    event_ids: &[&str],
) -> sea_orm::DeleteMany<claim::Entity> {
    claim::Entity::delete_many()
        .filter(claim::Column::TenantId.eq(tenant_id))
        .filter(claim::Column::EndpointId.eq(endpoint_id))
        .filter(claim::Column::EventId.is_in(event_ids.iter().copied()))
}

/// A body's key within its endpoint, as far as the purge needs it:
/// `(received_at, event_id, filed_at)` (the tenant is the endpoint's).
pub type BodyKey = (i64, String, i64);

/// One body-deleting batch's select, as [`delete_bodies`] runs it (without
/// the row locks): public so a test can hold its plan to the bodies' key,
/// which leads with `(endpoint_id, received_at)`. Bodies an open quarantine
/// entry holds stay.
pub fn body_deleting_query(endpoint_id: &str, cutoff: i64, batch: u64) -> sea_orm::Select<body::Entity> {
    body::Entity::find()
        .select_only()
        .column(body::Column::ReceivedAt)
        .column(body::Column::EventId)
        .column(body::Column::FiledAt)
        .filter(body::Column::EndpointId.eq(endpoint_id))
        .filter(body::Column::ReceivedAt.lt(cutoff))
        .filter(body::Column::EventId.not_in_subquery(open_quarantine(endpoint_id)))
        .limit(batch)
}

/// Deletes the batch `rows` of [`body_deleting_query`]: the endpoint's
/// bodies within the batch's span of the key (received and filed; the
/// filed span is the day partitions PostgreSQL plans) whose event id is one
/// of the batch's. Any other body that matches is as deletable as the
/// batch: received before the cutoff, its event id held by no open
/// quarantine entry. Bounded by the cutoff alone, SQLite read the
/// endpoint's whole range of old bodies for every batch (quadratic in a
/// day's bodies). Public so a test can hold its plan to that.
pub fn body_deleting_statement(endpoint_id: &str, rows: &[BodyKey]) -> sea_orm::DeleteMany<body::Entity> {
    let (received_from, received_to) = span(rows, |r| r.0);
    let (filed_from, filed_to) = span(rows, |r| r.2);
    body::Entity::delete_many()
        .filter(body::Column::EndpointId.eq(endpoint_id))
        .filter(body::Column::ReceivedAt.between(received_from, received_to))
        .filter(body::Column::FiledAt.between(filed_from, filed_to))
        .filter(body::Column::EventId.is_in(rows.iter().map(|r| r.1.as_str())))
}

/// The bodies still stored of the batch `claims` (deleted with them): the
/// endpoint's bodies within the batch's span of `received_at` whose event
/// id is one of the batch's. A body is received with its claim and filed
/// then or later (carried forward), so on PostgreSQL `filed_at` from the
/// span's start leaves out the partitions of older days. Bounded by the
/// cutoff alone, every batch read the endpoint's whole range of bodies left
/// for their day's drop (`body_cutoff_ms`), up to a day of them, in every
/// partition. Public so a test can hold its plan to that.
pub fn claim_bodies_deleting_statement(endpoint_id: &str, claims: &[ClaimKey]) -> sea_orm::DeleteMany<body::Entity> {
    let (from, to) = span(claims, |c| c.1);
    body::Entity::delete_many()
        .filter(body::Column::EndpointId.eq(endpoint_id))
        .filter(body::Column::ReceivedAt.between(from, to))
        .filter(body::Column::FiledAt.gte(from))
        .filter(body::Column::EventId.is_in(claims.iter().map(|c| c.0.as_str())))
}

async fn delete_claims(db: &DatabaseConnection, e: &endpoint::Model, cutoff: i64, batch: u64) -> DomainResult<Batch> {
    let txn = db::begin_write(db).await?;
    let claims: Vec<ClaimKey> = skip_locked(db, claim_deleting_query(db.get_database_backend(), &e.id, cutoff, batch))
        .into_tuple()
        .all(&txn)
        .await?;
    if claims.is_empty() {
        txn.commit().await?;
        return Batch::of(0, 0);
    }
    let ids: Vec<&str> = claims.iter().map(|c| c.0.as_str()).collect();
    let deleted = claim_deleting_statement(&e.tenant_id, &e.id, &ids).exec(&txn).await?.rows_affected;
    // A body still stored goes with its claim, so a later claim of the same
    // id never finds an older body beside its own. The endpoint's bodies
    // past their retention went just before, so the span holds only bodies
    // of open quarantine entries (whose claims stay) and, on PostgreSQL,
    // those left for their day's drop (body_cutoff_ms).
    claim_bodies_deleting_statement(&e.id, &claims).exec(&txn).await?;
    txn.commit().await?;
    Batch::of(claims.len(), deleted)
}

async fn delete_bodies(db: &DatabaseConnection, endpoint_id: &str, cutoff: i64, batch: u64) -> DomainResult<Batch> {
    let txn = db::begin_write(db).await?;
    let rows: Vec<BodyKey> =
        skip_locked(db, body_deleting_query(endpoint_id, cutoff, batch)).into_tuple().all(&txn).await?;
    let deleted =
        if rows.is_empty() { 0 } else { body_deleting_statement(endpoint_id, &rows).exec(&txn).await?.rows_affected };
    txn.commit().await?;
    Batch::of(rows.len(), deleted)
}

/// The delivery-log rows `ids` of one tenant (an endpoint's are all its
/// tenant's). The key leads with `(tenant_id, id)`, so each id is one
/// lookup; bounded by the endpoint and age instead, SQLite read the
/// endpoint's whole range of old rows for every batch. Public so a test can
/// hold its plan to that.
pub fn delivery_deleting_statement(tenant_id: &str, ids: Vec<String>) -> sea_orm::DeleteMany<delivery_log::Entity> {
    delivery_log::Entity::delete_many()
        .filter(delivery_log::Column::TenantId.eq(tenant_id))
        .filter(delivery_log::Column::Id.is_in(ids))
}

/// SQLite only: PostgreSQL drops the log's days whole.
async fn delete_deliveries(
    db: &DatabaseConnection,
    e: &endpoint::Model,
    cutoff: i64,
    batch: u64,
) -> DomainResult<Batch> {
    let txn = db::begin_write(db).await?;
    let q = delivery_log::Entity::find()
        .select_only()
        .column(delivery_log::Column::Id)
        .filter(delivery_log::Column::EndpointId.eq(&e.id))
        .filter(delivery_log::Column::AnsweredAt.lt(cutoff))
        .limit(batch);
    let ids: Vec<String> = q.into_tuple().all(&txn).await?;
    let selected = ids.len();
    let deleted =
        if ids.is_empty() { 0 } else { delivery_deleting_statement(&e.tenant_id, ids).exec(&txn).await?.rows_affected };
    txn.commit().await?;
    Batch::of(selected, deleted)
}

/// Resolved entries are created no earlier than their claim, so one created
/// before the claim cutoff belongs to a claim being purged.
async fn delete_resolved_quarantine(db: &DatabaseConnection, endpoint_id: &str, cutoff: i64) -> DomainResult<u64> {
    let res = qentry::Entity::delete_many()
        .filter(qentry::Column::EndpointId.eq(endpoint_id))
        .filter(qentry::Column::Status.ne(QuarantineStatus::Open))
        .filter(qentry::Column::CreatedAt.lt(cutoff))
        .exec(db)
        .await?;
    Ok(res.rows_affected)
}

/// One replay-record batch's select: the oldest records past their expiry,
/// of those [`crate::replay::kept_by_expiry`] (on PostgreSQL through
/// `replay_records_unsigned`'s expiry index).
pub fn replay_deleting_query(backend: DbBackend, now_ms: i64, batch: u64) -> sea_orm::Select<replay::Entity> {
    replay::Entity::find()
        .select_only()
        .column(replay::Column::ExpiresAt)
        .column(replay::Column::MessageDigest)
        .filter(replay::Column::ExpiresAt.lt(now_ms))
        .filter(crate::replay::kept_by_expiry(backend))
        .order_by_asc(replay::Column::ExpiresAt)
        .limit(batch)
}

/// Deletes the batch `rows` (`(expires_at, message_digest)`) of
/// [`replay_deleting_query`]: the records within the batch's span of the
/// expiry index whose digest is one of the batch's. Any other record that
/// matches is as deletable: expired, and kept by expiry.
pub fn replay_deleting_statement(backend: DbBackend, rows: &[(i64, String)]) -> sea_orm::DeleteMany<replay::Entity> {
    let (from, to) = span(rows, |r| r.0);
    replay::Entity::delete_many()
        .filter(replay::Column::ExpiresAt.between(from, to))
        .filter(crate::replay::kept_by_expiry(backend))
        .filter(replay::Column::MessageDigest.is_in(rows.iter().map(|r| r.1.as_str())))
}

async fn delete_replay(db: &DatabaseConnection, now_ms: i64, batch: u64) -> DomainResult<Batch> {
    let backend = db.get_database_backend();
    let txn = db::begin_write(db).await?;
    let rows: Vec<(i64, String)> =
        skip_locked(db, replay_deleting_query(backend, now_ms, batch)).into_tuple().all(&txn).await?;
    let deleted =
        if rows.is_empty() { 0 } else { replay_deleting_statement(backend, &rows).exec(&txn).await?.rows_affected };
    txn.commit().await?;
    Batch::of(rows.len(), deleted)
}
