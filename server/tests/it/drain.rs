//! SIGTERM under load (issue 25 item 5): the server stops accepting, answers
//! every request it took in full, never with a 5xx, exits 0 within
//! `SIGNET_SHUTDOWN_TIMEOUT_SECS`, and every claim it committed has its
//! effect: the reminder row or the outbox intent.

use std::{
    collections::HashSet,
    sync::Arc,
    time::{Duration, Instant},
};

use domain::crypto::{SigningSecret, signature};
use sea_orm::EntityTrait;
use serde_json::{Value, json};
use views::scheme::Scheme;

use crate::{both_engines, support::Install};

/// What one delivery got.
#[derive(Debug)]
enum Got {
    /// A whole answer: status and JSON body.
    Answer(u16, Value),
    /// Connection refused: the listener is closed.
    Refused,
    /// The connection closed before any byte of an answer (a connection the
    /// kernel had queued when the listener closed). The provider sees what
    /// a refusal looks like and retries.
    ClosedUnanswered(String),
    /// Anything else (a cut-off answer, a body that is not JSON).
    Broken(String),
}

/// The `w`-th worker's `k`-th delivery: a reminder or an OTP request.
fn body(w: usize, k: usize) -> Vec<u8> {
    let event = if k.is_multiple_of(2) {
        let data = json!({"reminder_id": format!("r-{w}-{k}"), "send_at": "2027-01-05T09:00:00Z"});
        json!({"type": "reminder.created", "data": data})
    } else {
        json!({"type": "otp.requested", "data": {"otp_request_id": format!("o-{w}-{k}"), "channel": "sms"}})
    };
    event.to_string().into_bytes()
}

async fn deliver(url: &str, secret: &SigningSecret, w: usize, k: usize) -> Got {
    // A fresh connection each time, as many providers do: a kept-alive one
    // could be closed by the drain just as the next request is sent.
    let client = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    let body = body(w, k);
    let ts = domain::clock::now_ms() / 1000;
    let mut req = client.post(url).body(body.clone());
    for (name, value) in signature::sign(Scheme::StandardWebhooks, secret, &body, ts, &format!("m-{w}-{k}")).unwrap() {
        req = req.header(name, value);
    }
    match req.send().await {
        Ok(res) => {
            let status = res.status().as_u16();
            match res.bytes().await.map(|b| serde_json::from_slice::<Value>(&b)) {
                Ok(Ok(v)) => Got::Answer(status, v),
                Ok(Err(e)) => Got::Broken(format!("{status}: not JSON: {e}")),
                Err(e) => Got::Broken(format!("{status}: answer cut off: {e}")),
            }
        }
        Err(e) if e.is_connect() => Got::Refused,
        Err(e) => {
            let text = format!("{e:?}");
            let unanswered = ["IncompleteMessage", "connection closed before message completed", "reset by peer"];
            if unanswered.iter().any(|u| text.contains(u)) { Got::ClosedUnanswered(text) } else { Got::Broken(text) }
        }
    }
}

both_engines!(sigterm_under_load_answers_or_refuses_and_loses_no_effect, async |i: &Install| {
    i.clinic_a_hooks("standard-webhooks", "reminder.created,otp.requested", &[]);
    let secret = Arc::new(i.clinic_a_hooks_key("reminder.created,otp.requested").1);
    let mut s = i.serve_with(&[("SIGNET_SHUTDOWN_TIMEOUT_SECS", "20")]);
    let url = s.url("/hooks/clinic-a/hooks");
    let mut workers = Vec::new();
    for w in 0..12 {
        let (url, secret) = (url.clone(), secret.clone());
        workers.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for k in 0.. {
                let g = deliver(&url, &secret, w, k).await;
                let refused = matches!(g, Got::Refused);
                got.push((format!("m-{w}-{k}"), g));
                if refused {
                    break;
                }
            }
            got
        }));
    }
    // One delivery is surely in flight at the signal: half its body before,
    // the rest after.
    let (tx, rx) = tokio::sync::mpsc::channel::<Vec<u8>>(2);
    let slow = {
        let body = body(99, 0);
        let headers =
            signature::sign(Scheme::StandardWebhooks, &secret, &body, domain::clock::now_ms() / 1000, "m-99-0");
        let stream = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|chunk| (Ok::<_, std::io::Error>(chunk), rx))
        });
        let mut req = reqwest::Client::new()
            .post(&url)
            .header("content-length", body.len())
            .body(reqwest::Body::wrap_stream(stream));
        for (name, value) in headers.unwrap() {
            req = req.header(name, value);
        }
        tx.send(body[..10].to_vec()).await.unwrap();
        let rest = body[10..].to_vec();
        (tokio::spawn(async move { req.send().await.unwrap().json::<Value>().await.unwrap() }), rest)
    };
    // Load first, then the signal in the middle of it.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let signalled = Instant::now();
    let kill = std::process::Command::new("kill").args(["-TERM", &s.child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    // Well after the server stopped accepting (the workers are refused by
    // now), yet within SIGNET_SHUTDOWN_TIMEOUT_SECS.
    tokio::time::sleep(Duration::from_secs(3)).await;
    tx.send(slow.1).await.unwrap();
    drop(tx);
    let v = slow.0.await.unwrap();
    assert_eq!(v["status"], "applied", "the delivery in flight at the signal: {v}");
    let status = loop {
        if let Some(status) = s.child.try_wait().unwrap() {
            break status;
        }
        assert!(signalled.elapsed() < Duration::from_secs(25), "still running 25 s after SIGTERM");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "exit {status:?}: {}", s.output());
    assert!(signalled.elapsed() < Duration::from_secs(21), "took {:?}", signalled.elapsed());

    let mut applied = HashSet::new();
    let (mut answers, mut refused, mut unanswered) = (0, 0, 0);
    for w in workers {
        for (id, got) in w.await.unwrap() {
            match got {
                Got::Answer(status, v) => {
                    assert!(status < 500, "{id}: {status} {v} during the drain");
                    assert_eq!(v["status"], "applied", "{id}: {v}");
                    applied.insert(id);
                    answers += 1;
                }
                Got::Refused => refused += 1,
                Got::ClosedUnanswered(e) => {
                    eprintln!("{id}: closed unanswered: {e}");
                    unanswered += 1;
                }
                Got::Broken(e) => panic!("{id}: {e}"),
            }
        }
    }
    eprintln!("drain: {answers} answered, {refused} refused, {unanswered} closed unanswered");
    assert!(answers >= 12, "too little load: {answers}");
    assert_eq!(refused, 12, "every worker ends on a refused connection");
    assert!(s.output().contains("shutting down") && s.output().contains("signet stopped"), "{}", s.output());

    // Every answered delivery is claimed, and every claim has its effect.
    let db = domain::db::connect(&i.database_url).await.unwrap();
    let claims = domain::entity::inbox_claim::Entity::find().all(&db).await.unwrap();
    let reminders: HashSet<String> =
        domain::entity::reminder::Entity::find().all(&db).await.unwrap().into_iter().map(|r| r.reminder_id).collect();
    let intents: HashSet<String> = domain::entity::outbox_intent::Entity::find()
        .all(&db)
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.idempotency_key)
        .collect();
    let claimed: HashSet<&str> = claims.iter().map(|c| c.event_id.as_str()).collect();
    applied.insert("m-99-0".to_owned());
    for id in &applied {
        assert!(claimed.contains(id.as_str()), "{id} was answered applied but has no claim");
    }
    for c in &claims {
        let n = c.event_id.strip_prefix("m-").unwrap();
        match c.event_type.as_deref() {
            Some("reminder.created") => assert!(reminders.contains(&format!("r-{n}")), "{}: no reminder", c.event_id),
            Some("otp.requested") => assert!(intents.contains(&format!("otp:o-{n}")), "{}: no intent", c.event_id),
            other => panic!("{}: {other:?}", c.event_id),
        }
    }
    assert_eq!(reminders.len() + intents.len(), claims.len());
});
