//! Sealed event bodies move out of `inbox_claims` into `event_bodies`
//! (issue 28 item 1), partitioned by day on PostgreSQL.
//!
//! Until now the retention purge cleared a body by updating its claim row.
//! That update names a column the partial index `ix_claims_sealed_age`
//! filters on, so it is never a HOT update: every cleared body added an entry
//! to each of the claims' indexes, which grew by a quarter a day at 30 M
//! claims while the heap stayed flat, and a day's clearing wrote about 3 GB
//! of WAL (docs/benchmarks.md, "A hundred million claims"). Now a claim row
//! is never touched by retention, and on PostgreSQL a day of bodies goes as
//! one partition drop (`domain::retention::partitions`).
//!
//! `filed_at` is the partition column: the claim's `received_at`, or the
//! time the purge carried the body of a still open quarantine entry forward
//! into today's partition before dropping its day. The key therefore holds
//! `filed_at` (PostgreSQL requires the partition column in a unique key);
//! one body per claim is what the claim's own key and the claim transaction
//! guarantee. The key is the table's only index, so a body costs one index
//! entry as it did in the claims (`ix_claims_sealed_age`). It leads with
//! `(endpoint_id, received_at)`: the purge reads an endpoint's bodies by age
//! through it, a reader names a claim's body exactly (the claim gives its
//! `received_at`), and the KEK rewrap walks it in order.
//!
//! On PostgreSQL the claims are locked in EXCLUSIVE mode while the bodies
//! are copied (reads go on; writes wait), the copied bodies are cleared from
//! the claims (dropping a column only hides its bytes, which would stay
//! until each claim is deleted), then the two columns are dropped.
//! An instance of an older build still writing claims fails its inserts
//! once this has run: upgrade every instance together.

use sea_orm_migration::{
    prelude::*,
    sea_orm::{DbBackend, Statement},
};

use crate::partitioning::{self, DAY_MS, LOCK_KEY};

#[derive(DeriveMigrationName)]
pub struct Migration;

/// Days after today given partitions (a frozen copy of the server's horizon).
const AHEAD_DAYS: i64 = 3;

const COLUMNS: &str = "tenant_id, endpoint_id, event_id, received_at, filed_at, kek_version, body_ciphertext";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    /// One transaction on SQLite too (sea-orm-migration gives PostgreSQL
    /// one by default): a failure part-way leaves the claims as they were,
    /// and no claim written between the copy and the column drop loses its
    /// body.
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let conn = m.get_connection();
        let pg = m.get_database_backend() == DbBackend::Postgres;
        // SQLite: a rowid table and its key's index. `WITHOUT ROWID` would
        // make the key the table, but an index b-tree keeps at most about a
        // kilobyte of a row on its page, so every body would spill to an
        // overflow page of its own (bench/ab.sh: 0.88 of the throughput).
        let (blob, tail) = if pg { ("BYTEA", " PARTITION BY RANGE (filed_at)") } else { ("BLOB", "") };
        if pg {
            conn.execute_unprepared(&format!("SELECT pg_advisory_xact_lock({LOCK_KEY})")).await?;
            conn.execute_unprepared("LOCK TABLE inbox_claims IN EXCLUSIVE MODE").await?;
        }
        conn.execute_unprepared(&format!(
            "CREATE TABLE event_bodies (tenant_id TEXT NOT NULL, endpoint_id TEXT NOT NULL, event_id TEXT NOT NULL, \
             received_at BIGINT NOT NULL, filed_at BIGINT NOT NULL, kek_version INTEGER NOT NULL, \
             body_ciphertext {blob} NOT NULL, \
             CONSTRAINT event_bodies_pkey PRIMARY KEY (endpoint_id, received_at, tenant_id, event_id, filed_at)){tail}"
        ))
        .await?;
        if pg {
            let today = partitioning::day_of(now_ms());
            let rows = conn
                .query_all_raw(Statement::from_string(
                    DbBackend::Postgres,
                    format!(
                        "SELECT DISTINCT floor(received_at::numeric / {DAY_MS})::bigint AS day FROM inbox_claims \
                         WHERE body_ciphertext IS NOT NULL"
                    ),
                ))
                .await?;
            let mut days = rows.iter().map(|r| r.try_get::<i64>("", "day")).collect::<Result<Vec<_>, _>>()?;
            days.extend(today..=today + AHEAD_DAYS);
            days.sort_unstable();
            days.dedup();
            for day in days {
                conn.execute_unprepared(&partitioning::create_sql("event_bodies", 1, day)).await?;
            }
        }
        conn.execute_unprepared(&format!(
            "INSERT INTO event_bodies ({COLUMNS}) SELECT tenant_id, endpoint_id, event_id, received_at, received_at, \
             kek_version, body_ciphertext FROM inbox_claims WHERE body_ciphertext IS NOT NULL"
        ))
        .await?;
        conn.execute_unprepared("DROP INDEX ix_claims_sealed_age").await?;
        if pg {
            // Dropping a column only hides it: the bytes would stay in every
            // claim row until the claim is deleted (its dedup retention, up
            // to years), long after the body retention. Cleared first, the
            // old row versions go at the next vacuum.
            conn.execute_unprepared(
                "UPDATE inbox_claims SET body_ciphertext = NULL, kek_version = NULL \
                 WHERE body_ciphertext IS NOT NULL",
            )
            .await?;
        }
        // One column per statement: SQLite's ALTER TABLE drops one at a time.
        for col in ["body_ciphertext", "kek_version"] {
            conn.execute_unprepared(&format!("ALTER TABLE inbox_claims DROP COLUMN {col}")).await?;
        }
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let conn = m.get_connection();
        let pg = m.get_database_backend() == DbBackend::Postgres;
        let blob = if pg { "BYTEA" } else { "BLOB" };
        if pg {
            conn.execute_unprepared(&format!("SELECT pg_advisory_xact_lock({LOCK_KEY})")).await?;
            conn.execute_unprepared("LOCK TABLE inbox_claims, event_bodies IN EXCLUSIVE MODE").await?;
        }
        conn.execute_unprepared(&format!("ALTER TABLE inbox_claims ADD COLUMN body_ciphertext {blob}")).await?;
        conn.execute_unprepared("ALTER TABLE inbox_claims ADD COLUMN kek_version INTEGER").await?;
        // A body carried forward has two rows only until its old day's drop
        // commits (the same transaction): the latest filing is the body.
        let latest = "FROM event_bodies b WHERE b.endpoint_id = inbox_claims.endpoint_id \
                      AND b.received_at = inbox_claims.received_at AND b.tenant_id = inbox_claims.tenant_id \
                      AND b.event_id = inbox_claims.event_id ORDER BY b.filed_at DESC LIMIT 1";
        conn.execute_unprepared(&format!(
            "UPDATE inbox_claims SET body_ciphertext = (SELECT b.body_ciphertext {latest}), \
             kek_version = (SELECT b.kek_version {latest}) \
             WHERE EXISTS (SELECT 1 {latest})"
        ))
        .await?;
        conn.execute_unprepared(
            "CREATE INDEX ix_claims_sealed_age ON inbox_claims (endpoint_id, received_at) \
             WHERE body_ciphertext IS NOT NULL",
        )
        .await?;
        conn.execute_unprepared("DROP TABLE event_bodies").await?;
        Ok(())
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}
