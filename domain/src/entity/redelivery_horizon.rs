//! `redelivery_horizons` rows: one per change of a scheme's documented
//! redelivery horizon (the floor for every endpoint's dedup retention).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "redelivery_horizons")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub scheme: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub version: i32,
    pub horizon_secs: i64,
    pub actor: String,
    pub reason: String,
    pub created_at: i64,
    /// Where the value comes from (the sender's published schedule).
    pub source: Option<String>,
    /// How far back the sender lets a person resend by hand (0: unknown
    /// or none); a dedup retention below it needs the risk accepted.
    pub manual_resend_secs: i64,
    pub manual_resend_source: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
