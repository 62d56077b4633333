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
/// claims and the purge at its end: the expired days' partitions dropped,
/// then the row deletes, each timed with the WAL written meanwhile; a
/// Markdown row per day with the claims table's sizes (heap, TOAST and
/// maps, indexes, total) and the bodies' days', then each claims index's.
pub(super) async fn daily_purges(
    db: &DatabaseConnection,
    tenants: &[String],
    args: &Args,
    vault: &domain::vault::Vault,
) {
    use domain::retention::{partitions, purge};
    const DAY: i64 = 86_400_000;
    let start = seeded_at(db).await;
    set_retention(db, tenants).await;
    let per_day = args.events / DAYS;
    let n_ep = args.tenants * ENDPOINTS_PER_TENANT;
    let body = BulkBody::sealed(db, vault, 0).await;
    exec(db, "DROP TABLE IF EXISTS bench_endpoints".into()).await;
    exec(db, BENCH_ENDPOINTS.into()).await;
    println!(
        "| day | claims inserted | partitions dropped | drop s | drop WAL MB | claims deleted | bodies cleared \
         | row purge s | row purge WAL MB | vacuum s | claims stored | heap MB | table MB (with TOAST, maps) \
         | indexes MB | total MB | bodies MB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut stored = args.events;
    print_sizes(db, 0, 0, None, None, stored).await;
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
        // The whole days first, timed apart, as the purge's first step
        // (which then finds nothing left to drop); then the row deletes.
        let now = start + d * DAY;
        // Every endpoint's retention, as set_retention set it.
        let longest = partitions::Longest { dedup_ms: 30 * DAY, body_ms: 7 * DAY };
        let (dropped, drop) = timed(db, partitions::drop_expired(db, now, longest)).await;
        let dropped = dropped.expect("drop");
        let (r, rows) = timed(db, purge::run(db, now, purge::DEFAULT_BATCH)).await;
        let r = r.expect("purge");
        assert_eq!(r.partitions_dropped, 0, "the drops above took every expired day");
        let vacuum_s = if args.vacuum {
            let t = Instant::now();
            exec(db, "VACUUM inbox_claims".into()).await;
            Some(t.elapsed().as_secs_f64())
        } else {
            None
        };
        stored += per_day - r.claims_deleted as i64;
        let purged =
            Purged { dropped: dropped.partitions, drop, claims: r.claims_deleted, bodies: r.bodies_cleared, rows };
        print_sizes(db, d, per_day, Some(purged), vacuum_s, stored).await;
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

/// A step's seconds and the WAL written meanwhile (by anything on the
/// cluster), in bytes.
#[derive(Clone, Copy)]
struct Cost {
    secs: f64,
    wal: i64,
}

async fn timed<T>(db: &DatabaseConnection, step: impl std::future::Future<Output = T>) -> (T, Cost) {
    let before = wal_lsn(db).await;
    let t = Instant::now();
    let out = step.await;
    let secs = t.elapsed().as_secs_f64();
    (out, Cost { secs, wal: wal_since(db, &before).await })
}

/// What a day's purge did: the partitions dropped, then the row deletes.
struct Purged {
    dropped: u64,
    drop: Cost,
    claims: u64,
    bodies: u64,
    rows: Cost,
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
    inserted: i64,
    purged: Option<Purged>,
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
    let cost = |c: Cost| format!("{:.1} | {:.0}", c.secs, c.wal as f64 / MB);
    let purge = purged.map_or("– | – | – | – | – | – | –".into(), |p| {
        format!("{} | {} | {} | {} | {}", p.dropped, cost(p.drop), p.claims, p.bodies, cost(p.rows))
    });
    let vacuum = vacuum_s.map_or("–".into(), |s| format!("{s:.1}"));
    println!(
        "| {day} | {inserted} | {purge} | {vacuum} | {stored} \
         | {heap:.0} | {table:.0} | {indexes:.0} | {total:.0} | {bodies:.0} |"
    );
}
