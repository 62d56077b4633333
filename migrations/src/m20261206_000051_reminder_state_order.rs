//! `reminders.state_order`: how the transition that set the reminder's
//! status was ordered (issue 23 item 6). `NULL`: no transition since
//! creation; `occurred_at`: `state_at` is the sender's `occurred_at`;
//! `none`: the transition carried no sender order (`state_at` is then not
//! read). Rows transitioned before this migration may have `state_at` from a
//! delivery timestamp and cannot be told apart, so they become `none`: a
//! later transition that contradicts them goes to triage instead of being
//! ordered by a delivery time. Their `state_at` is kept, never read.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Reminders {
    Table,
    StateAt,
    StateOrder,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(Table::alter().table(Reminders::Table).add_column(string_null(Reminders::StateOrder)).to_owned())
            .await?;
        m.exec_stmt(
            Query::update()
                .table(Reminders::Table)
                .value(Reminders::StateOrder, "none")
                .and_where(Expr::col(Reminders::StateAt).is_not_null())
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(Table::alter().table(Reminders::Table).drop_column(Reminders::StateOrder).to_owned()).await
    }
}
