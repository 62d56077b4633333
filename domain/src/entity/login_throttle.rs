//! `login_throttle` rows.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "login_throttle")]
pub struct Model {
    /// `user:<name>` or `ip:<address>`.
    #[sea_orm(primary_key, auto_increment = false)]
    pub subject: String,
    pub failures: i32,
    pub window_started_at: i64,
    pub locked_until: Option<i64>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
