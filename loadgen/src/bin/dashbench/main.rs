//! `dashbench`: the dashboard queries against a database seeded with ten
//! million stored events (claims) and the rollups they would have produced
//! over 30 days (minute rollups for the last two days, as the purge keeps
//! them; hourly rollups for all 30). Prints a Markdown table of the
//! median and p95 time of each dashboard read, and the time of one
//! `COUNT(*)` over the claims for contrast. Used by `bench/dashboard.sh`.

mod bulk;
mod daily;

use std::time::{Duration, Instant};

use bulk::{BENCH_ENDPOINTS, BulkBody, ClaimRows, drop_claim_indexes, rebuild_claim_indexes};
use daily::daily_purges;

use clap::Parser;
use domain::{
    auth::Principal,
    clock,
    registry::{
        endpoints::{self, NewEndpoint},
        tenants::{self, NewTenant},
    },
    stats::{self, Window},
};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, IntoActiveModel, Statement};
use views::scheme::Scheme;

#[derive(Parser)]
struct Args {
    /// `sqlite://…` or `postgres://…` (an empty database).
    #[arg(long)]
    database_url: String,
    #[arg(long, default_value_t = 10_000_000)]
    events: i64,
    #[arg(long, default_value_t = 20)]
    tenants: i64,
    /// Timed repetitions of each read.
    #[arg(long, default_value_t = 20)]
    runs: usize,
    /// The master key (base64 of 32 bytes) to seal keys under, so `signet`
    /// can open the seeded database afterwards; default: a throwaway key.
    #[arg(long)]
    master_key_file: Option<std::path::PathBuf>,
    /// Seed (with an approved key per endpoint) and exit: `bench/evidence.sh`
    /// then times `signet` itself against the database.
    #[arg(long)]
    seed_only: bool,
    /// Seal a 1 KiB body into every claim of the last N days (as the body
    /// retention, 7 days by default, keeps them): `bench/kek.sh` reseals
    /// them. 0: no bodies (the dashboard and evidence benchmarks).
    #[arg(long, default_value_t = 0)]
    sealed_body_days: i64,
    /// Seed, then time one retention purge run as if N days had passed
    /// (`bench/purge.sh`): with the default 30-day dedup and 7-day body
    /// retention, N = 1 deletes the oldest day's claims and clears a day of
    /// bodies, as the purge meets them each day in a steady state.
    #[arg(long)]
    purge_after_days: Option<i64>,
    /// PostgreSQL, for `bench/scale.sh`'s hundred million claims: drop the
    /// claims' primary key and indexes around the bulk insert and rebuild
    /// them from their own definitions (checked equal afterwards), and write
    /// the bodies of `--sealed-body-days` in the insert itself: the bytes of
    /// one body sealed as the receiver seals it, copied into every such claim
    /// (the right size for size and purge measurements; they open only for
    /// the first claim's AAD). Digests are 64 hex characters, as stored.
    #[arg(long)]
    bulk: bool,
    /// Skip the seeding: the database was seeded by an earlier `--seed-only`
    /// run with the same `--tenants`, `--events` and `--master-key-file`.
    #[arg(long)]
    reuse: bool,
    /// PostgreSQL: N consecutive days, each inserting a day's worth of new
    /// claims (`--events` / 30, with bodies as `--bulk` writes them), then
    /// one retention purge at the end of that day (30 days of claims, 7 of
    /// bodies), timed with the WAL it wrote; prints the claims table's sizes
    /// after each day (`bench/scale.sh`).
    #[arg(long)]
    daily_purges: Option<i64>,
    /// With `--daily-purges`: `VACUUM inbox_claims` after each purge, timed
    /// apart (what autovacuum would do; it is off on this machine's cluster).
    #[arg(long)]
    vacuum: bool,
}

const ENDPOINTS_PER_TENANT: i64 = 2;
const DAYS: i64 = 30;

async fn exec(db: &DatabaseConnection, sql: String) {
    db.execute_unprepared(&sql).await.unwrap_or_else(|e| panic!("{e}: {sql}"));
}

/// `SELECT n FROM <0..count>` for the engine.
fn series(backend: DbBackend, count: i64) -> String {
    match backend {
        DbBackend::Postgres => format!("SELECT generate_series(0, {}) AS n", count - 1),
        _ => format!(
            "WITH RECURSIVE s(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM s WHERE n < {}) SELECT n FROM s",
            count - 1
        ),
    }
}

async fn seed(db: &DatabaseConnection, vault: &domain::vault::Vault, args: &Args) -> Vec<String> {
    let p = Principal::cli();
    let mut slugs = Vec::new();
    for t in 0..args.tenants {
        let slug = format!("clinic-{t:03}");
        tenants::create(db, &p, NewTenant { slug: slug.clone(), name: None, notify_url: None }).await.expect("tenant");
        for e in 0..ENDPOINTS_PER_TENANT {
            endpoints::create(
                db,
                &p,
                &slug.parse().expect("slug"),
                NewEndpoint {
                    slug: format!("hooks-{e}"),
                    scheme: Scheme::StandardWebhooks,
                    event_types: None,
                    tolerance_secs: None,
                    max_body_bytes: None,
                    hmac_profile: None,
                },
            )
            .await
            .expect("endpoint");
            // The credential map of the evidence bundle: one approved key per
            // endpoint.
            domain::registry::keys::provision(
                db,
                vault,
                &p,
                &slug.parse().expect("slug"),
                &format!("hooks-{e}").parse().expect("slug"),
                domain::registry::keys::ProvisionRequest { owner: Some("bench-team".into()), ..Default::default() },
                domain::registry::keys::Approval::ApproveAs {
                    reviewer: "bench-reviewer".into(),
                    comment: "bench".into(),
                },
            )
            .await
            .expect("key");
        }
        slugs.push(slug);
    }
    let b = db.get_database_backend();
    exec(db, BENCH_ENDPOINTS.into()).await;
    let n_ep = args.tenants * ENDPOINTS_PER_TENANT;
    let now = clock::now_ms();
    let span_ms = DAYS * 86_400_000;
    // PostgreSQL's rollups are partitioned by day, with no default partition.
    domain::retention::partitions::cover(db, now - span_ms, now).await.expect("partitions for the seeded days");

    let started = Instant::now();
    eprintln!("seeding {} claims…", args.events);
    // `--bulk`: the claims' indexes go while the rows go in (rebuilt below).
    let bulk = if args.bulk {
        assert_eq!(b, DbBackend::Postgres, "--bulk is for PostgreSQL");
        let body = BulkBody::sealed(db, vault, now - args.sealed_body_days * 86_400_000).await;
        Some((body, drop_claim_indexes(db).await))
    } else {
        None
    };
    // In chunks so SQLite's recursive CTE and PG's work memory stay small.
    let chunk = 1_000_000.min(args.events);
    let mut done = 0;
    while done < args.events {
        let count = chunk.min(args.events - done);
        let rows = ClaimRows { prefix: "evt_", offset: done, count, end: now, span_ms, total: args.events, n_ep };
        for sql in rows.insert(b, bulk.as_ref().map(|(body, _)| body)) {
            exec(db, sql).await;
        }
        done += count;
        eprintln!("  {done} claims ({:.0} s)", started.elapsed().as_secs_f64());
    }
    if let Some((_, dropped)) = &bulk {
        rebuild_claim_indexes(db, dropped).await;
        eprintln!("  indexes rebuilt ({:.0} s)", started.elapsed().as_secs_f64());
    }

    // Rollups those events would have produced: per endpoint and bucket,
    // applied, ~10% duplicates, a few failures, and three latency buckets.
    let per_minute = args.events / (DAYS * 1440 * n_ep);
    let rows = |unit: i64| {
        let n = per_minute * unit;
        [
            ("applied", "", n),
            ("duplicate", "", n / 10),
            ("verification_failed", "mismatch", (n / 50).max(1)),
            ("quarantined", "reminder_not_found", (n / 200).max(1)),
            ("latency", "le_2", n / 2),
            ("latency", "le_5", n * 2 / 5),
            ("latency", "le_25", n - n / 2 - n * 2 / 5),
        ]
        .iter()
        .map(|(o, r, v)| format!("SELECT '{o}' AS outcome, '{r}' AS reason, {v} AS c"))
        .collect::<Vec<_>>()
        .join(" UNION ALL ")
    };
    // Two days of minute rollups (what the purge keeps) and 30 days of hourly ones.
    for (table, time_col, ms_per_bucket, buckets) in
        [("event_rollups", "minute", 60_000, 2 * 1440), ("event_rollups_hourly", "hour", 3_600_000, DAYS * 24)]
    {
        let first = now / ms_per_bucket - buckets + 1;
        eprintln!("seeding {table} ({buckets} buckets x {n_ep} endpoints)…");
        exec(
            db,
            format!(
                "INSERT INTO {table} ({time_col}, tenant_id, endpoint_id, outcome, reason, count) \
                 SELECT {first} + s.n, e.tenant_id, e.id, o.outcome, o.reason, o.c \
                 FROM ({series}) s CROSS JOIN bench_endpoints e CROSS JOIN ({outcomes}) o",
                series = series(b, buckets),
                outcomes = rows(ms_per_bucket / 60_000),
            ),
        )
        .await;
        // And the total rows the flusher writes beside them (telemetry::TOTAL).
        exec(
            db,
            format!(
                "INSERT INTO {table} ({time_col}, tenant_id, endpoint_id, outcome, reason, count) \
                 SELECT {first} + s.n, '{total}', '{total}', o.outcome, o.reason, o.c * {n_ep} \
                 FROM ({series}) s CROSS JOIN ({outcomes}) o",
                total = domain::receiver::telemetry::TOTAL,
                series = series(b, buckets),
                outcomes = rows(ms_per_bucket / 60_000),
            ),
        )
        .await;
    }
    exec(db, "DROP TABLE bench_endpoints".into()).await;
    if args.sealed_body_days > 0 && !args.bulk {
        seal_bodies(db, vault, now - args.sealed_body_days * 86_400_000).await;
    }
    exec(db, "ANALYZE".into()).await;
    eprintln!("seeded in {:.0} s", started.elapsed().as_secs_f64());
    slugs
}

/// Seals a 1 KiB body (with the event's AAD, as the receiver does) for
/// every claim received since `since`, in transactions of 2000 rows.
async fn seal_bodies(db: &DatabaseConnection, vault: &domain::vault::Vault, since: i64) {
    use domain::entity::{event_body, inbox_claim as claim};
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect, TransactionTrait};
    let started = Instant::now();
    let body = vec![b'x'; 1024];
    let mut after: Option<(String, String, String)> = None;
    let mut sealed = 0u64;
    loop {
        let mut q = claim::Entity::find().filter(claim::Column::ReceivedAt.gte(since));
        if let Some((t, e, ev)) = &after {
            use sea_orm::sea_query::{Expr, ExprTrait};
            let key = Expr::tuple([
                Expr::col(claim::Column::TenantId),
                Expr::col(claim::Column::EndpointId),
                Expr::col(claim::Column::EventId),
            ]);
            q = q.filter(key.gt(Expr::tuple([Expr::val(t.clone()), Expr::val(e.clone()), Expr::val(ev.clone())])));
        }
        let rows: Vec<(String, String, String, i64)> = q
            .select_only()
            .columns([claim::Column::TenantId, claim::Column::EndpointId, claim::Column::EventId])
            .column(claim::Column::ReceivedAt)
            .order_by_asc(claim::Column::TenantId)
            .order_by_asc(claim::Column::EndpointId)
            .order_by_asc(claim::Column::EventId)
            .limit(2000)
            .into_tuple()
            .all(db)
            .await
            .expect("claims to seal");
        let Some(last) = rows.last().map(|(t, e, ev, _)| (t.clone(), e.clone(), ev.clone())) else { break };
        vault.reserve_seals(db, rows.len() as u64).await.expect("count the seals ahead");
        let mut bodies = Vec::with_capacity(rows.len());
        for (t, e, ev, at) in &rows {
            let (sealed_body, kek) = vault.seal(&domain::crypto::Aad::event_body(t, e, ev), &body).expect("seal");
            bodies.push(domain::bodies::row(t, e, ev, *at, sealed_body, kek).into_active_model());
        }
        let txn = db.begin().await.expect("begin");
        for chunk in bodies.chunks(200) {
            event_body::Entity::insert_many(chunk.to_vec()).exec_without_returning(&txn).await.expect("seal bodies");
        }
        txn.commit().await.expect("commit");
        sealed += rows.len() as u64;
        if sealed % 200_000 < 2000 {
            eprintln!("  sealed {sealed} bodies ({:.0} s)", started.elapsed().as_secs_f64());
        }
        after = Some(last);
    }
    eprintln!("sealed {sealed} bodies in {:.0} s", started.elapsed().as_secs_f64());
}

/// Every endpoint's retention: 30 days of claims, 7 of bodies (a Standard
/// Webhooks endpoint's default keeps claims for its 90-day manual resend
/// window).
async fn set_retention(db: &DatabaseConnection, tenants: &[String]) {
    use domain::retention::{self, DAY_SECS, RetentionChange};
    let change = RetentionChange {
        dedup_secs: Some(30 * DAY_SECS),
        body_secs: Some(7 * DAY_SECS),
        reason: "purge benchmark".into(),
        accept_risk: true,
    };
    for tenant in tenants {
        for e in 0..ENDPOINTS_PER_TENANT {
            let (tenant, endpoint) = (tenant.parse().expect("slug"), format!("hooks-{e}").parse().expect("slug"));
            retention::set(db, &Principal::cli(), &tenant, &endpoint, &change).await.expect("retention");
        }
    }
}

/// One purge run `days` after the seeding, timed as a whole, with every
/// endpoint's retention set to 30 days of claims and 7 of bodies (a
/// Standard Webhooks endpoint's default keeps claims for its 90-day manual
/// resend window); prints a Markdown row.
async fn time_purge(db: &DatabaseConnection, tenants: &[String], engine: &str, stored: i64, days: i64) {
    use domain::retention::purge;
    set_retention(db, tenants).await;
    let t = Instant::now();
    let r = purge::run(db, clock::now_ms() + days * 86_400_000, purge::DEFAULT_BATCH).await.expect("purge");
    let secs = t.elapsed().as_secs_f64();
    println!(
        "| {engine} | {stored} | {days} | {} | {} | {} | {secs:.1} | {:.0} |",
        r.claims_deleted,
        r.bodies_cleared,
        r.partitions_dropped,
        (r.claims_deleted + r.bodies_cleared) as f64 / secs
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let db = domain::db::connect(&args.database_url).await.expect("connect");
    domain::db::migrate(&db).await.expect("migrate");
    let master = match &args.master_key_file {
        Some(path) => {
            domain::crypto::MasterKey::from_base64(&std::fs::read_to_string(path).expect("read the master key file"))
                .expect("master key")
        }
        None => domain::crypto::MasterKey::generate().0,
    };
    // Every change is audited, and the audit chain's key lives in the vault.
    let vault = domain::startup::open_vault(&db, master).await.expect("vault");
    let slugs = if args.reuse {
        (0..args.tenants).map(|t| format!("clinic-{t:03}")).collect()
    } else {
        seed(&db, &vault, &args).await
    };
    if args.seed_only {
        return;
    }
    if args.daily_purges.is_some() {
        daily_purges(&db, &slugs, &args, &vault).await;
        return;
    }
    let engine = if db.get_database_backend() == DbBackend::Postgres { "PostgreSQL" } else { "SQLite" };
    if let Some(days) = args.purge_after_days {
        time_purge(&db, &slugs, engine, args.events, days).await;
        return;
    }
    let p = Principal::cli();

    let t = Instant::now();
    let row = db
        .query_one_raw(Statement::from_string(db.get_database_backend(), "SELECT COUNT(*) AS n FROM inbox_claims"))
        .await
        .expect("count")
        .expect("row");
    let count: i64 = row.try_get("", "n").expect("n");
    println!("| {engine} | COUNT(*) over the claims ({count} rows), for contrast | {:.1} | – |", ms(t.elapsed()));

    let middle: views::ids::TenantSlug = slugs[slugs.len() / 2].parse().expect("slug");
    for window in [Window::Hour, Window::Day, Window::Week] {
        for tenant in [None, Some(&middle)] {
            let mut times = Vec::with_capacity(args.runs);
            let mut applied = 0;
            for _ in 0..args.runs {
                let t = Instant::now();
                let v = stats::stats(&db, &p, tenant, window).await.expect("stats");
                times.push(ms(t.elapsed()));
                applied = v.series[0].total;
            }
            times.sort_by(|a, b| a.total_cmp(b));
            let p95 = times[((times.len() as f64 * 0.95).ceil() as usize).saturating_sub(1)];
            println!(
                "| {engine} | dashboard {}, {} ({applied} applied) | {:.1} | {:.1} |",
                window.as_str(),
                tenant.map_or("all tenants".to_owned(), |t| format!("tenant {t}")),
                times[times.len() / 2],
                p95
            );
        }
    }
}
