//! The operator CLI (docs/contract.md §2). Every command acts directly on the
//! database, is audited as `cli`, and with `--json` prints exactly one JSON
//! value on stdout.

mod access;
mod commands;
mod event;
mod evidence;
mod jobs;
mod kek;
mod open;
mod output;
mod quarantine;
mod registry;
mod retention;
mod retry_policy;
pub mod send;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::config::{DbArgs, ServeArgs};

#[derive(Parser, Debug)]
#[command(
    name = "signet",
    version,
    about = "Receive webhooks safely: scoped keys, verified intake, exactly-once effects."
)]
pub struct Cli {
    /// Print exactly one JSON value on stdout.
    #[arg(long, global = true)]
    pub json: bool,
    /// Log lines on stderr: `text` or `json` (JSON lines carrying the trace
    /// id while traces are exported).
    #[arg(long, env = "SIGNET_LOG_FORMAT", global = true, default_value = "text")]
    pub log_format: String,
    #[command(flatten)]
    pub db: DbArgs,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the server (the default).
    Serve(ServeArgs),
    /// Run database migrations and exit.
    Migrate,
    /// The configuration `serve` would run with.
    #[command(subcommand)]
    Config(ConfigCmd),
    /// Tenants (clinics).
    #[command(subcommand)]
    Tenant(TenantCmd),
    /// Endpoints of a tenant.
    #[command(subcommand)]
    Endpoint(EndpointCmd),
    /// Signing keys.
    #[command(subcommand)]
    Key(KeyCmd),
    /// Console users.
    #[command(subcommand)]
    User(UserCmd),
    /// API tokens for /api/v1.
    #[command(subcommand)]
    Token(TokenCmd),
    /// The key-encryption key ring.
    #[command(subcommand)]
    Kek(KekCmd),
    /// Every background job: who holds each lease, the latest KEK rewrap and
    /// the latest bulk releases, with status and progress.
    Jobs,
    /// The audit log.
    #[command(subcommand)]
    Audit(AuditCmd),
    /// One event's whole story.
    #[command(subcommand)]
    Event(EventCmd),
    /// Quarantined events: list, release, discard.
    #[command(subcommand)]
    Quarantine(QuarantineCmd),
    /// A tenant's retry policy (versioned).
    #[command(subcommand, name = "retry-policy")]
    RetryPolicy(RetryPolicyCmd),
    /// Dedup and body retention, redelivery horizons, and the purge.
    #[command(subcommand)]
    Retention(RetentionCmd),
    /// Drills: the design's test matrix, run against this database through the
    /// real receiver.
    #[command(subcommand)]
    Drill(DrillCmd),
    /// Signed sign-off evidence: export, verify, the public key.
    #[command(subcommand)]
    Evidence(EvidenceCmd),
    /// Provider side: sign and post a webhook with retries (needs no database).
    Send {
        /// The receiver URL, e.g. http://127.0.0.1:3000/hooks/clinic-a/reminders
        url: String,
        #[arg(long)]
        scheme: String,
        /// The endpoint key's secret (`whsec_…`), or for standard-webhooks a
        /// `v1a` private key (`whsk_…`), which signs `v1a`. Prefer
        /// SIGNET_SEND_SECRET: command lines are visible to other local users.
        #[arg(long, env = "SIGNET_SEND_SECRET", hide_env_values = true)]
        secret: String,
        /// Body file; default: stdin.
        #[arg(long)]
        file: Option<std::path::PathBuf>,
        /// The message id (standard-webhooks `webhook-id`, GitHub delivery id).
        /// Stripe carries the event id in the body's `id`. Default: generated.
        #[arg(long)]
        event_id: Option<String>,
        /// `X-GitHub-Event` for the github scheme.
        #[arg(long)]
        github_event: Option<String>,
        /// Scheme hmac: sign as this preset does.
        #[arg(long, value_parser = ["dvir", "shopify", "slack"], conflicts_with = "profile")]
        preset: Option<String>,
        /// Scheme hmac: sign as this profile (JSON file) describes.
        #[arg(long)]
        profile: Option<std::path::PathBuf>,
        #[arg(long, default_value_t = 8)]
        max_attempts: u32,
        /// First backoff ceiling in milliseconds (doubles per attempt).
        #[arg(long, default_value_t = 500)]
        base_delay_ms: u64,
        /// Backoff cap in milliseconds; a longer `Retry-After` is cut to it.
        #[arg(long, default_value_t = 30_000)]
        max_delay_ms: u64,
        /// PEM file of extra CA certificates to trust for https receivers
        /// (a private CA); the public web roots are always trusted.
        #[arg(long)]
        ca_cert: Option<std::path::PathBuf>,
    },
}

#[derive(Subcommand, Debug)]
pub enum ConfigCmd {
    /// Print the effective configuration (no secrets) and one line per
    /// problem: an unreachable database, a master key file others can read,
    /// metrics on the public address, plain http on a non-loopback bind.
    /// Exit 0 when good, 1 otherwise. Takes `serve`'s settings.
    Check(ServeArgs),
}

#[derive(Subcommand, Debug)]
pub enum TenantCmd {
    Create {
        tenant: String,
        #[arg(long)]
        name: Option<String>,
        #[arg(long)]
        notify_url: Option<String>,
    },
    List,
}

#[derive(Subcommand, Debug)]
pub enum EndpointCmd {
    Create {
        tenant: String,
        endpoint: String,
        #[arg(long)]
        scheme: String,
        /// Comma-separated; omitted: any event type.
        #[arg(long, value_delimiter = ',')]
        event_types: Option<Vec<String>>,
        #[arg(long, default_value_t = domain::registry::DEFAULT_TOLERANCE_SECS)]
        tolerance_secs: i64,
        #[arg(long, default_value_t = domain::registry::endpoints::DEFAULT_MAX_BODY_BYTES)]
        max_body_bytes: i64,
        /// Scheme hmac: a sender's published format.
        #[arg(long, value_parser = ["dvir", "shopify", "slack"], conflicts_with = "profile")]
        preset: Option<String>,
        /// Scheme hmac: a JSON file with the profile (see docs/providers.md,
        /// "HMAC profiles"), or `{"preset": "…"}`.
        #[arg(long)]
        profile: Option<std::path::PathBuf>,
    },
    List {
        tenant: String,
    },
    /// The compound key for events that carry no id: envelope fields such as
    /// `type,data.reminder_id,occurred_at`. Without one (the default), such
    /// events are quarantined as `missing_event_id`. Versioned and audited.
    EventKey {
        tenant: String,
        endpoint: String,
        /// Comma-separated field paths (`type`, `occurred_at`, `tenant`,
        /// `data.<name>`); omitted with `--none`, or to show the key.
        #[arg(long, value_delimiter = ',', conflicts_with = "none")]
        fields: Option<Vec<String>>,
        /// Remove the key: events without an id are quarantined again.
        #[arg(long)]
        none: bool,
        /// Why (required for a change).
        #[arg(long)]
        reason: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
pub enum KeyCmd {
    /// Create a key; its secret is printed exactly once.
    Provision {
        tenant: String,
        endpoint: String,
        #[arg(long)]
        owner: Option<String>,
        #[arg(long)]
        rotation_owner: Option<String>,
        /// Narrower than the endpoint's types (comma-separated).
        #[arg(long, value_delimiter = ',')]
        event_types: Option<Vec<String>>,
        /// Approve the scope at once, recorded under this reviewer's name.
        #[arg(long)]
        approve_as: Option<String>,
        #[command(flatten)]
        v1a: V1aArgs,
    },
    Approve {
        key_id: String,
        #[arg(long)]
        reviewer: String,
        #[arg(long, default_value = "")]
        comment: String,
    },
    Reject {
        key_id: String,
        #[arg(long)]
        reviewer: String,
        #[arg(long)]
        comment: String,
    },
    /// Create a replacement; its secret is printed exactly once.
    Rotate {
        key_id: String,
        #[arg(long, default_value_t = domain::registry::keys::DEFAULT_OVERLAP_SECS)]
        overlap_secs: i64,
        #[arg(long)]
        approve_as: Option<String>,
        #[command(flatten)]
        v1a: V1aArgs,
    },
    /// Revoke at once. A reason is required.
    Revoke {
        key_id: String,
        #[arg(long)]
        reason: Option<String>,
    },
    List {
        #[arg(long)]
        tenant: Option<String>,
    },
}

/// A standard-webhooks `v1a` (Ed25519) credential instead of an HMAC secret.
#[derive(clap::Args, Debug)]
pub struct V1aArgs {
    /// The provider's public key, `whpk_` + base64 of 32 bytes. Stored in
    /// clear; nothing secret is printed.
    #[arg(long, conflicts_with = "generate_ed25519")]
    pub public_key: Option<String>,
    /// Generate a pair: the public key is stored, the private key (`whsk_…`)
    /// is printed once for the provider and kept only sealed.
    #[arg(long)]
    pub generate_ed25519: bool,
}

impl V1aArgs {
    pub fn credential(self) -> Option<domain::registry::keys::NewCredential> {
        use domain::registry::keys::NewCredential;
        match (self.public_key, self.generate_ed25519) {
            (Some(pk), _) => Some(NewCredential::PublicKey(pk)),
            (None, true) => Some(NewCredential::GenerateEd25519),
            (None, false) => None,
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum UserCmd {
    /// Password from stdin; when stdin is empty a generated one is printed once.
    Create {
        username: String,
        #[arg(long)]
        role: String,
        #[arg(long)]
        tenant: Option<String>,
    },
    List,
}

#[derive(Subcommand, Debug)]
pub enum TokenCmd {
    /// The token is printed exactly once.
    Create {
        #[arg(long)]
        name: String,
        #[arg(long)]
        role: String,
        #[arg(long)]
        tenant: Option<String>,
    },
    Revoke {
        token_id: String,
    },
    List,
}

#[derive(Subcommand, Debug)]
pub enum KekCmd {
    /// Add a KEK version and reseal every sealed column under it (signing
    /// keys, service keys, outbox payloads, event bodies), online. When rows
    /// still wait under an older version (an interrupted run), resumes that
    /// instead of adding another version.
    Rotate,
    /// Reseal every sealed column under the newest version (or resume the
    /// rewrap that was interrupted), with progress on stderr.
    Rewrap,
    /// Every KEK version with the rows it seals, the retired ones, and the
    /// latest rewrap.
    Status,
    /// Stop the latest rewrap (running, interrupted or failed) for good: the
    /// rows it resealed stay resealed; the next `kek rewrap` starts anew.
    Cancel,
    /// Remove a version from the ring for good: refused while any row still
    /// uses it, for the newest version, and for a minute after a rotation.
    Retire { version: u32 },
}

#[derive(Subcommand, Debug)]
pub enum AuditCmd {
    /// Recompute the keyed chain; exits non-zero at the first broken entry,
    /// or when the chain no longer holds a signed checkpoint.
    Verify {
        /// A signed checkpoint saved earlier (`signet audit checkpoint`, or
        /// `audit.checkpoint` of an evidence bundle).
        #[arg(long)]
        checkpoint: Option<std::path::PathBuf>,
        /// A file of signed checkpoints, one JSON a line (what `serve`
        /// appends to `SIGNET_AUDIT_CHECKPOINT_FILE`): the chain must still
        /// hold every one.
        #[arg(long)]
        checkpoints: Option<std::path::PathBuf>,
        /// The evidence public key to check the checkpoints' signatures with
        /// (default: this deployment's own).
        #[arg(long)]
        public_key: Option<std::path::PathBuf>,
    },
    /// Print a checkpoint of the chain's head, signed with the evidence key;
    /// keep it outside the database.
    Checkpoint,
}

#[derive(Subcommand, Debug)]
pub enum DrillCmd {
    /// Run every drill now; exits non-zero unless all pass. Stored and
    /// audited.
    Run,
    /// Past runs, newest first.
    List {
        #[arg(long, default_value_t = 20)]
        limit: u64,
    },
    /// Internal: the process `interrupted_before_commit` kills.
    #[command(hide = true)]
    Child,
}

#[derive(Subcommand, Debug)]
pub enum EvidenceCmd {
    /// Write evidence.json, evidence.html, manifest.json and manifest.sig.
    Export {
        /// Output directory (created owner-only if missing; must be empty unless --force).
        #[arg(long)]
        out: std::path::PathBuf,
        /// Limit every section to one tenant.
        #[arg(long)]
        tenant: Option<String>,
        /// Run the drills first, so the bundle carries a fresh run.
        #[arg(long)]
        run_drills: bool,
        /// Replace the bundle's files in a non-empty directory (whatever is at
        /// their names, a symlink included, is replaced, never written through).
        #[arg(long)]
        force: bool,
    },
    /// Check every digest and the signature; exits non-zero on any mismatch.
    Verify {
        dir: std::path::PathBuf,
        /// The deployment's public key (`signet evidence public-key`), base64
        /// or PEM. Without it, only integrity is checked, against the key the
        /// bundle itself names.
        #[arg(long)]
        public_key: Option<std::path::PathBuf>,
    },
    /// The evidence-signing public key (Ed25519, base64; --pem for PEM).
    PublicKey {
        #[arg(long)]
        pem: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum EventCmd {
    /// Every answer to its deliveries, its claim, replay records, quarantine
    /// and triage, reminder transition, outbox intents and audit entries
    /// (never the body). `--json` prints the API's object.
    Show { tenant: String, endpoint: String, event_id: String },
}

#[derive(Subcommand, Debug)]
pub enum QuarantineCmd {
    /// Open entries (or `--status all|released|discarded`), newest first.
    List {
        #[arg(long)]
        tenant: Option<String>,
        #[arg(long)]
        reason: Option<String>,
        #[arg(long)]
        status: Option<String>,
    },
    /// Re-run the handler; exactly once even if released concurrently.
    Release {
        id: String,
        #[arg(long)]
        reason: String,
    },
    /// Give up on the event (it stays claimed: retries remain duplicates).
    Discard {
        id: String,
        #[arg(long)]
        reason: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum RetryPolicyCmd {
    /// The current policy and its history.
    Show { tenant: String },
    /// Move one or more tenants (all or none) to `--policy`.
    /// Enabling is refused (exit 1, `rollout_order`) until a drill run passed
    /// on this build and an approved bundle covers the tenants' keys.
    Set {
        #[arg(required = true)]
        tenants: Vec<String>,
        /// `enabled` or `disabled`.
        #[arg(long)]
        policy: String,
        #[arg(long)]
        reason: String,
        /// Break-glass (one tenant): when the rollout order refuses, record
        /// an override request that a second person approves
        /// (`approve-override`); exit 0 with the request.
        #[arg(long)]
        override_reason: Option<String>,
        #[command(flatten)]
        rollout: crate::config::RolloutArgs,
    },
    /// A tenant's break-glass override requests, newest first.
    Overrides { tenant: String },
    /// Approve a pending override as a second person: enables retries.
    ApproveOverride {
        tenant: String,
        id: String,
        /// Who approves (not the requester).
        #[arg(long)]
        reviewer: String,
        #[arg(long, default_value = "")]
        comment: String,
    },
    /// Reject a pending override.
    RejectOverride {
        tenant: String,
        id: String,
        #[arg(long)]
        reviewer: String,
        #[arg(long)]
        comment: String,
    },
    /// Restore the previous version's value (as a new version).
    Rollback {
        tenant: String,
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        rollout: crate::config::RolloutArgs,
    },
}

#[derive(Subcommand, Debug)]
pub enum RetentionCmd {
    /// Every endpoint's retention and the horizons, or one endpoint's history.
    Show { tenant: Option<String>, endpoint: Option<String> },
    /// Change an endpoint's retention (durations such as 30d, 36h, 1d 12h).
    Set {
        tenant: String,
        endpoint: String,
        /// How long claims are kept (never below the scheme's horizon).
        #[arg(long)]
        dedup: Option<String>,
        /// How long bodies are kept (at most the dedup retention).
        #[arg(long)]
        body: Option<String>,
        #[arg(long)]
        reason: String,
        /// Record a dedup retention below the scheme's manual resend window
        /// (audited; a finding in every evidence bundle while it lasts).
        #[arg(long)]
        accept_risk: bool,
    },
    /// Change a scheme's redelivery horizon (the floor for dedup retention).
    Horizon {
        scheme: String,
        duration: String,
        #[arg(long)]
        reason: String,
    },
    /// Run the purge once now (`signet serve` runs it periodically).
    Purge,
}

pub fn parse() -> Cli {
    Cli::parse()
}

impl Cli {
    /// `serve` (explicit or by default) rather than a one-shot command.
    pub fn is_server(&self) -> bool {
        matches!(self.command, None | Some(Command::Serve(_)))
    }
}

pub async fn run(cli: Cli) -> ExitCode {
    let json = cli.json;
    // Its own exit code and output: a problem is a finding, not an error.
    if let Some(Command::Config(ConfigCmd::Check(args))) = &cli.command {
        return crate::config_check::run(json, &cli.db, args, &cli.log_format).await;
    }
    match commands::dispatch(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            output::error(json, &e);
            ExitCode::FAILURE
        }
    }
}
