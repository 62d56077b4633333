//! What every claim transaction needs, built once with the receiver and
//! shared by the one-event path and the group commit.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use sea_orm::DatabaseConnection;
use tokio::sync::{Mutex, MutexGuard, Notify};

use super::rollbacks::{RollbackReason, Rollbacks};
use crate::{receiver::faults::Faults, vault::Vault};

/// Whether a delivery is real traffic or a test delivery from the console
/// or the API (`onboarding::test_delivery`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Traffic {
    Live,
    /// Gates 6 and 9 run their transaction as for a real delivery, and roll
    /// it back: the answer is the real one, and nothing is kept (no replay
    /// record, no claim, no effect, no outbox intent).
    Test,
}

pub(crate) struct ClaimContext {
    pub db: DatabaseConnection,
    pub vault: Arc<Vault>,
    pub faults: Faults,
    pub rollbacks: Rollbacks,
    write_queue: Option<WriteQueue>,
}

impl ClaimContext {
    pub fn new(db: DatabaseConnection, vault: Arc<Vault>, faults: Faults) -> Self {
        let sqlite = db.get_database_backend() == sea_orm::DbBackend::Sqlite;
        ClaimContext { db, vault, faults, rollbacks: Rollbacks::default(), write_queue: sqlite.then(WriteQueue::new) }
    }

    pub fn rolled_back(&self, reason: RollbackReason) {
        self.rollbacks.count(reason);
    }

    /// Counts a rollback of real traffic; a test delivery's rollbacks are
    /// its design, not the receiver's figures.
    pub fn rolled_back_for(&self, traffic: Traffic, reason: RollbackReason) {
        if traffic == Traffic::Live {
            self.rollbacks.count(reason);
        }
    }

    pub fn is_sqlite(&self) -> bool {
        self.write_queue.is_some()
    }

    /// Waits for this process's turn to write (SQLite; `None` elsewhere).
    /// `synthetic`: a drill delivery, which gives way to real tenants.
    pub async fn write_turn(&self, synthetic: bool) -> Option<WriteTurn<'_>> {
        match &self.write_queue {
            Some(q) => Some(q.turn(synthetic).await),
            None => None,
        }
    }
}

/// How long a drill delivery gives way to real tenants' claims before it
/// queues anyway: on a saturated receiver the 31 duplicates of
/// `concurrent_duplicates` still finish inside a provider's timeout, one
/// commit per half second beside the real traffic.
const DRILL_YIELD_MAX: Duration = Duration::from_millis(500);

/// SQLite has one writer at a time. Queueing this process's claim
/// transactions here (first come, first served) replaces SQLite's busy-wait
/// polling, which otherwise adds 10–100 ms tails under load. Other processes
/// (the CLI) still wait through the busy timeout.
///
/// Drill deliveries queue one at a time, and only while no real tenant's
/// claim waits: `concurrent_duplicates` sends 32 deliveries of one event, 31
/// of which take the one-event path, and queued ahead of other tenants they
/// would hold each of them up for all 31 commits. So at most one drill
/// commit is ever ahead of a real claim.
pub(crate) struct WriteQueue {
    turn: Mutex<()>,
    drill_lane: Mutex<()>,
    /// Real claims waiting for the turn.
    real_waiting: AtomicUsize,
    /// Signalled when the last waiting real claim got its turn.
    no_real_waiting: Notify,
}

/// This process's turn to write, held until dropped.
pub(crate) struct WriteTurn<'a> {
    _turn: MutexGuard<'a, ()>,
    _drill_lane: Option<MutexGuard<'a, ()>>,
}

impl WriteQueue {
    fn new() -> WriteQueue {
        WriteQueue {
            turn: Mutex::new(()),
            drill_lane: Mutex::new(()),
            real_waiting: AtomicUsize::new(0),
            no_real_waiting: Notify::new(),
        }
    }

    /// A drill delivery (`synthetic`) waits for the drill deliveries ahead
    /// of it, then until no real claim waits (at most [`DRILL_YIELD_MAX`]).
    async fn turn(&self, synthetic: bool) -> WriteTurn<'_> {
        if synthetic {
            let lane = self.drill_lane.lock().await;
            let _ = tokio::time::timeout(DRILL_YIELD_MAX, self.until_no_real_waiting()).await;
            return WriteTurn { _turn: self.turn.lock().await, _drill_lane: Some(lane) };
        }
        self.real_waiting.fetch_add(1, Ordering::SeqCst);
        let turn = self.turn.lock().await;
        if self.real_waiting.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.no_real_waiting.notify_waiters();
        }
        WriteTurn { _turn: turn, _drill_lane: None }
    }

    async fn until_no_real_waiting(&self) {
        loop {
            // Registered before the check, so a notification between the
            // two is not lost.
            let notified = self.no_real_waiting.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.real_waiting.load(Ordering::SeqCst) == 0 {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::sync::{Arc, Mutex as StdMutex};

    use super::*;

    /// Takes a turn, records who got it, holds it briefly.
    fn claimant(q: &Arc<WriteQueue>, order: &Arc<StdMutex<Vec<String>>>, who: String, synthetic: bool) {
        let (q, order) = (q.clone(), order.clone());
        tokio::spawn(async move {
            let _turn = q.turn(synthetic).await;
            order.lock().unwrap().push(who);
            tokio::time::sleep(Duration::from_millis(2)).await;
        });
    }

    #[tokio::test]
    async fn drill_deliveries_never_queue_ahead_of_real_claims() {
        let q = Arc::new(WriteQueue::new());
        let order = Arc::new(StdMutex::new(Vec::new()));
        let held = q.turn(false).await;
        // Thirty drill deliveries arrive while a real claim commits, then
        // two real claims.
        for n in 0..30 {
            claimant(&q, &order, format!("drill-{n}"), true);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        claimant(&q, &order, "real-1".into(), false);
        claimant(&q, &order, "real-2".into(), false);
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(held);
        tokio::time::sleep(Duration::from_secs(1)).await;
        let order = order.lock().unwrap().clone();
        let pos = |who: &str| order.iter().position(|o| o == who).unwrap();
        // At most the one drill delivery already queued goes first.
        assert!(pos("real-1") <= 1 && pos("real-2") <= 2, "{order:?}");
        assert_eq!(order.len(), 32, "every drill delivery still gets its turn: {order:?}");
    }

    #[tokio::test]
    async fn a_drill_delivery_is_not_starved_by_steady_real_claims() {
        let q = Arc::new(WriteQueue::new());
        let order = Arc::new(StdMutex::new(Vec::new()));
        let held = q.turn(false).await;
        claimant(&q, &order, "drill".into(), true);
        // Real claims keep one another waiting for longer than a drill
        // delivery gives way.
        for n in 0..400 {
            claimant(&q, &order, format!("real-{n}"), false);
        }
        drop(held);
        tokio::time::sleep(Duration::from_secs(3)).await;
        let order = order.lock().unwrap().clone();
        let drill = order.iter().position(|o| o == "drill").expect("the drill delivery never got its turn");
        assert!(drill < 400, "the drill delivery waited for every real claim: {drill}");
    }
}
