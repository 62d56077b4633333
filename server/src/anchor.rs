//! Signed audit checkpoints appended to a file outside the database
//! (`domain::audit::anchor` says why): one within a second of every
//! sensitive action, and at least every `every` otherwise. Each is also
//! written to the log stream as a structured line, a second copy outside the
//! database. The file is opened append-only, created owner-only (0600), and
//! every line is fsynced before the next is considered written.

use std::{
    io::Write,
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};

use domain::{audit::anchor, vault::Vault};
use sea_orm::DatabaseConnection;

use crate::jobs::{Job, Next, Step};

/// The checkpoint file, open for appending.
pub struct AnchorFile {
    path: PathBuf,
    file: std::fs::File,
}

impl AnchorFile {
    /// Opens (creating owner-only) the file for appending; an existing file
    /// keeps its mode, with a warning when others can read it.
    pub fn open(path: &Path) -> std::io::Result<AnchorFile> {
        let mut opts = std::fs::OpenOptions::new();
        opts.append(true).create(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let file = opts.open(path)?;
        crate::config::warn_if_readable_by_others(path, "the audit checkpoint file");
        Ok(AnchorFile { path: path.to_owned(), file })
    }

    fn append(&mut self, cp: &views::evidence::SignedCheckpoint) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(cp).map_err(std::io::Error::other)?;
        line.push(b'\n');
        // One write of a whole line: appends from several processes on one
        // host never interleave within a line.
        self.file.write_all(&line)?;
        self.file.sync_data()
    }
}

/// The anchoring job (local: each process signs the shared head into its
/// own file), stepping every [`TICK`]. `on_written` hears each checkpoint's
/// time (unix seconds), for the metric.
pub struct Anchors<F> {
    db: DatabaseConnection,
    vault: Arc<Vault>,
    file: Arc<std::sync::Mutex<AnchorFile>>,
    every: Duration,
    on_written: F,
    last: Option<(i64, Instant)>,
}

/// How often a new sensitive entry is looked for.
pub const TICK: Duration = Duration::from_secs(1);

impl<F: Fn(i64) + Send + Sync + 'static> Anchors<F> {
    pub fn new(db: DatabaseConnection, vault: Arc<Vault>, file: AnchorFile, every: Duration, on_written: F) -> Self {
        Anchors { db, vault, file: Arc::new(std::sync::Mutex::new(file)), every, on_written, last: None }
    }
}

impl<F: Fn(i64) + Send + Sync + 'static> Job for Anchors<F> {
    async fn step(&mut self, _: &Step) -> Next {
        let due = match self.last {
            None => true,
            Some((seq, at)) => at.elapsed() >= self.every || sensitive_since(&self.db, seq).await,
        };
        if !due {
            return Next::Wait;
        }
        match write(&self.db, &self.vault, &self.file).await {
            Ok(seq) => {
                self.last = Some((seq, Instant::now()));
                (self.on_written)(domain::clock::now_ms() / 1000);
            }
            Err(e) => tracing::error!(error = %e, "writing an audit checkpoint failed; retrying in a second"),
        }
        Next::Wait
    }
}

async fn sensitive_since(db: &DatabaseConnection, seq: i64) -> bool {
    match anchor::sensitive_after(db, seq).await {
        Ok(hit) => hit,
        Err(e) => {
            tracing::warn!(error = %e, "could not read the audit log for new sensitive entries");
            false
        }
    }
}

async fn write(
    db: &DatabaseConnection,
    vault: &Vault,
    file: &Arc<std::sync::Mutex<AnchorFile>>,
) -> Result<i64, String> {
    let cp = anchor::signed(db, vault).await.map_err(|e| e.to_string())?;
    let (seq, to_file) = (cp.checkpoint.seq, cp.clone());
    let file = file.clone();
    let path = tokio::task::spawn_blocking(move || {
        let mut f = file.lock().map_err(|_| "the checkpoint file's lock is poisoned".to_owned())?;
        f.append(&to_file).map_err(|e| format!("cannot append to {}: {e}", f.path.display()))?;
        Ok::<_, String>(f.path.display().to_string())
    })
    .await
    .map_err(|e| e.to_string())??;
    tracing::info!(
        target: "signet::audit::checkpoint",
        seq,
        head = %cp.checkpoint.head,
        at = %cp.checkpoint.at,
        signature = %cp.signature,
        public_key = %cp.public_key,
        file = %path,
        "audit checkpoint"
    );
    Ok(seq)
}
