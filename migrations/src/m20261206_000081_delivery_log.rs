//! The delivery log (issue 25 item 4, "one event's whole story"): one row per
//! answer Signet gave to a delivery whose event id it could read, with the
//! time, the status and answer, the key and the scheme. Never a body or a
//! signature. Rows are written in batches off the hot path and purged with
//! the claims (the endpoint's dedup retention).

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum DeliveryLog {
    Table,
    Id,
    TenantId,
    EndpointId,
    EventId,
    AnsweredAt,
    Status,
    Answer,
    KeyId,
    Scheme,
    MessageDigest,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(DeliveryLog::Table)
                .if_not_exists()
                .col(string(DeliveryLog::Id).primary_key())
                .col(string(DeliveryLog::TenantId))
                .col(string(DeliveryLog::EndpointId))
                .col(string(DeliveryLog::EventId))
                .col(big_integer(DeliveryLog::AnsweredAt))
                .col(integer(DeliveryLog::Status))
                .col(string(DeliveryLog::Answer))
                .col(string_null(DeliveryLog::KeyId))
                .col(string(DeliveryLog::Scheme))
                .col(string_null(DeliveryLog::MessageDigest))
                .to_owned(),
        )
        .await?;
        // The story reads one event's rows; the purge reads an endpoint's old ones.
        m.create_index(
            Index::create()
                .name("idx_delivery_log_event")
                .table(DeliveryLog::Table)
                .col(DeliveryLog::TenantId)
                .col(DeliveryLog::EndpointId)
                .col(DeliveryLog::EventId)
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("idx_delivery_log_age")
                .table(DeliveryLog::Table)
                .col(DeliveryLog::EndpointId)
                .col(DeliveryLog::AnsweredAt)
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(DeliveryLog::Table).if_exists().to_owned()).await
    }
}
