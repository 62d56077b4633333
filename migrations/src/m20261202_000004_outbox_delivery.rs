//! Outbox delivery state: a lease for intents being sent (so a crashed
//! sender's intents are picked up again, with the same idempotency key), the
//! time of delivery and the last error.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum OutboxIntents {
    Table,
    LeaseUntil,
    DeliveredAt,
    LastError,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for col in [OutboxIntents::LeaseUntil, OutboxIntents::DeliveredAt] {
            m.alter_table(Table::alter().table(OutboxIntents::Table).add_column(big_integer_null(col)).to_owned())
                .await?;
        }
        m.alter_table(
            Table::alter().table(OutboxIntents::Table).add_column(string_null(OutboxIntents::LastError)).to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for col in [OutboxIntents::LeaseUntil, OutboxIntents::DeliveredAt, OutboxIntents::LastError] {
            m.alter_table(Table::alter().table(OutboxIntents::Table).drop_column(col).to_owned()).await?;
        }
        Ok(())
    }
}
