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

use crate::partitioning::{self, LOCK_KEY, Rebuild, days_with_rows, now_ms, partitioned};

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
        let conn = m.get_connection();
        // The server's upkeep holds the same lock while it adds partitions.
        conn.execute_unprepared(&format!("SELECT pg_advisory_xact_lock({LOCK_KEY})")).await?;
        if partitioned(conn, TABLE).await? {
            return Ok(());
        }
        conn.execute_unprepared(&format!("LOCK TABLE {TABLE} IN ACCESS EXCLUSIVE MODE")).await?;
        let today = partitioning::day_of(now_ms());
        let plan = Rebuild::start(conn, TABLE).await?;
        let days = days_with_rows(conn, &plan.old, "received_at", 1, "TRUE").await?;
        plan.create(conn, "PARTITION BY RANGE (received_at)").await?;
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
        let plan = Rebuild::start(conn, TABLE).await?;
        plan.create(conn, "").await?;
        plan.finish(conn, OLD_PK).await
    }
}
