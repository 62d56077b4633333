//! `login_throttle` rows.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "login_throttle")]
pub struct Model {
    /// `user:<name>`, `device:<digest>` or `ip:<address or /64>`.
    #[sea_orm(primary_key, auto_increment = false)]
    pub subject: String,
    pub failures: i32,
    /// When the last counted attempt was made.
    pub last_attempt_at: i64,
    pub locked_until: Option<i64>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
