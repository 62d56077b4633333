//! `audit_verified`: how far the audit chain has been verified, so the next
//! verification starts there (O(new entries)) instead of at the genesis.
//! One row; its `mac` is keyed like the chain's links, so the mark cannot be
//! moved by someone without the master key.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum AuditVerified {
    Table,
    Id,
    Seq,
    Hash,
    Mac,
    VerifiedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(AuditVerified::Table)
                .if_not_exists()
                .col(integer(AuditVerified::Id).primary_key())
                .col(big_integer(AuditVerified::Seq))
                .col(string(AuditVerified::Hash))
                .col(string(AuditVerified::Mac))
                .col(big_integer(AuditVerified::VerifiedAt))
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(AuditVerified::Table).if_exists().to_owned()).await
    }
}
