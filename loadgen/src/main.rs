//! Drives signed standard-webhooks traffic at a fixed concurrency for a
//! fixed time and prints one JSON line: throughput and latency percentiles.
//!
//! Each worker owns one HTTP connection. Bodies are ~1 KiB `reminder.created`
//! envelopes; a share of requests (default 10%) are duplicates: a re-signed
//! resend of one of the worker's events first sent at least a second earlier
//! (as a provider's retry would be; within the same second it would be the
//! same signed message, i.e. a replay).
//!
//! Several receivers (`--url` repeated, or a comma list): requests go to
//! them round-robin, each worker keeping one connection per receiver.

use std::{
    collections::{BTreeMap, VecDeque},
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use bytes::Bytes;
use clap::Parser;
use domain::crypto::{SigningSecret, signature};
use http::{Request, Uri, header};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use rand::Rng;
use views::scheme::Scheme;

#[derive(Parser)]
struct Args {
    /// Receiver URL, e.g. http://127.0.0.1:3000/hooks/bench/hooks; repeat
    /// it (or give a comma list) to spread requests across receivers.
    #[arg(long = "url", required = true, value_delimiter = ',')]
    urls: Vec<String>,
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
    body: Bytes,
    at: Instant,
}

fn body(id: &str, size: usize) -> Vec<u8> {
    let head = format!(
        r#"{{"type":"reminder.created","data":{{"reminder_id":"{id}","send_at":"2027-01-05T09:00:00Z","pad":""#
    );
    let tail = r#""}}"#;
    let pad = size.saturating_sub(head.len() + tail.len());
    format!("{head}{}{tail}", "x".repeat(pad)).into_bytes()
}

/// One HTTP/1.1 connection (hyper's bare client: the load generator shares
/// the machine with the server and the database, so it should cost little).
async fn connect(authority: &str) -> Option<SendRequest<Full<Bytes>>> {
    let stream = tokio::net::TcpStream::connect(authority).await.ok()?;
    stream.set_nodelay(true).ok()?;
    let (sender, conn) = http1::handshake(TokioIo::new(stream)).await.ok()?;
    tokio::spawn(conn);
    Some(sender)
}

/// Sends one signed request; the answer's status and contract status word.
async fn send(
    conn: &mut Option<SendRequest<Full<Bytes>>>,
    uri: &Uri,
    headers: &[(String, String)],
    body: Bytes,
) -> String {
    if conn.as_ref().is_none_or(|c| c.is_closed()) {
        *conn = connect(uri.authority().map_or("", |a| a.as_str())).await;
    }
    let Some(sender) = conn.as_mut() else { return "error".to_owned() };
    let mut req = Request::post(uri.path())
        .header(header::HOST, uri.authority().map_or("", |a| a.as_str()))
        .header(header::CONTENT_TYPE, "application/json");
    for (k, v) in headers {
        req = req.header(k.as_str(), v.as_str());
    }
    let Ok(res) = sender.send_request(req.body(Full::new(body)).expect("request")).await else {
        return "error".to_owned();
    };
    let status = res.status().as_u16();
    let bytes = res.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    format!("{status} {}", v["status"].as_str().or(v["error"].as_str()).unwrap_or(""))
}

// One thread: with every worker waiting on the network, a second one would
// only add wake-ups competing with the server and the database for the CPU.
#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args = Args::parse();
    let secret = Arc::new(SigningSecret::parse(&args.secret).expect("secret"));
    let uris: Arc<Vec<Uri>> = Arc::new(args.urls.iter().map(|u| u.parse().expect("url")).collect());
    // One counter for all workers: request n goes to receiver n mod count.
    let turn = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    let started = Instant::now();
    let per_worker_interval = (args.rate > 0.0).then(|| Duration::from_secs_f64(args.concurrency as f64 / args.rate));
    let mut tasks = Vec::new();
    for _ in 0..args.concurrency {
        let (secret, uris, turn) = (secret.clone(), uris.clone(), turn.clone());
        let (dup_ratio, size) = (args.dup_ratio, args.body_bytes);
        tasks.push(tokio::spawn(async move {
            let mut conns = Vec::with_capacity(uris.len());
            for uri in uris.iter() {
                conns.push(connect(uri.authority().map_or("", |a| a.as_str())).await);
            }
            // This worker's own earlier events: a duplicate resends the
            // oldest one sent at least a second ago, once.
            let mut history: VecDeque<Sent> = VecDeque::new();
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
                let dup = rand::thread_rng().gen_bool(dup_ratio)
                    && history.front().is_some_and(|s| s.at.elapsed() >= Duration::from_secs(1));
                let (id, bytes, fresh) = match dup {
                    true => {
                        let s = history.pop_front().expect("checked");
                        (s.id, s.body, false)
                    }
                    false => {
                        let id = format!("msg_{}", uuid::Uuid::new_v4().simple());
                        let b = Bytes::from(body(&id, size));
                        (id, b, true)
                    }
                };
                let ts = domain::clock::now_ms() / 1000;
                let headers = signature::sign(Scheme::StandardWebhooks, &secret, &bytes, ts, &id).expect("sign");
                let at = turn.fetch_add(1, Ordering::Relaxed) % uris.len();
                let t0 = Instant::now();
                let label = send(&mut conns[at], &uris[at], &headers, bytes.clone()).await;
                lat.push(t0.elapsed());
                *statuses.entry(label).or_default() += 1;
                if fresh {
                    history.push_back(Sent { id, body: bytes, at: Instant::now() });
                    if history.len() > 10_000 {
                        history.pop_front();
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
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)))
            .map(|d| d.as_secs_f64() * 1000.0)
            .unwrap_or(0.0)
    };
    let verified = statuses.iter().filter(|(k, _)| k.starts_with("200")).map(|(_, v)| v).sum::<u64>();
    println!(
        "{}",
        serde_json::json!({
            "concurrency": args.concurrency,
            "receivers": args.urls.len(),
            "requests": lat.len(),
            "seconds": elapsed,
            "verified_per_sec": verified as f64 / elapsed,
            "p50_ms": pct(0.50),
            "p99_ms": pct(0.99),
            "statuses": statuses,
        })
    );
}
