//! `bulk_releases` rows: one background bulk release of quarantined events
//! and its progress counters.

use sea_orm::entity::prelude::*;
use views::jobs::RunStatus;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "bulk_releases")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    /// The filter's tenant; `None` for a release across all tenants.
    pub tenant_id: Option<String>,
    /// The [`QuarantineFilter`](views::quarantine::QuarantineFilter) as JSON.
    pub filter: String,
    pub reason: String,
    pub actor: String,
    /// Stored: running, finished, failed or canceled (`interrupted` is
    /// derived).
    pub status: RunStatus,
    /// Which runner owns the job: set by start and by each resume, so a
    /// superseded runner stops instead of finishing or failing the job.
    pub runner: String,
    pub total: i64,
    pub processed: i64,
    pub released: i64,
    pub still_failing: i64,
    pub already_resolved: i64,
    pub error: Option<String>,
    pub created_at: i64,
    /// Bumped after every entry: the runner's heartbeat.
    pub updated_at: i64,
    pub finished_at: Option<i64>,
    /// Automatic resumes since a person last started or resumed the job
    /// (`bulk_release::resume_stale`): bounded, so a failing job does not
    /// loop.
    pub auto_resumes: i32,
    /// The actor (JSON) whose rights the runner re-reads each round: the
    /// starter, or the person who last resumed the job. `None` for jobs
    /// started before it was stored: only a person resumes those.
    pub authority: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
