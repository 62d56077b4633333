//! Break-glass for the rollout order (issue 23 item 3): a request to enable
//! retries before the drills and the review caught up, with its reason and
//! what was missing, decided once by a second person (four eyes).

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum RolloutOverrides {
    Table,
    Id,
    TenantId,
    RequestedBy,
    RequestedByKind,
    Reason,
    PolicyReason,
    Missing,
    Status,
    CreatedAt,
    ExpiresAt,
    DecidedBy,
    DecidedAt,
    Comment,
    PolicyVersion,
}

#[derive(DeriveIden)]
enum Tenants {
    Table,
    Id,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(RolloutOverrides::Table)
                .if_not_exists()
                .col(string(RolloutOverrides::Id).primary_key())
                .col(string(RolloutOverrides::TenantId))
                .col(string(RolloutOverrides::RequestedBy))
                .col(string(RolloutOverrides::RequestedByKind))
                .col(text(RolloutOverrides::Reason))
                .col(text(RolloutOverrides::PolicyReason))
                .col(text(RolloutOverrides::Missing))
                .col(string(RolloutOverrides::Status))
                .col(big_integer(RolloutOverrides::CreatedAt))
                .col(big_integer(RolloutOverrides::ExpiresAt))
                .col(string_null(RolloutOverrides::DecidedBy))
                .col(big_integer_null(RolloutOverrides::DecidedAt))
                .col(text_null(RolloutOverrides::Comment))
                .col(integer_null(RolloutOverrides::PolicyVersion))
                .foreign_key(
                    ForeignKey::create()
                        .from(RolloutOverrides::Table, RolloutOverrides::TenantId)
                        .to(Tenants::Table, Tenants::Id),
                )
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("idx_rollout_overrides_tenant")
                .table(RolloutOverrides::Table)
                .col(RolloutOverrides::TenantId)
                .col(RolloutOverrides::CreatedAt)
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(RolloutOverrides::Table).if_exists().to_owned()).await
    }
}
