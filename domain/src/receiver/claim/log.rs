//! The delivery log's writer. The answer that made a claim is not logged:
//! the claim records it. The other answers are recorded off the hot path: the
//! receiver hands each row to a bounded queue (`try_send`, never waiting)
//! and one task writes what queues within 100 ms in one multi-row insert, taking
//! the same write turn as the claims on SQLite. A full queue drops the row
//! and counts it (`signet_delivery_log_dropped_total`) rather than holding
//! up an answer; a crash loses at most what was queued. The log is a story
//! for people, not a guarantee: the claim is what decides duplicates.

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

use sea_orm::{DbErr, EntityTrait};
use tokio::sync::{mpsc, oneshot};

use super::context::ClaimContext;
use crate::entity::delivery_log;

/// Rows waiting to be written at most; beyond it rows are dropped.
pub const QUEUE: usize = 8192;
/// Rows per insert (well under both engines' bind-parameter limits).
const WRITE_BATCH: usize = 256;
/// How long the first queued row waits for others to share its insert.
/// Each insert is a commit (and on SQLite a turn the claims wait for), so
/// writing as rows trickle in (a few hundred a second) would cost a commit
/// apiece; lingering caps it at about ten a second. A flush writes at once.
const LINGER: std::time::Duration = std::time::Duration::from_millis(100);

/// Rows written and dropped so far (for `/metrics`).
#[derive(Debug, Default)]
pub struct DeliveryLogStats {
    pub written: AtomicU64,
    pub dropped: AtomicU64,
}

enum Msg {
    Row(Box<delivery_log::ActiveModel>),
    /// Answered once every row queued before it was written (or dropped).
    Flush(oneshot::Sender<()>),
}

pub(super) struct DeliveryLog {
    queue: mpsc::Sender<Msg>,
    pub stats: Arc<DeliveryLogStats>,
}

impl DeliveryLog {
    /// Starts the writer task (inside a tokio runtime).
    pub fn start(ctx: Arc<ClaimContext>) -> DeliveryLog {
        let (queue, rx) = mpsc::channel(QUEUE);
        let stats = Arc::new(DeliveryLogStats::default());
        tokio::spawn(write(ctx, rx, stats.clone()));
        DeliveryLog { queue, stats }
    }

    /// Queues a row; never waits.
    pub fn record(&self, row: delivery_log::ActiveModel) {
        if self.queue.try_send(Msg::Row(Box::new(row))).is_err() {
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Waits until every row queued so far is written (tests, drills).
    pub async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        if self.queue.send(Msg::Flush(tx)).await.is_ok() {
            let _ = rx.await;
        }
    }
}

async fn write(ctx: Arc<ClaimContext>, mut rx: mpsc::Receiver<Msg>, stats: Arc<DeliveryLogStats>) {
    let mut rows = Vec::with_capacity(WRITE_BATCH);
    let mut acks = Vec::new();
    while let Some(first) = rx.recv().await {
        let deadline = tokio::time::Instant::now() + LINGER;
        let mut next = Some(first);
        while let Some(msg) = next.take() {
            match msg {
                Msg::Row(row) => rows.push(*row),
                Msg::Flush(ack) => acks.push(ack),
            }
            if rows.len() < WRITE_BATCH && acks.is_empty() {
                next = tokio::time::timeout_at(deadline, rx.recv()).await.ok().flatten();
            }
        }
        if !rows.is_empty() {
            let n = rows.len() as u64;
            match insert(&ctx, std::mem::take(&mut rows)).await {
                Ok(()) => stats.written.fetch_add(n, Ordering::Relaxed),
                Err(e) => {
                    tracing::warn!(error = %e, rows = n, "writing the delivery log failed; rows dropped");
                    stats.dropped.fetch_add(n, Ordering::Relaxed)
                }
            };
        }
        for ack in acks.drain(..) {
            let _ = ack.send(());
        }
    }
}

async fn insert(ctx: &ClaimContext, rows: Vec<delivery_log::ActiveModel>) -> Result<(), DbErr> {
    let _turn = ctx.write_turn(false).await;
    delivery_log::Entity::insert_many(rows).exec_without_returning(&ctx.db).await.map(|_| ())
}
