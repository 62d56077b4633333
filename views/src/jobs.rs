//! The statuses of a resumable background job (a bulk release, a KEK
//! rewrap). The one view of every job is `jobs_overview`, apart, because it
//! shows those jobs' own views, which use these statuses.

use crate::string_enum::string_enum;

string_enum! {
    /// A resumable job's run (a KEK rewrap, a bulk release), as stored in
    /// its table's `status` and shown.
    pub enum RunStatus {
        Running = "running",
        Finished = "finished",
        /// Stopped by an error; resumable.
        Failed = "failed",
        /// Stopped by a person: never resumed, by a person or by the system.
        Canceled = "canceled",
        /// Shown, never stored: `running` with a stale heartbeat.
        Interrupted = "interrupted",
    }
}
