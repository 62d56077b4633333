//! Retention (docs/architecture.md#replays-order-and-retention: retention is
//! part of the guarantee): each endpoint's dedup and body retention and each
//! scheme's redelivery horizon, as append-only versions (who, when, why) kept
//! for the evidence export; indexes for the batched purge.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Endpoints {
    Table,
    Id,
}

#[derive(DeriveIden)]
enum RedeliveryHorizons {
    Table,
    Scheme,
    Version,
    HorizonSecs,
    Actor,
    Reason,
    CreatedAt,
}

#[derive(DeriveIden)]
enum RetentionVersions {
    Table,
    EndpointId,
    Version,
    DedupSecs,
    BodySecs,
    HorizonSecs,
    Actor,
    Reason,
    CreatedAt,
}

#[derive(DeriveIden)]
enum InboxClaims {
    Table,
    EndpointId,
    ReceivedAt,
}

#[derive(DeriveIden)]
enum ReplayRecords {
    Table,
    ExpiresAt,
}

const DAY: i64 = 86_400;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(RedeliveryHorizons::Table)
                .if_not_exists()
                .col(string(RedeliveryHorizons::Scheme))
                .col(integer(RedeliveryHorizons::Version))
                .col(big_integer(RedeliveryHorizons::HorizonSecs))
                .col(string(RedeliveryHorizons::Actor))
                .col(string(RedeliveryHorizons::Reason))
                .col(big_integer(RedeliveryHorizons::CreatedAt))
                .primary_key(Index::create().col(RedeliveryHorizons::Scheme).col(RedeliveryHorizons::Version))
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(RetentionVersions::Table)
                .if_not_exists()
                .col(string(RetentionVersions::EndpointId))
                .col(integer(RetentionVersions::Version))
                .col(big_integer(RetentionVersions::DedupSecs))
                .col(big_integer(RetentionVersions::BodySecs))
                .col(big_integer(RetentionVersions::HorizonSecs))
                .col(string(RetentionVersions::Actor))
                .col(string(RetentionVersions::Reason))
                .col(big_integer(RetentionVersions::CreatedAt))
                .primary_key(Index::create().col(RetentionVersions::EndpointId).col(RetentionVersions::Version))
                .foreign_key(
                    ForeignKey::create()
                        .from(RetentionVersions::Table, RetentionVersions::EndpointId)
                        .to(Endpoints::Table, Endpoints::Id),
                )
                .to_owned(),
        )
        .await?;

        // The senders' documented redelivery horizons as version 1, and the
        // defaults (30 d dedup, 7 d body) for endpoints that exist already.
        let conn = m.get_connection();
        let now_ms =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        for (scheme, secs, why) in [
            ("standard-webhooks", DAY, "Standard Webhooks retries for about a day"),
            ("stripe", 3 * DAY, "Stripe retries live-mode events for up to 3 days"),
            ("github", 3 * DAY, "GitHub allows manual redelivery for 3 days"),
        ] {
            conn.execute_unprepared(&format!(
                "INSERT INTO redelivery_horizons (scheme, version, horizon_secs, actor, reason, created_at) \
                 VALUES ('{scheme}', 1, {secs}, 'system', '{why}', {now_ms})"
            ))
            .await?;
        }
        conn.execute_unprepared(&format!(
            "INSERT INTO retention_versions \
                 (endpoint_id, version, dedup_secs, body_secs, horizon_secs, actor, reason, created_at) \
             SELECT id, 1, {dedup}, {body}, CASE scheme WHEN 'standard-webhooks' THEN {day} ELSE {three} END, \
                    'system', 'default retention', created_at FROM endpoints",
            dedup = 30 * DAY,
            body = 7 * DAY,
            day = DAY,
            three = 3 * DAY,
        ))
        .await?;

        m.create_index(
            Index::create()
                .name("ix_claims_endpoint_received")
                .table(InboxClaims::Table)
                .col(InboxClaims::EndpointId)
                .col(InboxClaims::ReceivedAt)
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("ix_replay_expires")
                .table(ReplayRecords::Table)
                .col(ReplayRecords::ExpiresAt)
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_index(Index::drop().name("ix_replay_expires").table(ReplayRecords::Table).to_owned()).await?;
        m.drop_index(Index::drop().name("ix_claims_endpoint_received").table(InboxClaims::Table).to_owned()).await?;
        m.drop_table(Table::drop().table(RetentionVersions::Table).if_exists().to_owned()).await?;
        m.drop_table(Table::drop().table(RedeliveryHorizons::Table).if_exists().to_owned()).await
    }
}
