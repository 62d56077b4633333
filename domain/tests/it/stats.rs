//! Dashboard figures from rollups, on both engines: outcomes by reason per
//! window, latency quantiles, live operational state, tenant scoping.

use std::time::Duration;

use domain::{
    auth::Role,
    error::DomainError,
    ops::stats::{self, Window},
    receiver::{self, telemetry::Telemetry},
    registry::Scheme,
};
use serde_json::json;

use crate::{
    db_test,
    fixtures::*,
    receiver::{deliver, now_s, setup, signed, Setup},
    support::TestDb,
};

/// Delivers like the HTTP handler does: the outcome is recorded in telemetry.
async fn deliver_counted(s: &Setup, tel: &Telemetry, body: &str, id: &str, tamper: bool) {
    let mut h = signed(s, Scheme::StandardWebhooks, body.as_bytes(), now_s(), id);
    if tamper {
        h.iter_mut().filter(|(k, _)| k == "webhook-signature").for_each(|(_, v)| *v = "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=".into());
    }
    let outcome = deliver(s, &h, body.as_bytes()).await;
    let ep = receiver::resolve(&s.r, "clinic-a", "hooks").await.ok();
    tel.record(ep.as_deref(), &outcome, None, Duration::from_millis(3));
}

db_test!(dashboard_counts_come_from_rollups, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    let b = tenant(t, "clinic-b").await;
    let tel = Telemetry::default();
    for i in 0..3 {
        let body = json!({"type": "reminder.created", "data": {"reminder_id": format!("r-{i}"), "send_at": "2027-01-05T09:00:00Z"}}).to_string();
        deliver_counted(&s, &tel, &body, &format!("msg_{i}"), false).await;
    }
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let dup = json!({"type": "reminder.created", "data": {"reminder_id": "r-0", "send_at": "2027-01-05T09:00:00Z"}}).to_string();
    deliver_counted(&s, &tel, &dup, "msg_0", false).await;
    deliver_counted(&s, &tel, &dup, "msg_bad", true).await;
    let missing = json!({"type": "reminder.canceled", "data": {"reminder_id": "r-missing"}}).to_string();
    deliver_counted(&s, &tel, &missing, "msg_q", false).await;
    tel.flush(&t.db).await.unwrap();

    for window in [Window::Hour, Window::Day, Window::Week] {
        let v = stats::stats(&t.db, &admin(), Some("clinic-a"), window).await.unwrap();
        let total = |o: &str| v.series.iter().find(|s| s.outcome == o).unwrap().total;
        assert_eq!((total("applied"), total("duplicate"), total("verification_failed"), total("quarantined")), (3, 1, 1, 1), "{window:?}");
        let q = v.series.iter().find(|s| s.outcome == "quarantined").unwrap();
        assert_eq!(q.reasons[0].reason, "reminder_not_found");
        assert_eq!(v.series[0].points.len(), match window { Window::Hour => 60, Window::Day => 24, Window::Week => 168 });
        // The newest buckets hold them (the clock may just have entered the next one).
        assert_eq!(v.series[0].points.iter().rev().take(2).sum::<i64>(), 3);
        assert_eq!(v.latency.samples, 6);
        let p50 = v.latency.p50_ms.unwrap();
        assert!((2.0..=5.0).contains(&p50), "3 ms answers fall in the 2-5 ms bucket: {p50}");
        assert_eq!(v.quarantine_open, 1);
        assert_eq!(v.failing_endpoints.len(), 1);
        assert_eq!(v.failing_endpoints[0].reasons[0].reason, "mismatch");
        assert_eq!(v.failing_endpoints[0].accepted_keys, vec![s.key_id.clone()]);
        assert_eq!(v.retry_policies.len(), 1);
    }
    // The overview covers every tenant; clinic-b has nothing.
    let all = stats::stats(&t.db, &reviewer(), None, Window::Day).await.unwrap();
    assert_eq!(all.retry_policies.len(), 2);
    assert_eq!(all.series[0].total, 3);
    let other = stats::stats(&t.db, &admin(), Some("clinic-b"), Window::Day).await.unwrap();
    assert_eq!(other.series.iter().map(|s| s.total).sum::<i64>(), 0);
    assert_eq!(other.quarantine_open, 0);
    // A clinic admin sees its own tenant only, whatever it asks for.
    let bob = user(Role::ClinicAdmin, Some(&b.id));
    let own = stats::stats(&t.db, &bob, None, Window::Day).await.unwrap();
    assert_eq!(own.tenant.as_deref(), Some("clinic-b"));
    assert_eq!(own.series[0].total, 0);
    assert!(matches!(stats::stats(&t.db, &bob, Some("clinic-a"), Window::Day).await, Err(DomainError::NotFound)));
    assert_eq!(Window::parse(Some("1y")).map(|_| ()).unwrap_err().code(), "invalid_window");
});
