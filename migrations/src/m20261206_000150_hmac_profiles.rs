//! Scheme `hmac` (issue 26 item 2): an endpoint whose sender signs in its
//! own HMAC format, described by a profile.
//!
//! - `endpoints.scheme` admits `hmac`. PostgreSQL replaces the column's
//!   CHECK. SQLite cannot alter a CHECK; widening one changes no stored row,
//!   so the table's recorded SQL is edited in place, the procedure SQLite
//!   documents for such changes ("ALTER TABLE", section 7: `writable_schema`
//!   and a new `schema_version`), inside this migration's transaction.
//! - `endpoints.hmac_profile`: the profile (JSON), fixed at creation.
//! - A redelivery horizon for `hmac`, version 1, so its endpoints get a
//!   retention as every other scheme's do.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend, Statement};

#[derive(DeriveMigrationName)]
pub struct Migration;

const BEFORE: &str = "('standard-webhooks', 'stripe', 'github')";
const AFTER: &str = "('standard-webhooks', 'stripe', 'github', 'hmac')";

const DAY: i64 = 86_400;
/// No single sender: the presets' published schedules, with margin.
const HORIZON_SECS: i64 = 2 * DAY;
const SOURCE: &str = "scheme hmac has no single sender; its presets retry within hours: Shopify 8 times over 4 h, \
                      Slack 3 times within an hour, seed 004's sender 8 attempts with backoff capped at 15 min; \
                      2 d leaves margin. Raise it for a sender that retries longer";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let c = m.get_connection();
        widen_scheme(c, BEFORE, AFTER).await?;
        c.execute_unprepared("ALTER TABLE endpoints ADD COLUMN hmac_profile text").await?;
        let source = SOURCE.replace('\'', "''");
        let now_ms =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        c.execute_unprepared(&format!(
            "INSERT INTO redelivery_horizons \
                 (scheme, version, horizon_secs, actor, reason, created_at, source, manual_resend_secs, \
                  manual_resend_source) \
             VALUES ('hmac', 1, {HORIZON_SECS}, 'system', 'scheme hmac introduced (migration 000150)', {now_ms}, \
                     '{source}', 0, 'senders differ: set the dedup retention for the sender''s own resend window')"
        ))
        .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let c = m.get_connection();
        c.execute_unprepared("DELETE FROM redelivery_horizons WHERE scheme = 'hmac'").await?;
        c.execute_unprepared("ALTER TABLE endpoints DROP COLUMN hmac_profile").await?;
        widen_scheme(c, AFTER, BEFORE).await
    }
}

/// Replaces the list of schemes `endpoints.scheme` admits.
async fn widen_scheme(c: &SchemaManagerConnection<'_>, from: &str, to: &str) -> Result<(), DbErr> {
    if c.get_database_backend() != DbBackend::Sqlite {
        let sql = format!(
            "DO $$ DECLARE old text; BEGIN \
               SELECT conname INTO old FROM pg_constraint \
                WHERE conrelid = 'endpoints'::regclass AND contype = 'c' \
                  AND pg_get_constraintdef(oid) LIKE '%scheme%'; \
               IF old IS NOT NULL THEN EXECUTE format('ALTER TABLE endpoints DROP CONSTRAINT %I', old); END IF; \
               ALTER TABLE endpoints ADD CONSTRAINT endpoints_scheme_check CHECK (scheme IN {to}); \
             END $$"
        );
        c.execute_unprepared(&sql).await?;
        return Ok(());
    }
    let q = |sql: &str| Statement::from_string(DbBackend::Sqlite, sql.to_owned());
    let row = c
        .query_one_raw(q("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'endpoints'"))
        .await?
        .ok_or_else(|| DbErr::Migration("no endpoints table".to_owned()))?;
    let sql: String = row.try_get("", "sql")?;
    if sql.matches(from).count() != 1 {
        return Err(DbErr::Migration(format!("endpoints' scheme CHECK is not {from} as expected")));
    }
    let version: i64 = c
        .query_one_raw(q("PRAGMA schema_version"))
        .await?
        .ok_or_else(|| DbErr::Migration("no schema_version".to_owned()))?
        .try_get_by_index(0)?;
    let new_sql = sql.replace(from, to).replace('\'', "''");
    c.execute_unprepared("PRAGMA writable_schema = ON").await?;
    let edit = c
        .execute_unprepared(&format!(
            "UPDATE sqlite_master SET sql = '{new_sql}' WHERE type = 'table' AND name = 'endpoints'"
        ))
        .await;
    // The schema version moves on either way, so every connection reads the
    // table's definition afresh.
    c.execute_unprepared(&format!("PRAGMA schema_version = {}", version + 1)).await?;
    c.execute_unprepared("PRAGMA writable_schema = OFF").await?;
    edit?;
    // Only this table: a whole-file check would read every stored event.
    let check = c.query_one_raw(q("PRAGMA integrity_check(endpoints)")).await?;
    let ok: String = check.map(|r| r.try_get_by_index(0)).transpose()?.unwrap_or_default();
    if ok != "ok" {
        return Err(DbErr::Migration(format!("integrity check after widening the scheme CHECK: {ok}")));
    }
    Ok(())
}
