//! `outbox_intents.trace_context`: the W3C `traceparent` of the webhook
//! whose effect created the intent (issue 25 item 3), so the relay's send
//! continues that trace. `NULL` while traces are not exported, for intents
//! created before this migration and for those a quarantine release creates.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum OutboxIntents {
    Table,
    TraceContext,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter().table(OutboxIntents::Table).add_column(string_null(OutboxIntents::TraceContext)).to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(Table::alter().table(OutboxIntents::Table).drop_column(OutboxIntents::TraceContext).to_owned())
            .await
    }
}
