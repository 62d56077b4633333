//! Issue 28 item 1, replay records: on PostgreSQL `replay_records` gains
//! `recorded_at` (ms, filled by the database when a record is written) and
//! becomes daily range partitions of it; its primary key gains the column,
//! as a unique key on a partitioned table must. One record per signed
//! message across the days is the writers' rule (an advisory lock on the
//! key, then a probe of every partition: `domain::receiver::unique`). A
//! record cannot be partitioned by `expires_at`: GitHub's keep time is the
//! dedup retention, far past the partitions made ahead, and a longer keep
//! time moves it further (`receiver::replay::extend`).
//!
//! Existing records get the migration's time (they are at most a keep time
//! old, and their day is dropped only once every one of them has expired).
//! Converted like m20261206_000100 (`partitioning::Rebuild`), in this
//! migration's transaction, under an ACCESS EXCLUSIVE lock on the table.
//!
//! SQLite is unchanged.

use sea_orm_migration::{prelude::*, sea_orm::DbBackend};

use crate::partitioning;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// Days after today given partitions (a frozen copy of the server's horizon).
const AHEAD_DAYS: i64 = 3;
const TABLE: &str = "replay_records";
const PK: &str = "tenant_id, endpoint_id, message_digest, recorded_at";
const OLD_PK: &str = "tenant_id, endpoint_id, message_digest";
/// The writing transaction's time in ms.
const NOW_MS: &str = "(extract(epoch FROM now()) * 1000)::bigint";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        if m.get_database_backend() != DbBackend::Postgres {
            return Ok(());
        }
        let conn = m.get_connection();
        if !partitioning::lock_for_conversion(conn, TABLE, false).await? {
            return Ok(());
        }
        conn.execute_unprepared(&format!(
            "ALTER TABLE {TABLE} ADD COLUMN recorded_at bigint NOT NULL DEFAULT {NOW_MS}"
        ))
        .await?;
        partitioning::partition_by_day(conn, TABLE, "recorded_at", PK, AHEAD_DAYS).await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        if m.get_database_backend() != DbBackend::Postgres {
            return Ok(());
        }
        let conn = m.get_connection();
        if !partitioning::lock_for_conversion(conn, TABLE, true).await? {
            return Ok(());
        }
        // An expired record may share its key with a newer one: the newest
        // stays, as the old key allows one.
        conn.execute_unprepared(&format!(
            "DELETE FROM {TABLE} r USING {TABLE} n WHERE r.tenant_id = n.tenant_id AND r.endpoint_id = n.endpoint_id \
             AND r.message_digest = n.message_digest AND r.recorded_at < n.recorded_at"
        ))
        .await?;
        partitioning::unpartition(conn, TABLE, OLD_PK).await?;
        conn.execute_unprepared(&format!("ALTER TABLE {TABLE} DROP COLUMN recorded_at")).await?;
        Ok(())
    }
}
