//! Every primary key of a table that Citus would distribute by tenant
//! includes `tenant_id` (docs/scaling.md; the rule and its table list are
//! [`crate::distribution`], checked against the live catalog by a test):
//!
//! - `replay_records` gains `tenant_id` (copied from its endpoint) and its key
//!   becomes (tenant, endpoint, message digest). An endpoint belongs to one
//!   tenant, so this refuses exactly the replays the old key did. A record of
//!   an endpoint that no longer exists (none in normal operation) is kept
//!   with an empty tenant and expires as before.
//! - `quarantine` and `outbox_intents` are keyed by (tenant, id) instead of
//!   id. Their ids are UUID v7 (74 random bits beside the time), and every
//!   lookup checks the row's tenant against the caller; the unique keys that
//!   carry their guarantees, (tenant, endpoint, event id) and (tenant,
//!   idempotency key), are unchanged.
//!
//! PostgreSQL swaps the key in one `ALTER TABLE` (an ACCESS EXCLUSIVE lock
//! while the new index builds). SQLite cannot alter a primary key: each table
//! is rebuilt (create, copy, drop, rename, indexes again) inside this
//! migration's transaction, so a failure leaves the old table as it was.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend, Statement};

#[derive(DeriveMigrationName)]
pub struct Migration;

/// (table, primary key before, primary key after).
const KEYS: &[(&str, &[&str], &[&str])] = &[
    ("replay_records", &["endpoint_id", "message_digest"], &["tenant_id", "endpoint_id", "message_digest"]),
    ("quarantine", &["id"], &["tenant_id", "id"]),
    ("outbox_intents", &["id"], &["tenant_id", "id"]),
];

/// (index, table): plain indexes on `id` beside the new keys.
const ID_INDEXES: &[(&str, &str)] = &[("ix_quarantine_id", "quarantine"), ("ix_outbox_id", "outbox_intents")];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    /// One transaction on both engines: SQLite's rebuild must not stop half
    /// way.
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let c = m.get_connection();
        let sqlite = c.get_database_backend() == DbBackend::Sqlite;
        // `varchar` on both engines, as sea-query's `string()` makes it.
        c.execute_unprepared("ALTER TABLE replay_records ADD COLUMN tenant_id varchar").await?;
        c.execute_unprepared(
            "UPDATE replay_records SET tenant_id = COALESCE( \
                 (SELECT e.tenant_id FROM endpoints e WHERE e.id = replay_records.endpoint_id), '')",
        )
        .await?;
        if !sqlite {
            c.execute_unprepared("ALTER TABLE replay_records ALTER COLUMN tenant_id SET NOT NULL").await?;
        }
        for (table, _, after) in KEYS {
            match sqlite {
                true => rebuild_sqlite(c, table, after, &[]).await?,
                false => swap_postgres_key(c, table, after).await?,
            }
        }
        // The console and the API name an entry or an intent by id alone
        // (and then check its tenant): those lookups keep an index.
        for (name, table) in ID_INDEXES {
            c.execute_unprepared(&format!("CREATE INDEX {name} ON {table} (id)")).await?;
        }
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let c = m.get_connection();
        let sqlite = c.get_database_backend() == DbBackend::Sqlite;
        for (name, _) in ID_INDEXES {
            c.execute_unprepared(&format!("DROP INDEX {name}")).await?;
        }
        for (table, before, _) in KEYS {
            let drop: &[&str] = if *table == "replay_records" { &["tenant_id"] } else { &[] };
            match sqlite {
                true => rebuild_sqlite(c, table, before, drop).await?,
                false => swap_postgres_key(c, table, before).await?,
            }
        }
        if !sqlite {
            c.execute_unprepared("ALTER TABLE replay_records DROP COLUMN tenant_id").await?;
        }
        Ok(())
    }
}

/// Replaces the table's primary key (whatever its name) with one over `key`,
/// named `<table>_pkey` as PostgreSQL names a key it creates.
async fn swap_postgres_key(c: &SchemaManagerConnection<'_>, table: &str, key: &[&str]) -> Result<(), DbErr> {
    let sql = format!(
        "DO $$ DECLARE old text; BEGIN \
           SELECT conname INTO old FROM pg_constraint WHERE conrelid = '{table}'::regclass AND contype = 'p'; \
           EXECUTE format('ALTER TABLE {table} DROP CONSTRAINT %I, \
                           ADD CONSTRAINT {table}_pkey PRIMARY KEY ({})', old); \
         END $$",
        key.join(", ")
    );
    c.execute_unprepared(&sql).await?;
    Ok(())
}

/// SQLite's way to change a primary key: a new table with the same columns
/// (less `drop`) and the new key, the rows copied over, the old table
/// dropped, the new one renamed, and the old table's indexes created again.
/// m20261206_000190 rebuilds with it too: both are frozen with it.
pub(crate) async fn rebuild_sqlite(
    c: &SchemaManagerConnection<'_>,
    table: &str,
    key: &[&str],
    drop: &[&str],
) -> Result<(), DbErr> {
    let q = |sql: String| Statement::from_string(DbBackend::Sqlite, sql);
    let mut defs = Vec::new();
    let mut names = Vec::new();
    let columns = c
        .query_all_raw(q(format!("SELECT name, type, \"notnull\" AS nn, dflt_value FROM pragma_table_info('{table}')")))
        .await?;
    for col in columns {
        let name: String = col.try_get("", "name")?;
        if drop.contains(&name.as_str()) {
            continue;
        }
        let ty: String = col.try_get("", "type")?;
        let not_null: i64 = col.try_get("", "nn")?;
        let default: Option<String> = col.try_get("", "dflt_value")?;
        let mut def = format!("\"{name}\" {ty}");
        // Every key column is NOT NULL (the new `tenant_id` was filled above).
        if not_null != 0 || key.contains(&name.as_str()) {
            def.push_str(" NOT NULL");
        }
        if let Some(d) = default {
            def.push_str(&format!(" DEFAULT {d}"));
        }
        defs.push(def);
        names.push(format!("\"{name}\""));
    }
    let indexes = c
        .query_all_raw(q(format!(
            "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = '{table}' AND sql IS NOT NULL"
        )))
        .await?
        .into_iter()
        .map(|r| r.try_get::<String>("", "sql"))
        .collect::<Result<Vec<_>, _>>()?;
    let new = format!("{table}__rebuild");
    let cols = names.join(", ");
    let pk = key.iter().map(|k| format!("\"{k}\"")).collect::<Vec<_>>().join(", ");
    c.execute_unprepared(&format!("CREATE TABLE \"{new}\" ({}, PRIMARY KEY ({pk}))", defs.join(", "))).await?;
    c.execute_unprepared(&format!("INSERT INTO \"{new}\" ({cols}) SELECT {cols} FROM \"{table}\"")).await?;
    c.execute_unprepared(&format!("DROP TABLE \"{table}\"")).await?;
    c.execute_unprepared(&format!("ALTER TABLE \"{new}\" RENAME TO \"{table}\"")).await?;
    for sql in indexes {
        c.execute_unprepared(&sql).await?;
    }
    Ok(())
}
