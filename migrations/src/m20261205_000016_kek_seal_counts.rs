//! `kek_versions.seals`: values sealed under each KEK version, counted
//! ahead of sealing (see `domain::vault`), so that a version nearing the
//! AES-GCM random-nonce bound is rotated in time. Existing versions start
//! from the rows that name them now: what was sealed and since replaced or
//! purged is not known.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum KekVersions {
    Table,
    Seals,
}

/// Every sealed column's table, as of this migration.
const SEALED_TABLES: [&str; 4] = ["signing_keys", "service_keys", "outbox_intents", "inbox_claims"];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter().table(KekVersions::Table).add_column(big_integer(KekVersions::Seals).default(0)).to_owned(),
        )
        .await?;
        let counts: Vec<String> = SEALED_TABLES
            .iter()
            .map(|t| format!("(SELECT COUNT(*) FROM {t} WHERE {t}.kek_version = kek_versions.version)"))
            .collect();
        m.get_connection()
            .execute_unprepared(&format!("UPDATE kek_versions SET seals = {}", counts.join(" + ")))
            .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(Table::alter().table(KekVersions::Table).drop_column(KekVersions::Seals).to_owned()).await
    }
}
