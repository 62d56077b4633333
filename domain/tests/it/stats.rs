//! Dashboard figures from rollups, on both engines: outcomes by reason per
//! window, latency quantiles, live operational state, tenant scoping.

use std::time::Duration;

use domain::{
    crypto::{SigningSecret, signature},
    error::DomainError,
    receiver::{self, telemetry::Telemetry},
    stats::{self, Window},
};
use serde_json::json;
use views::{outbox::OutboxStatus, roles::Role, scheme::Scheme};

use crate::{
    db_test,
    fixtures::*,
    receiver::{Setup, deliver, now_s, setup, signed},
    support::TestDb,
};

/// Delivers like the HTTP handler does: the outcome is recorded in telemetry.
async fn deliver_counted(s: &Setup, tel: &Telemetry, body: &str, id: &str, tamper: bool) {
    let mut h = signed(s, Scheme::StandardWebhooks, body.as_bytes(), now_s(), id);
    if tamper {
        h.iter_mut()
            .filter(|(k, _)| k == "webhook-signature")
            .for_each(|(_, v)| *v = "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=".into());
    }
    let outcome = deliver(s, &h, body.as_bytes()).await;
    let ep = s.r.resolve(&"clinic-a".parse().unwrap(), &"hooks".parse().unwrap()).await.ok();
    tel.record(ep.as_deref(), &outcome, None, Duration::from_millis(3));
}

db_test!(dashboard_counts_come_from_rollups, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    let b = tenant(t, "clinic-b").await;
    let tel = Telemetry::default();
    for i in 0..3 {
        let data = json!({"reminder_id": format!("r-{i}"), "send_at": "2027-01-05T09:00:00Z"});
        let body = json!({"type": "reminder.created", "data": data}).to_string();
        deliver_counted(&s, &tel, &body, &format!("msg_{i}"), false).await;
    }
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let dup = json!({"type": "reminder.created", "data": {"reminder_id": "r-0", "send_at": "2027-01-05T09:00:00Z"}})
        .to_string();
    deliver_counted(&s, &tel, &dup, "msg_0", false).await;
    deliver_counted(&s, &tel, &dup, "msg_bad", true).await;
    let missing = json!({"type": "reminder.canceled", "data": {"reminder_id": "r-missing"}}).to_string();
    deliver_counted(&s, &tel, &missing, "msg_q", false).await;
    tel.flush(&t.db).await.unwrap();

    for window in [Window::Hour, Window::Day, Window::Week] {
        let v = stats::stats(&t.db, &admin(), Some(&"clinic-a".parse().unwrap()), window).await.unwrap();
        let total = |o: &str| v.series.iter().find(|s| s.outcome == o).unwrap().total;
        assert_eq!(
            (total("applied"), total("duplicate"), total("verification_failed"), total("quarantined")),
            (3, 1, 1, 1),
            "{window:?}"
        );
        let q = v.series.iter().find(|s| s.outcome == "quarantined").unwrap();
        assert_eq!(q.reasons[0].reason, "reminder_not_found");
        assert_eq!(
            v.series[0].points.len(),
            match window {
                Window::Hour => 60,
                Window::Day => 24,
                Window::Week => 168,
            }
        );
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
    let other = stats::stats(&t.db, &admin(), Some(&"clinic-b".parse().unwrap()), Window::Day).await.unwrap();
    assert_eq!(other.series.iter().map(|s| s.total).sum::<i64>(), 0);
    assert_eq!(other.quarantine_open, 0);
    // A clinic admin sees its own tenant only, whatever it asks for.
    let bob = user(Role::ClinicAdmin, Some(&b.id));
    let own = stats::stats(&t.db, &bob, None, Window::Day).await.unwrap();
    assert_eq!(own.tenant.as_ref().map(|t| t.as_str()), Some("clinic-b"));
    assert_eq!(own.series[0].total, 0);
    assert!(matches!(
        stats::stats(&t.db, &bob, Some(&"clinic-a".parse().unwrap()), Window::Day).await,
        Err(DomainError::NotFound)
    ));
    assert_eq!(Window::parse(Some("1y")).map(|_| ()).unwrap_err().code(), "invalid_window");
});

db_test!(outbox_gauges_are_sampled_per_bucket, async |t: &TestDb| {
    use domain::{clock, crypto::Aad, entity::outbox_intent, stats::gauges};
    use sea_orm::{EntityTrait, Set};
    let a = tenant(t, "clinic-a").await;
    tenant(t, "clinic-b").await;
    let now = clock::now_ms();
    t.vault.reserve_seals(&t.db, 3).await.unwrap();
    for i in 0..3 {
        let id = format!("int_{i}");
        let (sealed, kek) = t.vault.seal(&Aad::outbox_payload(&a.id, &id), b"{}").unwrap();
        outbox_intent::Entity::insert(outbox_intent::ActiveModel {
            id: Set(id),
            tenant_id: Set(a.id.clone()),
            kind: Set("otp".into()),
            idempotency_key: Set(format!("otp:{i}")),
            payload_ciphertext: Set(sealed),
            kek_version: Set(kek as i32),
            status: Set(OutboxStatus::Pending),
            attempts: Set(0),
            next_attempt_at: Set(now),
            created_at: Set(now - 90_000),
            ..Default::default()
        })
        .exec_without_returning(&t.db)
        .await
        .unwrap();
    }
    gauges::sample(&t.db, now).await.unwrap();
    // A later, lower sample in the same bucket does not lower the bucket's value.
    outbox_intent::Entity::delete_by_id((a.id.clone(), "int_0".to_owned())).exec(&t.db).await.unwrap();
    gauges::sample(&t.db, now).await.unwrap();
    for window in [Window::Hour, Window::Day] {
        let v = stats::stats(&t.db, &admin(), Some(&"clinic-a".parse().unwrap()), window).await.unwrap();
        // The newest buckets (the clock may just have entered the next one).
        let newest = |p: &[i64]| p.iter().rev().take(2).copied().max().unwrap();
        assert_eq!(newest(&v.outbox.backlog_points), 3, "{window:?}");
        assert!(newest(&v.outbox.oldest_age_points) >= 90, "{window:?}");
        assert_eq!(v.outbox.backlog, 2, "the tile is live");
        let all = stats::stats(&t.db, &admin(), None, window).await.unwrap();
        assert_eq!(newest(&all.outbox.backlog_points), 3);
        let b = stats::stats(&t.db, &admin(), Some(&"clinic-b".parse().unwrap()), window).await.unwrap();
        assert!(b.outbox.backlog_points.iter().all(|p| *p == 0));
    }
});

db_test!(verification_failures_are_counted_under_a_key, async |t: &TestDb| {
    use domain::entity::signing_key;
    use sea_orm::EntityTrait;
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    let tel = Telemetry::default();
    let ep = s.r.resolve(&"clinic-a".parse().unwrap(), &"hooks".parse().unwrap()).await.unwrap();
    let run = |headers: Vec<(String, String)>, body: Vec<u8>, hint: Option<String>| {
        let (s, tel, ep) = (&s, &tel, ep.clone());
        async move {
            let mut h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            if let Some(hint) = hint.as_deref() {
                h.push(("signet-key-id", hint));
            }
            let delivery = receiver::Buffered { headers: &h[..], body: bytes::Bytes::from(body) };
            let receipt =
                receiver::receive(&s.r, &"clinic-a".parse().unwrap(), &"hooks".parse().unwrap(), delivery).await;
            let (outcome, key) = (receipt.outcome, receipt.key_id);
            tel.record(Some(&ep), &outcome, key.as_deref(), Duration::from_millis(2));
            (outcome, key)
        }
    };
    // Before any key verified, a bad signature naming no key counts under none.
    let body = b"{}".to_vec();
    let forged = signature::sign(Scheme::StandardWebhooks, &SigningSecret::generate(), &body, now_s(), "m0").unwrap();
    assert_eq!(run(forged.clone(), body.clone(), None).await.1, None);
    // Once the key verified, the endpoint's next bad signature counts under it.
    let good = json!({"type": "reminder.created", "data": {"reminder_id": "r-1", "send_at": "2027-01-05T09:00:00Z"}})
        .to_string()
        .into_bytes();
    let (ok, key) = run(signed(&s, Scheme::StandardWebhooks, &good, now_s(), "m1"), good.clone(), None).await;
    assert!(matches!(ok, receiver::Outcome::Applied { .. }));
    assert_eq!(key.as_deref(), Some(s.key_id.as_str()));
    assert_eq!(run(forged.clone(), body.clone(), None).await.1.as_deref(), Some(s.key_id.as_str()));
    // A request naming the key, and a matching signature outside the window.
    assert_eq!(run(forged, body.clone(), Some(s.key_id.clone())).await.1.as_deref(), Some(s.key_id.as_str()));
    let stale = signed(&s, Scheme::StandardWebhooks, &good, now_s() - 3600, "m2");
    let (o, k) = run(stale, good, None).await;
    assert_eq!(o, receiver::Outcome::Refused(receiver::Refusal::TimestampStale));
    assert_eq!(k.as_deref(), Some(s.key_id.as_str()));
    tel.flush(&t.db).await.unwrap();
    let row = signing_key::Entity::find_by_id(s.key_id.clone()).one(&t.db).await.unwrap().unwrap();
    assert_eq!(row.failure_count, 3);
    assert_eq!(row.last_failure_reason.as_deref(), Some("stale"));
    assert!(row.last_failure_at.is_some());
    assert_eq!(row.verified_count, 1, "failures are not counted as uses");
    let v = stats::stats(&t.db, &admin(), Some(&"clinic-a".parse().unwrap()), Window::Day).await.unwrap();
    let failing = &v.failing_endpoints[0];
    assert_eq!(failing.failures, 4);
    assert_eq!(failing.by_key.len(), 1);
    assert_eq!((failing.by_key[0].key_id.as_str(), failing.by_key[0].failures), (s.key_id.as_str(), 3));
    let key = domain::registry::keys::get(&t.db, &admin(), &s.key_id.parse().unwrap()).await.unwrap();
    assert_eq!((key.failure_count, key.last_failure_reason.as_deref()), (3, Some("stale")));
    // The evidence bundle's credential row: successes, failures by reason
    // and the last failure, over the window.
    let e =
        domain::evidence::bundle::collect(&t.db, &t.vault, &admin(), Some(&"clinic-a".parse().unwrap())).await.unwrap();
    let v = &e.credentials.iter().find(|c| c.key_id == s.key_id).unwrap().verification;
    assert_eq!((v.successes, v.failures), (1, 3), "{v:?}");
    assert_eq!(v.failures_by_reason.iter().map(|r| r.count).sum::<i64>(), 3);
    assert!(v.failures_by_reason.iter().any(|r| r.reason == "stale" && r.count == 1), "{v:?}");
    assert_eq!(v.last_failure_reason.as_deref(), Some("stale"));
    assert!(v.last_failure_at.is_some());
    let html = evidence_html::render(&e, "x");
    assert!(html.contains("1 verified · 3 failed"), "the printable page shows them");

    // A later flush in the same hour adds to the same rows (the upsert's key
    // holds the tenant on PostgreSQL).
    let good = json!({"type": "reminder.created", "data": {"reminder_id": "r-2", "send_at": "2027-01-05T09:00:00Z"}})
        .to_string()
        .into_bytes();
    run(signed(&s, Scheme::StandardWebhooks, &good, now_s(), "m3"), good.clone(), None).await;
    run(signed(&s, Scheme::StandardWebhooks, &good, now_s() - 3600, "m4"), good, None).await;
    tel.flush(&t.db).await.unwrap();
    let e =
        domain::evidence::bundle::collect(&t.db, &t.vault, &admin(), Some(&"clinic-a".parse().unwrap())).await.unwrap();
    let v = &e.credentials.iter().find(|c| c.key_id == s.key_id).unwrap().verification;
    assert_eq!((v.successes, v.failures), (2, 4), "{v:?}");
    assert!(v.failures_by_reason.iter().any(|r| r.reason == "stale" && r.count == 2), "{v:?}");
});

/// Every rollup row of `table` summed per (bucket, outcome, reason): the
/// per-endpoint rows (`totals` false) or the total rows.
async fn summed(t: &TestDb, table: &str, time_col: &str, totals: bool) -> Vec<(i64, String, String, i64)> {
    use sea_orm::{ConnectionTrait, Statement};
    let rows = if totals { "tenant_id = '*' AND endpoint_id = '*'" } else { "tenant_id <> '*'" };
    let sql = format!(
        "SELECT {time_col} AS b, outcome, reason, CAST(SUM(count) AS BIGINT) AS n FROM {table} WHERE {rows} \
         GROUP BY {time_col}, outcome, reason ORDER BY {time_col}, outcome, reason"
    );
    let found = t.db.query_all_raw(Statement::from_string(t.db.get_database_backend(), sql)).await.unwrap();
    found
        .iter()
        .map(|r| {
            let (outcome, reason) = (r.try_get("", "outcome").unwrap(), r.try_get("", "reason").unwrap());
            (r.try_get("", "b").unwrap(), outcome, reason, r.try_get("", "n").unwrap())
        })
        .collect()
}

db_test!(every_tenants_figures_come_from_total_rows_that_match_the_endpoints, async |t: &TestDb| {
    use receiver::{Outcome, Refusal};
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    tenant(t, "clinic-b").await;
    endpoint(t, "clinic-b", "hooks", None).await;
    let a = s.r.resolve(&"clinic-a".parse().unwrap(), &"hooks".parse().unwrap()).await.unwrap();
    let b = s.r.resolve(&"clinic-b".parse().unwrap(), &"hooks".parse().unwrap()).await.unwrap();
    let applied = |n: usize| Outcome::Applied { event_id: format!("evt_{n}") };
    let mismatch = Outcome::Refused(Refusal::SignatureMismatch);
    let unknown = Outcome::Refused(Refusal::UnknownEndpoint);
    // Key ids as the receiver names them (the rows need no key behind them).
    let keys: Vec<String> = (1..=4).map(|k| format!("key_{k:032x}")).collect();
    // Two processes' telemetry, flushed at once, round after round: they
    // share every total row, and neither flush may fail on the other.
    let (one, two) = (Telemetry::default(), Telemetry::default());
    for round in 0..12 {
        for (i, tel) in [&one, &two].into_iter().enumerate() {
            for n in 0..3 {
                // Under two keys, so the processes share the keys' rows too.
                let key = &keys[(n + i) % 2];
                tel.record(Some(&a), &applied(round * 10 + n), Some(key), Duration::from_millis(3 + n as u64 * 20));
            }
            tel.record(Some(&b), &applied(round), None, Duration::from_millis(1));
            for key in &keys[2..] {
                tel.record(Some(&b), &mismatch, Some(key), Duration::from_millis(1));
            }
            if i == 1 {
                tel.record(None, &unknown, None, Duration::from_millis(1));
            }
        }
        let (r1, r2) = tokio::join!(one.flush(&t.db), two.flush(&t.db));
        r1.unwrap();
        r2.unwrap();
    }
    for (table, time_col) in [("event_rollups", "minute"), ("event_rollups_hourly", "hour")] {
        let totals = summed(t, table, time_col, true).await;
        assert!(!totals.is_empty(), "{table}");
        assert_eq!(totals, summed(t, table, time_col, false).await, "{table}: the totals sum every other row");
    }
    for window in Window::ALL {
        let all = stats::stats(&t.db, &admin(), None, window).await.unwrap();
        let total = |v: &views::stats::StatsView, o: &str| v.series.iter().find(|s| s.outcome == o).unwrap().total;
        let clinic_a = stats::stats(&t.db, &admin(), Some(&"clinic-a".parse().unwrap()), window).await.unwrap();
        let clinic_b = stats::stats(&t.db, &admin(), Some(&"clinic-b".parse().unwrap()), window).await.unwrap();
        assert_eq!((total(&clinic_a, "applied"), total(&clinic_b, "applied")), (72, 24), "{window:?}");
        assert_eq!(total(&all, "applied"), 96, "{window:?}");
        // Failures of both tenants and of requests that named no endpoint.
        assert_eq!(total(&all, "verification_failed"), 48 + 12, "{window:?}");
        assert_eq!(all.latency.samples, 72 + 24 + 48 + 12, "{window:?}");
        let slowest = all.latency.p99_ms.unwrap();
        assert!((25.0..=50.0).contains(&slowest), "clinic-a's 43 ms answers lead the p99: {slowest}");
        // The failing endpoints' panel still names the endpoint, never a total row.
        assert_eq!(all.failing_endpoints.len(), 1, "{window:?}");
        assert_eq!(all.failing_endpoints[0].endpoint.as_str(), "hooks");
        assert_eq!(all.failing_endpoints[0].failures, 48);
    }
});

db_test!(an_existing_database_gains_total_rows_for_what_it_stored, async |t: &TestDb| {
    use migrations::{Migrator, MigratorTrait};
    use sea_orm::ConnectionTrait;
    let names: Vec<String> = Migrator::migrations().iter().map(|m| m.name().to_owned()).collect();
    let at = names.iter().position(|n| n == "m20261207_000210_rollup_totals").expect("the migration is listed");
    Migrator::down(&t.db, Some((names.len() - at) as u32)).await.unwrap();
    let minute = domain::clock::now_ms() / 60_000;
    for (tenant, endpoint, outcome, reason, count) in [
        ("t-a", "e-a1", "applied", "", 5),
        ("t-a", "e-a2", "applied", "", 7),
        ("t-b", "e-b1", "applied", "", 11),
        ("t-b", "e-b1", "verification_failed", "mismatch", 2),
        ("", "", "verification_failed", "unknown_endpoint", 3),
    ] {
        for (table, col, bucket) in [("event_rollups", "minute", minute), ("event_rollups_hourly", "hour", minute / 60)]
        {
            t.db.execute_unprepared(&format!(
                "INSERT INTO {table} ({col}, tenant_id, endpoint_id, outcome, reason, count) \
                 VALUES ({bucket}, '{tenant}', '{endpoint}', '{outcome}', '{reason}', {count})"
            ))
            .await
            .unwrap();
        }
    }
    Migrator::up(&t.db, None).await.unwrap();
    for (table, time_col) in [("event_rollups", "minute"), ("event_rollups_hourly", "hour")] {
        let totals = summed(t, table, time_col, true).await;
        assert_eq!(totals.len(), 3, "{table}: applied, and two failure reasons");
        assert_eq!(totals, summed(t, table, time_col, false).await, "{table}");
    }
    for window in Window::ALL {
        let all = stats::stats(&t.db, &admin(), None, window).await.unwrap();
        let total = |o: &str| all.series.iter().find(|s| s.outcome == o).unwrap().total;
        assert_eq!((total("applied"), total("verification_failed")), (23, 5), "{window:?}");
    }
    // And back: the total rows go, the others stay.
    Migrator::down(&t.db, Some((names.len() - at) as u32)).await.unwrap();
    assert!(summed(t, "event_rollups_hourly", "hour", true).await.is_empty());
    assert_eq!(summed(t, "event_rollups_hourly", "hour", false).await.len(), 3);
});
