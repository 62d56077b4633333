//! The receiver's tables: claims (the inbox), replay records, the clinic
//! reminders (the built-in business effect), outbox intents, quarantine,
//! per-minute rollups, and the per-tenant retry policy.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Tenants {
    Table,
    RetryPolicy,
}

#[derive(DeriveIden)]
enum InboxClaims {
    Table,
    TenantId,
    EndpointId,
    EventId,
    BodyDigest,
    EventType,
    KeyId,
    Outcome,
    ReceivedAt,
    BodyCiphertext,
    KekVersion,
}

#[derive(DeriveIden)]
enum ReplayRecords {
    Table,
    EndpointId,
    MessageDigest,
    ExpiresAt,
}

#[derive(DeriveIden)]
enum Reminders {
    Table,
    TenantId,
    ReminderId,
    Status,
    SendAt,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum OutboxIntents {
    Table,
    Id,
    TenantId,
    Kind,
    IdempotencyKey,
    PayloadCiphertext,
    KekVersion,
    Status,
    Attempts,
    NextAttemptAt,
    CreatedAt,
}

#[derive(DeriveIden)]
enum Quarantine {
    Table,
    Id,
    TenantId,
    EndpointId,
    EventId,
    Reason,
    Status,
    CreatedAt,
}

#[derive(DeriveIden)]
enum EventRollups {
    Table,
    Minute,
    TenantId,
    EndpointId,
    Outcome,
    Reason,
    Count,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter().table(Tenants::Table).add_column(string(Tenants::RetryPolicy).default("enabled")).to_owned(),
        )
        .await?;

        // The claim: one row per (tenant, endpoint, event id), decided by the
        // primary key, never by a prior SELECT.
        m.create_table(
            Table::create()
                .table(InboxClaims::Table)
                .if_not_exists()
                .col(string(InboxClaims::TenantId))
                .col(string(InboxClaims::EndpointId))
                .col(string(InboxClaims::EventId))
                .col(string(InboxClaims::BodyDigest))
                .col(string_null(InboxClaims::EventType))
                .col(string(InboxClaims::KeyId))
                .col(string(InboxClaims::Outcome))
                .col(big_integer(InboxClaims::ReceivedAt))
                .col(blob_null(InboxClaims::BodyCiphertext))
                .col(integer_null(InboxClaims::KekVersion))
                .primary_key(
                    Index::create().col(InboxClaims::TenantId).col(InboxClaims::EndpointId).col(InboxClaims::EventId),
                )
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("ix_claims_received")
                .table(InboxClaims::Table)
                .col(InboxClaims::ReceivedAt)
                .to_owned(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table(ReplayRecords::Table)
                .if_not_exists()
                .col(string(ReplayRecords::EndpointId))
                .col(string(ReplayRecords::MessageDigest))
                .col(big_integer(ReplayRecords::ExpiresAt))
                .primary_key(Index::create().col(ReplayRecords::EndpointId).col(ReplayRecords::MessageDigest))
                .to_owned(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table(Reminders::Table)
                .if_not_exists()
                .col(string(Reminders::TenantId))
                .col(string(Reminders::ReminderId))
                .col(string(Reminders::Status))
                .col(big_integer(Reminders::SendAt))
                .col(big_integer(Reminders::CreatedAt))
                .col(big_integer(Reminders::UpdatedAt))
                .primary_key(Index::create().col(Reminders::TenantId).col(Reminders::ReminderId))
                .to_owned(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table(OutboxIntents::Table)
                .if_not_exists()
                .col(string(OutboxIntents::Id).primary_key())
                .col(string(OutboxIntents::TenantId))
                .col(string(OutboxIntents::Kind))
                .col(string(OutboxIntents::IdempotencyKey))
                .col(blob(OutboxIntents::PayloadCiphertext))
                .col(integer(OutboxIntents::KekVersion))
                .col(string(OutboxIntents::Status))
                .col(integer(OutboxIntents::Attempts))
                .col(big_integer(OutboxIntents::NextAttemptAt))
                .col(big_integer(OutboxIntents::CreatedAt))
                .to_owned(),
        )
        .await?;
        // At most one intent per (tenant, idempotency key), ever: for OTPs the
        // key is the otp_request_id.
        m.create_index(
            Index::create()
                .name("ux_outbox_tenant_key")
                .table(OutboxIntents::Table)
                .col(OutboxIntents::TenantId)
                .col(OutboxIntents::IdempotencyKey)
                .unique()
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("ix_outbox_due")
                .table(OutboxIntents::Table)
                .col(OutboxIntents::Status)
                .col(OutboxIntents::NextAttemptAt)
                .to_owned(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table(Quarantine::Table)
                .if_not_exists()
                .col(string(Quarantine::Id).primary_key())
                .col(string(Quarantine::TenantId))
                .col(string(Quarantine::EndpointId))
                .col(string(Quarantine::EventId))
                .col(string(Quarantine::Reason))
                .col(string(Quarantine::Status))
                .col(big_integer(Quarantine::CreatedAt))
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("ux_quarantine_claim")
                .table(Quarantine::Table)
                .col(Quarantine::TenantId)
                .col(Quarantine::EndpointId)
                .col(Quarantine::EventId)
                .unique()
                .to_owned(),
        )
        .await?;

        // Durable per-minute counters, written in batches by each instance's
        // flusher (one upsert per key per flush), never per request.
        m.create_table(
            Table::create()
                .table(EventRollups::Table)
                .if_not_exists()
                .col(big_integer(EventRollups::Minute))
                .col(string(EventRollups::TenantId))
                .col(string(EventRollups::EndpointId))
                .col(string(EventRollups::Outcome))
                .col(string(EventRollups::Reason))
                .col(big_integer(EventRollups::Count))
                .primary_key(
                    Index::create()
                        .col(EventRollups::Minute)
                        .col(EventRollups::TenantId)
                        .col(EventRollups::EndpointId)
                        .col(EventRollups::Outcome)
                        .col(EventRollups::Reason),
                )
                .to_owned(),
        )
        .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for t in [
            EventRollups::Table.into_iden(),
            Quarantine::Table.into_iden(),
            OutboxIntents::Table.into_iden(),
            Reminders::Table.into_iden(),
            ReplayRecords::Table.into_iden(),
            InboxClaims::Table.into_iden(),
        ] {
            m.drop_table(Table::drop().table(t).if_exists().to_owned()).await?;
        }
        m.alter_table(Table::alter().table(Tenants::Table).drop_column(Tenants::RetryPolicy).to_owned()).await
    }
}
