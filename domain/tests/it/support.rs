//! Test databases: every test runs once on SQLite and once on PostgreSQL.
//!
//! PostgreSQL comes from `SIGNET_TEST_PG_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`); each test gets its own fresh
//! database, dropped afterwards. When PostgreSQL is unreachable the PG half
//! is skipped with a visible message, unless `SIGNET_REQUIRE_PG=1` (set by
//! CI), in which case it fails.

use std::sync::Arc;

use domain::{crypto::MasterKey, db, vault::Vault};
use sea_orm::{ConnectionTrait, Database, DatabaseConnection};

pub struct TestDb {
    pub db: DatabaseConnection,
    pub vault: Arc<Vault>,
    pub url: String,
    pub master_b64: String,
    cleanup: Option<(String, String)>,
    _dir: Option<tempfile::TempDir>,
}

impl TestDb {
    pub async fn sqlite() -> TestDb {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite://{}/signet.db?mode=rwc", dir.path().display());
        Self::finish(url, None, Some(dir)).await
    }

    /// `None` when PostgreSQL is not available and not required.
    pub async fn postgres() -> Option<TestDb> {
        let (url, cleanup) = fresh_postgres().await?;
        Some(Self::finish(url, Some(cleanup), None).await)
    }

    async fn finish(url: String, cleanup: Option<(String, String)>, dir: Option<tempfile::TempDir>) -> TestDb {
        let db = db::connect(&url).await.expect("connect");
        db::migrate(&db).await.expect("migrate");
        let (master, encoded) = MasterKey::generate();
        let vault = Arc::new(domain::startup::open_vault(&db, master).await.expect("vault"));
        TestDb { db, vault, url, master_b64: encoded.to_string(), cleanup, _dir: dir }
    }

    pub fn is_postgres(&self) -> bool {
        self.url.starts_with("postgres")
    }

    pub async fn close(self) {
        self.db.close().await.ok();
        if let Some(cleanup) = self.cleanup {
            drop_database(cleanup).await;
        }
    }
}

/// A new empty PostgreSQL database: its URL and what [`drop_database`]
/// needs. `None` when PostgreSQL is not available and not required.
pub async fn fresh_postgres() -> Option<(String, (String, String))> {
    let admin_url =
        std::env::var("SIGNET_TEST_PG_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let admin = match Database::connect(admin_url.as_str()).await {
        Ok(c) => c,
        Err(e) => {
            if std::env::var("SIGNET_REQUIRE_PG").is_ok_and(|v| v == "1") {
                panic!("PostgreSQL is required (SIGNET_REQUIRE_PG=1) but unreachable at {admin_url}: {e}");
            }
            eprintln!(
                "SKIPPED (PostgreSQL unreachable at {admin_url}): set SIGNET_TEST_PG_URL to run the PostgreSQL half"
            );
            return None;
        }
    };
    let name = format!("signet_t_{}", uuid::Uuid::new_v4().simple());
    admin.execute_unprepared(&format!("CREATE DATABASE {name}")).await.expect("create database");
    admin.close().await.ok();
    let base = admin_url.rsplit_once('/').map(|(b, _)| b).unwrap_or(&admin_url).to_owned();
    let url = format!("{base}/{name}");
    Some((url, (admin_url, name)))
}

pub async fn drop_database((admin_url, name): (String, String)) {
    if let Ok(admin) = Database::connect(admin_url.as_str()).await {
        admin.execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await.ok();
        admin.close().await.ok();
    }
}

/// Defines `<name>::sqlite` and `<name>::postgres` tests from one async body
/// taking `&TestDb`.
#[macro_export]
macro_rules! db_test {
    ($name:ident, $body:expr) => {
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn sqlite() {
                let t = $crate::support::TestDb::sqlite().await;
                ($body)(&t).await;
                t.close().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn postgres() {
                let Some(t) = $crate::support::TestDb::postgres().await else { return };
                ($body)(&t).await;
                t.close().await;
            }
        }
    };
}
