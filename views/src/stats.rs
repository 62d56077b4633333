use serde::{Deserialize, Serialize};

use crate::{
    ids::{EndpointSlug, KeyId, TenantSlug},
    retry_policy::RetryPolicy,
};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReasonCount {
    pub reason: String,
    pub count: i64,
}

/// One outcome over the window: a count per bucket, and its reasons.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OutcomeSeries {
    pub outcome: String,
    pub total: i64,
    pub points: Vec<i64>,
    /// Totals by reason, largest first (empty for outcomes without reasons).
    pub reasons: Vec<ReasonCount>,
}

/// Latency quantiles estimated from the rolled-up histogram buckets
/// (linear within a bucket, as Prometheus' histogram_quantile does).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LatencyStats {
    pub samples: i64,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub p50_points: Vec<Option<f64>>,
    pub p99_points: Vec<Option<f64>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OutboxStats {
    /// Pending or being sent.
    pub backlog: u64,
    pub oldest_pending_age_secs: Option<i64>,
    pub dead: u64,
    /// Highest sampled backlog per bucket (sampled every 15 s by `serve`).
    pub backlog_points: Vec<i64>,
    /// Highest sampled age of the oldest pending intent per bucket (s).
    pub oldest_age_points: Vec<i64>,
}

/// A key being replaced: still accepted until `expires_at`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OverlapKey {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub key_id: KeyId,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub tenant: TenantSlug,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub endpoint: EndpointSlug,
    pub expires_at: Option<String>,
    /// The same instant in Unix ms, for countdowns.
    pub expires_at_ms: Option<i64>,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub replaced_by: Option<KeyId>,
}

/// An endpoint whose deliveries failed verification in the window. A
/// failed signature matches no key, so failures belong to the endpoint;
/// its accepted keys are listed to check against the provider's settings.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FailingEndpoint {
    pub tenant: String,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub endpoint: EndpointSlug,
    pub failures: i64,
    pub reasons: Vec<ReasonCount>,
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub accepted_keys: Vec<KeyId>,
    /// The failures counted under a key (named, matched, or the endpoint's
    /// last to verify), by key, over the window's hours.
    pub by_key: Vec<KeyFailureCount>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct KeyFailureCount {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub key_id: KeyId,
    pub failures: i64,
    pub reasons: Vec<ReasonCount>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PolicyState {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub tenant: TenantSlug,
    pub policy: RetryPolicy,
    pub version: i32,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StatsView {
    pub window: String,
    /// `None`: every tenant the caller can see.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub tenant: Option<TenantSlug>,
    pub bucket_secs: i64,
    /// Start of the first bucket and end of the last (RFC 3339).
    pub start: String,
    pub end: String,
    /// When the figures were read (Unix ms).
    pub now_ms: i64,
    /// Start of each bucket (RFC 3339), for labels.
    pub bucket_starts: Vec<String>,
    pub series: Vec<OutcomeSeries>,
    pub latency: LatencyStats,
    pub quarantine_open: u64,
    pub outbox: OutboxStats,
    pub keys_in_overlap: Vec<OverlapKey>,
    pub failing_endpoints: Vec<FailingEndpoint>,
    pub retry_policies: Vec<PolicyState>,
}
