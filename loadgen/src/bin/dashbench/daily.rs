//! `--daily-purges`: consecutive days of new claims and the retention purge
//! at each day's end, with the WAL it wrote, the claims table's sizes and
//! the bodies' (`bench/scale.sh`).

use std::time::Instant;

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};

use super::{
    Args, DAYS, ENDPOINTS_PER_TENANT,
    bulk::{BENCH_ENDPOINTS, BulkBody, ClaimRows},
    exec, set_retention,
};

async fn scalar(db: &DatabaseConnection, sql: &str) -> i64 {
    let row = db
        .query_one_raw(Statement::from_string(db.get_database_backend(), sql))
        .await
        .unwrap_or_else(|e| panic!("{e}: {sql}"))
        .expect("a row");
    row.try_get("", "n").expect("n")
}

/// When the seeding ran: its oldest claim was received `DAYS` before.
/// Read per endpoint through `ix_claims_endpoint_received`.
async fn seeded_at(db: &DatabaseConnection) -> i64 {
    let oldest = scalar(
        db,
        "SELECT MIN((SELECT MIN(received_at) FROM inbox_claims c WHERE c.endpoint_id = e.id)) AS n FROM endpoints e",
    )
    .await;
    oldest + DAYS * 86_400_000
}

const MB: f64 = 1024.0 * 1024.0;

/// `--daily-purges`: `days` days after the seeding, each with a day's new
/// claims and the purge at its end; a Markdown row per day with the claims
/// table's sizes (heap, TOAST and maps, indexes, total), then each index's.
pub(super) async fn daily_purges(
    db: &DatabaseConnection,
    tenants: &[String],
    args: &Args,
    vault: &domain::vault::Vault,
) {
    use domain::retention::purge;
    const DAY: i64 = 86_400_000;
    let start = seeded_at(db).await;
    set_retention(db, tenants).await;
    let per_day = args.events / DAYS;
    let n_ep = args.tenants * ENDPOINTS_PER_TENANT;
    let body = BulkBody::sealed(db, vault, 0).await;
    exec(db, "DROP TABLE IF EXISTS bench_endpoints".into()).await;
    exec(db, BENCH_ENDPOINTS.into()).await;
    println!(
        "| day | claims inserted | claims deleted | bodies cleared | purge s | purge WAL MB | vacuum s \
         | claims stored | heap MB | table MB (with TOAST, maps) | indexes MB | total MB | bodies MB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut stored = args.events;
    print_sizes(db, 0, (0, 0, 0), None, None, stored).await;
    for d in 1..=days_of(args) {
        let started = Instant::now();
        // The bodies' partitions of that day, as the upkeep keeps them.
        domain::retention::partitions::upkeep(db, start + d * DAY).await.expect("partitions");
        let chunk = 500_000.min(per_day);
        let mut done = 0;
        while done < per_day {
            let count = chunk.min(per_day - done);
            let prefix = format!("evt_d{d}_");
            let rows = ClaimRows {
                prefix: &prefix,
                offset: done,
                count,
                end: start + d * DAY,
                span_ms: DAY,
                total: per_day,
                n_ep,
            };
            for sql in rows.insert(DbBackend::Postgres, Some(&body)) {
                exec(db, sql).await;
            }
            done += count;
        }
        eprintln!("day {d}: {per_day} claims inserted in {:.0} s", started.elapsed().as_secs_f64());
        let wal_before = wal_lsn(db).await;
        let t = Instant::now();
        let r = purge::run(db, start + d * DAY, purge::DEFAULT_BATCH).await.expect("purge");
        let purge_s = t.elapsed().as_secs_f64();
        let wal = wal_since(db, &wal_before).await;
        eprintln!("day {d}: purge from WAL {wal_before} to {}", wal_lsn(db).await);
        let vacuum_s = if args.vacuum {
            let t = Instant::now();
            exec(db, "VACUUM inbox_claims".into()).await;
            Some(t.elapsed().as_secs_f64())
        } else {
            None
        };
        stored += per_day - r.claims_deleted as i64;
        print_sizes(db, d, (per_day, r.claims_deleted, r.bodies_cleared), Some((purge_s, wal)), vacuum_s, stored).await;
    }
    exec(db, "DROP TABLE bench_endpoints".into()).await;
    println!();
    println!("| index, after day {} | MB |", days_of(args));
    println!("|---|---|");
    let rows = db
        .query_all_raw(Statement::from_string(
            DbBackend::Postgres,
            "SELECT c.relname AS name, pg_relation_size(c.oid) AS n FROM pg_index i \
             JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = 'inbox_claims'::regclass ORDER BY 1",
        ))
        .await
        .expect("index sizes");
    for r in rows {
        let (name, n): (String, i64) = (r.try_get("", "name").expect("name"), r.try_get("", "n").expect("n"));
        println!("| `{name}` | {:.0} |", n as f64 / MB);
    }
}

fn days_of(args: &Args) -> i64 {
    args.daily_purges.unwrap_or(0)
}

async fn wal_lsn(db: &DatabaseConnection) -> String {
    let row = db
        .query_one_raw(Statement::from_string(DbBackend::Postgres, "SELECT pg_current_wal_lsn()::text AS lsn"))
        .await
        .expect("lsn")
        .expect("a row");
    row.try_get("", "lsn").expect("lsn")
}

/// Bytes of WAL written since `lsn` (by anything on the cluster).
async fn wal_since(db: &DatabaseConnection, lsn: &str) -> i64 {
    scalar(db, &format!("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '{lsn}')::bigint AS n")).await
}

async fn print_sizes(
    db: &DatabaseConnection,
    day: i64,
    (inserted, deleted, cleared): (i64, u64, u64),
    purge: Option<(f64, i64)>,
    vacuum_s: Option<f64>,
    stored: i64,
) {
    let size = |f: &str| format!("SELECT {f}('inbox_claims')::bigint AS n");
    let heap = scalar(db, &size("pg_relation_size")).await as f64 / MB;
    let table = scalar(db, &size("pg_table_size")).await as f64 / MB;
    let indexes = scalar(db, &size("pg_indexes_size")).await as f64 / MB;
    let total = scalar(db, &size("pg_total_relation_size")).await as f64 / MB;
    // A partitioned table has no storage of its own: its days' sum.
    let bodies = scalar(
        db,
        "SELECT COALESCE(SUM(pg_total_relation_size(inhrelid)), 0)::bigint AS n FROM pg_inherits \
         WHERE inhparent = 'event_bodies'::regclass",
    )
    .await as f64
        / MB;
    let (purge_s, wal) =
        purge.map_or(("–".into(), "–".into()), |(s, w)| (format!("{s:.1}"), format!("{:.0}", w as f64 / MB)));
    let vacuum = vacuum_s.map_or("–".into(), |s| format!("{s:.1}"));
    println!(
        "| {day} | {inserted} | {deleted} | {cleared} | {purge_s} | {wal} | {vacuum} | {stored} \
         | {heap:.0} | {table:.0} | {indexes:.0} | {total:.0} | {bodies:.0} |"
    );
}
