//! Configuration: flags win over environment variables, which win over
//! defaults (docs/contract.md §1). Loaded once in `main` and passed down.

use std::{
    io::Write,
    net::SocketAddr,
    path::{Path, PathBuf},
};

use clap::Args;
use domain::crypto::MasterKey;
use sea_orm::{DatabaseConnection, EntityTrait, PaginatorTrait};

/// Settings shared by every command that touches the database.
#[derive(Args, Debug, Clone)]
pub struct DbArgs {
    /// Database URL: `sqlite://…` (default) or `postgres://…`.
    #[arg(long, env = "DATABASE_URL", global = true)]
    pub database_url: Option<String>,
    /// Where the SQLite database and the generated master key live.
    #[arg(long, env = "SIGNET_DATA_DIR", default_value = "./data", global = true)]
    pub data_dir: PathBuf,
    /// File holding the master key (base64 of 32 bytes). `SIGNET_MASTER_KEY`
    /// may carry the key itself instead.
    #[arg(long, env = "SIGNET_MASTER_KEY_FILE", global = true)]
    pub master_key_file: Option<PathBuf>,
    /// PostgreSQL: connections this process opens at most (SQLite's pool is
    /// fixed). Several processes on one database share its `max_connections`.
    #[arg(
        long,
        env = "SIGNET_PG_POOL_SIZE",
        global = true,
        default_value_t = domain::db::DEFAULT_PG_POOL_SIZE,
        value_parser = clap::value_parser!(u32).range(4..=1000)
    )]
    pub pg_pool_size: u32,
}

/// The rollout gate's settings, for `serve` and the CLI's retry-policy
/// commands alike.
#[derive(Args, Debug, Clone)]
pub struct RolloutArgs {
    /// Enabling retries needs a drill run that passed on this build within
    /// this many days.
    #[arg(
        long,
        env = "SIGNET_ROLLOUT_DRILL_MAX_AGE_DAYS",
        default_value_t = domain::rollout::DEFAULT_DRILL_MAX_AGE_DAYS,
        value_parser = clap::value_parser!(u32).range(1..=90)
    )]
    pub rollout_drill_max_age_days: u32,
}

/// Settings for `serve`.
#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    #[command(flatten)]
    pub rollout: RolloutArgs,
    /// Address to listen on.
    #[arg(long, env = "SIGNET_ADDR", default_value = "127.0.0.1:3000")]
    pub addr: SocketAddr,
    /// The URL people use to reach Signet (setup link, Secure cookies when
    /// https). Default: http://<addr>.
    #[arg(long, env = "SIGNET_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Directory with the built web assets (`pkg/`).
    #[arg(long, env = "LEPTOS_SITE_ROOT", default_value = "target/site")]
    pub site_root: String,
    /// Comma-separated JSON field names masked when a person views a
    /// quarantined body (default: common personal-data fields).
    #[arg(long, env = "SIGNET_REDACT_FIELDS")]
    pub redact_fields: Option<String>,
    /// File sink for tenants without a notify URL (JSON lines). Default:
    /// `$SIGNET_DATA_DIR/notifications.jsonl`.
    #[arg(long, env = "SIGNET_OUTBOX_FILE")]
    pub outbox_file: Option<PathBuf>,
    /// File the signed audit checkpoints are appended to (JSON lines),
    /// outside the database. Default:
    /// `$SIGNET_DATA_DIR/audit-checkpoints.jsonl`.
    #[arg(long, env = "SIGNET_AUDIT_CHECKPOINT_FILE")]
    pub audit_checkpoint_file: Option<PathBuf>,
    /// Seconds between audit checkpoints while nothing sensitive happens
    /// (one follows every sensitive action within a second).
    #[arg(
        long,
        env = "SIGNET_AUDIT_CHECKPOINT_SECS",
        default_value_t = 300,
        value_parser = clap::value_parser!(u64).range(1..=86_400)
    )]
    pub audit_checkpoint_secs: u64,
    /// Seconds between retention purges (0: never; run `signet retention purge`).
    #[arg(long, env = "SIGNET_PURGE_INTERVAL_SECS", default_value_t = 3600)]
    pub purge_interval_secs: u64,
    /// A running bulk release whose runner has not reported for this long
    /// (its process died) is shown as interrupted, and can be resumed.
    #[arg(
        long,
        env = "SIGNET_BULK_STALE_SECS",
        default_value_t = 60,
        value_parser = clap::value_parser!(u64).range(2..=86_400)
    )]
    pub bulk_stale_secs: u64,
    /// A running KEK rewrap whose runner has not reported for this long (its
    /// process died) reads as interrupted on `/kek`, a person can resume it,
    /// and the system resumes it on its own (`kek::resume_stale`).
    #[arg(
        long,
        env = "SIGNET_KEK_STALE_SECS",
        default_value_t = (domain::kek::DEFAULT_STALE_AFTER_MS / 1000) as u64,
        value_parser = clap::value_parser!(u64).range(2..=86_400)
    )]
    pub kek_stale_secs: u64,
    /// How often an idle outbox worker looks for due intents.
    #[arg(long, env = "SIGNET_OUTBOX_POLL_MS", default_value_t = 1000)]
    pub outbox_poll_ms: u64,
    /// Sends per intent before it is `dead` (on-call can retry it by hand).
    #[arg(
        long,
        env = "SIGNET_OUTBOX_MAX_ATTEMPTS",
        default_value_t = 8,
        value_parser = clap::value_parser!(i32).range(1..=100)
    )]
    pub outbox_max_attempts: i32,
    /// First backoff ceiling (doubles per attempt, full jitter).
    #[arg(long, env = "SIGNET_OUTBOX_BASE_DELAY_MS", default_value_t = 1000)]
    pub outbox_base_delay_ms: i64,
    /// Backoff cap.
    #[arg(long, env = "SIGNET_OUTBOX_MAX_DELAY_MS", default_value_t = 300_000)]
    pub outbox_max_delay_ms: i64,
    /// How long a worker owns an intent it is sending; after that (a crash)
    /// another worker resends it with the same idempotency key.
    #[arg(long, env = "SIGNET_OUTBOX_LEASE_MS", default_value_t = 60_000)]
    pub outbox_lease_ms: u64,
    /// How long a process holds a background job (outbox relay, purge,
    /// gauge samples, maintenance) after its last renewal; renewed every
    /// third of it. A killed holder's jobs move to another process after it.
    #[arg(
        long,
        env = "SIGNET_JOB_LEASE_MS",
        default_value_t = 10_000,
        value_parser = clap::value_parser!(u64).range(300..=600_000)
    )]
    pub job_lease_ms: u64,
    /// Relay request timeout.
    #[arg(long, env = "SIGNET_OUTBOX_TIMEOUT_MS", default_value_t = 10_000)]
    pub outbox_timeout_ms: u64,
    /// Comma-separated CIDRs (or addresses) the outbox relay may reach
    /// although they are loopback, private, link-local, unique-local or
    /// otherwise internal. Default: none.
    #[arg(long, env = "SIGNET_RELAY_ALLOW", value_parser = clap::value_parser!(crate::egress::RelayAllow))]
    pub relay_allow: Option<crate::egress::RelayAllow>,
    /// A client must send a request's whole head within this; it is also how
    /// long an idle keep-alive connection stays open.
    #[arg(
        long,
        env = "SIGNET_HEADER_TIMEOUT_SECS",
        default_value_t = 10,
        value_parser = clap::value_parser!(u64).range(1..=300)
    )]
    pub header_timeout_secs: u64,
    /// A webhook body must arrive within this, or the delivery is refused
    /// (400 `body_incomplete`) and nothing is processed.
    #[arg(
        long,
        env = "SIGNET_BODY_TIMEOUT_SECS",
        default_value_t = 30,
        value_parser = clap::value_parser!(u64).range(1..=300)
    )]
    pub body_timeout_secs: u64,
    /// Any request not answered within this gets 503 with `Retry-After`.
    #[arg(
        long,
        env = "SIGNET_REQUEST_TIMEOUT_SECS",
        default_value_t = 60,
        value_parser = clap::value_parser!(u64).range(1..=3600)
    )]
    pub request_timeout_secs: u64,
    /// Open connections at most; beyond it new ones wait to be accepted.
    #[arg(
        long,
        env = "SIGNET_MAX_CONNECTIONS",
        default_value_t = 4096,
        value_parser = clap::value_parser!(u64).range(1..=1_000_000)
    )]
    pub max_connections: u64,
    /// Where `/metrics` is served: its own listener, loopback by default,
    /// because its labels name every tenant and endpoint. Never on the
    /// public address.
    #[arg(long, env = "SIGNET_METRICS_ADDR", default_value = "127.0.0.1:9464")]
    pub metrics_addr: SocketAddr,
    /// On SIGTERM / SIGINT: stop accepting, let requests in flight finish and
    /// the background work reach a safe point, and exit within this many
    /// seconds.
    #[arg(
        long,
        env = "SIGNET_SHUTDOWN_TIMEOUT_SECS",
        default_value_t = 30,
        value_parser = clap::value_parser!(u64).range(1..=3600)
    )]
    pub shutdown_timeout_secs: u64,
    /// Webhook deliveries being processed at once at most; beyond it `/hooks`
    /// answers 503 with `Retry-After` at once instead of queueing.
    #[arg(
        long,
        env = "SIGNET_MAX_IN_FLIGHT",
        default_value_t = 512,
        value_parser = clap::value_parser!(u64).range(1..=100_000)
    )]
    pub max_in_flight: u64,
    /// Reverse proxies (comma-separated CIDR blocks or addresses) whose
    /// `Forwarded` / `X-Forwarded-For` name the client for sign-in
    /// throttling. Unset: the socket peer is the client.
    #[arg(long, env = "SIGNET_TRUSTED_PROXIES")]
    pub trusted_proxies: Option<String>,
    /// Webhook body bytes held in memory at once, over all deliveries
    /// (bodies are buffered before their signature is checked); past it
    /// `/hooks` answers 503 with `Retry-After`. The last eighth is kept for
    /// bodies up to 64 KiB. At least 16 MiB, so the largest body an endpoint
    /// may allow (10 MiB) fits.
    #[arg(
        long,
        env = "SIGNET_MAX_INFLIGHT_BODY_BYTES",
        default_value_t = DEFAULT_MAX_INFLIGHT_BODY_BYTES,
        value_parser = clap::value_parser!(u64).range(16 << 20..=1 << 40)
    )]
    pub max_inflight_body_bytes: u64,
}

/// `SIGNET_MAX_INFLIGHT_BODY_BYTES`' default: 64 MiB.
pub const DEFAULT_MAX_INFLIGHT_BODY_BYTES: u64 = 64 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot create data directory {0}: {1}")]
    DataDir(PathBuf, std::io::Error),
    #[error("cannot read master key file {0}: {1}")]
    ReadKey(PathBuf, std::io::Error),
    #[error("master key in {0} is not base64 of 32 bytes")]
    BadKey(String),
    #[error(
        "the database already holds secrets sealed under a master key, but {0} does not exist; \
         restore that file or set SIGNET_MASTER_KEY_FILE / SIGNET_MASTER_KEY. Nothing was changed"
    )]
    MissingKey(PathBuf),
    #[error("cannot write master key file {0}: {1}")]
    WriteKey(PathBuf, std::io::Error),
    #[error("database error: {0}")]
    Db(#[from] sea_orm::DbErr),
}

impl DbArgs {
    /// The effective database URL (default: SQLite under the data dir).
    pub fn url(&self) -> Result<String, ConfigError> {
        if let Some(u) = self.database_url.as_deref().filter(|u| !u.is_empty()) {
            if let Some(file) = sqlite_file(u) {
                create_private_file(&file).map_err(|e| ConfigError::DataDir(file.clone(), e))?;
                warn_if_readable_by_others(&file, "the SQLite database");
            }
            return Ok(u.to_owned());
        }
        private_dir(&self.data_dir).map_err(|e| ConfigError::DataDir(self.data_dir.clone(), e))?;
        warn_if_readable_by_others(&self.data_dir, "the data directory");
        let file = self.data_dir.join("signet.db");
        // Created here, owner-only, before SQLite opens it (its -wal and -shm
        // files take the database file's permissions).
        create_private_file(&file).map_err(|e| ConfigError::DataDir(file.clone(), e))?;
        warn_if_readable_by_others(&file, "the SQLite database");
        Ok(format!("sqlite://{}?mode=rwc", file.display()))
    }

    /// Where the data and the master key live, as [`Self::master_key`]
    /// finds them (evidence bundles show their modes and owners).
    pub fn deployment_files(&self) -> domain::evidence::files::DeploymentFiles {
        let from_env = self.master_key_file.is_none() && std::env::var_os("SIGNET_MASTER_KEY").is_some();
        domain::evidence::files::DeploymentFiles {
            data_dir: Some(self.data_dir.clone()),
            master_key_file: match &self.master_key_file {
                Some(path) => Some(path.clone()),
                None if from_env => None,
                None => Some(self.data_dir.join("master.key")),
            },
            master_key_from_env: from_env,
        }
    }

    /// Finds the master key: the key file, then `SIGNET_MASTER_KEY`, then
    /// `$SIGNET_DATA_DIR/master.key`, which is created (mode 0600) only on a
    /// database that holds no sealed data yet.
    pub async fn master_key(&self, db: &DatabaseConnection) -> Result<MasterKey, ConfigError> {
        if let Some(path) = &self.master_key_file {
            return read_key_file(path);
        }
        if let Ok(encoded) = std::env::var("SIGNET_MASTER_KEY") {
            return MasterKey::from_base64(&encoded).map_err(|_| ConfigError::BadKey("SIGNET_MASTER_KEY".into()));
        }
        let path = self.data_dir.join("master.key");
        if path.exists() {
            return read_key_file(&path);
        }
        if domain::entity::kek_version::Entity::find().count(db).await? > 0 {
            return Err(ConfigError::MissingKey(path));
        }
        private_dir(&self.data_dir).map_err(|e| ConfigError::DataDir(self.data_dir.clone(), e))?;
        let (key, encoded) = MasterKey::generate();
        write_new_key_file(&path, encoded.as_bytes()).map_err(|e| ConfigError::WriteKey(path.clone(), e))?;
        tracing::warn!(
            path = %path.display(),
            "generated a master key for this data directory; production must supply its own \
             (SIGNET_MASTER_KEY_FILE) and keep it apart from the database backups"
        );
        Ok(key)
    }
}

fn read_key_file(path: &Path) -> Result<MasterKey, ConfigError> {
    let text =
        zeroize::Zeroizing::new(std::fs::read_to_string(path).map_err(|e| ConfigError::ReadKey(path.to_owned(), e))?);
    warn_if_readable_by_others(path, "the master key file");
    MasterKey::from_base64(&text).map_err(|_| ConfigError::BadKey(path.display().to_string()))
}

/// What Signet creates is owner-only, but what already exists keeps the
/// permissions its operator gave it (an upgrade never chmods); say so when
/// others can read it.
#[cfg(unix)]
pub fn warn_if_readable_by_others(path: &Path, what: &str) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path)
        && meta.permissions().mode() & 0o077 != 0
    {
        let fix = if meta.is_dir() { "chmod 700" } else { "chmod 600" };
        tracing::warn!(path = %path.display(), "{what} is readable by group or others; {fix} it");
    }
}
#[cfg(not(unix))]
pub fn warn_if_readable_by_others(_: &Path, _: &str) {}

/// The file a `sqlite://<path>?mode=rwc` URL lets SQLite create, so it can be
/// created owner-only first (`None` for other URLs and in-memory databases).
fn sqlite_file(url: &str) -> Option<PathBuf> {
    let rest = url.strip_prefix("sqlite://")?;
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let creates = query.split('&').any(|p| p == "mode=rwc");
    (creates && !path.is_empty() && !path.contains(":memory:")).then(|| PathBuf::from(path))
}

/// Creates the directory (and missing parents) owner-only (0700). An
/// existing directory keeps the permissions its operator gave it.
pub fn private_dir(path: &Path) -> std::io::Result<()> {
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        b.mode(0o700);
    }
    b.create(path)
}

/// Creates an empty owner-only (0600) file unless it exists already.
pub fn create_private_file(path: &Path) -> std::io::Result<()> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    match opts.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// Creates the file exclusively (never overwrites) with mode 0600.
fn write_new_key_file(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(path)?;
    f.write_all(contents)?;
    f.write_all(b"\n")?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn what_signet_creates_is_owner_only() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/data");
        private_dir(&dir).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&tmp.path().join("a")), 0o700);
        let file = dir.join("signet.db");
        create_private_file(&file).unwrap();
        assert_eq!(mode(&file), 0o600);
        // An existing file is left as it is (never truncated).
        std::fs::write(&file, b"kept").unwrap();
        create_private_file(&file).unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), b"kept");
        assert_eq!(sqlite_file("sqlite:///x/y.db?mode=rwc"), Some(PathBuf::from("/x/y.db")));
        assert_eq!(sqlite_file("sqlite:///x/y.db?mode=ro"), None);
        assert_eq!(sqlite_file("sqlite::memory:"), None);
        assert_eq!(sqlite_file("postgres://h/db"), None);
    }
}
