//! `drill_runs` rows: one run of every drill against the live database.

use sea_orm::entity::prelude::*;
use views::evidence::DrillStatus;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "drill_runs")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub actor: String,
    pub actor_kind: String,
    /// The tenant of the clinic admin who started the run; `None` for
    /// deployment-wide roles and the CLI.
    pub tenant_id: Option<String>,
    pub status: DrillStatus,
    /// Set when finished: every drill passed.
    pub passed: Option<bool>,
    /// `sqlite` or `postgres`.
    pub engine: String,
    /// Signet's version.
    pub version: String,
    /// The newest applied migration when the run started.
    pub schema_version: String,
    /// The git commit the running binary was built from (`unknown` when
    /// built outside git; empty for runs stored before it was recorded).
    pub build_commit: String,
    /// Hex SHA-256 of the binary that ran the drills (empty when it could
    /// not be read, or for runs stored before it was recorded).
    pub binary_sha256: String,
    /// JSON array of each finished drill's result.
    pub results: String,
    pub error: Option<String>,
    pub started_at: i64,
    /// Heartbeat: moves after each drill.
    pub updated_at: i64,
    pub finished_at: Option<i64>,
    /// JSON array of the schemes whose verification the run drilled (`[]`
    /// while running); `None` for runs stored before it was recorded, which
    /// signed with standard-webhooks only.
    pub schemes: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
