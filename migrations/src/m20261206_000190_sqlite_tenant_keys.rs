//! SQLite gets the keys PostgreSQL has had since m20261206_000100, so that
//! every key of a table to be distributed by tenant includes `tenant_id` on
//! both engines ([`crate::distribution`]):
//!
//! - `delivery_log`: (tenant_id, id, answered_at) instead of its id;
//! - `key_use_rollups`: (hour, tenant_id, key_id) instead of (hour, key_id);
//! - `key_failure_rollups`: (hour, tenant_id, key_id, reason) instead of
//!   (hour, key_id, reason).
//!
//! A key id names one tenant's key and a delivery log id is a fresh UUID, so
//! the new keys hold exactly the rows the old ones did. SQLite cannot alter a
//! primary key: each table is rebuilt (create, copy every row, drop, rename,
//! indexes again) inside this migration's one transaction, so a failure
//! leaves the old tables as they were. PostgreSQL already has these keys:
//! nothing happens there.

use sea_orm_migration::{prelude::*, sea_orm::DbBackend};

use crate::m20261206_000121_tenant_keys::rebuild_sqlite;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// (table, primary key before, primary key after, as on PostgreSQL).
const KEYS: &[(&str, &[&str], &[&str])] = &[
    ("delivery_log", &["id"], &["tenant_id", "id", "answered_at"]),
    ("key_use_rollups", &["hour", "key_id"], &["hour", "tenant_id", "key_id"]),
    ("key_failure_rollups", &["hour", "key_id", "reason"], &["hour", "tenant_id", "key_id", "reason"]),
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        if m.get_database_backend() != DbBackend::Sqlite {
            return Ok(());
        }
        for (table, _, after) in KEYS {
            rebuild_sqlite(m.get_connection(), table, after, &[]).await?;
        }
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        if m.get_database_backend() != DbBackend::Sqlite {
            return Ok(());
        }
        for (table, before, _) in KEYS {
            rebuild_sqlite(m.get_connection(), table, before, &[]).await?;
        }
        Ok(())
    }
}
