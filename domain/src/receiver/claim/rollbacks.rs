//! Claim transactions that ended without a commit, by why (for `/metrics`:
//! `signet_claim_rollbacks_total{reason}`). Counted whatever the answer was,
//! so a rollback that a retry then got past still shows.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct Rollbacks {
    /// Gate 6: the signed message was seen before; nothing to write.
    replay: AtomicU64,
    /// Gate 8: the key may not send this type (checked after gate 6).
    refused: AtomicU64,
    /// The effect could not apply; the event is quarantined in a
    /// transaction of its own (one event alone, or a whole shared batch).
    quarantine: AtomicU64,
    /// A database error ended the attempt; whatever it had open rolled back.
    /// An error while committing is counted here although the commit may
    /// have happened (the receiver cannot tell; the claim then says).
    error: AtomicU64,
}

/// Why a claim transaction rolled back.
#[derive(Debug, Clone, Copy)]
pub enum RollbackReason {
    Replay,
    Refused,
    Quarantine,
    Error,
}

impl Rollbacks {
    pub(super) fn count(&self, reason: RollbackReason) {
        let counter = match reason {
            RollbackReason::Replay => &self.replay,
            RollbackReason::Refused => &self.refused,
            RollbackReason::Quarantine => &self.quarantine,
            RollbackReason::Error => &self.error,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Every reason with its total so far (zeros included, so each series
    /// exists from the start).
    pub fn totals(&self) -> [(&'static str, u64); 4] {
        [
            ("replay", self.replay.load(Ordering::Relaxed)),
            ("refused", self.refused.load(Ordering::Relaxed)),
            ("quarantine", self.quarantine.load(Ordering::Relaxed)),
            ("error", self.error.load(Ordering::Relaxed)),
        ]
    }
}
