//! Evidence bound to the build and the database (issue 23 item 2), on both
//! engines: the bundle names the running build and reads the database's
//! durability settings live (a weak one is a critical finding); drill runs
//! count only for the build they ran on; the files' modes are read; each
//! credential shows its verifications.

use domain::{
    crypto::MasterKey,
    entity::drill_run,
    evidence::{bundle, files::DeploymentFiles, runs},
    vault::Vault,
};
use sea_orm::{ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, sea_query::Expr};
use sha2::{Digest, Sha256};
use views::evidence::Evidence;

use crate::{db_test, fixtures::*, support::TestDb};

fn ids(e: &Evidence, id: &str) -> Vec<(String, String)> {
    e.findings.iter().filter(|f| f.id == id).map(|f| (f.severity.clone(), f.subject.clone())).collect()
}

async fn vault_on(t: &TestDb, db: &DatabaseConnection) -> Vault {
    let master = MasterKey::from_base64(&t.master_b64).unwrap();
    domain::startup::open_vault(db, master).await.unwrap()
}

db_test!(bundles_name_the_build_and_read_the_database_live, async |t: &TestDb| {
    active_key(t).await;
    let b = export::export(&t.db, &t.vault, &reviewer(), None, Via::Cli).await.unwrap().bundle;
    let e = &b.evidence;
    // The build: this test binary, hashed.
    let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    assert_eq!(e.build.binary_sha256, hex::encode(Sha256::digest(&exe)));
    assert_eq!(e.build.version, env!("CARGO_PKG_VERSION"));
    assert!(!e.build.commit.is_empty());
    let json: serde_json::Value = serde_json::from_str(&b.evidence_json).unwrap();
    for field in ["version", "commit", "binary_sha256"] {
        assert!(json["build"][field].is_string(), "build.{field} in {}", json["build"]);
    }
    // The database, as its own connections see it.
    assert_eq!(e.database.schema_version, runs::schema_version(&t.db).await.unwrap());
    assert!(e.database.schema_version.starts_with('m'), "{:?}", e.database.schema_version);
    let d = &e.database.durability;
    if t.is_postgres() {
        assert_eq!(e.database.engine, "postgres");
        for s in ["fsync", "synchronous_commit", "full_page_writes", "wal_level", "synchronous_standby_names"] {
            assert!(d.contains_key(s), "{s} in {d:?}");
        }
        assert_eq!(e.database.synchronous_standby, Some(false));
    } else {
        assert_eq!(e.database.engine, "sqlite");
        assert_eq!((d["journal_mode"].as_str(), d["synchronous"].as_str()), ("wal", "full"));
        assert_eq!(e.database.synchronous_standby, None);
    }
    assert_eq!(json["database"]["durability"], serde_json::to_value(d).unwrap());
    assert!(ids(e, "durability_weak").is_empty(), "{:?}", e.findings);
    assert!(b.evidence_html.contains("Durability settings") && b.evidence_html.contains(&e.build.binary_sha256));
});

db_test!(a_weak_durability_setting_is_a_critical_finding_naming_it, async |t: &TestDb| {
    // Connections opened after the change see it, as Signet's would after a
    // restart. PostgreSQL: the test's own database; SQLite: a connection
    // that lowers `synchronous` (Signet's own always open WAL + FULL).
    let sound = bundle::collect(&t.db, &t.vault, &reviewer(), None).await.unwrap();
    let (weak_db, setting) = if t.is_postgres() {
        let name = t.url.rsplit('/').next().unwrap().to_owned();
        t.db.execute_unprepared(&format!("ALTER DATABASE {name} SET synchronous_commit = off")).await.unwrap();
        (domain::db::connect(&t.url).await.unwrap(), "synchronous_commit")
    } else {
        let mut o = sea_orm::ConnectOptions::new(t.url.clone());
        o.max_connections(1).sqlx_logging(false).map_sqlx_sqlite_opts(|s| {
            s.journal_mode(sea_orm::sqlx::sqlite::SqliteJournalMode::Wal)
                .synchronous(sea_orm::sqlx::sqlite::SqliteSynchronous::Normal)
        });
        (sea_orm::Database::connect(o).await.unwrap(), "synchronous")
    };
    let vault = vault_on(t, &weak_db).await;
    let e = bundle::collect(&weak_db, &vault, &reviewer(), None).await.unwrap();
    assert_eq!(ids(&e, "durability_weak"), [("critical".to_owned(), setting.to_owned())], "{:?}", e.findings);
    let f = e.findings.iter().find(|f| f.id == "durability_weak").unwrap();
    assert!(f.message.contains(&format!("{setting} = ")), "{}", f.message);
    assert!(matches!(e.database.durability[setting].as_str(), "off" | "normal"));
    // Against a bundle approved before, the change is named.
    let changed: Vec<(String, String)> =
        domain::evidence::signoff::differences(&sound, &e).into_iter().map(|d| (d.section, d.subject)).collect();
    assert_eq!(changed, [("database".to_owned(), setting.to_owned())]);
    weak_db.close().await.ok();
    if t.is_postgres() {
        let name = t.url.rsplit('/').next().unwrap().to_owned();
        t.db.execute_unprepared(&format!("ALTER DATABASE {name} RESET synchronous_commit")).await.unwrap();
        let fresh = domain::db::connect(&t.url).await.unwrap();
        let e = bundle::collect(&fresh, &vault_on(t, &fresh).await, &reviewer(), None).await.unwrap();
        assert!(ids(&e, "durability_weak").is_empty(), "{:?}", e.findings);
        fresh.close().await.ok();
    }
});

/// Starts a run (which records the running build) and marks it passed.
async fn passed_run(t: &TestDb) -> String {
    let run = runs::start(&t.db, &admin()).await.unwrap();
    drill_run::Entity::update_many()
        .col_expr(drill_run::Column::Status, Expr::value("finished"))
        .col_expr(drill_run::Column::Passed, Expr::value(true))
        .col_expr(drill_run::Column::FinishedAt, Expr::value(domain::clock::now_ms()))
        .filter(drill_run::Column::Id.eq(&run.run_id))
        .exec(&t.db)
        .await
        .unwrap();
    run.run_id
}

db_test!(a_drill_run_counts_only_for_the_build_it_ran_on, async |t: &TestDb| {
    active_key(t).await;
    let run_id = passed_run(t).await;
    let stored = drill_run::Entity::find_by_id(run_id.clone()).one(&t.db).await.unwrap().unwrap();
    let now = domain::evidence::identity::current().await;
    assert_eq!(
        (stored.build_commit.as_str(), stored.binary_sha256.as_str()),
        (now.commit.as_str(), now.binary_sha256.as_str())
    );
    let e = bundle::collect(&t.db, &t.vault, &reviewer(), None).await.unwrap();
    assert!(ids(&e, "drills_stale").is_empty(), "{:?}", e.drills.stale_reasons);
    assert_eq!(e.drills.latest.as_ref().unwrap().binary_sha256, now.binary_sha256);
    // An upgrade: the run's binary is not the one running now.
    for (commit, sha) in [(now.commit.as_str(), "0".repeat(64)), ("", String::new())] {
        drill_run::Entity::update_many()
            .col_expr(drill_run::Column::BuildCommit, Expr::value(commit))
            .col_expr(drill_run::Column::BinarySha256, Expr::value(sha))
            .filter(drill_run::Column::Id.eq(&run_id))
            .exec(&t.db)
            .await
            .unwrap();
        let e = bundle::collect(&t.db, &t.vault, &reviewer(), None).await.unwrap();
        assert_eq!(ids(&e, "drills_stale"), [("warning".to_owned(), "drills".to_owned())]);
        assert!(e.drills.stale_reasons.iter().any(|r| r.contains("another build")), "{:?}", e.drills.stale_reasons);
    }
    // Drills run again on this build: the finding is gone.
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    passed_run(t).await;
    let e = bundle::collect(&t.db, &t.vault, &reviewer(), None).await.unwrap();
    assert!(ids(&e, "drills_stale").is_empty(), "{:?}", e.drills.stale_reasons);
});

#[cfg(unix)]
db_test!(file_modes_are_read_and_an_open_master_key_file_is_critical, async |t: &TestDb| {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let key = dir.path().join("master.key");
    std::fs::write(&key, format!("{}\n", t.master_b64)).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let files =
        DeploymentFiles { data_dir: Some(dir.path().into()), master_key_file: Some(key.clone()), ..Default::default() };
    let vault = vault_on(t, &t.db).await.with_files(files);
    let e = bundle::collect(&t.db, &vault, &reviewer(), None).await.unwrap();
    let row = |role: &str| {
        e.files.iter().find(|f| f.role == role).cloned().unwrap_or_else(|| panic!("{role}: {:?}", e.files))
    };
    assert_eq!((row("data_dir").mode.as_deref(), row("data_dir").group_or_world_access), (Some("0700"), false));
    assert_eq!(row("data_dir").owned_by_signet, Some(true));
    let k = row("master_key_file");
    assert_eq!(
        (k.mode.as_deref(), k.group_or_world_access, k.path.clone()),
        (Some("0644"), true, Some(key.display().to_string()))
    );
    assert!(k.uid.is_some() && k.gid.is_some());
    assert_eq!(ids(&e, "master_key_file_exposed"), [("critical".to_owned(), key.display().to_string())]);
    if t.is_postgres() {
        assert!(e.files.iter().all(|f| f.role != "sqlite_file"));
    } else {
        assert!(row("sqlite_file").path.unwrap().ends_with("signet.db"));
    }
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let e = bundle::collect(&t.db, &vault, &reviewer(), None).await.unwrap();
    assert!(ids(&e, "master_key_file_exposed").is_empty(), "{:?}", e.findings);
    // A key given in the environment has no file, and says so.
    let env = vault_on(t, &t.db).await.with_files(DeploymentFiles { master_key_from_env: true, ..Default::default() });
    let e = bundle::collect(&t.db, &env, &reviewer(), None).await.unwrap();
    let k = e.files.iter().find(|f| f.role == "master_key_file").unwrap();
    assert_eq!((k.path.as_deref(), k.mode.as_deref()), (None, None));
    assert!(k.note.as_deref().unwrap().contains("SIGNET_MASTER_KEY"));
});
