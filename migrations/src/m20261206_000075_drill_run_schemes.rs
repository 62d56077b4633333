//! Drill runs record the signature schemes whose verification they drilled
//! (`drill_runs.schemes`, a JSON array of scheme names): the rollout order
//! needs a run covering every scheme of the cohort's endpoints. Runs stored
//! before this migration have none recorded (null); they signed with
//! standard-webhooks only and count for that scheme alone.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum DrillRuns {
    Table,
    Schemes,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(Table::alter().table(DrillRuns::Table).add_column(text_null(DrillRuns::Schemes)).to_owned()).await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(Table::alter().table(DrillRuns::Table).drop_column(DrillRuns::Schemes).to_owned()).await
    }
}
