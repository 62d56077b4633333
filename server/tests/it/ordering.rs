//! `POST /hooks/…` never orders reminder transitions by delivery time (issue
//! 23 item 6), for each scheme, over HTTP: a transition without
//! `occurred_at` that contradicts a later-applied state answers 202
//! `quarantined` / `ambiguous_order` and changes nothing, its retry is a
//! duplicate, and an `occurred_at` orders transitions whenever they were
//! signed.

use domain::crypto::{SigningSecret, signature};
use reqwest::StatusCode;
use sea_orm::{ConnectionTrait, Statement};
use serde_json::{Value, json};
use views::scheme::Scheme;

use crate::{
    both_engines,
    support::{Install, now},
};

/// An event with `id` (Stripe's event id; the other schemes send it as a header too).
fn event(id: &str, kind: &str, data: Value, occurred: Option<&str>) -> Vec<u8> {
    let mut body = json!({"id": id, "type": kind, "data": data});
    if let Some(at) = occurred {
        body["occurred_at"] = Value::from(at);
    }
    body.to_string().into_bytes()
}

fn scheduled(id: &str, r: &str, send_at: &str, occurred: Option<&str>) -> Vec<u8> {
    event(id, "reminder.scheduled", json!({"reminder_id": r, "send_at": send_at}), occurred)
}

async fn ordering(i: &Install, scheme: Scheme) {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    i.cli_json(&["endpoint", "create", "clinic-a", "hooks", "--scheme", scheme.as_str()]);
    let types = "reminder.created,reminder.scheduled";
    let k = i.cli_json(&["key", "provision", "clinic-a", "hooks", "--approve-as", "rita", "--event-types", types]);
    let secret = SigningSecret::parse(k["secret"].as_str().unwrap()).unwrap();
    let s = i.serve();
    let url = s.url("/hooks/clinic-a/hooks");
    let c = reqwest::Client::new();
    // Signed `age` seconds ago (GitHub signs no time: it is when it arrives).
    let post = |body: Vec<u8>, id: &str, age: i64| {
        let headers = signature::sign(scheme, &secret, &body, now() - age, id).unwrap();
        let mut r = c.post(&url).body(body);
        for (k, v) in &headers {
            r = r.header(k.as_str(), v.as_str());
        }
        async move {
            let res = r.send().await.unwrap();
            (res.status(), res.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let db = domain::db::connect(&i.database_url).await.unwrap();
    let send_at = async |r: &str| {
        let sql = format!("SELECT send_at, status FROM reminders WHERE reminder_id = '{r}'");
        let row = db.query_one_raw(Statement::from_string(db.get_database_backend(), sql)).await.unwrap().unwrap();
        (row.try_get::<i64>("", "send_at").unwrap(), row.try_get::<String>("", "status").unwrap())
    };
    let ms = |at: &str| domain::clock::parse_rfc3339(at).unwrap();

    let created = |id: &str, r: &str| {
        event(id, "reminder.created", json!({"reminder_id": r, "send_at": "2027-01-05T09:00:00Z"}), None)
    };
    assert_eq!(post(created("evt_c1", "r-1"), "evt_c1", 0).await.0, StatusCode::OK);
    let newer = scheduled("evt_new", "r-1", "2027-01-06T09:00:00Z", None);
    let (status, body) = post(newer, "evt_new", 60).await;
    assert_eq!((status, body["status"].as_str()), (StatusCode::OK, Some("applied")), "{body}");
    // A retry of an older `scheduled`, signed (or arriving) after the newer one.
    let older = scheduled("evt_old", "r-1", "2027-01-05T09:00:00Z", None);
    let (status, body) = post(older.clone(), "evt_old", 0).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body, json!({"status": "quarantined", "reason": "ambiguous_order"}));
    assert_eq!(send_at("r-1").await, (ms("2027-01-06T09:00:00Z"), "scheduled".to_owned()), "not applied");
    let (status, body) = post(older, "evt_old", -1).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!((body["status"].as_str(), body["original"].as_str()), (Some("duplicate"), Some("quarantined")));
    assert_eq!(send_at("r-1").await.0, ms("2027-01-06T09:00:00Z"));

    // With `occurred_at`, the sender's order decides, not the signing time.
    assert_eq!(post(created("evt_c2", "r-2"), "evt_c2", 0).await.0, StatusCode::OK);
    let at_ten = scheduled("evt_10", "r-2", "2027-01-06T09:00:00Z", Some("2027-01-01T10:00:00Z"));
    assert_eq!(post(at_ten, "evt_10", 60).await.1["status"], "applied");
    let at_nine = scheduled("evt_9", "r-2", "2027-01-04T09:00:00Z", Some("2027-01-01T09:00:00Z"));
    let (status, body) = post(at_nine, "evt_9", 0).await;
    assert_eq!((status, body["status"].as_str()), (StatusCode::OK, Some("stale_transition")), "{body}");
    assert_eq!(send_at("r-2").await.0, ms("2027-01-06T09:00:00Z"));
}

both_engines!(ambiguous_order_standard_webhooks, async |i: &Install| ordering(i, Scheme::StandardWebhooks).await);
both_engines!(ambiguous_order_stripe, async |i: &Install| ordering(i, Scheme::Stripe).await);
both_engines!(ambiguous_order_github, async |i: &Install| ordering(i, Scheme::Github).await);
