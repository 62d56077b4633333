//! Bulk releases run in the background: a job row the quarantine page polls
//! for progress, and the entries it will release, snapshotted when it starts
//! so "N of M" means the M the preview promised.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum BulkReleases {
    Table,
    Id,
    TenantId,
    Filter,
    Reason,
    Actor,
    Status,
    Runner,
    Total,
    Processed,
    Released,
    StillFailing,
    AlreadyResolved,
    Error,
    CreatedAt,
    UpdatedAt,
    FinishedAt,
}

#[derive(DeriveIden)]
enum BulkReleaseItems {
    Table,
    JobId,
    Position,
    EntryId,
    Outcome,
    Error,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(BulkReleases::Table)
                .if_not_exists()
                .col(string(BulkReleases::Id).primary_key())
                .col(string_null(BulkReleases::TenantId))
                .col(text(BulkReleases::Filter))
                .col(text(BulkReleases::Reason))
                .col(string(BulkReleases::Actor))
                .col(string(BulkReleases::Status))
                .col(string(BulkReleases::Runner))
                .col(big_integer(BulkReleases::Total))
                .col(big_integer(BulkReleases::Processed))
                .col(big_integer(BulkReleases::Released))
                .col(big_integer(BulkReleases::StillFailing))
                .col(big_integer(BulkReleases::AlreadyResolved))
                .col(text_null(BulkReleases::Error))
                .col(big_integer(BulkReleases::CreatedAt))
                .col(big_integer(BulkReleases::UpdatedAt))
                .col(big_integer_null(BulkReleases::FinishedAt))
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("ix_bulk_releases_created")
                .table(BulkReleases::Table)
                .col(BulkReleases::CreatedAt)
                .if_not_exists()
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(BulkReleaseItems::Table)
                .if_not_exists()
                .col(string(BulkReleaseItems::JobId))
                .col(integer(BulkReleaseItems::Position))
                .col(string(BulkReleaseItems::EntryId))
                .col(string_null(BulkReleaseItems::Outcome))
                .col(text_null(BulkReleaseItems::Error))
                .primary_key(Index::create().col(BulkReleaseItems::JobId).col(BulkReleaseItems::Position))
                .foreign_key(
                    ForeignKey::create()
                        .from(BulkReleaseItems::Table, BulkReleaseItems::JobId)
                        .to(BulkReleases::Table, BulkReleases::Id)
                        .on_delete(ForeignKeyAction::Cascade),
                )
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(BulkReleaseItems::Table).if_exists().to_owned()).await?;
        m.drop_table(Table::drop().table(BulkReleases::Table).if_exists().to_owned()).await
    }
}
