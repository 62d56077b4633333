//! `ix_claims_sealed_age`: the claims that still hold a sealed body, by
//! endpoint and age, for the retention purge's body clearing (issue 28
//! item 1).
//!
//! The purge clears bodies past the body retention in batches of 500, each
//! selecting an endpoint's oldest claims that still have a body. Through
//! `ix_claims_endpoint_received` every batch first stepped over all the
//! claims whose bodies were cleared before (23 of 30 days with the defaults),
//! so a day's purge grew with the square of what is stored: 11.5 s at one
//! million events on SQLite, 408 s at ten million (`bench/purge.sh`). This
//! index holds only the rows with a body, so each batch reads just its own.
//! It costs an index entry per claim while its body is kept; the claim
//! transaction in pgbench showed no difference (docs/benchmarks.md).
//!
//! A partial index, in plain SQL (both engines have them; sea-query's index
//! builder has no `WHERE`). On PostgreSQL, `CREATE INDEX` blocks writes to
//! the claims while it reads them once; see docs/benchmarks.md for its time.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.get_connection()
            .execute_unprepared(
                "CREATE INDEX ix_claims_sealed_age ON inbox_claims (endpoint_id, received_at) \
                 WHERE body_ciphertext IS NOT NULL",
            )
            .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.get_connection().execute_unprepared("DROP INDEX ix_claims_sealed_age").await?;
        Ok(())
    }
}
