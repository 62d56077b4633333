//! `signet send`: signs, retries and stops as the answers say.

use std::{process::Output, time::Duration};

use domain::crypto::SigningSecret;
use serde_json::Value;
use views::scheme::Scheme;

use super::{enable_retries, setup};
use crate::{
    both_engines,
    support::{Install, created},
};

/// `signet --json send` of `file` to `url` (Standard Webhooks, `secret`),
/// with `extra` flags: its output and the JSON report it printed.
fn send(i: &Install, url: &str, secret: &str, file: &str, extra: &[&str]) -> (Output, Value) {
    let mut args = vec!["--json", "send", url, "--scheme", "standard-webhooks", "--secret", secret, "--file", file];
    args.extend_from_slice(extra);
    let out = i.cli(&args, "");
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON report ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    (out, report)
}

both_engines!(send_signs_retries_and_stops_correctly, async |i: &Install| {
    let (_, secret, _) = setup(i, Scheme::StandardWebhooks);
    enable_retries(i);
    let s = i.serve();
    let url = s.url("/hooks/clinic-a/hooks");
    let file = i.data_dir().join("body.json");
    std::fs::write(&file, created("r-send")).unwrap();
    let f = file.to_str().unwrap();
    let (ok, report) = send(i, &url, secret.expose(), f, &["--event-id", "msg_send"]);
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    assert_eq!(report["delivered"], true);
    assert_eq!(report["attempts"].as_array().unwrap().len(), 1);
    // Sending again (a second later) re-signs with a fresh timestamp: a
    // duplicate, still 2xx. (Within the same second it would be the same
    // signed message: a replay.)
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (_, report) = send(i, &url, secret.expose(), f, &["--event-id", "msg_send"]);
    assert!(report["attempts"][0]["response"].as_str().unwrap().contains("duplicate"));
    // A wrong secret is a non-retryable 401: one attempt, non-zero exit.
    let (wrong, report) = send(i, &url, SigningSecret::generate().expose(), f, &[]);
    assert!(!wrong.status.success());
    assert_eq!(report["attempts"].as_array().unwrap().len(), 1);
    assert_eq!(report["attempts"][0]["status"], 401);
    // A 503 is retried, honouring Retry-After (5 s), up to --max-attempts.
    drop(s);
    let s = i.serve_with(&[("SIGNET_FAULTS", "transient=1")]);
    let url = s.url("/hooks/clinic-a/hooks");
    let started = std::time::Instant::now();
    let (busy, report) = send(i, &url, secret.expose(), f, &["--max-attempts", "2", "--base-delay-ms", "10"]);
    assert!(!busy.status.success());
    let attempts = report["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0]["status"], 503);
    assert!(attempts[0]["wait_ms"].as_u64().unwrap() >= 5000, "Retry-After honoured");
    assert!(started.elapsed() >= Duration::from_secs(5));
    let progress = String::from_utf8_lossy(&busy.stderr);
    assert!(progress.contains("attempt 1: 503") && progress.contains("attempt 2: 503"), "{progress}");
    // Connection refused (nothing listening) is retried too.
    drop(s);
    let (_, report) =
        send(i, &url, secret.expose(), f, &["--max-attempts", "3", "--base-delay-ms", "10", "--max-delay-ms", "50"]);
    assert_eq!(report["attempts"].as_array().unwrap().len(), 3);
    assert!(report["attempts"][0]["status"].is_null());
});
