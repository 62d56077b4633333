//! Issue 28 item 1, claims: on PostgreSQL `inbox_claims` (and the sealed
//! bodies it holds) becomes daily range partitions of `received_at`, so the
//! purge drops a day instead of deleting its rows. Its primary key gains
//! `received_at`, as a unique key on a partitioned table must: one claim per
//! event across the days is the claim writers' rule (an advisory lock on the
//! key, then a probe of every partition: `domain::receiver::unique`).
//!
//! Converted like m20261206_000100 (`partitioning::Rebuild`), in this
//! migration's one transaction, under an ACCESS EXCLUSIVE lock on
//! `inbox_claims`: partitions for every day holding rows and for today and
//! [`AHEAD_DAYS`] more, a copy of every row, then the key and the indexes.
//!
//! SQLite is unchanged.

use sea_orm_migration::{prelude::*, sea_orm::DbBackend};

use crate::partitioning;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// Days after today given partitions (a frozen copy of the server's horizon).
const AHEAD_DAYS: i64 = 3;
const TABLE: &str = "inbox_claims";
const PK: &str = "tenant_id, endpoint_id, event_id, received_at";
const OLD_PK: &str = "tenant_id, endpoint_id, event_id";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        if m.get_database_backend() != DbBackend::Postgres {
            return Ok(());
        }
        partitioning::partition_by_day(m.get_connection(), TABLE, "received_at", PK, AHEAD_DAYS).await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        if m.get_database_backend() != DbBackend::Postgres {
            return Ok(());
        }
        partitioning::unpartition(m.get_connection(), TABLE, OLD_PK).await
    }
}
