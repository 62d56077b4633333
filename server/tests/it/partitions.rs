//! Partition upkeep in the real binary (PostgreSQL): `signet serve`
//! processes started at once on one database each create what is missing
//! before serving, without tripping over one another.

use domain::retention::partitions::{self, AHEAD_DAYS, PARTITIONED, day_of, partition_name};
use sea_orm::ConnectionTrait;

use crate::support::{Engine, Install};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_processes_started_at_once_both_create_the_partitions_ahead() {
    let Some(i) = Install::new(Engine::Postgres) else { return };
    let db = domain::db::connect(&i.database_url).await.unwrap();
    domain::db::migrate(&db).await.unwrap();
    // As if no upkeep had run for the whole horizon: only today is left.
    let today = day_of(domain::clock::now_ms());
    for t in &PARTITIONED {
        for day in today + 1..=today + AHEAD_DAYS {
            // IF EXISTS: the last day is missing if midnight came since
            // the migration.
            db.execute_unprepared(&format!("DROP TABLE IF EXISTS {}", partition_name(t.table, day))).await.unwrap();
        }
    }
    // One data directory for all three: its master key is made once, before
    // (each process would otherwise race to create the same new file).
    assert!(i.cli(&["tenant", "create", "clinic-a"], "").status.success());
    let servers = std::thread::scope(|s| {
        let starts: Vec<_> = (0..3).map(|_| s.spawn(|| i.serve())).collect();
        starts.into_iter().map(|h| h.join().expect("every process starts")).collect::<Vec<_>>()
    });
    for t in &PARTITIONED {
        let days = partitions::days(&db, t.table).await.unwrap();
        assert!((today..=today + AHEAD_DAYS).all(|d| days.contains(&d)), "{}: {days:?}", t.table);
    }
    let created: usize = servers.iter().map(|s| s.output().matches("partitions created").count()).sum();
    assert!(created >= 1, "one of them created the missing days");
    for s in &servers {
        let health = reqwest::get(s.url("/healthz")).await.unwrap();
        assert!(health.status().is_success(), "every process serves");
    }
    db.close().await.ok();
}
