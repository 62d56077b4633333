//! The rollups' total rows (issue 28 item 2): for each bucket, outcome and
//! reason, a row with `tenant_id = endpoint_id = '*'` that sums every
//! tenant's and endpoint's rows (`domain::receiver::telemetry::TOTAL`). The
//! all-tenants dashboard then reads one row per bucket and (outcome, reason)
//! instead of one per endpoint: 80 ms at 40 endpoints for 7 days on
//! PostgreSQL, 138 ms on SQLite (docs/benchmarks.md).
//!
//! Backfilled from the rows already stored, minute and hour tables alike.
//! On PostgreSQL the tables are locked in SHARE mode while they are read, so
//! a flush of an instance still running the previous build waits rather than
//! adding counts the totals would miss; one running after the upgrade still
//! writes no totals, so every instance should run the new build.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

const TABLES: [(&str, &str); 2] = [("event_rollups", "minute"), ("event_rollups_hourly", "hour")];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let conn = m.get_connection();
        if m.get_database_backend() == sea_orm::DbBackend::Postgres {
            conn.execute_unprepared("LOCK TABLE event_rollups, event_rollups_hourly IN SHARE MODE").await?;
        }
        for (table, time_col) in TABLES {
            conn.execute_unprepared(&format!(
                "INSERT INTO {table} ({time_col}, tenant_id, endpoint_id, outcome, reason, count) \
                 SELECT {time_col}, '*', '*', outcome, reason, SUM(count) FROM {table} \
                 WHERE tenant_id <> '*' GROUP BY {time_col}, outcome, reason"
            ))
            .await?;
        }
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for (table, _) in TABLES {
            m.get_connection().execute_unprepared(&format!("DELETE FROM {table} WHERE tenant_id = '*'")).await?;
        }
        Ok(())
    }
}
