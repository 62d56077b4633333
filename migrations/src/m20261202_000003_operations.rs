//! Operations: the versioned per-tenant retry policy and the triage record
//! on quarantined events (who resolved them, when and why).

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Tenants {
    Table,
    Id,
}

#[derive(DeriveIden)]
enum RetryPolicyVersions {
    Table,
    TenantId,
    Version,
    Policy,
    Actor,
    Reason,
    CreatedAt,
}

#[derive(DeriveIden)]
enum Quarantine {
    Table,
    ResolvedAt,
    ResolvedBy,
    ResolutionNote,
    LastReleaseError,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        // Every change is a new row; `tenants.retry_policy` caches the newest
        // version's value for the receiver's endpoint cache.
        m.create_table(
            Table::create()
                .table(RetryPolicyVersions::Table)
                .if_not_exists()
                .col(string(RetryPolicyVersions::TenantId))
                .col(integer(RetryPolicyVersions::Version))
                .col(string(RetryPolicyVersions::Policy))
                .col(string(RetryPolicyVersions::Actor))
                .col(string(RetryPolicyVersions::Reason))
                .col(big_integer(RetryPolicyVersions::CreatedAt))
                .primary_key(Index::create().col(RetryPolicyVersions::TenantId).col(RetryPolicyVersions::Version))
                .foreign_key(
                    ForeignKey::create()
                        .from(RetryPolicyVersions::Table, RetryPolicyVersions::TenantId)
                        .to(Tenants::Table, Tenants::Id),
                )
                .to_owned(),
        )
        .await?;
        // Tenants that exist already start with their current policy as v1.
        m.get_connection()
            .execute_unprepared(
                "INSERT INTO retry_policy_versions (tenant_id, version, policy, actor, reason, created_at) \
                 SELECT id, 1, retry_policy, 'system', 'initial policy', created_at FROM tenants",
            )
            .await?;

        for col in [Quarantine::ResolvedAt] {
            m.alter_table(Table::alter().table(Quarantine::Table).add_column(big_integer_null(col)).to_owned()).await?;
        }
        for col in [Quarantine::ResolvedBy, Quarantine::ResolutionNote, Quarantine::LastReleaseError] {
            m.alter_table(Table::alter().table(Quarantine::Table).add_column(string_null(col)).to_owned()).await?;
        }
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for col in
            [Quarantine::ResolvedAt, Quarantine::ResolvedBy, Quarantine::ResolutionNote, Quarantine::LastReleaseError]
        {
            m.alter_table(Table::alter().table(Quarantine::Table).drop_column(col).to_owned()).await?;
        }
        m.drop_table(Table::drop().table(RetryPolicyVersions::Table).if_exists().to_owned()).await
    }
}
