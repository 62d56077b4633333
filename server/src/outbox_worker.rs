//! The outbox relay: a job of `signet serve` ([`crate::jobs`]) that leases
//! due intents and hands them to a [`Notifier`], in the one process that
//! holds the relay's job lease. It stops with the server and resumes from
//! the database when started again.

use std::{future::Future, path::PathBuf, sync::Arc, time::Duration};

use domain::{
    outbox::{self, Delivery, RetryRule},
    receiver::faults::Faults,
    vault::Vault,
};
use sea_orm::DatabaseConnection;
use serde_json::json;
use tokio::io::AsyncWriteExt;
use tracing::{Instrument, field::Empty};
use views::outbox::OutboxStatus;

use crate::{
    egress::{self, GuardedResolver, RelayAllow},
    jobs::{Job, Next, Pace, Step},
    metrics::SendResult,
};

/// Why a send failed; `permanent` failures are not retried.
#[derive(Debug)]
pub struct SendFailure {
    pub message: String,
    pub permanent: bool,
    /// The relay's address was refused (`egress`): nothing was sent.
    pub refused: bool,
}

/// Where notifications go.
pub trait Notifier: Send + Sync + 'static {
    fn send(&self, d: &Delivery) -> impl Future<Output = Result<(), SendFailure>> + Send;
}

/// The message a notifier delivers (the same bytes on every attempt).
fn message(d: &Delivery) -> serde_json::Value {
    json!({
        "id": d.id,
        "tenant": d.tenant_slug,
        "kind": d.kind,
        "idempotency_key": d.idempotency_key,
        "payload": d.payload,
    })
}

/// POSTs JSON to the tenant's relay URL with `Idempotency-Key` = intent id,
/// only to addresses `egress` permits.
pub struct HttpRelay {
    client: reqwest::Client,
    allow: Arc<RelayAllow>,
}

impl HttpRelay {
    pub fn new(timeout: Duration, allow: RelayAllow) -> Result<Self, reqwest::Error> {
        let allow = Arc::new(allow);
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            // A proxy would make the connection (and the lookup) elsewhere.
            .no_proxy()
            .dns_resolver(Arc::new(GuardedResolver::new(allow.clone())))
            .build()?;
        Ok(HttpRelay { client, allow })
    }

    async fn post(&self, url: &str, d: &Delivery) -> Result<(), SendFailure> {
        // Stored before the https-or-loopback rule: refused, not used.
        let parsed = reqwest::Url::parse(url).ok().filter(|_| domain::registry::tenants::notify_url_allowed(url));
        let Some(url) = parsed else {
            return Err(SendFailure {
                message: "the tenant's notify URL is not https:// (or http:// to loopback); fix it and retry".into(),
                permanent: true,
                refused: false,
            });
        };
        egress::check_url(&url, &self.allow).map_err(refused)?;
        let mut req = self.client.post(url).header("Idempotency-Key", &d.id);
        // The send span's context, so the relay can continue the trace.
        if let Some(traceparent) = crate::otel::current_traceparent() {
            req = req.header("traceparent", traceparent);
        }
        let res = req.json(&message(d)).send().await;
        match res {
            Ok(r) if r.status().is_success() => Ok(()),
            Err(e) => match egress::refusal(&e) {
                Some(r) => Err(refused(r.clone())),
                // A timeout or a dropped connection is an uncertain outcome:
                // retried with the same key, never a new one.
                None => Err(SendFailure {
                    message: format!("relay unreachable or timed out: {}", without_url(&e)),
                    permanent: false,
                    refused: false,
                }),
            },
            Ok(r) => {
                let s = r.status();
                let retryable = s.is_server_error() || matches!(s.as_u16(), 408 | 409 | 425 | 429);
                Err(SendFailure { message: format!("relay answered {s}"), permanent: !retryable, refused: false })
            }
        }
    }
}

/// A refused target is a configuration problem, not a passing one: the intent
/// goes `dead` at once, saying why; on-call retries it once the URL or
/// `SIGNET_RELAY_ALLOW` is fixed.
fn refused(r: egress::Refused) -> SendFailure {
    SendFailure { message: r.to_string(), permanent: true, refused: true }
}

/// reqwest errors carry the URL, which may hold credentials; keep the kind only.
fn without_url(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timeout"
    } else if e.is_connect() {
        "connection failed"
    } else {
        "request failed"
    };
    kind.to_owned()
}

/// Appends one JSON line per notification to a local file, so a person
/// running `make run` can watch them arrive. The file is owner-only (0600)
/// and never holds a one-time code: an OTP line records the intent (its
/// request, channel and idempotency key), not the code, which only a relay
/// receives.
pub struct FileSink {
    path: PathBuf,
}

/// The file sink's line: the message without secrets.
fn file_line(d: &Delivery) -> String {
    let mut m = message(d);
    if let Some(code) = m.pointer_mut("/payload/code") {
        *code = json!("(withheld: one-time codes go to a relay only)");
    }
    let mut line = m.to_string();
    line.push('\n');
    line
}

impl FileSink {
    async fn append(&self, d: &Delivery) -> Result<(), SendFailure> {
        let line = file_line(d);
        let write = async {
            let mut opts = tokio::fs::OpenOptions::new();
            opts.create(true).append(true);
            #[cfg(unix)]
            opts.mode(0o600);
            let mut f = opts.open(&self.path).await?;
            f.write_all(line.as_bytes()).await?;
            f.flush().await
        };
        write.await.map_err(|e| SendFailure {
            message: format!("cannot write {}: {e}", self.path.display()),
            permanent: false,
            refused: false,
        })
    }
}

/// The built-in routing: the tenant's relay URL when it has one, else the
/// file sink.
pub struct Builtin {
    pub relay: HttpRelay,
    pub file: FileSink,
}

impl Builtin {
    pub fn new(file: PathBuf, timeout: Duration, allow: RelayAllow) -> Result<Self, String> {
        Ok(Builtin { relay: HttpRelay::new(timeout, allow).map_err(|e| e.to_string())?, file: FileSink { path: file } })
    }
}

impl Notifier for Builtin {
    async fn send(&self, d: &Delivery) -> Result<(), SendFailure> {
        match &d.notify_url {
            Some(url) => self.relay.post(url, d).await,
            None => self.file.append(d).await,
        }
    }
}

#[derive(Debug, Clone)]
pub struct WorkerConfig {
    pub poll: Duration,
    pub batch: u64,
    pub lease: Duration,
    pub rule: RetryRule,
}

/// The relay: claims due intents and sends them, a batch per step (leased,
/// `OUTBOX_RELAY`); a full batch steps again at once, an idle one waits for
/// the poll. A drain lets the batch in progress finish.
pub struct Relay<N> {
    pub db: DatabaseConnection,
    pub vault: Arc<Vault>,
    pub notifier: N,
    pub cfg: WorkerConfig,
    pub metrics: Arc<crate::metrics::Metrics>,
    pub faults: Faults,
}

impl<N: Notifier> Relay<N> {
    pub fn pace(&self) -> Pace {
        Pace { first: Duration::ZERO, every: self.cfg.poll, finish_on_stop: true }
    }
}

impl<N: Notifier> Job for Relay<N> {
    async fn step(&mut self, step: &Step) -> Next {
        let (db, cfg) = (&self.db, &self.cfg);
        let batch = match outbox::claim_batch(db, &self.vault, cfg.batch, cfg.lease.as_millis() as i64).await {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(error = %e, "outbox claim failed");
                Vec::new()
            }
        };
        let idle = batch.is_empty();
        for d in batch {
            // A holder that lost the job sends nothing more; the intents it
            // claimed are resent once their own leases expire.
            if !step.valid() {
                break;
            }
            deliver(db, &self.notifier, &d, &cfg.rule, &self.faults, &self.metrics).await;
        }
        if idle { Next::Wait } else { Next::Now }
    }
}

async fn deliver<N: Notifier>(
    db: &DatabaseConnection,
    notifier: &N,
    d: &Delivery,
    rule: &RetryRule,
    faults: &Faults,
    metrics: &crate::metrics::Metrics,
) {
    // The send's span (exported only): in the trace of the webhook whose
    // effect created the intent, and linked to its span. Never the payload
    // or the URL (which may hold credentials).
    let span = tracing::info_span!(
        target: domain::TRACE_TARGET, "outbox.send", otel.kind = "client", tenant = %d.tenant_slug,
        kind = %d.kind, intent = %d.id, attempt = d.attempts, outcome = Empty
    );
    if let Some(stored) = &d.trace_context {
        crate::otel::continue_from(&span, stored);
    }
    let sent = notifier.send(d).instrument(span.clone()).await;
    span.record(
        "outcome",
        match &sent {
            Ok(()) => "delivered",
            Err(f) if f.refused => "refused",
            Err(_) => "failed",
        },
    );
    match sent {
        Ok(()) => {
            metrics.observe_send(SendResult::Delivered, false);
            if let Some(stall) = faults.stall_after_send {
                tokio::time::sleep(stall).await;
            }
            if let Err(e) = outbox::mark_sent(db, &d.id).await {
                // The lease expires and the intent is resent with the same key.
                tracing::error!(error = %e, intent = %d.id, "could not mark an intent sent");
            }
        }
        Err(f) => match outbox::mark_failed(db, d, &f.message, f.permanent, rule).await {
            Ok(status) => {
                let result = if f.refused { SendResult::Refused } else { SendResult::Failed };
                metrics.observe_send(result, status == Some(OutboxStatus::Dead));
                // `None`: the lease had lapsed and another worker owns the intent.
                let status = status.map_or("lease_lost", OutboxStatus::as_str);
                tracing::warn!(
                    intent = %d.id, tenant = %d.tenant_slug, attempt = d.attempts, %status, error = %f.message,
                    "notification not delivered"
                )
            }
            Err(e) => tracing::error!(error = %e, intent = %d.id, "could not record a failed send"),
        },
    }
}
