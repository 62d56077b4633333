//! `signet config check`: the effective configuration (never a secret) and
//! one line per problem, so a bad deployment is refused before it serves.
//! Exit 0 when good, 1 otherwise.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    process::ExitCode,
    time::Duration,
};

use serde_json::{Map, Value, json};

use crate::config::{DbArgs, ServeArgs};

/// What `config check` found: the settings as `serve` would use them, and
/// what is wrong with them.
pub struct Report {
    pub config: Vec<(&'static str, String)>,
    pub problems: Vec<String>,
}

pub async fn run(json: bool, db: &DbArgs, serve: &ServeArgs, log_format: &str) -> ExitCode {
    let mut report = check(db, serve).await;
    telemetry(log_format, &mut report);
    if json {
        let config: Map<String, Value> = report.config.iter().map(|(k, v)| ((*k).to_owned(), json!(v))).collect();
        let ok = report.problems.is_empty();
        println!("{}", json!({"ok": ok, "config": config, "problems": report.problems}));
    } else {
        for (k, v) in &report.config {
            println!("{k:<24} {v}");
        }
        for p in &report.problems {
            eprintln!("problem: {p}");
        }
        if report.problems.is_empty() {
            println!("configuration OK");
        }
    }
    if report.problems.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

pub async fn check(db: &DbArgs, serve: &ServeArgs) -> Report {
    let mut problems = Vec::new();
    let url = effective_url(db);
    let public_url = serve.public_url.clone().unwrap_or_else(|| format!("http://{}", serve.addr));
    let key = master_key(db, &mut problems);
    check_database(&url, db.database_url.as_deref().is_some_and(|u| !u.is_empty()), &mut problems).await;
    if collides(serve.metrics_addr, serve.addr) {
        problems.push(format!(
            "SIGNET_METRICS_ADDR ({}) is the public address SIGNET_ADDR ({}): /metrics names every tenant and \
             endpoint and has no authentication, so it needs its own listener on loopback or a private interface",
            serve.metrics_addr, serve.addr
        ));
    }
    if !serve.addr.ip().is_loopback() && !public_url.starts_with("https://") {
        problems.push(format!(
            "SIGNET_PUBLIC_URL ({public_url}) is not https, but SIGNET_ADDR ({}) is not loopback: sign-ins would \
             travel in clear; terminate TLS in front of Signet and set SIGNET_PUBLIC_URL=https://…",
            serve.addr
        ));
    }
    if serve.body_timeout_secs >= serve.request_timeout_secs {
        problems.push(format!(
            "SIGNET_BODY_TIMEOUT_SECS ({}) must be shorter than SIGNET_REQUEST_TIMEOUT_SECS ({})",
            serve.body_timeout_secs, serve.request_timeout_secs
        ));
    }
    let proxies = serve.trusted_proxies.clone().unwrap_or_default();
    if let Err(e) = app::ssr::client_addr::TrustedProxies::parse(&proxies) {
        problems.push(format!("SIGNET_TRUSTED_PROXIES: {e}"));
    }
    let or_none = |v: &Option<String>| v.clone().filter(|s| !s.is_empty()).unwrap_or_else(|| "–".into());
    let path_or = |p: &Option<PathBuf>, default: &str| {
        p.clone().unwrap_or_else(|| db.data_dir.join(default)).display().to_string()
    };
    let config = vec![
        ("database", crate::serve::redact_url(&url)),
        ("data_dir", db.data_dir.display().to_string()),
        ("pg_pool_size", db.pg_pool_size.to_string()),
        ("master_key", key),
        ("addr", serve.addr.to_string()),
        ("public_url", public_url),
        ("metrics_addr", serve.metrics_addr.to_string()),
        ("site_root", serve.site_root.clone()),
        ("trusted_proxies", or_none(&serve.trusted_proxies)),
        ("relay_allow", serve.relay_allow.as_ref().map_or_else(|| "–".into(), ToString::to_string)),
        ("outbox_file", path_or(&serve.outbox_file, "notifications.jsonl")),
        ("audit_checkpoint_file", path_or(&serve.audit_checkpoint_file, "audit-checkpoints.jsonl")),
        ("audit_checkpoint_secs", serve.audit_checkpoint_secs.to_string()),
        ("purge_interval_secs", serve.purge_interval_secs.to_string()),
        ("bulk_stale_secs", serve.bulk_stale_secs.to_string()),
        ("kek_stale_secs", serve.kek_stale_secs.to_string()),
        ("header_timeout_secs", serve.header_timeout_secs.to_string()),
        ("body_timeout_secs", serve.body_timeout_secs.to_string()),
        ("request_timeout_secs", serve.request_timeout_secs.to_string()),
        ("max_connections", serve.max_connections.to_string()),
        ("max_in_flight", serve.max_in_flight.to_string()),
        ("shutdown_timeout_secs", serve.shutdown_timeout_secs.to_string()),
        ("max_inflight_body_bytes", serve.max_inflight_body_bytes.to_string()),
        ("outbox_poll_ms", serve.outbox_poll_ms.to_string()),
        ("outbox_max_attempts", serve.outbox_max_attempts.to_string()),
        ("outbox_base_delay_ms", serve.outbox_base_delay_ms.to_string()),
        ("outbox_max_delay_ms", serve.outbox_max_delay_ms.to_string()),
        ("outbox_lease_ms", serve.outbox_lease_ms.to_string()),
        ("outbox_timeout_ms", serve.outbox_timeout_ms.to_string()),
        ("redact_fields", serve.redact_fields.clone().unwrap_or_else(|| "(the default list)".into())),
    ];
    Report { config, problems }
}

/// `SIGNET_LOG_FORMAT` and where traces go (`OTEL_*`), as `serve` reads them.
fn telemetry(log_format: &str, report: &mut Report) {
    use crate::otel::{LogFormat, settings};
    match log_format.parse::<LogFormat>() {
        Ok(f) => report.config.push(("log_format", f.as_str().into())),
        Err(e) => {
            report.config.push(("log_format", "(invalid)".into()));
            report.problems.push(e);
        }
    }
    match settings::otlp_from_env() {
        Ok(Some(otlp)) => report.config.push(("otlp_traces", otlp.shown)),
        Ok(None) => report.config.push(("otlp_traces", "off".into())),
        Err(e) => {
            report.config.push(("otlp_traces", "(invalid)".into()));
            report.problems.push(e);
        }
    }
}

/// The URL `serve` would open, computed without creating anything.
fn effective_url(db: &DbArgs) -> String {
    match db.database_url.as_deref().filter(|u| !u.is_empty()) {
        Some(u) => u.to_owned(),
        None => format!("sqlite://{}?mode=rwc", db.data_dir.join("signet.db").display()),
    }
}

/// The database answers. A SQLite file that does not exist yet is created
/// at the first start, which needs its directory (or, for the default, the
/// data directory is created with it); nothing is created here.
async fn check_database(url: &str, explicit: bool, problems: &mut Vec<String>) {
    if let Some(rest) = url.strip_prefix("sqlite://") {
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        if !path.is_empty() && !path.contains(":memory:") && !Path::new(path).exists() {
            let creates = query.split('&').any(|p| p == "mode=rwc");
            let dir = Path::new(path).parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
            if !creates {
                problems
                    .push(format!("DATABASE_URL: the SQLite file {path} does not exist (add ?mode=rwc to create it)"));
            } else if explicit && !dir.is_dir() {
                problems.push(format!(
                    "DATABASE_URL: cannot reach the database: directory {} does not exist",
                    dir.display()
                ));
            }
            return;
        }
    }
    let reached = tokio::time::timeout(Duration::from_secs(10), async {
        let db = domain::db::connect(url).await?;
        db.ping().await?;
        db.close().await
    })
    .await;
    let url = crate::serve::redact_url(url);
    match reached {
        Ok(Ok(())) => {}
        Ok(Err(e)) => problems.push(format!("DATABASE_URL: cannot reach the database at {url}: {e}")),
        Err(_) => problems.push(format!("DATABASE_URL: cannot reach the database at {url}: no answer within 10 s")),
    }
}

/// Where the master key comes from (never the key), checking that it
/// reads as a key and that only its owner can read its file.
fn master_key(db: &DbArgs, problems: &mut Vec<String>) -> String {
    if let Some(path) = &db.master_key_file {
        check_key_file(path, "SIGNET_MASTER_KEY_FILE", problems);
        return format!("file {}", path.display());
    }
    if let Ok(encoded) = std::env::var("SIGNET_MASTER_KEY") {
        if domain::crypto::MasterKey::from_base64(&encoded).is_err() {
            problems.push("SIGNET_MASTER_KEY is not base64 of 32 bytes".into());
        }
        return "SIGNET_MASTER_KEY (the environment)".into();
    }
    let path = db.data_dir.join("master.key");
    if path.exists() {
        check_key_file(&path, "the generated master key", problems);
        return format!("file {} (generated)", path.display());
    }
    format!("none yet: serve generates {} on a database without sealed data", path.display())
}

fn check_key_file(path: &Path, what: &str, problems: &mut Vec<String>) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path) {
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                problems.push(format!(
                    "{what} {} is readable by group or others (mode {mode:04o}); chmod 600 it",
                    path.display()
                ));
            }
        }
    }
    match std::fs::read_to_string(path).map(zeroize::Zeroizing::new) {
        Err(e) => problems.push(format!("{what}: cannot read {}: {e}", path.display())),
        Ok(text) => {
            if domain::crypto::MasterKey::from_base64(&text).is_err() {
                problems.push(format!("{what}: {} is not base64 of 32 bytes", path.display()));
            }
        }
    }
}

/// Whether two listeners would share a socket: the same port on the same
/// address, or on any address when either is unspecified (`0.0.0.0`).
/// Port 0 picks a free port, so it never collides.
fn collides(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() != 0 && a.port() == b.port() && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listeners_collide_on_one_port_of_one_or_every_address() {
        let a = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert!(collides(a("127.0.0.1:3000"), a("127.0.0.1:3000")));
        assert!(collides(a("0.0.0.0:3000"), a("127.0.0.1:3000")));
        assert!(collides(a("10.0.0.1:3000"), a("0.0.0.0:3000")));
        assert!(!collides(a("127.0.0.1:9464"), a("127.0.0.1:3000")));
        assert!(!collides(a("10.0.0.1:3000"), a("127.0.0.1:3000")));
        assert!(!collides(a("127.0.0.1:0"), a("127.0.0.1:0")));
    }
}
