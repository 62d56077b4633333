//! Samples of gauges (outbox backlog, oldest pending age) per tenant and in
//! total (`tenant_id = ''`), the highest value seen in each minute and each
//! hour, so dashboards can chart them over a window.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum GaugeSamples {
    Table,
    Unit,
    Bucket,
    TenantId,
    Name,
    Value,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(GaugeSamples::Table)
                .if_not_exists()
                .col(string(GaugeSamples::Unit))
                .col(big_integer(GaugeSamples::Bucket))
                .col(string(GaugeSamples::TenantId))
                .col(string(GaugeSamples::Name))
                .col(big_integer(GaugeSamples::Value))
                .primary_key(
                    Index::create()
                        .col(GaugeSamples::Unit)
                        .col(GaugeSamples::TenantId)
                        .col(GaugeSamples::Bucket)
                        .col(GaugeSamples::Name),
                )
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(GaugeSamples::Table).if_exists().to_owned()).await
    }
}
