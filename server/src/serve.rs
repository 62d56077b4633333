//! `signet serve`: open the database and vault, print the setup link while
//! no user exists, start the background work and serve until a signal.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use app::ssr::{RevealStore, SetupToken, SharedState};
use domain::{auth::sessions::SessionPolicy, vault::Vault};
use leptos::prelude::LeptosOptions;

use crate::{
    config::{DbArgs, ServeArgs},
    http::state::AppState,
};

pub async fn run(db_args: DbArgs, args: ServeArgs) -> Result<(), String> {
    // The request timeout answers first otherwise, and the body timeout
    // would be a setting that never takes effect.
    if args.body_timeout_secs >= args.request_timeout_secs {
        return Err(format!(
            "SIGNET_BODY_TIMEOUT_SECS ({}) must be shorter than SIGNET_REQUEST_TIMEOUT_SECS ({})",
            args.body_timeout_secs, args.request_timeout_secs
        ));
    }
    let trusted_proxies = app::ssr::client_addr::TrustedProxies::parse(args.trusted_proxies.as_deref().unwrap_or(""))
        .map_err(|e| format!("SIGNET_TRUSTED_PROXIES (--trusted-proxies): {e}"))?;
    let url = db_args.url().map_err(|e| e.to_string())?;
    let db = domain::db::connect_with(&url, db_args.pg_pool_size)
        .await
        .map_err(|e| format!("cannot open the database: {e}"))?;
    // Before anything is written: this process dates what it stores by its
    // own clock, and instances sharing the database must agree.
    domain::clock_offset::refuse_if_far_off(&db).await.map_err(|e| format!("refusing to start: {e}"))?;
    domain::db::migrate(&db).await.map_err(|e| format!("migrations failed: {e}"))?;
    // Before serving: with no default partition, a write needs today's.
    domain::retention::partitions::upkeep(&db, domain::clock::now_ms())
        .await
        .map_err(|e| format!("cannot create the partitions ahead: {e}"))?;
    let master = db_args.master_key(&db).await.map_err(|e| e.to_string())?;
    let vault = Arc::new(
        domain::startup::open_vault(&db, master)
            .await
            .map_err(|e| format!("refusing to start: {e}"))?
            .with_files(db_args.deployment_files()),
    );

    // Bound first: drills started from the console or the API deliver to
    // this very listener.
    let listener =
        tokio::net::TcpListener::bind(args.addr).await.map_err(|e| format!("cannot listen on {}: {e}", args.addr))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    // Before any background work starts: an instance whose metrics port is
    // taken stops here, having done nothing.
    let metrics_listener = tokio::net::TcpListener::bind(args.metrics_addr)
        .await
        .map_err(|e| metrics_bind_error(args.metrics_addr, &e))?;
    let public_url = args.public_url.clone().unwrap_or_else(|| format!("http://{}", args.addr));
    // Test fault points (debug builds only), read once and passed down.
    let faults = domain::receiver::faults::Faults::from_env();
    let receiver = Arc::new(domain::receiver::Receiver::new(db.clone(), vault.clone(), faults.clone()));
    let loopback = if local.ip().is_unspecified() {
        SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), local.port())
    } else {
        local
    };
    let drill_runner = crate::drills::RunnerToken::generate();
    let transport = crate::drills::HttpTransport::new(
        format!("http://{loopback}"),
        receiver.faults().drill.clone(),
        crate::drills::ChildEnv::from_args(&db_args)?,
        drill_runner.clone(),
    )?;
    let drills =
        Arc::new(crate::drills::ServeSpawner { db: db.clone(), vault: vault.clone(), transport: Arc::new(transport) });
    let leptos_options = LeptosOptions::builder()
        .output_name("signet")
        .site_root(args.site_root.clone())
        .site_pkg_dir("pkg")
        .site_addr(args.addr)
        .build();
    let shared = SharedState {
        db: db.clone(),
        vault: vault.clone(),
        sessions: SessionPolicy::default(),
        secure_cookies: app::ssr::cookies_secure(&public_url),
        reveals: Arc::new(RevealStore::default()),
        // Taken by the page the reveal redirects to, a moment later.
        body_views: Arc::new(RevealStore::new(Duration::from_secs(120), 64)),
        setup: Arc::new(SetupToken::default()),
        redaction: Arc::new(domain::quarantine::redact::Redaction::from_config(args.redact_fields.as_deref())),
        bulk_stale_ms: (args.bulk_stale_secs * 1000) as i64,
        kek_stale_ms: (args.kek_stale_secs * 1000) as i64,
        rollout_drill_max_age_days: args.rollout.rollout_drill_max_age_days,
        faults: faults.clone(),
        receiver: receiver.clone(),
        public_url: public_url.clone(),
        drills,
        budgets: Arc::new(domain::budget::Budgets::default()),
        trusted_proxies: Arc::new(trusted_proxies),
    };
    let state = AppState { leptos_options, hsts: public_url.starts_with("https://"), shared };

    if !domain::auth::users::any_exist(&db).await.map_err(|e| e.to_string())? {
        let token = state.shared.setup.mint();
        // Printed, not logged: a one-time bootstrap credential for the operator.
        println!(
            "No users exist yet. Create the first administrator (link valid until it is used or the server restarts):"
        );
        println!("  {}/setup?token={token}", public_url.trim_end_matches('/'));
        println!("Or from a shell: signet user create <name> --role admin");
    }

    let hooks = crate::http::hooks::HookState {
        receiver,
        telemetry: Arc::new(domain::receiver::telemetry::Telemetry::default()),
        metrics: Arc::new(crate::metrics::Metrics::new().map_err(|e| format!("metrics: {e}"))?),
        body_read: Duration::from_secs(args.body_timeout_secs),
        unknown_log: Arc::default(),
        body_budget: crate::http::limits::BodyBudget::new(
            usize::try_from(args.max_inflight_body_bytes).map_err(|_| "SIGNET_MAX_INFLIGHT_BODY_BYTES is too large")?,
        ),
        shed_log: Arc::default(),
        drill_runner,
        drill_log: Arc::default(),
    };
    let outbox_file = args.outbox_file.clone().unwrap_or_else(|| db_args.data_dir.join("notifications.jsonl"));
    let notifier = crate::outbox_worker::Builtin::new(
        outbox_file,
        Duration::from_millis(args.outbox_timeout_ms),
        args.relay_allow.clone().unwrap_or_default(),
    )
    .map_err(|e| format!("outbox relay: {e}"))?;
    let checkpoints =
        args.audit_checkpoint_file.clone().unwrap_or_else(|| db_args.data_dir.join("audit-checkpoints.jsonl"));
    let anchor_file = crate::anchor::AnchorFile::open(&checkpoints).map_err(|e| {
        format!("cannot open the audit checkpoint file {} (SIGNET_AUDIT_CHECKPOINT_FILE): {e}", checkpoints.display())
    })?;
    hooks.metrics.set_intervals(args.purge_interval_secs, args.audit_checkpoint_secs);
    let jobs = start_jobs(&db, &vault, &args, &hooks, notifier, anchor_file, faults).await;
    let telemetry = hooks.telemetry.clone();
    let limits = crate::http::RequestLimits {
        request_timeout: Duration::from_secs(args.request_timeout_secs),
        hooks_in_flight: args.max_in_flight as usize,
    };
    let metrics_local = metrics_listener.local_addr().map_err(|e| e.to_string())?;
    let metrics_router = crate::http::metrics_router(&hooks);
    let router = crate::http::router(state, hooks, limits);
    tracing::info!(addr = %local, database = %redact_url(&url), "signet listening");
    // Printed before the listening line, so whoever waits for that line
    // (tests, scripts) already knows where the metrics are.
    println!("Signet metrics on http://{metrics_local}/metrics");
    println!("Signet is listening on http://{local}");
    let conn_limits = crate::listen::ConnLimits {
        header_read: Duration::from_secs(args.header_timeout_secs),
        max_connections: args.max_connections as usize,
    };
    let timeout = Duration::from_secs(args.shutdown_timeout_secs);
    let metrics_server = tokio::spawn(crate::listen::serve(
        metrics_listener,
        metrics_router,
        conn_limits,
        timeout,
        std::future::pending(),
    ));
    let signalled = Arc::new(std::sync::OnceLock::new());
    let shutdown = {
        let signalled = signalled.clone();
        async move {
            shutdown_signal().await;
            let _ = signalled.set(tokio::time::Instant::now());
        }
    };
    // Requests in flight get most of the budget. Each webhook waits for its
    // claim's commit (a group-commit batch answers every member), so once
    // they are answered the claim batch is flushed; the rest of the budget is
    // for the background work's safe point and the last telemetry flush.
    crate::listen::serve(listener, router, conn_limits, timeout * 4 / 5, shutdown).await;
    let deadline = signalled.get().copied().unwrap_or_else(tokio::time::Instant::now) + timeout;
    metrics_server.abort();
    let safe_point = async {
        // The relay and the purge finish the intent or batch they are on;
        // the leases are released, so another process takes the jobs at once.
        jobs.stop().await;
        if let Err(e) = telemetry.flush(&db).await {
            tracing::error!(error = %e, "final telemetry flush failed");
        }
    };
    if tokio::time::timeout_at(deadline, safe_point).await.is_err() {
        tracing::warn!("SIGNET_SHUTDOWN_TIMEOUT_SECS reached before the background work stopped; exiting");
    }
    db.close().await.ok();
    tracing::info!("signet stopped");
    Ok(())
}

/// The background jobs ([`crate::jobs`]): those that write shared state
/// under their leases, one process at a time; the rest in every process.
async fn start_jobs(
    db: &sea_orm::DatabaseConnection,
    vault: &Arc<Vault>,
    args: &ServeArgs,
    hooks: &crate::http::hooks::HookState,
    notifier: crate::outbox_worker::Builtin,
    anchor_file: crate::anchor::AnchorFile,
    faults: domain::receiver::faults::Faults,
) -> crate::jobs::Runner {
    use crate::jobs::{self, Pace, maintenance, purge, resume, telemetry};
    let holder = jobs::lease::holder_id();
    let lease_ttl = Duration::from_millis(args.job_lease_ms);
    let mut runner = jobs::Runner::new(db.clone(), holder.clone(), lease_ttl, faults.clone());
    let relay = crate::outbox_worker::Relay {
        db: db.clone(),
        vault: vault.clone(),
        notifier,
        cfg: crate::outbox_worker::WorkerConfig {
            poll: Duration::from_millis(args.outbox_poll_ms),
            batch: 32,
            lease: Duration::from_millis(args.outbox_lease_ms),
            rule: domain::outbox::RetryRule {
                base_ms: args.outbox_base_delay_ms,
                cap_ms: args.outbox_max_delay_ms,
                max_attempts: args.outbox_max_attempts,
            },
        },
        metrics: hooks.metrics.clone(),
        faults: faults.clone(),
    };
    runner.leased(jobs::OUTBOX_RELAY, relay.pace(), relay).await;
    // On PostgreSQL the job also keeps the partitions ahead: it runs even
    // with the purge off.
    let purge_every = (args.purge_interval_secs > 0).then(|| Duration::from_secs(args.purge_interval_secs));
    if purge_every.is_some() || db.get_database_backend() == sea_orm::DbBackend::Postgres {
        let first = purge_every.unwrap_or(purge::UPKEEP_EVERY).min(Duration::from_secs(30));
        let job = purge::Purge::new(db.clone(), hooks.metrics.clone(), purge_every);
        runner.leased(jobs::RETENTION_PURGE, job.pace(first), job).await;
    }
    let gauges = telemetry::GaugeSamples { db: db.clone() };
    runner.leased(jobs::GAUGE_SAMPLES, Pace::every(telemetry::GAUGES_EVERY), gauges).await;
    runner.leased(jobs::MAINTENANCE, Pace::every(maintenance::EVERY), maintenance::Maintenance::new(db.clone())).await;
    let stale = resume::StaleAfter {
        kek_ms: (args.kek_stale_secs * 1000) as i64,
        bulk_ms: (args.bulk_stale_secs * 1000) as i64,
    };
    let resumer = resume::Resume { db: db.clone(), vault: vault.clone(), faults, stale, process: holder };
    runner.leased(jobs::JOB_RESUME, Pace::every(resume::EVERY), resumer).await;
    let clock = maintenance::ClockCheck { db: db.clone(), metrics: hooks.metrics.clone(), off: false };
    runner.local(Pace::every(maintenance::CLOCK_EVERY), clock);
    let refresh = maintenance::RingRefresh { db: db.clone(), vault: vault.clone() };
    runner.local(Pace::every(maintenance::EVERY), refresh);
    runner.local(Pace::every(telemetry::FLUSH_EVERY), telemetry::Flush::new(db.clone(), hooks.clone()));
    let metrics = hooks.metrics.clone();
    let every = Duration::from_secs(args.audit_checkpoint_secs);
    let anchors = crate::anchor::Anchors::new(db.clone(), vault.clone(), anchor_file, every, move |at| {
        metrics.audit_checkpoint_written(at)
    });
    runner.local(Pace::every(crate::anchor::TICK), anchors);
    runner
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutting down: finishing in-flight requests");
}

/// Why `/metrics` cannot be served, naming the setting to change: a second
/// instance on one host (or `make bench` beside `make run`) needs its own
/// metrics port.
fn metrics_bind_error(addr: SocketAddr, e: &std::io::Error) -> String {
    if e.kind() == std::io::ErrorKind::AddrInUse {
        format!(
            "cannot listen for /metrics on {addr}: the port is taken (another Signet instance?); \
             give this one its own with SIGNET_METRICS_ADDR (--metrics-addr), e.g. 127.0.0.1:0 for any free port"
        )
    } else {
        format!("cannot listen for /metrics on {addr} (SIGNET_METRICS_ADDR): {e}")
    }
}

/// The URL without credentials, for the log.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}://…@{}", &url[..s], &url[at + 1..]),
        _ => url.to_owned(),
    }
}
