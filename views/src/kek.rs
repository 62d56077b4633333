use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::jobs::RunStatus;

/// One KEK version and the rows sealed under it, per source.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct KekVersionView {
    pub version: u32,
    pub created_at: String,
    /// New secrets are sealed under the newest version.
    pub newest: bool,
    /// Rows per source (`signing_keys`, `service_keys`, `outbox_payloads`,
    /// `event_bodies`).
    pub rows: BTreeMap<String, u64>,
    pub total_rows: u64,
    /// Not the newest and used by no row: `signet kek retire` may take it.
    pub retirable: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RetiredView {
    pub version: u32,
    pub created_at: String,
    pub retired_at: String,
    pub retired_by: String,
}

/// A rewrap job and its progress.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RewrapView {
    pub id: String,
    pub target_version: u32,
    /// `failed`: see `error`.
    pub status: RunStatus,
    pub started_by: String,
    /// The source being walked now (`done` at the end).
    pub source: String,
    /// Rows under another version when the job started.
    pub total: u64,
    /// Rows read so far (every row of every source is read once).
    pub scanned: u64,
    pub rewrapped: u64,
    pub error: Option<String>,
    pub started_at: String,
    pub updated_at: String,
    /// When it finished or was canceled.
    pub finished_at: Option<String>,
}

impl RewrapView {
    pub fn is_running(&self) -> bool {
        self.status == RunStatus::Running
    }
    /// Resealed of those under another version at the start, 0–100.
    pub fn percent(&self) -> u64 {
        (self.rewrapped * 100).checked_div(self.total).unwrap_or(100).min(100)
    }
}

/// The KEK page and `signet kek status`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct KekOverview {
    /// Oldest first.
    pub versions: Vec<KekVersionView>,
    pub retired: Vec<RetiredView>,
    /// Rows under a version other than the newest.
    pub stale_rows: u64,
    pub latest_rewrap: Option<RewrapView>,
    /// `false`: the rows were not counted (a page polling a running rewrap,
    /// see [`Counting`]); `rows`, `total_rows` and `stale_rows` are then 0.
    pub counted: bool,
}
