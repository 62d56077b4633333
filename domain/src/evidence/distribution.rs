//! The schema rule the Citus plan needs (docs/scaling.md), read from the
//! live catalog: every primary key, unique constraint and unique index of a
//! table in `migrations::distribution::DISTRIBUTED` includes the
//! distribution column. Citus enforces uniqueness only inside one shard, so a
//! key without `tenant_id` could not be created on a distributed table, and a
//! schema change that adds one is caught here before anyone tries.

use migrations::distribution::DISTRIBUTION_COLUMN;
use sea_orm::{DatabaseConnection, DbBackend};

use super::catalog::{rows, sqlite_ident};
use crate::error::DomainResult;

/// A uniqueness rule as the catalog has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UniqueKey {
    /// The constraint's or index's name (`PRIMARY KEY` for SQLite's).
    pub name: String,
    /// `primary key`, `unique constraint` or `unique index`.
    pub kind: &'static str,
    pub columns: Vec<String>,
}

/// Every unique key of `table`, partial unique indexes included (Citus holds
/// those to the same rule); `None` when the table does not exist.
pub async fn unique_keys(db: &DatabaseConnection, table: &str) -> DomainResult<Option<Vec<UniqueKey>>> {
    match db.get_database_backend() {
        DbBackend::Postgres => postgres(db, table).await,
        _ => sqlite(db, table).await,
    }
}

/// Each unique key of `tables` without the distribution column, as "table:
/// kind name (columns)", and each table that does not exist. Empty when the
/// schema can be distributed as declared.
pub async fn violations(db: &DatabaseConnection, tables: &[&str]) -> DomainResult<Vec<String>> {
    let mut out = Vec::new();
    for table in tables {
        let Some(keys) = unique_keys(db, table).await? else {
            out.push(format!("{table}: no such table"));
            continue;
        };
        for k in keys.iter().filter(|k| !k.columns.iter().any(|c| c == DISTRIBUTION_COLUMN)) {
            out.push(format!("{table}: {} {} ({}) lacks {DISTRIBUTION_COLUMN}", k.kind, k.name, k.columns.join(", ")));
        }
    }
    Ok(out)
}

async fn postgres(db: &DatabaseConnection, table: &str) -> DomainResult<Option<Vec<UniqueKey>>> {
    let exists = rows(db, "SELECT to_regclass($1) IS NOT NULL AS present", vec![table.into()]).await?;
    if !exists.first().map(|r| r.try_get::<bool>("", "present")).transpose()?.unwrap_or(false) {
        return Ok(None);
    }
    // pg_index has every unique index, the ones behind a primary key or a
    // unique constraint too; pg_constraint names those.
    let sql = "SELECT COALESCE(con.conname, c.relname) AS name, \
                      CASE con.contype WHEN 'p' THEN 'primary key' WHEN 'u' THEN 'unique constraint' \
                           ELSE 'unique index' END AS kind, \
                      array_to_string(ARRAY(SELECT a.attname \
                          FROM unnest(i.indkey) WITH ORDINALITY AS k(n, o) \
                          JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.n \
                          ORDER BY k.o), ',') AS cols \
               FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid \
               LEFT JOIN pg_constraint con ON con.conindid = i.indexrelid AND con.contype IN ('p', 'u') \
               WHERE i.indrelid = to_regclass($1) AND i.indisunique ORDER BY 1";
    let mut keys = Vec::new();
    for r in rows(db, sql, vec![table.into()]).await? {
        let kind: String = r.try_get("", "kind")?;
        let cols: String = r.try_get("", "cols")?;
        keys.push(UniqueKey {
            name: r.try_get("", "name")?,
            kind: match kind.as_str() {
                "primary key" => "primary key",
                "unique constraint" => "unique constraint",
                _ => "unique index",
            },
            columns: cols.split(',').filter(|c| !c.is_empty()).map(str::to_owned).collect(),
        });
    }
    Ok(Some(keys))
}

async fn sqlite(db: &DatabaseConnection, table: &str) -> DomainResult<Option<Vec<UniqueKey>>> {
    let Some(t) = sqlite_ident(table) else { return Ok(None) };
    let exists =
        rows(db, "SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?", vec![table.into()]).await?;
    if exists.is_empty() {
        return Ok(None);
    }
    let mut keys = Vec::new();
    let pk: Vec<String> =
        rows(db, &format!("SELECT name FROM pragma_table_info({t}) WHERE pk > 0 ORDER BY pk"), vec![])
            .await?
            .into_iter()
            .filter_map(|r| r.try_get::<String>("", "name").ok())
            .collect();
    if !pk.is_empty() {
        keys.push(UniqueKey { name: "PRIMARY KEY".to_owned(), kind: "primary key", columns: pk });
    }
    // Unique indexes, the automatic ones behind a PRIMARY KEY or UNIQUE
    // clause included (origin `pk`: already listed above).
    let sql = format!("SELECT name, origin FROM pragma_index_list({t}) WHERE \"unique\" = 1 ORDER BY name");
    for ix in rows(db, &sql, vec![]).await? {
        let (name, origin): (String, String) = (ix.try_get("", "name")?, ix.try_get("", "origin")?);
        let Some(i) = sqlite_ident(&name).filter(|_| origin != "pk") else { continue };
        let cols = rows(db, &format!("SELECT name FROM pragma_index_info({i}) ORDER BY seqno"), vec![]).await?;
        keys.push(UniqueKey {
            name,
            kind: if origin == "u" { "unique constraint" } else { "unique index" },
            columns: cols.into_iter().filter_map(|r| r.try_get::<String>("", "name").ok()).collect(),
        });
    }
    Ok(Some(keys))
}
