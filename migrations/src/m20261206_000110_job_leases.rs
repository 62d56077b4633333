//! `job_leases`: one row per background job that must run in at most one
//! `signet serve` process at a time (issue 28 item 3). A process holds the
//! job while `expires_at` is in the future; `epoch` grows by one at every
//! change of holder, so a stale holder's renewal (which names its epoch)
//! matches nothing. Same table on both engines.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum JobLeases {
    Table,
    Job,
    Holder,
    Epoch,
    ExpiresAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(JobLeases::Table)
                .if_not_exists()
                .col(string(JobLeases::Job).primary_key())
                .col(string(JobLeases::Holder))
                .col(big_integer(JobLeases::Epoch))
                .col(big_integer(JobLeases::ExpiresAt))
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(JobLeases::Table).to_owned()).await
    }
}
