//! How the schema would be laid out on Citus (docs/scaling.md, "Citus:
//! distributing by tenant_id"), declared once so that a test can hold the
//! live catalog to it: every primary key and unique constraint of a
//! distributed table includes the distribution column, since Citus can only
//! enforce uniqueness inside one shard.

/// The column every distributed table is sharded and colocated by.
pub const DISTRIBUTION_COLUMN: &str = "tenant_id";

/// Tables distributed by [`DISTRIBUTION_COLUMN`], colocated, so that one
/// tenant's claim, replay records, reminder, quarantine entry, outbox intents,
/// delivery log and counters live on one shard and a claim transaction
/// touches one node. The delivery log's and the key rollups' keys include
/// `tenant_id` on PostgreSQL since m20261206_000100 and on SQLite since
/// m20261206_000190.
pub const DISTRIBUTED: &[&str] = &[
    "inbox_claims",
    "event_bodies",
    "replay_records",
    "reminders",
    "quarantine",
    "outbox_intents",
    "delivery_log",
    "event_rollups",
    "event_rollups_hourly",
    "key_use_rollups",
    "key_failure_rollups",
    "gauge_samples",
];

/// Small registry tables replicated to every node as Citus reference tables:
/// read on every claim (or joined with distributed rows) and rarely written.
pub const REFERENCE: &[&str] = &[
    "tenants",
    "endpoints",
    "signing_keys",
    "key_approvals",
    "event_key_versions",
    "retention_versions",
    "retry_policy_versions",
    "redelivery_horizons",
    "rollout_overrides",
    "kek_versions",
];
