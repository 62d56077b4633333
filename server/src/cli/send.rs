//! `signet send`: a provider-side sender for testing and for providers
//! without a library. Signs per scheme (standard-webhooks: `v1` with a
//! `whsec_` secret, `v1a` with a `whsk_` Ed25519 private key; `hmac` as its
//! preset or profile says), re-signs
//! every attempt with a fresh timestamp, retries with capped full-jitter exponential backoff, honours
//! `Retry-After` (never beyond the backoff cap), and stops on 2xx and on
//! non-retryable 4xx. Speaks TLS (rustls, the public web roots plus any
//! `--ca-cert`), since providers post to https receivers.

use std::{io::Read, time::Duration};

use domain::crypto::{SigningSecret, profile, signature};
use rand::Rng;
use serde::Serialize;
use views::scheme::Scheme;

use super::output::{CliError, emit};

/// Statuses that retrying cannot fix.
const NON_RETRYABLE: [u16; 7] = [400, 401, 403, 404, 409, 413, 422];

pub struct SendArgs {
    pub url: String,
    pub scheme: Scheme,
    pub secret: SigningSecret,
    pub body: Vec<u8>,
    pub event_id: String,
    pub github_event: Option<String>,
    /// Scheme `hmac`: the profile to sign as.
    pub profile: Option<views::hmac::HmacProfile>,
    pub max_attempts: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
    /// Extra trusted CA certificates (PEM) besides the public web roots.
    pub ca_pem: Option<Vec<u8>>,
}

/// At most this much of a receiver's answer is read (and 300 characters of
/// it shown): a receiver cannot make the sender buffer without bound.
const MAX_RESPONSE_BYTES: usize = 4096;

#[derive(Serialize)]
pub struct Attempt {
    pub attempt: u32,
    /// HTTP status, or `null` when the request did not get an answer.
    pub status: Option<u16>,
    pub response: String,
    /// What happens next: `done`, `give_up`, or `retry`.
    pub next: &'static str,
    pub wait_ms: Option<u64>,
}

#[derive(Serialize)]
pub struct Report {
    pub delivered: bool,
    pub event_id: String,
    pub attempts: Vec<Attempt>,
}

/// Full jitter: a uniform wait in `[0, min(max, base · 2^attempt)]`.
pub fn backoff(base: Duration, max: Duration, attempt: u32) -> Duration {
    let ceiling = base.saturating_mul(2u32.saturating_pow(attempt.min(20))).min(max);
    let ms = ceiling.as_millis() as u64;
    Duration::from_millis(if ms == 0 { 0 } else { rand::thread_rng().gen_range(0..=ms) })
}

/// Parses `Retry-After` in seconds (the HTTP-date form is not used by Signet).
fn retry_after(res: &reqwest::Response) -> Option<Duration> {
    res.headers().get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// Reads at most [`MAX_RESPONSE_BYTES`] of the answer's body.
async fn bounded_text(mut res: reqwest::Response) -> String {
    let mut kept = Vec::new();
    while kept.len() < MAX_RESPONSE_BYTES {
        match res.chunk().await {
            Ok(Some(chunk)) => kept.extend_from_slice(&chunk[..chunk.len().min(MAX_RESPONSE_BYTES - kept.len())]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&kept).chars().take(300).collect()
}

fn client(ca_pem: Option<&[u8]>) -> Result<reqwest::Client, CliError> {
    let mut b = reqwest::Client::builder().timeout(Duration::from_secs(30)).redirect(reqwest::redirect::Policy::none());
    if let Some(pem) = ca_pem {
        let certs = reqwest::Certificate::from_pem_bundle(pem)
            .map_err(|e| CliError::new("ca_cert", format!("not a PEM certificate bundle: {e}")))?;
        if certs.is_empty() {
            return Err(CliError::new("ca_cert", "the CA file holds no PEM certificate"));
        }
        for c in certs {
            b = b.add_root_certificate(c);
        }
    }
    b.build().map_err(|e| CliError::new("http", format!("cannot build an HTTP client: {e}")))
}

pub async fn run(args: SendArgs, mut progress: impl FnMut(&Attempt)) -> Result<Report, CliError> {
    let client = client(args.ca_pem.as_deref())?;
    let mut attempts = Vec::new();
    for attempt in 1..=args.max_attempts.max(1) {
        let ts = time_now();
        let signed = match &args.profile {
            Some(p) => profile::sign_for(p, &args.secret, &args.event_id, ts, &args.body),
            None => signature::sign(args.scheme, &args.secret, &args.body, ts, &args.event_id),
        };
        let headers = signed.ok_or_else(|| {
            CliError::new(
                "invalid_secret",
                "this secret cannot sign for this scheme \
                 (standard-webhooks needs whsec_<base64>, or whsk_<base64> for v1a)",
            )
        })?;
        let mut req =
            client.post(&args.url).header(reqwest::header::CONTENT_TYPE, "application/json").body(args.body.clone());
        for (k, v) in &headers {
            req = req.header(k.as_str(), v.as_str());
        }
        if args.scheme == Scheme::Github {
            req = req.header("X-GitHub-Event", args.github_event.as_deref().unwrap_or("signet"));
        }
        let last = attempt == args.max_attempts.max(1);
        let record = match req.send().await {
            Ok(res) => {
                let status = res.status().as_u16();
                // A receiver may ask for a pause, but never for longer than
                // the sender's own cap.
                let wait_hint = retry_after(&res).map(|w| w.min(args.max_delay));
                let text = bounded_text(res).await;
                let (next, wait) = if (200..300).contains(&status) {
                    ("done", None)
                } else if NON_RETRYABLE.contains(&status) || last {
                    ("give_up", None)
                } else {
                    let jitter = backoff(args.base_delay, args.max_delay, attempt - 1);
                    ("retry", Some(wait_hint.map(|w| w.max(jitter)).unwrap_or(jitter)))
                };
                Attempt {
                    attempt,
                    status: Some(status),
                    response: text,
                    next,
                    wait_ms: wait.map(|w| w.as_millis() as u64),
                }
            }
            Err(e) => {
                let next = if last { "give_up" } else { "retry" };
                let wait = (!last).then(|| backoff(args.base_delay, args.max_delay, attempt - 1));
                Attempt {
                    attempt,
                    status: None,
                    response: format!("request failed: {e}"),
                    next,
                    wait_ms: wait.map(|w| w.as_millis() as u64),
                }
            }
        };
        progress(&record);
        let (next, wait) = (record.next, record.wait_ms);
        attempts.push(record);
        match next {
            "retry" => tokio::time::sleep(Duration::from_millis(wait.unwrap_or(0))).await,
            "done" => return Ok(Report { delivered: true, event_id: args.event_id, attempts }),
            _ => break,
        }
    }
    Ok(Report { delivered: false, event_id: args.event_id, attempts })
}

fn time_now() -> i64 {
    domain::clock::now_ms() / 1000
}

/// `signet send`: reads the body (a file or stdin) and the credential from
/// the arguments, sends with retries, and reports each attempt on stderr.
#[allow(clippy::too_many_arguments)]
pub(super) async fn command(
    json: bool,
    url: String,
    scheme: String,
    secret: String,
    file: Option<std::path::PathBuf>,
    event_id: Option<String>,
    github_event: Option<String>,
    hmac_profile: Option<views::hmac::HmacProfileBody>,
    max_attempts: u32,
    base_delay_ms: u64,
    max_delay_ms: u64,
    ca_cert: Option<std::path::PathBuf>,
) -> Result<(), CliError> {
    let ca_pem = match &ca_cert {
        Some(path) => Some(
            std::fs::read(path)
                .map_err(|e| CliError::new("ca_cert", format!("cannot read {}: {e}", path.display())))?,
        ),
        None => None,
    };
    let scheme = domain::registry::parse_scheme(&scheme)?;
    let profile = match (scheme, hmac_profile) {
        (views::scheme::Scheme::Hmac, Some(body)) => Some(domain::registry::hmac_profile::resolve(&body)?.0),
        (views::scheme::Scheme::Hmac, None) => {
            return Err(CliError::new("invalid_hmac_profile", "scheme hmac needs --preset or --profile"));
        }
        (_, Some(_)) => {
            return Err(CliError::new("invalid_hmac_profile", "--preset and --profile are for scheme hmac only"));
        }
        (_, None) => None,
    };
    let secret = domain::crypto::SigningSecret::parse(&secret)
        .ok_or_else(|| CliError::new("invalid_secret", "the secret is empty"))?;
    let body = match &file {
        Some(path) => {
            std::fs::read(path).map_err(|e| CliError::new("file", format!("cannot read {}: {e}", path.display())))?
        }
        None => {
            let mut buf = Vec::new();
            std::io::stdin()
                .read_to_end(&mut buf)
                .map_err(|e| CliError::new("stdin", format!("cannot read the body from stdin: {e}")))?;
            buf
        }
    };
    let event_id = event_id.unwrap_or_else(|| format!("msg_{}", uuid::Uuid::new_v4().simple()));
    let args = SendArgs {
        url,
        scheme,
        secret,
        body,
        event_id,
        github_event,
        profile,
        max_attempts,
        base_delay: std::time::Duration::from_millis(base_delay_ms),
        max_delay: std::time::Duration::from_millis(max_delay_ms),
        ca_pem,
    };
    let report = run(args, |a| {
        let status = a.status.map(|s| s.to_string()).unwrap_or_else(|| "no answer".into());
        let then = match (a.next, a.wait_ms) {
            ("retry", Some(ms)) => format!("retrying in {:.1} s", ms as f64 / 1000.0),
            ("done", _) => "delivered".into(),
            _ => "giving up".into(),
        };
        // Progress goes to stderr so `--json` keeps stdout to one value.
        eprintln!("attempt {}: {status} {} → {then}", a.attempt, a.response.trim());
    })
    .await?;
    let delivered = report.delivered;
    emit(json, &report, || {
        if delivered {
            format!("delivered {} after {} attempt(s)", report.event_id, report.attempts.len())
        } else {
            format!("not delivered after {} attempt(s)", report.attempts.len())
        }
    });
    if delivered { Ok(()) } else { Err(CliError::new("not_delivered", "the receiver did not accept the webhook")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_is_capped_full_jitter() {
        let base = Duration::from_millis(100);
        let max = Duration::from_millis(1000);
        for attempt in 0..30 {
            let ceiling = (100u64 << attempt.min(20)).min(1000);
            for _ in 0..50 {
                assert!(backoff(base, max, attempt).as_millis() as u64 <= ceiling);
            }
        }
        // Jitter really varies (not a fixed schedule).
        let samples: std::collections::HashSet<u128> = (0..50).map(|_| backoff(base, max, 5).as_millis()).collect();
        assert!(samples.len() > 5);
    }
}
