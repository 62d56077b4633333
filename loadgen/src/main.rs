//! Drives signed standard-webhooks traffic at a fixed concurrency for a
//! fixed time and prints one JSON line: throughput and latency percentiles.
//!
//! Each worker owns one HTTP connection. Bodies are ~1 KiB `reminder.created`
//! envelopes; a share of requests (default 10%) are duplicates: a re-signed
//! resend of an event first sent at least a second earlier (as a provider's
//! retry would be; within the same second it would be the same signed
//! message, i.e. a replay).

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use clap::Parser;
use domain::{
    crypto::{signature, SigningSecret},
    registry::Scheme,
};
use rand::Rng;

#[derive(Parser)]
struct Args {
    /// Receiver URL, e.g. http://127.0.0.1:3000/hooks/bench/hooks
    #[arg(long)]
    url: String,
    /// The endpoint key's secret (`whsec_…`).
    #[arg(long, env = "LOADGEN_SECRET")]
    secret: String,
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    #[arg(long, default_value_t = 20)]
    seconds: u64,
    #[arg(long, default_value_t = 0.10)]
    dup_ratio: f64,
    #[arg(long, default_value_t = 1024)]
    body_bytes: usize,
    /// Target total requests per second (0: as fast as possible).
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
}

struct Sent {
    id: String,
    body: Vec<u8>,
    at: Instant,
}

fn body(id: &str, size: usize) -> Vec<u8> {
    let head = format!(r#"{{"type":"reminder.created","data":{{"reminder_id":"{id}","send_at":"2027-01-05T09:00:00Z","pad":""#);
    let tail = r#""}}"#;
    let pad = size.saturating_sub(head.len() + tail.len());
    format!("{head}{}{tail}", "x".repeat(pad)).into_bytes()
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let secret = Arc::new(SigningSecret::parse(&args.secret).expect("secret"));
    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    let history: Arc<Mutex<Vec<Sent>>> = Arc::new(Mutex::new(Vec::new()));
    let started = Instant::now();
    let per_worker_interval = (args.rate > 0.0).then(|| Duration::from_secs_f64(args.concurrency as f64 / args.rate));
    let mut tasks = Vec::new();
    for _ in 0..args.concurrency {
        let (secret, history, url) = (secret.clone(), history.clone(), args.url.clone());
        let (dup_ratio, size) = (args.dup_ratio, args.body_bytes);
        tasks.push(tokio::spawn(async move {
            let client = reqwest::Client::builder().pool_max_idle_per_host(1).build().expect("client");
            let mut lat = Vec::new();
            let mut statuses: BTreeMap<String, u64> = BTreeMap::new();
            let mut next = Instant::now();
            while Instant::now() < deadline {
                if let Some(iv) = per_worker_interval {
                    if let Some(wait) = next.checked_duration_since(Instant::now()) {
                        tokio::time::sleep(wait).await;
                    }
                    next += iv;
                }
                let dup = rand::thread_rng().gen_bool(dup_ratio);
                let (id, bytes, fresh) = {
                    let h = history.lock().expect("history");
                    let old = h.iter().rev().find(|s| s.at.elapsed() >= Duration::from_secs(1));
                    match (dup, old) {
                        (true, Some(s)) => (s.id.clone(), s.body.clone(), false),
                        _ => {
                            let id = format!("msg_{}", uuid::Uuid::new_v4().simple());
                            let b = body(&id, size);
                            (id, b, true)
                        }
                    }
                };
                let ts = domain::clock::now_ms() / 1000;
                let headers = signature::sign(Scheme::StandardWebhooks, &secret, &bytes, ts, &id).expect("sign");
                let mut req = client.post(&url).body(bytes.clone());
                for (k, v) in &headers {
                    req = req.header(k.as_str(), v.as_str());
                }
                let t0 = Instant::now();
                let label = match req.send().await {
                    Ok(res) => {
                        let status = res.status().as_u16();
                        let v: serde_json::Value = res.json().await.unwrap_or_default();
                        format!("{status} {}", v["status"].as_str().or(v["error"].as_str()).unwrap_or(""))
                    }
                    Err(_) => "error".to_owned(),
                };
                lat.push(t0.elapsed());
                *statuses.entry(label).or_default() += 1;
                if fresh {
                    let mut h = history.lock().expect("history");
                    h.push(Sent { id, body: bytes, at: Instant::now() });
                    if h.len() > 10_000 {
                        h.drain(..5_000);
                    }
                }
            }
            (lat, statuses)
        }));
    }
    let mut lat = Vec::new();
    let mut statuses: BTreeMap<String, u64> = BTreeMap::new();
    for t in tasks {
        let (l, s) = t.await.expect("worker");
        lat.extend(l);
        for (k, v) in s {
            *statuses.entry(k).or_default() += v;
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    lat.sort();
    let pct = |p: f64| lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1))).map(|d| d.as_secs_f64() * 1000.0).unwrap_or(0.0);
    let verified = statuses.iter().filter(|(k, _)| k.starts_with("200")).map(|(_, v)| v).sum::<u64>();
    println!(
        "{}",
        serde_json::json!({
            "concurrency": args.concurrency,
            "requests": lat.len(),
            "seconds": elapsed,
            "verified_per_sec": verified as f64 / elapsed,
            "p50_ms": pct(0.50),
            "p99_ms": pct(0.99),
            "statuses": statuses,
        })
    );
}
