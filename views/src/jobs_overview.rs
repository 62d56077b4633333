//! The one view of every background job (`GET /api/v1/jobs`, `signet jobs`).

use serde::{Deserialize, Serialize};

use crate::{kek::RewrapView, quarantine::BulkReleaseView};

/// One leased job of `signet serve`: which process runs it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LeaseView {
    /// The job's name (`outbox_relay`, `retention_purge`, …).
    pub job: String,
    /// The process that took the lease last (`null`: never taken).
    pub holder: Option<String>,
    /// How many times the lease changed holder (0: never taken).
    pub epoch: u64,
    /// When the lease runs out unless renewed (`null`: never taken).
    pub expires_at: Option<String>,
    /// The lease has not run out, by the database's clock: `holder` runs
    /// the job now.
    pub held: bool,
}

/// Every background job at a glance.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobsView {
    /// Each leased job, by name.
    pub leases: Vec<LeaseView>,
    /// The latest KEK rewrap; `null` when none ran or the caller may not
    /// manage KEKs.
    pub kek_rewrap: Option<RewrapView>,
    /// The latest bulk releases the caller may see (at most 20), newest
    /// first.
    pub bulk_releases: Vec<BulkReleaseView>,
}
