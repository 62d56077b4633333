//! KEK versions over their life: rotation, the rewrap that reseals every
//! sealed column under the newest version, and retirement of a version
//! nothing uses any more. (The ring itself is `vault`.)
//!
//! Sealed columns ([`SOURCES`]): signing-key secrets, Signet's service keys,
//! outbox payloads (OTP codes) and stored event bodies (health data). A
//! rewrap is a job (`kek_rewraps`) that walks each table in primary-key
//! order, one window of [`WINDOW`] rows at a time; each window's reseals and
//! the job's cursor commit together, so a job killed anywhere resumes where
//! its last window ended and never reseals a row twice. It runs online:
//! each row is updated only if it still holds the version that was read, so
//! a concurrent purge (which nulls a body) or another writer wins. One job
//! runs at a time (a partial unique index); a job whose runner stopped
//! reporting reads as interrupted and can be resumed, by an admin or, a
//! bounded number of times, by the system ([`resume_stale`]). An admin may
//! [`cancel`] it; the next rewrap is then a new job.
//!
//! A version can be retired only when no row of any source still uses it,
//! it is not the newest, and the newest is old enough that every instance
//! has loaded it (they refresh the ring every 10 s).
//!
//! Where things are: `sources`, the sealed columns and their counts per
//! version; `status`, what an admin reads (versions, jobs); `rotation`,
//! adding a version and starting, resuming or taking over a rewrap job;
//! `rewrap`, the job's runner, one window at a time; `retire`; `admin`, the
//! permission, the audit entry and the ring-refresh error every change
//! shares.

mod admin;
mod retire;
mod rewrap;
mod rotation;
mod sources;
mod status;

pub use crate::jobs::MAX_AUTO_RESUMES;
pub(crate) use admin::open_err;
pub use retire::{RETIRE_AFTER_NEWEST_MS, retire};
pub use rewrap::{WINDOW, run, spawn, step};
pub use rotation::{Rotation, cancel, cancel_by_id, resume, resume_stale, rotate, start_rewrap};
pub use sources::{SOURCES, Source, counts};
pub use status::{Counting, DEFAULT_STALE_AFTER_MS, get, latest, overview};
