//! `endpoints` rows.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "endpoints")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub tenant_id: String,
    pub slug: String,
    pub scheme: String,
    /// JSON array of permitted event types; `["*"]` permits any type.
    pub event_types: String,
    pub tolerance_secs: i64,
    /// Signed timestamps before this (unix s) are refused: set when the
    /// tolerance is raised (see `receiver::cache::EndpointCtx`).
    pub timestamp_floor: Option<i64>,
    /// Signed timestamps before this (unix s) get replay records with
    /// `signed_at = 0`, like those stored before m20261207_000230; `None`
    /// for endpoints created since (see `receiver::verify::Verified`).
    pub replay_partitioned_from: Option<i64>,
    /// JSON array of envelope fields that identify an event when the sender
    /// gives no id (an explicit compound key; `None`: such events are
    /// quarantined). Versioned in `event_key_versions`.
    pub event_id_fields: Option<String>,
    /// The `hmac` scheme's profile (JSON of `views::hmac::HmacProfile`),
    /// fixed at creation; `None` for the other schemes.
    pub hmac_profile: Option<String>,
    pub max_body_bytes: i64,
    pub enabled: bool,
    pub created_at: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
