//! Four eyes on scope changes: `signing_keys.scope_changed_by` records who
//! last changed a key's event types, so that person cannot approve the
//! change (as the key's creator cannot approve the key).

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum SigningKeys {
    Table,
    ScopeChangedBy,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter().table(SigningKeys::Table).add_column(string_null(SigningKeys::ScopeChangedBy)).to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(Table::alter().table(SigningKeys::Table).drop_column(SigningKeys::ScopeChangedBy).to_owned())
            .await
    }
}
