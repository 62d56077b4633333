//! `login_throttle` rows.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "login_throttle")]
pub struct Model {
    /// `user:<name>`, `device:<digest>`, `ip:<address or /64>` or `global`.
    #[sea_orm(primary_key, auto_increment = false)]
    pub subject: String,
    pub failures: i32,
    /// When the last counted attempt was made.
    pub last_attempt_at: i64,
    pub locked_until: Option<i64>,
    /// When this subject's open audit window opened (its first failure not
    /// yet in the audit log); `None` when nothing waits to be recorded.
    pub window_at: Option<i64>,
    /// The window's latest failure.
    pub window_last_at: Option<i64>,
    /// Failures in the open window.
    pub window_failures: i32,
    /// The audit entry's target: the name tried, or a placeholder.
    pub window_target: Option<String>,
    /// Distinct addresses seen in the window, comma-separated, at most
    /// `throttle::WINDOW_ADDRESSES` (then a final `…`).
    pub window_addresses: Option<String>,
    /// Distinct failure reasons seen in the window, comma-separated.
    pub window_reasons: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
