//! `signet send` against an https receiver: a real TLS listener with a
//! certificate from a private CA the sender is told to trust. The receiver
//! asks for an hour's pause (`Retry-After: 3600`), then answers with a 64 MiB
//! body: the sender waits at most its own cap and reads a few KiB.

use std::{
    process::Command,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use domain::crypto::SigningSecret;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::BIN;

/// A TLS receiver on loopback: its CA certificate (PEM), its port, the
/// requests it saw (head and body), in order, and for each whether its
/// whole answer was taken (false: the sender hung up part-way).
struct Receiver {
    ca_pem: String,
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
    answered_fully: Arc<Mutex<Vec<bool>>>,
}

async fn https_receiver(answers: Vec<String>) -> Receiver {
    let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&leaf_key, &ca, &ca_key)
        .unwrap();
    let config = tokio_rustls::rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            tokio_rustls::rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into()),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let answered_fully = Arc::new(Mutex::new(Vec::new()));
    let fully = answered_fully.clone();
    tokio::spawn(async move {
        let mut answers = answers.into_iter();
        loop {
            let Ok((tcp, _)) = listener.accept().await else { return };
            let Ok(mut tls) = acceptor.accept(tcp).await else { continue };
            let mut got = Vec::new();
            let mut buf = [0u8; 8192];
            // Head, then as much body as Content-Length says.
            while let Ok(n @ 1..) = tls.read(&mut buf).await {
                got.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&got).into_owned();
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let len = head.lines().find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                    });
                    if body.len() >= len.unwrap_or(0) {
                        break;
                    }
                }
            }
            log.lock().unwrap().push(String::from_utf8_lossy(&got).into_owned());
            let Some(answer) = answers.next() else { return };
            let complete = tls.write_all(answer.as_bytes()).await.is_ok() && tls.shutdown().await.is_ok();
            fully.lock().unwrap().push(complete);
        }
    });
    Receiver { ca_pem: ca.pem(), port, seen, answered_fully }
}

fn send(url: &str, extra: &[&str], secret: &SigningSecret, dir: &std::path::Path) -> (std::process::Output, Duration) {
    let body = dir.join("body.json");
    std::fs::write(
        &body,
        br#"{"type":"reminder.created","data":{"reminder_id":"r-tls","send_at":"2027-01-05T09:00:00Z"}}"#,
    )
    .unwrap();
    let started = Instant::now();
    let out = Command::new(BIN)
        .env_clear()
        .env("SIGNET_SEND_SECRET", secret.expose())
        .args([
            "--json",
            "send",
            url,
            "--scheme",
            "standard-webhooks",
            "--file",
            body.to_str().unwrap(),
            "--event-id",
            "msg_tls",
        ])
        .args(extra)
        .output()
        .unwrap();
    (out, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_speaks_tls_caps_retry_after_and_reads_a_bounded_answer() {
    // Far more than socket buffers hold: a sender that read it all would let
    // the receiver finish writing it.
    let huge = "x".repeat(64 * 1024 * 1024);
    let answers = vec![
        "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 3600\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
            .to_owned(),
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{huge}",
            huge.len()
        ),
    ];
    let r = https_receiver(answers).await;
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &r.ca_pem).unwrap();
    let url = format!("https://localhost:{}/hooks/clinic-a/hooks", r.port);
    let secret = SigningSecret::generate();
    let (out, took) = send(
        &url,
        &["--ca-cert", ca.to_str().unwrap(), "--max-attempts", "3", "--base-delay-ms", "10", "--max-delay-ms", "300"],
        &secret,
        dir.path(),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let attempts = report["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2, "{report}");
    assert_eq!(attempts[0]["status"], 503);
    assert!(attempts[0]["wait_ms"].as_u64().unwrap() <= 300, "Retry-After is cut to the backoff cap: {report}");
    assert!(took < Duration::from_secs(20), "{took:?}");
    assert_eq!(attempts[1]["status"], 200);
    assert!(attempts[1]["response"].as_str().unwrap().len() <= 300, "only a bounded part of the answer is kept");
    for _ in 0..50 {
        if r.answered_fully.lock().unwrap().len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let fully = r.answered_fully.lock().unwrap().clone();
    assert_eq!(fully, vec![true, false], "the sender stopped reading the 64 MiB answer part-way");
    // Both requests came over TLS, signed.
    let seen = r.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert!(
        seen.iter().all(|req| req.starts_with("POST /hooks/clinic-a/hooks")
            && req.to_ascii_lowercase().contains("webhook-signature: v1,")),
        "{seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_refuses_a_receiver_whose_certificate_it_cannot_verify() {
    let r = https_receiver(vec!["HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}".to_owned()]).await;
    let dir = tempfile::tempdir().unwrap();
    let url = format!("https://localhost:{}/hooks/clinic-a/hooks", r.port);
    let (out, _) = send(&url, &["--max-attempts", "1"], &SigningSecret::generate(), dir.path());
    assert!(!out.status.success());
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report["attempts"][0]["status"].is_null(), "{report}");
    assert!(
        r.seen.lock().unwrap().iter().all(|req| !req.contains("webhook-signature")),
        "no signed request reached an unverified peer"
    );
}
