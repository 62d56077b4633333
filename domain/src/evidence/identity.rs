//! The build this process runs: version, the git commit it was built from
//! (`build.rs`), and the SHA-256 of the running binary. Drill runs and
//! bundles record it, and a drill run counts only for the build it ran on.

use std::io::Read;

use sha2::{Digest, Sha256};
use tokio::sync::OnceCell;

use views::evidence::BuildEvidence;

/// The commit `build.rs` found (`unknown` outside git).
pub const COMMIT: &str = env!("SIGNET_GIT_COMMIT");
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The binary does not change while the process runs, so it is hashed once
/// per process (a fact of the process, not configuration).
static CURRENT: OnceCell<BuildEvidence> = OnceCell::const_new();

/// The running build. The first call hashes the executable on a blocking
/// thread (tens of megabytes: never on the async runtime); later calls
/// answer at once. An unreadable executable leaves `binary_sha256` empty.
pub async fn current() -> BuildEvidence {
    CURRENT
        .get_or_init(|| async {
            let binary_sha256 =
                tokio::task::spawn_blocking(hash_current_exe).await.ok().flatten().unwrap_or_else(|| {
                    tracing::warn!("cannot hash the running binary: evidence binds to version and commit only");
                    String::new()
                });
            BuildEvidence { version: VERSION.to_owned(), commit: COMMIT.to_owned(), binary_sha256 }
        })
        .await
        .clone()
}

fn hash_current_exe() -> Option<String> {
    let mut file = std::fs::File::open(std::env::current_exe().ok()?).ok()?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match file.read(&mut buf).ok()? {
            0 => break,
            n => hasher.update(&buf[..n]),
        }
    }
    Some(hex::encode(hasher.finalize()))
}

/// Whether something recorded under `(version, commit, binary_sha256)` ran
/// on the build `now`. The binary's hash decides when both sides have one;
/// otherwise version and a known commit must both match. A record with
/// neither (stored before builds were recorded) matches no build.
pub fn same_build(version: &str, commit: &str, binary_sha256: &str, now: &BuildEvidence) -> bool {
    if !binary_sha256.is_empty() && !now.binary_sha256.is_empty() {
        return binary_sha256 == now.binary_sha256;
    }
    !commit.is_empty() && commit != "unknown" && commit == now.commit && version == now.version
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(version: &str, commit: &str, sha: &str) -> BuildEvidence {
        BuildEvidence { version: version.into(), commit: commit.into(), binary_sha256: sha.into() }
    }

    #[test]
    fn the_binary_hash_decides_and_unknown_builds_match_nothing() {
        let now = build("1.0.0", "abc", "f00d");
        assert!(same_build("1.0.0", "abc", "f00d", &now));
        assert!(!same_build("1.0.0", "abc", "beef", &now), "same commit, another binary");
        assert!(same_build("1.0.0", "abc", "", &now), "no hash recorded: commit and version");
        assert!(!same_build("0.9.0", "abc", "", &now));
        assert!(!same_build("1.0.0", "", "", &now), "a run from before builds were recorded");
        let unknown = build("1.0.0", "unknown", "");
        assert!(!same_build("1.0.0", "unknown", "", &unknown), "outside git, with no hash, nothing matches");
    }

    #[tokio::test]
    async fn the_running_binary_is_hashed_once() {
        let a = current().await;
        assert_eq!(a.binary_sha256.len(), 64, "{a:?}");
        assert_eq!(a, current().await);
        assert_eq!(a.version, env!("CARGO_PKG_VERSION"));
        assert!(!a.commit.is_empty());
    }
}
