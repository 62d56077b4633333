//! What a command acts on: the database (migrated) and the vault.

use domain::vault::Vault;
use sea_orm::DatabaseConnection;

use super::output::CliError;
use crate::config::DbArgs;

pub(super) async fn open_db(args: &DbArgs) -> Result<DatabaseConnection, CliError> {
    let url = args.url()?;
    let db = domain::db::connect_with(&url, args.pg_pool_size).await?;
    // Before the migrations, which make partitions by this clock's day.
    domain::clock_offset::refuse_if_far_off(&db).await?;
    domain::db::migrate(&db).await?;
    Ok(db)
}

pub(super) async fn open_vault(args: &DbArgs, db: &DatabaseConnection) -> Result<Vault, CliError> {
    let master = args.master_key(db).await?;
    let vault = domain::startup::open_vault(db, master).await.map_err(|e| CliError::new("vault", e.to_string()))?;
    Ok(vault.with_files(args.deployment_files()))
}
