//! Hourly rollups beside the per-minute ones, so a 24-hour or 7-day
//! dashboard reads at most 168 rows per (tenant, endpoint, outcome, reason)
//! however many events are stored. Backfilled from the minute rows.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum EventRollupsHourly {
    Table,
    Hour,
    TenantId,
    EndpointId,
    Outcome,
    Reason,
    Count,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(EventRollupsHourly::Table)
                .if_not_exists()
                .col(big_integer(EventRollupsHourly::Hour))
                .col(string(EventRollupsHourly::TenantId))
                .col(string(EventRollupsHourly::EndpointId))
                .col(string(EventRollupsHourly::Outcome))
                .col(string(EventRollupsHourly::Reason))
                .col(big_integer(EventRollupsHourly::Count))
                .primary_key(
                    Index::create()
                        .col(EventRollupsHourly::Hour)
                        .col(EventRollupsHourly::TenantId)
                        .col(EventRollupsHourly::EndpointId)
                        .col(EventRollupsHourly::Outcome)
                        .col(EventRollupsHourly::Reason),
                )
                .to_owned(),
        )
        .await?;
        // Per-tenant dashboards filter by tenant first.
        m.create_index(
            Index::create()
                .name("ix_rollups_hourly_tenant")
                .table(EventRollupsHourly::Table)
                .col(EventRollupsHourly::TenantId)
                .col(EventRollupsHourly::Hour)
                .to_owned(),
        )
        .await?;
        m.get_connection()
            .execute_unprepared(
                "INSERT INTO event_rollups_hourly (hour, tenant_id, endpoint_id, outcome, reason, count) \
                 SELECT minute / 60, tenant_id, endpoint_id, outcome, reason, SUM(count) FROM event_rollups \
                 GROUP BY minute / 60, tenant_id, endpoint_id, outcome, reason",
            )
            .await?;
        m.get_connection()
            .execute_unprepared("CREATE INDEX IF NOT EXISTS ix_rollups_tenant ON event_rollups (tenant_id, minute)")
            .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.get_connection().execute_unprepared("DROP INDEX IF EXISTS ix_rollups_tenant").await?;
        m.drop_table(Table::drop().table(EventRollupsHourly::Table).if_exists().to_owned()).await
    }
}
