//! The constraints Signet relies on (`migrations::expected`), as the live
//! database catalog has them: PostgreSQL's `pg_constraint`, `pg_index` and
//! `pg_trigger`; SQLite's `sqlite_master` with `pragma table_info`,
//! `index_list`, `index_info` and `foreign_key_list`. Nothing here is
//! assumed from the migrations: a constraint someone dropped shows as
//! missing.

use std::collections::BTreeSet;

use migrations::expected::{EXPECTED, Expected, ExpectedKind};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement, Value as DbValue};

use crate::error::DomainResult;

use views::evidence::ConstraintRow;

/// A uniqueness rule or foreign key as the catalog describes it.
#[derive(Debug, Default)]
struct Found {
    /// (name, columns) of primary keys and unique indexes/constraints.
    unique: Vec<(String, BTreeSet<String>)>,
    /// (name, from columns, referenced table, referenced columns), pairwise.
    foreign: Vec<(String, Vec<String>, String, Vec<String>)>,
    /// Triggers on the table that refuse changes: (name, refuses UPDATE,
    /// refuses DELETE).
    triggers: Vec<(String, bool, bool)>,
}

/// Every expected constraint with whether the live database enforces it.
pub async fn constraints(db: &DatabaseConnection) -> DomainResult<Vec<ConstraintRow>> {
    let mut rows = Vec::with_capacity(EXPECTED.len());
    for e in EXPECTED {
        let found = match db.get_database_backend() {
            DbBackend::Postgres => postgres(db, e.table).await?,
            _ => sqlite(db, e.table).await?,
        };
        rows.push(compare(e, &found));
    }
    Ok(rows)
}

fn compare(e: &Expected, f: &Found) -> ConstraintRow {
    let (kind, columns, references, enforced_by) = match e.kind {
        ExpectedKind::Unique { columns } => {
            let want: BTreeSet<String> = columns.iter().map(|c| (*c).to_owned()).collect();
            let by = f.unique.iter().filter(|(_, cols)| *cols == want).map(|(n, _)| n.clone()).collect();
            ("unique", columns, None, by)
        }
        ExpectedKind::ForeignKey { columns, ref_table, ref_columns } => {
            // Pairs (from → to) must match as a set: column order inside a
            // composite key is not part of the rule.
            let want: BTreeSet<(String, String)> =
                columns.iter().zip(ref_columns).map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect();
            let by = f
                .foreign
                .iter()
                .filter(|(_, from, to_table, to)| {
                    to_table == ref_table
                        && from.len() == want.len()
                        && from.iter().cloned().zip(to.iter().cloned()).collect::<BTreeSet<_>>() == want
                })
                .map(|(n, ..)| n.clone())
                .collect();
            ("foreign_key", columns, Some(format!("{ref_table}({})", ref_columns.join(", "))), by)
        }
        ExpectedKind::AppendOnly => {
            let refuses_update = f.triggers.iter().any(|(_, u, _)| *u);
            let refuses_delete = f.triggers.iter().any(|(_, _, d)| *d);
            let by = if refuses_update && refuses_delete {
                f.triggers.iter().map(|(n, ..)| n.clone()).collect()
            } else {
                Vec::new()
            };
            ("append_only", &[][..], None, by)
        }
    };
    ConstraintRow {
        id: e.id.to_owned(),
        table: e.table.to_owned(),
        kind: kind.to_owned(),
        columns: columns.iter().map(|c| (*c).to_owned()).collect(),
        references,
        guarantees: e.guarantees.to_owned(),
        present: !enforced_by.is_empty(),
        enforced_by,
    }
}

pub(super) async fn rows(
    db: &DatabaseConnection,
    sql: &str,
    values: Vec<DbValue>,
) -> DomainResult<Vec<sea_orm::QueryResult>> {
    Ok(db.query_all_raw(Statement::from_sql_and_values(db.get_database_backend(), sql, values)).await?)
}

async fn postgres(db: &DatabaseConnection, table: &str) -> DomainResult<Found> {
    let mut f = Found::default();
    // Primary keys, unique constraints and unique indexes (with no
    // predicate: a partial index does not make the columns unique).
    let sql = "SELECT c.relname AS name, \
                      array_to_string(ARRAY(SELECT a.attname FROM unnest(i.indkey) AS k(n) \
                          JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.n), ',') AS cols \
               FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid \
               WHERE i.indrelid = to_regclass($1) AND i.indisunique AND i.indisvalid AND i.indpred IS NULL";
    for r in rows(db, sql, vec![table.into()]).await? {
        let name: String = r.try_get("", "name")?;
        let cols: String = r.try_get("", "cols")?;
        f.unique.push((name, cols.split(',').filter(|c| !c.is_empty()).map(str::to_owned).collect()));
    }
    let sql = "SELECT con.conname AS name, \
                      array_to_string(ARRAY(SELECT a.attname \
                          FROM unnest(con.conkey) WITH ORDINALITY AS k(n, o) \
                          JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.n \
                          ORDER BY k.o), ',') AS cols, \
                      ref.relname AS ref_table, \
                      array_to_string(ARRAY(SELECT a.attname \
                          FROM unnest(con.confkey) WITH ORDINALITY AS k(n, o) \
                          JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.n \
                          ORDER BY k.o), ',') AS ref_cols \
               FROM pg_constraint con JOIN pg_class ref ON ref.oid = con.confrelid \
               WHERE con.conrelid = to_regclass($1) AND con.contype = 'f' AND con.convalidated";
    for r in rows(db, sql, vec![table.into()]).await? {
        let split = |s: String| s.split(',').filter(|c| !c.is_empty()).map(str::to_owned).collect::<Vec<_>>();
        f.foreign.push((
            r.try_get("", "name")?,
            split(r.try_get("", "cols")?),
            r.try_get("", "ref_table")?,
            split(r.try_get("", "ref_cols")?),
        ));
    }
    // Enabled row triggers firing BEFORE UPDATE / DELETE whose function
    // raises unconditionally (the migration's `signet_audit_append_only`).
    let sql = "SELECT t.tgname AS name, (t.tgtype & 16) <> 0 AS on_update, (t.tgtype & 8) <> 0 AS on_delete \
               FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid \
               WHERE t.tgrelid = to_regclass($1) AND NOT t.tgisinternal AND t.tgenabled <> 'D' \
                 AND (t.tgtype & 2) <> 0 AND p.proname = 'signet_audit_append_only'";
    for r in rows(db, sql, vec![table.into()]).await? {
        f.triggers.push((r.try_get("", "name")?, r.try_get("", "on_update")?, r.try_get("", "on_delete")?));
    }
    Ok(f)
}

/// The pragma functions take the table or index name as a string; names
/// come from `EXPECTED` (compile-time constants) or the catalog itself, and
/// only `[a-z0-9_]` names are quoted (others are skipped).
pub(super) fn sqlite_ident(name: &str) -> Option<String> {
    name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_' || b.is_ascii_digit()).then(|| format!("'{name}'"))
}

async fn sqlite(db: &DatabaseConnection, table: &str) -> DomainResult<Found> {
    let mut f = Found::default();
    let Some(t) = sqlite_ident(table) else { return Ok(f) };
    let pk: BTreeSet<String> = rows(db, &format!("SELECT name, pk FROM pragma_table_info({t}) WHERE pk > 0"), vec![])
        .await?
        .into_iter()
        .filter_map(|r| r.try_get::<String>("", "name").ok())
        .collect();
    if !pk.is_empty() {
        f.unique.push(("PRIMARY KEY".to_owned(), pk));
    }
    let indexes =
        rows(db, &format!("SELECT name, \"unique\" AS uniq, partial FROM pragma_index_list({t})"), vec![]).await?;
    for ix in indexes {
        let (name, uniq, partial): (String, i64, i64) =
            (ix.try_get("", "name")?, ix.try_get("", "uniq")?, ix.try_get("", "partial")?);
        if uniq == 0 || partial != 0 {
            continue;
        }
        let Some(i) = sqlite_ident(&name) else { continue };
        let cols = rows(db, &format!("SELECT name FROM pragma_index_info({i})"), vec![]).await?;
        f.unique.push((name, cols.into_iter().filter_map(|r| r.try_get::<String>("", "name").ok()).collect()));
    }
    let mut by_id: std::collections::BTreeMap<i64, (Vec<String>, String, Vec<String>)> = Default::default();
    let sql = format!(
        "SELECT id, seq, \"table\" AS ref_table, \"from\" AS src, \"to\" AS dst \
         FROM pragma_foreign_key_list({t}) ORDER BY id, seq"
    );
    for r in rows(db, &sql, vec![]).await? {
        let e = by_id
            .entry(r.try_get("", "id")?)
            .or_insert_with(|| (Vec::new(), r.try_get("", "ref_table").unwrap_or_default(), Vec::new()));
        e.0.push(r.try_get("", "src")?);
        e.2.push(r.try_get::<Option<String>>("", "dst")?.unwrap_or_default());
    }
    for (id, (from, to_table, to)) in by_id {
        f.foreign.push((format!("foreign key #{id}"), from, to_table, to));
    }
    // SQLite keeps a trigger's SQL: a BEFORE trigger that raises ABORT.
    let sql = "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ?";
    for r in rows(db, sql, vec![table.into()]).await? {
        let (name, text): (String, String) =
            (r.try_get("", "name")?, r.try_get::<Option<String>>("", "sql")?.unwrap_or_default());
        let upper = text.to_ascii_uppercase();
        if upper.contains("BEFORE") && upper.contains("RAISE(ABORT") {
            f.triggers.push((name, upper.contains("BEFORE UPDATE"), upper.contains("BEFORE DELETE")));
        }
    }
    Ok(f)
}
