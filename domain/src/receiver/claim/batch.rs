//! Group commit for gates 6 and 9. Deliveries that are expected to apply
//! (a well-formed envelope whose type the key permits) wait in one queue; a
//! few workers each take whatever has queued up and claim it in one
//! transaction: one multi-row insert of replay records, one of claims with
//! their bodies ([`rows::insert_claims`]), then each event's effect, then a
//! single commit. Under load that spends one
//! commit and two statements on many events instead of a transaction each;
//! with nothing queued a batch is one event and costs what it always did.
//!
//! Every rule of the one-event path holds per event: the claim's primary key
//! decides duplicates inside the transaction, the effect and its outbox
//! intents commit with the claim, and nobody is answered before the commit.
//! Anything unusual leaves the batch: two deliveries of one event (or one
//! signed message) in the same batch, an effect that must quarantine, or any
//! database error. Those deliveries go back to their callers, which run the
//! one-event path (`single::attempt`) with its retries. After a database
//! error the commit may have happened, so the caller is told the error.

use std::{
    collections::HashSet,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use sea_orm::{
    ConnectionTrait, DatabaseTransaction, DbErr, EntityTrait, QueryTrait,
    sea_query::{OnConflict, Query},
};
use tokio::sync::{Mutex, mpsc, oneshot};

use super::{context::ClaimContext, rollbacks::RollbackReason, rows};
use crate::{
    db,
    entity::replay_record,
    receiver::{admission::Job, effects, outcome::Outcome},
};
use views::events::ClaimOutcome;

/// At most this many events share a transaction (the multi-row inserts
/// stay well under both engines' bind-parameter limits, and the driver's
/// per-connection statement cache holds every batch size).
pub const MAX_BATCH: usize = 16;

/// A worker's answer for one job.
pub(super) enum Reply {
    /// Decided inside a committed batch.
    Done(Outcome),
    /// Not decided: the caller runs the one-event path. `Some(err)` when the
    /// batch failed with a database error, after which its commit may have
    /// happened.
    Alone(Box<Job>, Option<DbErr>),
}

/// A job, who waits for its answer, and its claim span (disabled unless
/// traces are exported), which is told the batch it joined.
type Queued = (Job, oneshot::Sender<Reply>, tracing::Span);

/// Numbers the batches of this process, for the claim spans.
static BATCH_SEQ: AtomicU64 = AtomicU64::new(1);

/// How many batches committed and how many events they carried (for
/// `/metrics`: events per batch is the group-commit factor).
#[derive(Debug, Default)]
pub struct BatchStats {
    pub batches: AtomicU64,
    pub events: AtomicU64,
}

/// The queue and its workers. Dropping it closes the queue; the workers
/// finish their batch and stop.
pub(super) struct Batcher {
    queue: mpsc::Sender<Queued>,
    pub stats: Arc<BatchStats>,
}

impl Batcher {
    /// Starts `workers` workers (must be called inside a tokio runtime).
    pub fn start(ctx: Arc<ClaimContext>, workers: usize) -> Batcher {
        let (queue, rx) = mpsc::channel::<Queued>(1024);
        let rx = Arc::new(Mutex::new(rx));
        let stats = Arc::new(BatchStats::default());
        for _ in 0..workers.max(1) {
            tokio::spawn(work(ctx.clone(), rx.clone(), stats.clone()));
        }
        Batcher { queue, stats }
    }

    /// Queues the job and waits for its batch. `None` only if the workers
    /// are gone (the runtime is shutting down), in which case nothing of the
    /// job was committed by a batch that answered.
    pub async fn claim(&self, job: Job, span: &tracing::Span) -> Option<Reply> {
        let (tx, rx) = oneshot::channel();
        if let Err(mpsc::error::SendError((job, _, _))) = self.queue.send((job, tx, span.clone())).await {
            return Some(Reply::Alone(Box::new(job), None));
        }
        rx.await.ok()
    }
}

/// A worker: take whatever has queued (waiting for the first), run it as one
/// batch, repeat. While one worker runs its batch the next collects.
async fn work(ctx: Arc<ClaimContext>, rx: Arc<Mutex<mpsc::Receiver<Queued>>>, stats: Arc<BatchStats>) {
    loop {
        let mut jobs = Vec::new();
        {
            let mut rx = rx.lock().await;
            let Some(first) = rx.recv().await else { return };
            jobs.push(first);
            while jobs.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(next) => jobs.push(next),
                    Err(_) => break,
                }
            }
        }
        commit_batch(&ctx, jobs, &stats).await;
    }
}

/// Runs one batch and answers every job in it.
async fn commit_batch(ctx: &ClaimContext, jobs: Vec<Queued>, stats: &BatchStats) {
    let (mut batch, alone) = split_collisions(jobs);
    for (job, tx, _) in alone {
        let _ = tx.send(Reply::Alone(Box::new(job), None));
    }
    let seq = BATCH_SEQ.fetch_add(1, Ordering::Relaxed);
    for (_, _, span) in &batch {
        span.record("batch", seq);
        span.record("batch_size", batch.len());
    }
    // Rows are locked in one order (tenant, endpoint, event id) by every
    // batch, so two batches cannot deadlock on each other's claims.
    batch.sort_by(|(a, ..), (b, ..)| event_key(a).cmp(&event_key(b)));
    // A batch is one commit for whatever queued (drill deliveries that
    // expect to apply included): it waits as a real tenant's claim.
    let queued = ctx.write_turn(false).await;
    let jobs: Vec<&Job> = batch.iter().map(|(j, ..)| j).collect();
    let result = attempt(ctx, &jobs).await;
    drop(queued);
    match result {
        Ok((outcomes, after)) => {
            after.wait().await;
            stats.batches.fetch_add(1, Ordering::Relaxed);
            stats.events.fetch_add(batch.len() as u64, Ordering::Relaxed);
            for ((_, tx, _), outcome) in batch.into_iter().zip(outcomes) {
                let _ = tx.send(Reply::Done(outcome));
            }
        }
        Err(failure) => {
            let err = match failure {
                Failure::Quarantine => None,
                Failure::Db(e) => {
                    ctx.rolled_back(RollbackReason::Error);
                    Some(e)
                }
            };
            for (job, tx, _) in batch {
                let _ = tx.send(Reply::Alone(Box::new(job), err.clone()));
            }
        }
    }
}

fn event_key(j: &Job) -> (&str, &str, &str) {
    let ep = j.verified.endpoint();
    (&ep.tenant_id, &ep.endpoint_id, &j.event_id)
}

/// Keeps the first job for each event id and each signed message; the rest
/// run alone, after, and meet the first one's rows as any concurrent
/// delivery would.
fn split_collisions(jobs: Vec<Queued>) -> (Vec<Queued>, Vec<Queued>) {
    let mut events = HashSet::new();
    let mut messages = HashSet::new();
    let (mut batch, mut alone) = (Vec::with_capacity(jobs.len()), Vec::new());
    for q in jobs {
        let (tenant, endpoint, event) = event_key(&q.0);
        let event = (tenant.to_owned(), endpoint.to_owned(), event.to_owned());
        let message = q.0.verified.message_digest().map(|d| (endpoint.to_owned(), d.to_owned()));
        let fresh_message = message.as_ref().is_none_or(|m| !messages.contains(m));
        if events.contains(&event) || !fresh_message {
            alone.push(q);
        } else {
            events.insert(event);
            messages.extend(message);
            batch.push(q);
        }
    }
    (batch, alone)
}

enum Failure {
    /// An effect cannot apply: every job runs alone so that one event is
    /// quarantined in its own transaction and the rest apply.
    Quarantine,
    Db(DbErr),
}

impl From<DbErr> for Failure {
    fn from(e: DbErr) -> Self {
        Failure::Db(e)
    }
}

/// Gates 6 and 9 and the effects for every job, in one transaction, and
/// what is left to do once the write turn is released.
async fn attempt(ctx: &ClaimContext, jobs: &[&Job]) -> Result<(Vec<Outcome>, rows::AfterCommit), Failure> {
    if ctx.faults.transient {
        return Err(Failure::Db(DbErr::ConnectionAcquire(sea_orm::ConnAcquireErr::Timeout)));
    }
    let txn = db::begin_write(&ctx.db).await?;
    let mut outcomes: Vec<Option<Outcome>> = jobs.iter().map(|_| None).collect();
    // Gate 6: a signed message seen before is a replay (or, where the
    // signature leaves the id out, a duplicate of the same id).
    let fresh = record_messages(&txn, jobs).await?;
    for (i, job) in jobs.iter().enumerate() {
        if job
            .verified
            .message_digest()
            .is_some_and(|d| !fresh.contains(&(job.verified.endpoint().endpoint_id.clone(), d.to_owned())))
        {
            outcomes[i] = Some(rows::replayed(&txn, &job.verified, &job.event_id).await?);
        }
    }
    // Gate 9: the claims; a conflicting one is a duplicate or an identity
    // conflict, judged against the stored claim.
    let open: Vec<usize> = (0..jobs.len()).filter(|i| outcomes[*i].is_none()).collect();
    let claimed = insert_claims(ctx, &txn, &open.iter().map(|i| jobs[*i]).collect::<Vec<_>>()).await?;
    for &i in &open {
        let job = jobs[i];
        let key = (
            job.verified.endpoint().tenant_id.clone(),
            job.verified.endpoint().endpoint_id.clone(),
            job.event_id.clone(),
        );
        if claimed.contains(&key) {
            let at =
                effects::Target { tenant_id: &key.0, endpoint_id: &key.1, trace_context: job.trace_context.as_deref() };
            match effects::apply(&txn, &ctx.vault, at, &job.event_id, &job.envelope, effects::Order::Sender).await {
                Ok(applied) => outcomes[i] = Some(rows::settled(&txn, &job.verified, &job.event_id, applied).await?),
                Err(e) => {
                    rows::quarantine_reason(e)?;
                    txn.rollback().await?;
                    ctx.rolled_back(RollbackReason::Quarantine);
                    return Err(Failure::Quarantine);
                }
            }
        } else {
            outcomes[i] = Some(rows::conflicted(&txn, &job.verified, &job.event_id).await?);
        }
    }
    // Drill faults never fire in a shared transaction: a drill delivery
    // with one armed takes the one-event path (`Claims::settle`).
    let after = rows::commit(txn, &ctx.faults, false).await?;
    Ok((outcomes.into_iter().map(|o| o.unwrap_or(Outcome::Unavailable)).collect(), after))
}

/// Inserts the jobs' replay records in one statement; returns the
/// (endpoint, digest) pairs that were new.
async fn record_messages(txn: &DatabaseTransaction, jobs: &[&Job]) -> Result<HashSet<(String, String)>, DbErr> {
    let records: Vec<_> = jobs.iter().filter_map(|j| rows::replay_row(&j.verified)).collect();
    if records.is_empty() {
        return Ok(HashSet::new());
    }
    let mut stmt = replay_record::Entity::insert_many(records)
        .on_conflict(OnConflict::columns(rows::REPLAY_KEY).do_nothing().to_owned())
        .into_query();
    stmt.returning(
        Query::returning().columns([replay_record::Column::EndpointId, replay_record::Column::MessageDigest]),
    );
    let mut fresh = HashSet::new();
    for row in txn.query_all(&stmt).await? {
        fresh.insert((row.try_get::<String>("", "endpoint_id")?, row.try_get::<String>("", "message_digest")?));
    }
    Ok(fresh)
}

/// Inserts the jobs' claims (outcome `applied`) and their bodies
/// ([`rows::insert_claims`]); returns the (tenant, endpoint, event id) keys
/// that were new.
async fn insert_claims(
    ctx: &ClaimContext,
    txn: &DatabaseTransaction,
    jobs: &[&Job],
) -> Result<HashSet<(String, String, String)>, DbErr> {
    let rows = jobs
        .iter()
        .map(|j| {
            rows::claim_row(&ctx.vault, &j.verified, &j.event_id, Some(&j.envelope.event_type), ClaimOutcome::Applied)
        })
        .collect::<Result<Vec<_>, _>>()?;
    rows::insert_claims(txn, rows).await
}
