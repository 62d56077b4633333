//! What every claim transaction needs, built once with the receiver and
//! shared by the one-event path and the group commit.

use std::sync::Arc;

use sea_orm::DatabaseConnection;
use tokio::sync::{Mutex, MutexGuard};

use crate::{receiver::faults::Faults, vault::Vault};

pub(crate) struct ClaimContext {
    pub db: DatabaseConnection,
    pub vault: Arc<Vault>,
    pub faults: Faults,
    /// SQLite has one writer at a time. Queueing this process's claim
    /// transactions here (first come, first served) replaces SQLite's
    /// busy-wait polling, which otherwise adds 10–100 ms tails under load.
    /// Other processes (the CLI) still wait through the busy timeout.
    write_queue: Option<Mutex<()>>,
}

impl ClaimContext {
    pub fn new(db: DatabaseConnection, vault: Arc<Vault>, faults: Faults) -> Self {
        let sqlite = db.get_database_backend() == sea_orm::DbBackend::Sqlite;
        ClaimContext { db, vault, faults, write_queue: sqlite.then(|| Mutex::new(())) }
    }

    pub fn is_sqlite(&self) -> bool {
        self.write_queue.is_some()
    }

    /// Waits for this process's turn to write (SQLite).
    pub async fn write_turn(&self) -> Option<MutexGuard<'_, ()>> {
        match &self.write_queue {
            Some(q) => Some(q.lock().await),
            None => None,
        }
    }
}
