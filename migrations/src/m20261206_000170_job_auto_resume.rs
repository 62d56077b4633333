//! Automatic resume of interrupted KEK rewraps and bulk releases (issue 28
//! item 3).
//!
//! - `kek_rewraps.auto_resumes`, `bulk_releases.auto_resumes`: how many times
//!   the system has resumed the job on its own since a person last started
//!   or resumed it; bounded, so a job that keeps failing does not loop.
//! - `bulk_releases.authority`: the actor (JSON) whose rights the job's
//!   runner re-reads each round: the starter, or the person who last resumed
//!   it. An automatic resume runs under it, re-checked. `NULL` for jobs
//!   started before this migration: those wait for a person, as before.
//!
//! One column per `ALTER TABLE`: SQLite takes one change per statement.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum KekRewraps {
    Table,
    AutoResumes,
}

#[derive(DeriveIden)]
enum BulkReleases {
    Table,
    AutoResumes,
    Authority,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter().table(KekRewraps::Table).add_column(integer(KekRewraps::AutoResumes).default(0)).to_owned(),
        )
        .await?;
        m.alter_table(
            Table::alter()
                .table(BulkReleases::Table)
                .add_column(integer(BulkReleases::AutoResumes).default(0))
                .to_owned(),
        )
        .await?;
        m.alter_table(
            Table::alter().table(BulkReleases::Table).add_column(text_null(BulkReleases::Authority)).to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(Table::alter().table(BulkReleases::Table).drop_column(BulkReleases::Authority).to_owned())
            .await?;
        m.alter_table(Table::alter().table(BulkReleases::Table).drop_column(BulkReleases::AutoResumes).to_owned())
            .await?;
        m.alter_table(Table::alter().table(KekRewraps::Table).drop_column(KekRewraps::AutoResumes).to_owned()).await
    }
}
