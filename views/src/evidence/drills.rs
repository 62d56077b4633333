//! Drill runs as stored, printed and returned, and their results.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::string_enum::string_enum;

string_enum! {
    /// A run's state, as stored in `drill_runs.status`. A `running` run
    /// whose runner stopped reads as `interrupted`, and is stored so when
    /// the next run starts.
    pub enum DrillStatus {
        Running = "running",
        Finished = "finished",
        Interrupted = "interrupted",
    }
}

/// Every drill, in the order they run: the runner's list and the order the
/// console shows a run's rows in, waiting ones included.
pub const DRILL_NAMES: [&str; 8] = [
    "concurrent_duplicates",
    "interrupted_before_commit",
    "lost_ack",
    "unknown_tenant",
    "invalid_signature",
    "replay",
    "identity_conflict",
    "scheme_verification",
];

/// A run, as `drill run --json` prints it and `/api/v1/drills/{id}` returns
/// it (docs/contract.md §5): `passed` is null while it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DrillRunView {
    pub run_id: String,
    pub passed: Option<bool>,
    /// A [`DrillStatus`] word: `running`, `finished` or `interrupted`.
    /// Text, as every string of the evidence bundle that embeds a run is
    /// (its page's escaping test marks each one).
    pub status: String,
    /// Who started the run; null only in a tenant's evidence bundle when
    /// the run was started outside that tenant.
    pub actor: Option<String>,
    pub actor_kind: String,
    pub engine: String,
    pub version: String,
    /// The commit and binary the run ran on (empty for runs stored before
    /// they were recorded): a run counts only for that build.
    #[serde(default)]
    pub build_commit: String,
    #[serde(default)]
    pub binary_sha256: String,
    pub schema_version: String,
    pub started_at: String,
    pub started_at_ms: i64,
    pub finished_at: Option<String>,
    pub finished_at_ms: Option<i64>,
    /// Drills in a run, and how many have finished.
    pub total: usize,
    pub done: usize,
    pub error: Option<String>,
    pub drills: Vec<DrillResult>,
    /// The signature schemes whose verification the run drilled and saw
    /// pass (`standard-webhooks`, `stripe`, `github`): the rollout order
    /// counts a run only for these. A run stored before they were recorded
    /// reads `["standard-webhooks"]`, the one scheme it signed with (so
    /// does one in a bundle exported before they were recorded).
    #[serde(default = "signed_with_standard_webhooks_only")]
    pub schemes: Vec<String>,
}

/// What a run from before schemes were recorded verified.
pub fn signed_with_standard_webhooks_only() -> Vec<String> {
    vec!["standard-webhooks".to_owned()]
}

/// One drill's result, as stored and as `drill run --json` prints it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DrillResult {
    pub name: String,
    pub passed: bool,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub observed: Map<String, Value>,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub expected: Map<String, Value>,
    /// Each check that failed: `<check>: expected <e>, observed <o>`, or
    /// what went wrong.
    pub failures: Vec<String>,
    pub duration_ms: i64,
}

impl DrillRunView {
    pub fn is_running(&self) -> bool {
        self.status == DrillStatus::Running.as_str()
    }
}

/// The schemes a drill run verified, in words (the console and the
/// printable page).
pub fn schemes_text(schemes: &[String]) -> String {
    if schemes.is_empty() { "none".to_owned() } else { schemes.join(", ") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_without_recorded_schemes_reads_as_standard_webhooks_only() {
        let old = serde_json::json!({
            "run_id": "r", "passed": true, "status": "finished", "actor": null, "actor_kind": "user",
            "engine": "sqlite", "version": "0.1.0", "schema_version": "m", "started_at": "t", "started_at_ms": 0,
            "finished_at": null, "finished_at_ms": null, "total": 7, "done": 7, "error": null, "drills": [],
        });
        let run: DrillRunView = serde_json::from_value(old).unwrap();
        assert_eq!(run.schemes, ["standard-webhooks"]);
        assert_eq!(schemes_text(&run.schemes), "standard-webhooks");
        assert_eq!(schemes_text(&[]), "none");
    }
}
