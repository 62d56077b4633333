//! Request bodies for the console's server functions and the admin API are
//! bounded by a declared limit (64 KiB): over it, 413 and never a 500,
//! whether the size is declared up front or the body just keeps streaming.

use crate::{both_engines, support::Install};

fn stream_of(total: usize) -> reqwest::Body {
    let chunk = bytes::Bytes::from(vec![b'a'; 16 * 1024]);
    let chunks = (0..total / chunk.len()).map(move |_| Ok::<_, std::io::Error>(chunk.clone()));
    reqwest::Body::wrap_stream(futures_util::stream::iter(chunks))
}

both_engines!(oversized_control_bodies_answer_413, async |i: &Install| {
    let s = i.serve();
    let c = reqwest::Client::new();
    let origin = s.url("/").trim_end_matches('/').to_owned();

    // Declared: 1 MiB to the sign-in server function (no session needed).
    let declared = c
        .post(s.url("/fn/login"))
        .header("origin", &origin)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(vec![b'a'; 1024 * 1024])
        .send()
        .await
        .unwrap();
    assert_eq!(declared.status(), 413);
    let err: serde_json::Value = declared.json().await.unwrap();
    assert_eq!(err["error"], "body_too_large");

    // Streamed without a length: 8 MiB to the sign-in function and the API.
    for path in ["/fn/login", "/api/v1/tenants"] {
        let res = c
            .post(s.url(path))
            .header("origin", &origin)
            .header("content-type", "application/json")
            .body(stream_of(8 * 1024 * 1024))
            .send()
            .await;
        // The server answers 413 after 64 KiB and closes the connection; the
        // client sees the answer, or (racing it) its upload cut off. Never
        // any other status.
        match res {
            Ok(res) => assert_eq!(res.status(), 413, "{path}"),
            Err(e) => assert!(e.is_request() && !e.is_timeout(), "{path}: {e}"),
        }
    }

    // Within the limit, the sign-in function still answers normally.
    let ok = c
        .post(s.url("/fn/login"))
        .header("origin", &origin)
        .header("accept", "application/json")
        .form(&[("username", "nobody"), ("password", "wrong password here")])
        .send()
        .await
        .unwrap();
    assert_ne!(ok.status(), 413);
    assert!(ok.status().is_client_error(), "{}", ok.status());
    // The server is still healthy after all of that.
    assert_eq!(c.get(s.url("/healthz")).send().await.unwrap().status(), 200);
});

// Strict input: a field a call does not take is refused and named, a PATCH
// that names nothing is refused, and neither changes anything.
both_engines!(unknown_fields_and_empty_patches_are_refused, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    i.cli_json(&["endpoint", "create", "clinic-a", "hooks", "--scheme", "standard-webhooks"]);
    let token =
        i.cli_json(&["token", "create", "--name", "t", "--role", "admin"])["token"].as_str().unwrap().to_owned();
    let s = i.serve();
    let c = reqwest::Client::new();
    let send = |method: reqwest::Method, path: &str, body: serde_json::Value| {
        c.request(method, s.url(path)).bearer_auth(&token).json(&body).send()
    };
    let endpoint = "/api/v1/tenants/clinic-a/endpoints/hooks";
    let before: serde_json::Value =
        c.get(s.url(endpoint)).bearer_auth(&token).send().await.unwrap().json().await.unwrap();

    let res = send(reqwest::Method::PATCH, endpoint, serde_json::json!({"dedup_retention_secs": 60})).await.unwrap();
    assert_eq!(res.status(), 422);
    let err: serde_json::Value = res.json().await.unwrap();
    assert_eq!(err["error"], "unknown_field");
    assert!(err["message"].as_str().unwrap().contains("dedup_retention_secs"), "{err}");

    let res =
        send(reqwest::Method::PATCH, endpoint, serde_json::json!({"enabled": false, "tolerance": 5})).await.unwrap();
    assert_eq!(res.status(), 422, "a known field does not carry an unknown one through");

    let res = send(reqwest::Method::PATCH, endpoint, serde_json::json!({})).await.unwrap();
    assert_eq!(res.status(), 422);
    assert_eq!(res.json::<serde_json::Value>().await.unwrap()["error"], "nothing_to_change");

    let after: serde_json::Value =
        c.get(s.url(endpoint)).bearer_auth(&token).send().await.unwrap().json().await.unwrap();
    assert_eq!(before, after, "refused requests changed nothing");

    // Optional bodies are strict too: no key is provisioned.
    let res = send(
        reqwest::Method::POST,
        &format!("{endpoint}/keys"),
        serde_json::json!({"owner": "ops", "scopes": ["all"]}),
    )
    .await
    .unwrap();
    assert_eq!(res.status(), 422);
    let keys: serde_json::Value =
        c.get(s.url(&format!("{endpoint}/keys"))).bearer_auth(&token).send().await.unwrap().json().await.unwrap();
    assert_eq!(keys.as_array().unwrap().len(), 0, "{keys}");
    // A PATCH repeating the stored values changes nothing, so it is refused.
    for same in [serde_json::json!({"enabled": true}), serde_json::json!({"tolerance_secs": 300, "enabled": true})] {
        let res = send(reqwest::Method::PATCH, endpoint, same.clone()).await.unwrap();
        assert_eq!(res.status(), 422, "{same}");
        assert_eq!(res.json::<serde_json::Value>().await.unwrap()["error"], "nothing_to_change", "{same}");
    }
    let res = send(reqwest::Method::PATCH, "/api/v1/tenants/clinic-a", serde_json::json!({"name": "clinic-a"}))
        .await
        .unwrap();
    assert_eq!(res.status(), 422);
    // And a correct request still works.
    let ok = send(reqwest::Method::PATCH, endpoint, serde_json::json!({"enabled": false})).await.unwrap();
    assert_eq!(ok.status(), 200);

    // Query strings are strict: an unknown parameter, or a value that does
    // not parse, is 422 naming it, never a silently widened listing.
    for (path, code, named) in [
        ("/api/v1/keys?tenant=clinic-a&tenat=clinic-b", "unknown_field", "tenat"),
        ("/api/v1/tenants/clinic-a/events?limit=ten", "invalid_query", "limit"),
        ("/api/v1/quarantine?tenant=clinic-a&include_bodies=true", "unknown_field", "include_bodies"),
        // A call that takes no query string at all refuses one just the same.
        ("/api/v1/tenants/clinic-a?expand=keys", "unknown_field", "expand"),
        ("/api/v1/tenants?limit=5", "unknown_field", "limit"),
    ] {
        let res = c.get(s.url(path)).bearer_auth(&token).send().await.unwrap();
        assert_eq!(res.status(), 422, "{path}");
        let err: serde_json::Value = res.json().await.unwrap();
        assert_eq!(err["error"], code, "{path}: {err}");
        assert!(err["message"].as_str().unwrap().contains(named), "{path}: {err}");
    }

    // A call that takes no body refuses one: the options it carries would
    // otherwise be dropped without a word (and no drill run starts).
    let res = send(reqwest::Method::POST, "/api/v1/drills", serde_json::json!({"only": ["replay"]})).await.unwrap();
    assert_eq!(res.status(), 422);
    let err: serde_json::Value = res.json().await.unwrap();
    assert_eq!(err["error"], "unknown_field");
    assert!(err["message"].as_str().unwrap().contains("only"), "{err}");
    let runs: serde_json::Value =
        c.get(s.url("/api/v1/drills")).bearer_auth(&token).send().await.unwrap().json().await.unwrap();
    assert_eq!(runs.as_array().map(Vec::len), Some(0), "{runs}");

    // Server functions take exactly their arguments, as forms and as queries.
    let origin = s.base.trim_end_matches('/').to_owned();
    let res = c
        .post(s.url("/fn/login"))
        .header("Origin", &origin)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body("username=root&password=whatever&role=admin")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422);
    let err: serde_json::Value = res.json().await.unwrap();
    assert_eq!(err["error"], "unknown_field");
    assert!(err["message"].as_str().unwrap().contains("role"), "{err}");
    let res = c.get(s.url("/fn/dashboard_stats?window=24h&tenants=all")).send().await.unwrap();
    assert_eq!(res.status(), 422);
});

use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn addr_of(s: &crate::support::Server) -> String {
    s.base.trim_start_matches("http://").trim_end_matches('/').to_owned()
}

/// Reads until the server closes the connection (or `within` passes);
/// returns what it said and whether it closed.
async fn until_closed(conn: &mut tokio::net::TcpStream, within: Duration) -> (String, bool) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, conn.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return (String::from_utf8_lossy(&got).into_owned(), true),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => return (String::from_utf8_lossy(&got).into_owned(), false),
        }
    }
}

// Connection and request limits, against the real binary with short
// timeouts: a slow-header client and idle connections are closed, a slow
// webhook body is refused, and past the in-flight limit /hooks answers 503.
both_engines!(slow_clients_and_idle_connections_are_cut_off, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    i.cli_json(&["endpoint", "create", "clinic-a", "hooks", "--scheme", "standard-webhooks"]);
    let s = i.serve_with(&[
        ("SIGNET_HEADER_TIMEOUT_SECS", "1"),
        ("SIGNET_BODY_TIMEOUT_SECS", "1"),
        ("SIGNET_MAX_IN_FLIGHT", "2"),
    ]);
    let addr = addr_of(&s);

    // A slow-header client: half a request head, then silence.
    let mut slow = tokio::net::TcpStream::connect(&addr).await.unwrap();
    slow.write_all(b"POST /hooks/clinic-a/hooks HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    let started = Instant::now();
    let (_, closed) = until_closed(&mut slow, Duration::from_secs(6)).await;
    assert!(closed, "a slow-header client is disconnected");
    assert!(started.elapsed() < Duration::from_secs(4), "{:?}", started.elapsed());

    // A thousand idle connections: the server still answers, then closes them all.
    let mut idle = Vec::new();
    for _ in 0..1000 {
        idle.push(tokio::net::TcpStream::connect(&addr).await.unwrap());
    }
    let c = reqwest::Client::new();
    assert_eq!(c.get(s.url("/healthz")).send().await.unwrap().status(), 200);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut closed = 0;
    for conn in &mut idle {
        if until_closed(conn, Duration::from_secs(3)).await.1 {
            closed += 1;
        }
    }
    assert_eq!(closed, 1000, "every idle connection is closed by the server");
    drop(idle);

    // A slow webhook body: the head arrives, the body never finishes.
    let stalled_body = || async {
        let mut conn = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let head = b"POST /hooks/clinic-a/hooks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
                     Content-Length: 100\r\n\r\n{\"type\":";
        conn.write_all(head).await.unwrap();
        conn
    };
    let mut one = stalled_body().await;
    let started = Instant::now();
    let (answer, _) = until_closed(&mut one, Duration::from_secs(6)).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("body_incomplete"), "{answer}");
    assert!(started.elapsed() < Duration::from_secs(4), "{:?}", started.elapsed());

    // Two deliveries in flight (bodies stalled): a third is told to come back.
    let (_a, _b) = (stalled_body().await, stalled_body().await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let third = c.post(s.url("/hooks/clinic-a/hooks")).body("{}").send().await.unwrap();
    assert_eq!(third.status(), 503);
    assert!(third.headers().get("retry-after").is_some());
    assert_eq!(third.json::<serde_json::Value>().await.unwrap()["error"], "overloaded");
    // Once they time out, deliveries are taken again (401: unsigned).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let fourth = c.post(s.url("/hooks/clinic-a/hooks")).body("{}").send().await.unwrap();
    assert_ne!(fourth.status(), 503);
});

// The two limits the test above does not reach: past SIGNET_MAX_CONNECTIONS
// a new connection waits to be accepted (and is served once one closes),
// and a request not answered within SIGNET_REQUEST_TIMEOUT_SECS gets 503
// `timeout` with Retry-After (here a webhook whose claim stalls).
both_engines!(the_connection_limit_and_the_request_timeout_hold, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    i.cli_json(&["endpoint", "create", "clinic-a", "hooks", "--scheme", "standard-webhooks"]);
    let secret = i.cli_json(&["key", "provision", "clinic-a", "hooks", "--approve-as", "rita"])["secret"]
        .as_str()
        .unwrap()
        .to_owned();
    let s = i.serve_with(&[
        ("SIGNET_MAX_CONNECTIONS", "3"),
        ("SIGNET_HEADER_TIMEOUT_SECS", "30"),
        ("SIGNET_BODY_TIMEOUT_SECS", "1"),
        ("SIGNET_REQUEST_TIMEOUT_SECS", "2"),
        ("SIGNET_FAULTS", "stall_effect_ms=8000"),
    ]);
    let addr = addr_of(&s);
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(tokio::net::TcpStream::connect(&addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let url = s.url("/healthz");
    let waiting =
        tokio::spawn(async move { reqwest::Client::new().get(url).send().await.map(|r| r.status().as_u16()) });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!waiting.is_finished(), "a fourth connection is not served while three are open");
    drop(held);
    let status =
        tokio::time::timeout(Duration::from_secs(5), waiting).await.expect("served once one closes").unwrap().unwrap();
    assert_eq!(status, 200);

    let body = i.data_dir().join("slow.json");
    std::fs::write(
        &body,
        r#"{"type":"reminder.created","data":{"reminder_id":"r-1","send_at":"2027-01-05T09:00:00Z"}}"#,
    )
    .unwrap();
    let started = Instant::now();
    let out = i.cli(
        &[
            "--json",
            "send",
            &s.url("/hooks/clinic-a/hooks"),
            "--scheme",
            "standard-webhooks",
            "--secret",
            &secret,
            "--file",
            body.to_str().unwrap(),
            "--event-id",
            "msg_slow",
            "--max-attempts",
            "1",
        ],
        "",
    );
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let first = &report["attempts"][0];
    assert_eq!(first["status"], 503, "{report}");
    assert!(first["response"].as_str().unwrap().contains("timeout"), "{report}");
    assert!(started.elapsed() < Duration::from_secs(6), "{:?}", started.elapsed());
});

const MIB: usize = 1024 * 1024;

/// `VmRSS` or `VmHWM` (the peak) of a process, in bytes.
fn memory_of(pid: u32, field: &str) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap_or_else(|| panic!("no {field}"));
    line.split_whitespace().nth(1).unwrap().parse::<usize>().unwrap() * 1024
}

/// A webhook whose 10 MiB body arrives slowly: 8 MiB in 256 KiB pieces,
/// then nothing until `hold_until`, then the rest. Stops sending as soon as
/// the server answers. Returns the answer ("" when the connection was cut
/// before one could be read).
async fn slow_large_body(addr: String, declared: bool, hold_until: tokio::time::Instant) -> String {
    const PIECE: usize = 256 * 1024;
    let mut conn = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let framing = if declared { format!("Content-Length: {}", 10 * MIB) } else { "Transfer-Encoding: chunked".into() };
    let head = format!(
        "POST /hooks/clinic-a/big HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n\
         {framing}\r\n\r\n"
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    let piece = if declared {
        vec![b' '; PIECE]
    } else {
        [format!("{PIECE:x}\r\n").into_bytes(), vec![b' '; PIECE], b"\r\n".to_vec()].concat()
    };
    let mut answer = Vec::new();
    let mut sent = 0;
    while sent < 10 * MIB {
        if sent == 8 * MIB {
            tokio::time::sleep_until(hold_until).await;
        } else {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // An answer before the body is complete: the server refused it.
        let mut buf = [0u8; 4096];
        match conn.try_read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                answer.extend_from_slice(&buf[..n]);
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => break,
        }
        if conn.write_all(&piece).await.is_err() {
            break;
        }
        sent += PIECE;
    }
    if sent == 10 * MIB && !declared {
        let _ = conn.write_all(b"0\r\n\r\n").await;
    }
    let (rest, _) = until_closed(&mut conn, Duration::from_secs(10)).await;
    String::from_utf8_lossy(&answer).into_owned() + &rest
}

// Bodies are read before their signature can be checked, so what they hold
// is bounded for all deliveries together (SIGNET_MAX_INFLIGHT_BODY_BYTES,
// here its 64 MiB default). Fifty slow 10 MiB bodies to an endpoint that
// allows 10 MiB: the server's peak memory stays under the budget plus
// 100 MiB, the bodies that do not fit are told to come back (503
// `overloaded`, `Retry-After: 1`), a signed webhook to another endpoint
// gets its normal answer meanwhile, and the budget is whole again after.
both_engines!(fifty_slow_large_bodies_stay_within_the_body_budget, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    let big = (10 * MIB).to_string();
    i.cli_json(&["endpoint", "create", "clinic-a", "big", "--scheme", "standard-webhooks", "--max-body-bytes", &big]);
    i.cli_json(&["endpoint", "create", "clinic-a", "hooks", "--scheme", "standard-webhooks"]);
    let secret = i.cli_json(&["key", "provision", "clinic-a", "hooks", "--approve-as", "rita"])["secret"]
        .as_str()
        .unwrap()
        .to_owned();
    let s = i.serve();
    let pid = s.child.id();
    let addr = addr_of(&s);
    let started = Instant::now();
    let hold_until = tokio::time::Instant::now() + Duration::from_secs(4);
    let clients: Vec<_> =
        (0..50).map(|n| tokio::spawn(slow_large_body(addr.clone(), n % 2 == 0, hold_until))).collect();

    // While they are all in flight: a normal signed webhook elsewhere.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let body = r#"{"type":"reminder.created","data":{"reminder_id":"r-1","send_at":"2027-01-05T09:00:00Z"}}"#;
    let key = domain::crypto::SigningSecret::parse(&secret).unwrap();
    let ts = domain::clock::now_ms() / 1000;
    let headers = domain::crypto::signature::sign(
        views::scheme::Scheme::StandardWebhooks,
        &key,
        body.as_bytes(),
        ts,
        "msg_beside",
    )
    .unwrap();
    let mut req = reqwest::Client::new().post(s.url("/hooks/clinic-a/hooks")).body(body);
    for (k, v) in headers {
        req = req.header(k, v);
    }
    let res = req.send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.json::<serde_json::Value>().await.unwrap()["status"], "applied");
    let during = memory_of(pid, "VmRSS:");

    let answers: Vec<String> = futures_util::future::join_all(clients).await.into_iter().map(Result::unwrap).collect();
    let peak = memory_of(pid, "VmHWM:");
    assert!(peak < (64 + 100) * MIB, "peak RSS {} MiB (while all were in flight: {} MiB)", peak / MIB, during / MIB);
    let taken = answers.iter().filter(|a| a.starts_with("HTTP/1.1 401")).count();
    let refused = answers.iter().filter(|a| a.starts_with("HTTP/1.1 503")).count();
    for a in answers.iter().filter(|a| a.starts_with("HTTP/1.1 503")) {
        assert!(a.contains("overloaded") && a.to_ascii_lowercase().contains("retry-after: 1"), "{a}");
    }
    let cut = answers.iter().filter(|a| a.is_empty()).count();
    assert_eq!(taken + refused + cut, 50, "401 (read whole, unsigned) or 503 only: {answers:?}");
    assert!((1..=5).contains(&taken), "at most 56 MiB of large bodies at once: {taken} taken");
    assert!(refused >= 25, "{refused} refused with an answer, {cut} cut off");
    let metrics = reqwest::get(&s.metrics).await.unwrap().text().await.unwrap();
    assert!(metrics.contains("signet_webhooks_shed_total{limit=\"body_bytes\"}"), "{metrics}");
    // The alert rules read one total of 503 overloaded answers, whatever the limit.
    let shed: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("signet_webhooks_shed_total{"))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum();
    let overloaded =
        metrics.lines().find_map(|l| l.strip_prefix("signet_hooks_overloaded_total ")?.trim().parse::<f64>().ok());
    assert_eq!(overloaded, Some(shed), "{metrics}");
    assert!(shed >= refused as f64, "{metrics}");
    // Every delivery left the in-flight gauge, those cut off included.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let m = reqwest::get(&s.metrics).await.unwrap().text().await.unwrap();
        if m.lines().any(|l| l == "signet_hooks_in_flight 0") {
            break;
        }
        assert!(Instant::now() < deadline, "deliveries still counted in flight: {m}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Everything held was given back: a whole 10 MiB body is read again.
    let whole = reqwest::Client::new().post(s.url("/hooks/clinic-a/big")).body(vec![b' '; 10 * MIB]).send().await;
    assert_eq!(whole.unwrap().status(), 401);
    assert!(started.elapsed() < Duration::from_secs(30), "{:?}", started.elapsed());
});
