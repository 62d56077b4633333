//! `kek_rewraps` rows: jobs resealing every sealed column under one KEK
//! version (see `kek`).

use sea_orm::entity::prelude::*;
use views::jobs::RunStatus;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "kek_rewraps")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub target_version: i32,
    /// Stored: running, finished, failed or canceled (`interrupted` is
    /// derived).
    pub status: RunStatus,
    /// The current runner's token: a runner that was superseded stops.
    pub runner: String,
    pub actor: String,
    /// The sealed column being worked on (`kek::SOURCES`), or `done`.
    pub source: String,
    /// JSON array of the last primary key done in `source`.
    pub cursor: Option<String>,
    /// Rows under another version when the job started.
    pub total: i64,
    pub scanned: i64,
    pub rewrapped: i64,
    pub error: Option<String>,
    pub created_at: i64,
    /// The heartbeat: moves with every batch.
    pub updated_at: i64,
    pub finished_at: Option<i64>,
    /// Automatic resumes since a person last started or resumed the job
    /// (`kek::resume_stale`): bounded, so a failing job does not loop.
    pub auto_resumes: i32,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
