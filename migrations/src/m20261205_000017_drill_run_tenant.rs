//! Drill runs belong to the tenant of the clinic admin who started them
//! (`drill_runs.tenant_id`; null for deployment-wide roles and the CLI), so
//! a clinic admin lists only its own tenant's runs. Runs stored before this
//! migration have no tenant: only deployment-wide roles see them.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum DrillRuns {
    Table,
    TenantId,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(Table::alter().table(DrillRuns::Table).add_column(string_null(DrillRuns::TenantId)).to_owned())
            .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(Table::alter().table(DrillRuns::Table).drop_column(DrillRuns::TenantId).to_owned()).await
    }
}
