//! `reminders` rows.

use sea_orm::entity::prelude::*;
use views::events::{ReminderStatus, StateOrder};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "reminders")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub tenant_id: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub reminder_id: String,
    pub status: ReminderStatus,
    pub send_at: i64,
    pub created_at: i64,
    pub updated_at: i64,
    /// When the event that set `status` happened (ms), the sender's
    /// `occurred_at`; read only when `state_order` is `occurred_at`.
    pub state_at: Option<i64>,
    /// How the transition that set `status` was ordered: `None` (no
    /// transition since creation; see `receiver::effects`).
    pub state_order: Option<StateOrder>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
