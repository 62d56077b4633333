//! The database's durability settings, read live for each bundle, and the
//! rule for which of them break the ack promise (CONTRACT: a 2xx is sent
//! only after the claim and its effects committed; the commit must survive
//! a crash of the database's host).
//!
//! The rule (docs/evidence.md#the-bundle, "Durability: the rule"):
//! - PostgreSQL: `fsync` and `full_page_writes` must be `on`;
//!   `synchronous_commit` must not be `off` (`local`, `on`, `remote_write`
//!   and `remote_apply` all flush the local WAL before COMMIT returns).
//!   `wal_level` and the synchronous standby are shown, not judged: the
//!   promise is about this server's crash, not its loss.
//! - SQLite: `synchronous` must be `full` or `extra` (in WAL mode `normal`
//!   lets the last commits roll back on power loss after they were acked);
//!   `journal_mode` must not be `off` or `memory` (a crash mid-write can
//!   corrupt the file). Signet opens every connection WAL + FULL.
//!
//! A setting that cannot be read counts as weak: the bundle cannot vouch
//! for it.

use std::collections::BTreeMap;

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};

use super::runs;
use crate::error::DomainResult;

use views::evidence::DatabaseEvidence;

/// The PostgreSQL settings read, in the order shown.
pub const PG_SETTINGS: [&str; 5] =
    ["fsync", "synchronous_commit", "full_page_writes", "wal_level", "synchronous_standby_names"];

/// Reads the engine, schema and durability settings through `db`'s own
/// connections (what Signet's commits actually run under).
pub async fn read(db: &DatabaseConnection) -> DomainResult<DatabaseEvidence> {
    let mut durability = BTreeMap::new();
    let mut synchronous_standby = None;
    match db.get_database_backend() {
        DbBackend::Postgres => {
            let list = PG_SETTINGS.map(|s| format!("'{s}'")).join(", ");
            let sql = format!("SELECT name, setting FROM pg_settings WHERE name IN ({list})");
            for r in db.query_all_raw(Statement::from_string(DbBackend::Postgres, sql)).await? {
                durability.insert(r.try_get::<String>("", "name")?, r.try_get::<String>("", "setting")?);
            }
            synchronous_standby =
                Some(durability.get("synchronous_standby_names").is_some_and(|v| !v.trim().is_empty()));
        }
        backend => {
            let one = |sql: &str| Statement::from_string(backend, sql.to_owned());
            if let Some(r) = db.query_one_raw(one("PRAGMA journal_mode")).await? {
                durability.insert("journal_mode".to_owned(), r.try_get_by_index::<String>(0)?.to_ascii_lowercase());
            }
            if let Some(r) = db.query_one_raw(one("PRAGMA synchronous")).await? {
                let level = match r.try_get_by_index::<i64>(0)? {
                    0 => "off".to_owned(),
                    1 => "normal".to_owned(),
                    2 => "full".to_owned(),
                    3 => "extra".to_owned(),
                    n => n.to_string(),
                };
                durability.insert("synchronous".to_owned(), level);
            }
        }
    }
    Ok(DatabaseEvidence {
        engine: runs::engine_name(db).to_owned(),
        schema_version: runs::schema_version(db).await?,
        durability,
        synchronous_standby,
    })
}

/// A setting weaker than the ack promise needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Weak {
    pub setting: &'static str,
    /// As read (`None`: it could not be read).
    pub value: Option<String>,
    pub why: &'static str,
}

/// Every setting of `d` weaker than the ack promise needs (the rule in the
/// module documentation).
pub fn weak(d: &DatabaseEvidence) -> Vec<Weak> {
    rules(&d.engine)
        .iter()
        .filter_map(|&(setting, want, why)| {
            let value = d.durability.get(setting).cloned();
            let holds = match (want, value.as_deref()) {
                (_, None) => false,
                (Want::OneOf(ok), Some(v)) => ok.contains(&v),
                (Want::NoneOf(bad), Some(v)) => !bad.contains(&v),
            };
            (!holds).then_some(Weak { setting, value, why })
        })
        .collect()
}

#[derive(Clone, Copy)]
enum Want {
    OneOf(&'static [&'static str]),
    NoneOf(&'static [&'static str]),
}

/// (setting, the values that hold, why a weak one breaks the promise).
fn rules(engine: &str) -> &'static [(&'static str, Want, &'static str)] {
    match engine {
        "postgres" => &[
            (
                "fsync",
                Want::OneOf(&["on"]),
                "PostgreSQL does not force commits to disk: a crash can lose acknowledged work",
            ),
            (
                "synchronous_commit",
                Want::NoneOf(&["off"]),
                "COMMIT returns before its WAL is flushed: a delivery can be acknowledged and then lost in a crash",
            ),
            ("full_page_writes", Want::OneOf(&["on"]), "a torn page after an OS crash can corrupt committed data"),
        ],
        "sqlite" => &[
            (
                "synchronous",
                Want::OneOf(&["full", "extra"]),
                "SQLite does not sync each commit: the last acknowledged commits can roll back on power loss",
            ),
            (
                "journal_mode",
                Want::NoneOf(&["off", "memory"]),
                "no journal on disk: a crash mid-write can corrupt the database",
            ),
        ],
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db(engine: &str, settings: &[(&str, &str)]) -> DatabaseEvidence {
        DatabaseEvidence {
            engine: engine.into(),
            durability: settings.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
            ..Default::default()
        }
    }

    fn named(w: Vec<Weak>) -> Vec<&'static str> {
        w.into_iter().map(|w| w.setting).collect()
    }

    #[test]
    fn postgres_defaults_hold_and_each_weak_setting_is_named() {
        let good =
            [("fsync", "on"), ("synchronous_commit", "on"), ("full_page_writes", "on"), ("wal_level", "minimal")];
        assert!(weak(&db("postgres", &good)).is_empty());
        for sc in ["local", "remote_write", "remote_apply"] {
            let mut s = good.to_vec();
            s[1].1 = sc;
            assert!(weak(&db("postgres", &s)).is_empty(), "{sc} flushes the local WAL");
        }
        let bad = [("fsync", "off"), ("synchronous_commit", "off"), ("full_page_writes", "off")];
        assert_eq!(named(weak(&db("postgres", &bad))), ["fsync", "synchronous_commit", "full_page_writes"]);
        assert_eq!(named(weak(&db("postgres", &good[1..]))), ["fsync"], "unread counts as weak");
    }

    #[test]
    fn sqlite_needs_full_sync_and_a_journal() {
        assert!(weak(&db("sqlite", &[("journal_mode", "wal"), ("synchronous", "full")])).is_empty());
        assert!(weak(&db("sqlite", &[("journal_mode", "delete"), ("synchronous", "extra")])).is_empty());
        for level in ["normal", "off"] {
            assert_eq!(named(weak(&db("sqlite", &[("journal_mode", "wal"), ("synchronous", level)]))), ["synchronous"]);
        }
        for mode in ["off", "memory"] {
            assert_eq!(
                named(weak(&db("sqlite", &[("journal_mode", mode), ("synchronous", "full")]))),
                ["journal_mode"]
            );
        }
    }
}
