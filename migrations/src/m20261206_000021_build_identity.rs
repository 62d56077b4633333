//! Evidence bound to the build (issue 23 item 2):
//! - each drill run records the build it ran on (`build_commit`,
//!   `binary_sha256`), so a run counts only for that build. Runs stored
//!   before this migration have empty values: they count for no build, and
//!   the next bundle calls them stale until drills run again;
//! - `key_use_rollups`: successful verifications per key and hour, so each
//!   credential row in a bundle shows its successes over the window (the
//!   failures already have `key_failure_rollups`).

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum DrillRuns {
    Table,
    BuildCommit,
    BinarySha256,
}

#[derive(DeriveIden)]
enum KeyUseRollups {
    Table,
    Hour,
    KeyId,
    TenantId,
    EndpointId,
    Count,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite adds one at a time.
        for col in [DrillRuns::BuildCommit, DrillRuns::BinarySha256] {
            m.alter_table(Table::alter().table(DrillRuns::Table).add_column(string(col).default("")).to_owned())
                .await?;
        }
        m.create_table(
            Table::create()
                .table(KeyUseRollups::Table)
                .if_not_exists()
                .col(big_integer(KeyUseRollups::Hour))
                .col(string(KeyUseRollups::KeyId))
                .col(string(KeyUseRollups::TenantId))
                .col(string(KeyUseRollups::EndpointId))
                .col(big_integer(KeyUseRollups::Count))
                .primary_key(Index::create().col(KeyUseRollups::Hour).col(KeyUseRollups::KeyId))
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(KeyUseRollups::Table).if_exists().to_owned()).await?;
        for col in [DrillRuns::BinarySha256, DrillRuns::BuildCommit] {
            m.alter_table(Table::alter().table(DrillRuns::Table).drop_column(col).to_owned()).await?;
        }
        Ok(())
    }
}
