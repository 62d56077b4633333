//! The statuses of a background job (a bulk release, a KEK rewrap).

pub const RUNNING: &str = "running";
pub const FINISHED: &str = "finished";
pub const FAILED: &str = "failed";
/// Shown, never stored: `running` with a stale heartbeat.
pub const INTERRUPTED: &str = "interrupted";
