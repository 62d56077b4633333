//! Records the git commit this crate is built from as `SIGNET_GIT_COMMIT`
//! (evidence bundles and drill runs name it), or `unknown` outside git.
//! Reruns only when HEAD or the branch it points at moves, not on every
//! source edit.

use std::{path::PathBuf, process::Command};

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=SIGNET_GIT_COMMIT");
    let commit = std::env::var("SIGNET_GIT_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| git(&["rev-parse", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=SIGNET_GIT_COMMIT={commit}");
    // HEAD (per worktree), the branch's loose ref and packed-refs: a commit
    // or checkout rewrites one of them. Missing files are not watched (cargo
    // would rerun every time).
    let here = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let mut watched = vec!["HEAD".to_owned(), "packed-refs".to_owned()];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(branch);
    }
    for name in watched {
        if let Some(path) = git(&["rev-parse", "--git-path", &name]) {
            let path = here.join(path);
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
}
