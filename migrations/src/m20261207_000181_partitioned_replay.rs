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

use crate::partitioning::{self, LOCK_KEY, Rebuild, days_with_rows, now_ms, partitioned};

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
        // The server's upkeep holds the same lock while it adds partitions.
        conn.execute_unprepared(&format!("SELECT pg_advisory_xact_lock({LOCK_KEY})")).await?;
        if partitioned(conn, TABLE).await? {
            return Ok(());
        }
        conn.execute_unprepared(&format!("LOCK TABLE {TABLE} IN ACCESS EXCLUSIVE MODE")).await?;
        conn.execute_unprepared(&format!(
            "ALTER TABLE {TABLE} ADD COLUMN recorded_at bigint NOT NULL DEFAULT {NOW_MS}"
        ))
        .await?;
        let today = partitioning::day_of(now_ms());
        let plan = Rebuild::start(conn, TABLE).await?;
        let days = days_with_rows(conn, &plan.old, "recorded_at", 1, "TRUE").await?;
        plan.create(conn, "PARTITION BY RANGE (recorded_at)").await?;
        for day in days.into_iter().chain(today..=today + AHEAD_DAYS) {
            conn.execute_unprepared(&partitioning::create_sql(TABLE, 1, day)).await?;
        }
        plan.finish(conn, PK).await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        if m.get_database_backend() != DbBackend::Postgres {
            return Ok(());
        }
        let conn = m.get_connection();
        conn.execute_unprepared(&format!("SELECT pg_advisory_xact_lock({LOCK_KEY})")).await?;
        if !partitioned(conn, TABLE).await? {
            return Ok(());
        }
        conn.execute_unprepared(&format!("LOCK TABLE {TABLE} IN ACCESS EXCLUSIVE MODE")).await?;
        // An expired record may share its key with a newer one: the newest
        // stays, as the old key allows one.
        conn.execute_unprepared(&format!(
            "DELETE FROM {TABLE} r USING {TABLE} n WHERE r.tenant_id = n.tenant_id AND r.endpoint_id = n.endpoint_id \
             AND r.message_digest = n.message_digest AND r.recorded_at < n.recorded_at"
        ))
        .await?;
        let plan = Rebuild::start(conn, TABLE).await?;
        plan.create(conn, "").await?;
        plan.finish(conn, OLD_PK).await?;
        conn.execute_unprepared(&format!("ALTER TABLE {TABLE} DROP COLUMN recorded_at")).await?;
        Ok(())
    }
}
