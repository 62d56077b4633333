//! Standard Webhooks `v1a` credentials: `signing_keys.credential_kind`
//! (`hmac`, every existing row, or `ed25519`) and `signing_keys.public_key`,
//! the `whpk_…` key in clear. An `ed25519` row seals nothing: its
//! `secret_ciphertext` is empty and its `kek_version` 0 (no ring version),
//! and KEK rewraps and counts read `hmac` rows only.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum SigningKeys {
    Table,
    CredentialKind,
    PublicKey,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite adds one at a time.
        m.alter_table(
            Table::alter()
                .table(SigningKeys::Table)
                .add_column(
                    string(SigningKeys::CredentialKind)
                        .default("hmac")
                        .check(Expr::col(SigningKeys::CredentialKind).is_in(["hmac", "ed25519"])),
                )
                .to_owned(),
        )
        .await?;
        m.alter_table(
            Table::alter().table(SigningKeys::Table).add_column(string_null(SigningKeys::PublicKey)).to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(Table::alter().table(SigningKeys::Table).drop_column(SigningKeys::PublicKey).to_owned()).await?;
        m.alter_table(Table::alter().table(SigningKeys::Table).drop_column(SigningKeys::CredentialKind).to_owned())
            .await
    }
}
