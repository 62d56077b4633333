use serde::{Deserialize, Serialize};

use crate::{
    audit::{BrokenEntry, Checkpoint},
    retention::HorizonView,
    retry_policy::PolicyVersionView,
    stats::ReasonCount,
};

mod drills;
mod signoff;

pub use drills::{
    DRILL_NAMES, DrillResult, DrillRunView, DrillStatus, schemes_text, signed_with_standard_webhooks_only,
};
pub use signoff::{Acknowledgement, Difference, ExportView, SignoffView, SinceApproval};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Evidence {
    /// `signet-evidence/1`.
    pub format: String,
    pub generated_at: String,
    pub deployment: Deployment,
    /// The build that wrote the bundle. (Bundles from before it was
    /// recorded read with empty values.)
    #[serde(default)]
    pub build: BuildEvidence,
    /// The database: engine, schema and its durability settings, read live.
    #[serde(default)]
    pub database: DatabaseEvidence,
    /// Modes and owners of the data directory, the SQLite file and the
    /// master key file, read live.
    #[serde(default)]
    pub files: Vec<FileEvidence>,
    /// The tenant every section is limited to, if any.
    pub tenant: Option<String>,
    pub credentials: Vec<CredentialRow>,
    /// Who can touch credentials: each role's permissions in the live
    /// policy and who holds it.
    pub access: Vec<RoleAccess>,
    pub constraints: Vec<ConstraintRow>,
    pub drills: DrillEvidence,
    pub retention: RetentionEvidence,
    pub retry_policy: Vec<RetryPolicyEvidence>,
    /// The live cohort check: each tenant with retries enabled, since they
    /// were (bundles from before it was recorded have none).
    #[serde(default)]
    pub cohort_check: Vec<CohortCheck>,
    pub metrics: MetricsEvidence,
    pub audit: AuditEvidence,
    pub findings: Vec<Finding>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Deployment {
    pub version: String,
    pub engine: String,
    pub schema_version: String,
    /// Base64 Ed25519 public key that signs the manifest.
    pub evidence_public_key: String,
    /// Values sealed under each KEK version (bundles from before the count
    /// have none).
    #[serde(default)]
    pub kek_seals: Vec<KekSeals>,
}

/// The running build: what a drill run and a bundle are bound to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BuildEvidence {
    /// Signet's version (`CARGO_PKG_VERSION`).
    pub version: String,
    /// The git commit it was built from, `unknown` when built outside git.
    pub commit: String,
    /// Hex SHA-256 of the running binary (empty when it could not be read).
    pub binary_sha256: String,
}

/// The database as read at export.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DatabaseEvidence {
    /// `sqlite` or `postgres`.
    pub engine: String,
    /// The newest applied migration.
    pub schema_version: String,
    /// The durability settings as the server reports them to Signet's own
    /// connections: PostgreSQL's `fsync`, `synchronous_commit`,
    /// `full_page_writes`, `wal_level` and `synchronous_standby_names`;
    /// SQLite's `journal_mode` and `synchronous`.
    pub durability: std::collections::BTreeMap<String, String>,
    /// PostgreSQL: whether a synchronous standby is configured
    /// (`synchronous_standby_names` is set). Null on SQLite.
    pub synchronous_standby: Option<bool>,
}

/// Whether the durability rule judges `setting` on `engine`; the other
/// settings read are shown only (docs/evidence.md#the-bundle: the durability rule).
pub fn durability_judged(engine: &str, setting: &str) -> bool {
    match engine {
        "postgres" => matches!(setting, "fsync" | "synchronous_commit" | "full_page_writes"),
        "sqlite" => matches!(setting, "synchronous" | "journal_mode"),
        _ => false,
    }
}

/// One file or directory Signet's safety rests on, as `stat` reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FileEvidence {
    /// `data_dir`, `sqlite_file` or `master_key_file`.
    pub role: String,
    /// Null when there is no such file (a master key given in
    /// `SIGNET_MASTER_KEY`; see `note`).
    pub path: Option<String>,
    /// Permission bits in octal, e.g. `0600`.
    pub mode: Option<String>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// Whether the owner is the user Signet runs as.
    pub owned_by_signet: Option<bool>,
    /// Any permission bit for group or others is set.
    pub group_or_world_access: bool,
    /// Why nothing could be read, or where the key came from instead.
    pub note: Option<String>,
}

/// A credential's verifications over the bundle's metrics window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct KeyVerification {
    /// Deliveries this key verified.
    pub successes: i64,
    /// Verification failures attributed to this key.
    pub failures: i64,
    pub failures_by_reason: Vec<ReasonCount>,
    /// The key's latest failure, whenever it was.
    pub last_failure_at: Option<String>,
    pub last_failure_reason: Option<String>,
}

/// Values sealed under one KEK version, counted ahead of sealing: never
/// fewer than were made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct KekSeals {
    pub version: u32,
    pub seals: i64,
    /// The version new values are sealed under.
    pub newest: bool,
}

/// One signing key: the credential-to-tenant mapping (never a secret).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CredentialRow {
    pub tenant: String,
    pub endpoint: String,
    pub key_id: String,
    pub status: String,
    pub scheme: String,
    pub event_types: Vec<String>,
    pub owner: String,
    pub rotation_owner: String,
    pub approved_by: Option<String>,
    pub approved_at: Option<String>,
    pub scope_hash: String,
    /// Whether the current scope is the approved one.
    pub scope_approved: bool,
    /// The KEK version sealing an HMAC secret; 0 for a public key (nothing
    /// sealed).
    pub kek_version: i32,
    /// `hmac` or `ed25519` (a standard-webhooks `v1a` public key).
    /// (Bundles stored before public keys existed read as `hmac`.)
    #[serde(default = "hmac")]
    pub credential: String,
    /// Whether what Signet stores for this key could sign an event: an HMAC
    /// secret can; a public key cannot, so a leaked database forges nothing
    /// with it. Shown as "cannot sign".
    #[serde(default = "yes")]
    pub can_sign: bool,
    pub created_at: String,
    pub age_days: i64,
    pub last_verified_at: Option<String>,
    /// When a retiring key stops being accepted.
    pub overlap_ends_at: Option<String>,
    /// Verifications over the bundle's metrics window (`metrics.start` to
    /// `metrics.end`).
    #[serde(default)]
    pub verification: KeyVerification,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Holder {
    /// `user` or `token`.
    pub kind: String,
    pub name: String,
    pub tenant: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RoleAccess {
    pub role: String,
    pub permissions: Vec<String>,
    /// Enabled users and unrevoked tokens with this role, by name. A
    /// tenant's bundle names only that tenant's clinic admins: holders of
    /// deployment-wide roles are counted, never named.
    pub holders: Vec<Holder>,
    /// Enabled users with this role in the bundle's scope, named or not.
    /// (Bundles stored before the counts existed read as 0.)
    #[serde(default)]
    pub user_count: u64,
    /// Unrevoked tokens with this role in the bundle's scope, named or not.
    #[serde(default)]
    pub token_count: u64,
}

impl RoleAccess {
    /// Holders counted but not named (a tenant's bundle, global roles).
    pub fn unnamed(&self) -> (u64, u64) {
        let named = |kind: &str| self.holders.iter().filter(|h| h.kind == kind).count() as u64;
        (self.user_count.saturating_sub(named("user")), self.token_count.saturating_sub(named("token")))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DrillEvidence {
    /// The newest finished run.
    pub latest: Option<DrillRunView>,
    pub stale: bool,
    pub stale_reasons: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RetentionRow {
    pub tenant: String,
    pub endpoint: String,
    pub scheme: String,
    pub dedup_secs: i64,
    pub body_secs: i64,
    /// The scheme's redelivery horizon now.
    pub horizon_secs: i64,
    /// What the purge applies: never less than the horizon.
    pub effective_dedup_secs: i64,
    pub decided_by: String,
    pub decided_at: String,
    pub reason: String,
    /// The decision keeps claims at least as long as the horizon.
    pub guard_holds: bool,
    /// The scheme's manual resend window now (0: none recorded).
    #[serde(default)]
    pub manual_resend_secs: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RetentionEvidence {
    pub horizons: Vec<HorizonView>,
    pub horizon_history: Vec<HorizonView>,
    pub endpoints: Vec<RetentionRow>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RetryPolicyEvidence {
    pub tenant: String,
    pub policy: String,
    pub version: i32,
    pub history: Vec<PolicyVersionView>,
    /// Who may flip the rollback switch (roles with the permission, and
    /// their holders).
    pub may_roll_back: Vec<String>,
    /// Approved break-glass overrides that no passing drill run on this build
    /// and no approved sign-off postdate yet (finding `rollout_override`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub open_overrides: Vec<crate::retry_policy::RolloutOverrideView>,
}

/// The check after enabling (docs/architecture.md#rollout-order-and-sign-off):
/// since retries were enabled for a tenant, each event has one claim, at most
/// one reminder transition and at most one outbox intent per kind. Read live
/// at export.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CohortCheck {
    pub tenant: String,
    /// When the policy version that enabled retries was written (the oldest
    /// of the newest run of `enabled` versions).
    pub enabled_since: String,
    pub enabled_since_ms: i64,
    /// Events claimed since then (an event with two claim rows counts once).
    pub events_checked: u64,
    /// Every breach found; `breaches` lists the first of them.
    pub breaches_total: u64,
    pub breaches: Vec<CohortBreach>,
}

/// One event (or outbox key) that broke the cohort's promise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CohortBreach {
    /// `duplicate_claim`, `repeated_transition` or `duplicate_intent`.
    pub check: String,
    /// The event, when the rows name it (an OTP intent is keyed by its
    /// request id, not the event).
    pub event_id: Option<String>,
    /// The endpoint's slug, when the rows name it.
    pub endpoint: Option<String>,
    pub what: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MetricsEvidence {
    pub window: String,
    pub start: String,
    pub end: String,
    pub applied: i64,
    pub duplicate_acks: i64,
    pub verification_failures: Vec<ReasonCount>,
    /// Transient failures answered 503 (the transaction rolled back).
    pub rollbacks: i64,
    pub quarantined: Vec<ReasonCount>,
    pub quarantine_open: u64,
    pub outbox_backlog: u64,
    pub outbox_oldest_pending_age_secs: Option<i64>,
    pub outbox_dead: u64,
}

/// [`Checkpoint`]'s schema without its `additionalProperties: false`
/// (which, kept, would refuse the fields flattened beside it).
#[cfg(feature = "openapi")]
fn open_checkpoint() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
    let mut schema = <Checkpoint as utoipa::PartialSchema>::schema();
    if let utoipa::openapi::RefOr::T(utoipa::openapi::Schema::Object(o)) = &mut schema {
        o.additional_properties = None;
    }
    schema
}

/// An audit checkpoint signed with the evidence key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SignedCheckpoint {
    #[serde(flatten)]
    #[cfg_attr(feature = "openapi", schema(schema_with = open_checkpoint))]
    pub checkpoint: Checkpoint,
    pub public_key: String,
    pub signature: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditEvidence {
    pub chain_verified: bool,
    pub entries: i64,
    pub head_seq: i64,
    pub head_hash: String,
    pub keyed_since_seq: Option<i64>,
    pub first_broken: Option<BrokenEntry>,
    /// 0: the whole chain was recomputed for this bundle. Otherwise the
    /// entries after this one were, and this one still carries the link it
    /// had when the chain up to it was verified (`signet audit verify`
    /// recomputes everything).
    #[serde(default)]
    pub verified_from_seq: i64,
    /// Keep this outside the database: `signet audit verify --checkpoint`
    /// compares the chain with it later.
    pub checkpoint: SignedCheckpoint,
}

/// One cohort-check breach in words: the check, where, and what.
pub fn breach_text(b: &CohortBreach) -> String {
    let at = match (&b.endpoint, &b.event_id) {
        (Some(e), Some(id)) => format!(" {e}/{id}"),
        (None, Some(id)) => format!(" {id}"),
        _ => String::new(),
    };
    format!("{}{at}: {}", b.check, b.what)
}

/// Which entries a bundle's chain check recomputed, in words (the console
/// and the printable page).
pub fn chain_recomputed(verified_from_seq: i64) -> String {
    match verified_from_seq {
        0 => "every entry".to_owned(),
        n => format!("the entries after {n} (verified earlier; entry {n} still carries the link it had then)"),
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, PartialOrd, Ord)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Finding {
    /// `critical`, `warning` or `info`.
    pub severity: String,
    /// The finding's kind, stable across bundles and releases (for example
    /// `drills_stale`): what a sign-off acknowledges. Bundles exported
    /// before it was named `id` call it `code`.
    #[serde(alias = "code")]
    pub id: String,
    pub subject: String,
    pub message: String,
}

/// One expected constraint as found (or not) in the catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ConstraintRow {
    pub id: String,
    pub table: String,
    /// `unique`, `foreign_key` or `append_only`.
    pub kind: String,
    pub columns: Vec<String>,
    /// `table(col, …)` for foreign keys.
    pub references: Option<String>,
    pub guarantees: String,
    pub present: bool,
    /// The catalog object that enforces it (constraint, index or trigger
    /// names), when present.
    pub enforced_by: Vec<String>,
}

impl Evidence {
    /// Findings of severity `critical`.
    pub fn critical(&self) -> usize {
        self.findings.iter().filter(|f| f.severity == "critical").count()
    }
}

fn hmac() -> String {
    "hmac".into()
}

fn yes() -> bool {
    true
}
