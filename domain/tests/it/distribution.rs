//! The schema rule of the Citus plan (docs/scaling.md), held against the
//! live catalog on both engines: every unique key of a table to be
//! distributed includes `tenant_id`.

use domain::{
    entity::{
        delivery_log, endpoint, key_failure_rollup, key_use_rollup, outbox_intent, quarantine_entry, replay_record,
    },
    evidence::distribution::{unique_keys, violations},
    receiver::telemetry::Telemetry,
};
use migrations::{
    Migrator, MigratorTrait,
    distribution::{DISTRIBUTED, REFERENCE},
};
use sea_orm::{ConnectionTrait, EntityTrait, Set};
use views::scheme::Scheme;

use crate::{
    db_test,
    fixtures::*,
    receiver::{created, deliver, now_s, setup, signed},
    support::TestDb,
};

db_test!(every_unique_key_of_a_distributed_table_includes_tenant_id, async |t: &TestDb| {
    let found = violations(&t.db, DISTRIBUTED).await.unwrap();
    assert!(found.is_empty(), "keys Citus could not enforce per shard:\n{}", found.join("\n"));
    // A name in the lists that matches no table would pass silently.
    for table in DISTRIBUTED.iter().chain(REFERENCE) {
        let keys = unique_keys(&t.db, table).await.unwrap();
        assert!(keys.is_some_and(|k| !k.is_empty()), "{table}: missing, or without a primary key");
    }
});

db_test!(a_unique_key_without_tenant_id_is_named_with_its_table, async |t: &TestDb| {
    for sql in [
        "CREATE TABLE scratch_spread (id varchar NOT NULL PRIMARY KEY, tenant_id varchar NOT NULL, \
         slug varchar NOT NULL, day bigint NOT NULL)",
        "CREATE UNIQUE INDEX ux_scratch_slug ON scratch_spread (slug)",
        "CREATE UNIQUE INDEX ux_scratch_tenant_day ON scratch_spread (tenant_id, day)",
    ] {
        t.db.execute_unprepared(sql).await.unwrap();
    }
    let pk = if t.is_postgres() { "scratch_spread_pkey" } else { "PRIMARY KEY" };
    assert_eq!(
        violations(&t.db, &["scratch_spread", "scratch_absent"]).await.unwrap(),
        vec![
            format!("scratch_spread: primary key {pk} (id) lacks tenant_id"),
            "scratch_spread: unique index ux_scratch_slug (slug) lacks tenant_id".to_owned(),
            "scratch_absent: no such table".to_owned(),
        ]
    );
});

db_test!(an_existing_database_moves_to_tenant_keys_and_keeps_every_row, async |t: &TestDb| {
    let a = tenant(t, "clinic-a").await;
    endpoint(t, "clinic-a", "reminders", None).await;
    let ep = endpoint::Entity::find().one(&t.db).await.unwrap().unwrap();
    // Back to the layout before the migration (and whatever came after it),
    // with rows in it: a replay record of a live endpoint and one of an
    // endpoint that no longer exists, a quarantine entry, an outbox intent.
    let names: Vec<String> = Migrator::migrations().iter().map(|m| m.name().to_owned()).collect();
    let at = names.iter().position(|n| n == "m20261206_000121_tenant_keys").expect("the migration is listed");
    Migrator::down(&t.db, Some((names.len() - at) as u32)).await.unwrap();
    let blob = if t.is_postgres() { "'\\x00'::bytea" } else { "X'00'" };
    for sql in [
        format!(
            "INSERT INTO replay_records (endpoint_id, message_digest, expires_at) \
             VALUES ('{}', 'd1', 1), ('gone', 'd2', 2)",
            ep.id
        ),
        format!(
            "INSERT INTO quarantine (id, tenant_id, endpoint_id, event_id, reason, status, created_at) \
             VALUES ('q1', '{}', '{}', 'evt_1', 'reminder_not_found', 'open', 0)",
            a.id, ep.id
        ),
        format!(
            "INSERT INTO outbox_intents (id, tenant_id, kind, idempotency_key, payload_ciphertext, kek_version, \
             status, attempts, next_attempt_at, created_at) VALUES ('i1', '{}', 'otp', 'otp:1', {blob}, 1, \
             'pending', 0, 0, 0)",
            a.id
        ),
    ] {
        t.db.execute_unprepared(&sql).await.unwrap();
    }
    Migrator::up(&t.db, None).await.unwrap();

    let mut replay: Vec<(String, String)> = replay_record::Entity::find()
        .all(&t.db)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.message_digest, r.tenant_id))
        .collect();
    replay.sort();
    assert_eq!(replay, vec![("d1".to_owned(), a.id.clone()), ("d2".to_owned(), String::new())]);
    let q = quarantine_entry::Entity::find_by_id((a.id.clone(), "q1".to_owned())).one(&t.db).await.unwrap();
    assert_eq!(q.map(|q| (q.event_id, q.status.as_str())), Some(("evt_1".to_owned(), "open")));
    let i = outbox_intent::Entity::find_by_id((a.id.clone(), "i1".to_owned())).one(&t.db).await.unwrap();
    assert_eq!(i.map(|i| i.idempotency_key), Some("otp:1".to_owned()));
    for (table, key) in [
        ("replay_records", vec!["tenant_id", "endpoint_id", "message_digest", "signed_at"]),
        ("quarantine", vec!["tenant_id", "id"]),
        ("outbox_intents", vec!["tenant_id", "id"]),
    ] {
        let keys = unique_keys(&t.db, table).await.unwrap().unwrap();
        let pk = keys.iter().find(|k| k.kind == "primary key").expect("a primary key");
        assert_eq!(pk.columns, key, "{table}");
    }
    // The guarantees the old keys gave still hold in the catalog.
    for c in domain::evidence::catalog::constraints(&t.db).await.unwrap() {
        assert!(c.present, "{} on {} is gone", c.id, c.table);
    }
    // And the same signed message is still refused a second time.
    let again = replay_record::Entity::insert(replay_record::ActiveModel {
        tenant_id: Set(a.id.clone()),
        endpoint_id: Set(ep.id.clone()),
        message_digest: Set("d1".into()),
        signed_at: Set(0),
        expires_at: Set(9),
    })
    .on_conflict_do_nothing()
    .exec_without_returning(&t.db)
    .await
    .unwrap();
    assert!(!matches!(again, sea_orm::TryInsertResult::Inserted(n) if n > 0), "{again:?}");
});

// SQLite's delivery log and key rollups were keyed without the tenant until
// m20261206_000190 (PostgreSQL's since m20261206_000100): rows written
// before it are all there after it, under the keys PostgreSQL has, and the
// rollup flush's upsert (one conflict target on both engines) adds to them.
db_test!(the_delivery_log_and_key_rollups_keep_every_row_under_tenant_keys, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    let ep = s.r.resolve(&"clinic-a".parse().unwrap(), &"hooks".parse().unwrap()).await.unwrap();
    let (tenant, endpoint, key) = (ep.tenant_id.clone(), ep.endpoint_id.clone(), s.key_id.clone());
    let names: Vec<String> = Migrator::migrations().iter().map(|m| m.name().to_owned()).collect();
    let at = names.iter().position(|n| n == "m20261206_000190_sqlite_tenant_keys").expect("the migration is listed");
    Migrator::down(&t.db, Some((names.len() - at) as u32)).await.unwrap();
    // Within today's partitions on PostgreSQL: the hour as the flush counts it.
    let now = domain::clock::now_ms();
    let hour = now / 3_600_000;
    for sql in [
        format!(
            "INSERT INTO delivery_log (id, tenant_id, endpoint_id, event_id, answered_at, status, answer, key_id, \
             scheme, message_digest) VALUES ('l1', '{tenant}', '{endpoint}', 'evt_1', {now}, 200, 'duplicate', \
             '{key}', 'standard-webhooks', NULL), ('l2', 'tb', 'eb', 'evt_1', {now}, 401, 'signature_mismatch', \
             NULL, 'github', 'd')"
        ),
        format!(
            "INSERT INTO key_use_rollups (hour, key_id, tenant_id, endpoint_id, count) \
             VALUES ({hour}, '{key}', '{tenant}', '{endpoint}', 3), ({hour}, 'k2', 'tb', 'eb', 4)"
        ),
        format!(
            "INSERT INTO key_failure_rollups (hour, key_id, tenant_id, endpoint_id, reason, count) \
             VALUES ({hour}, '{key}', '{tenant}', '{endpoint}', 'mismatch', 5), \
             ({hour}, '{key}', '{tenant}', '{endpoint}', 'expired', 6)"
        ),
    ] {
        t.db.execute_unprepared(&sql).await.unwrap();
    }
    Migrator::up(&t.db, None).await.unwrap();

    let mut logged: Vec<(String, String, i32)> = delivery_log::Entity::find()
        .all(&t.db)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.id, r.tenant_id, r.status))
        .collect();
    logged.sort();
    assert_eq!(logged, [("l1".into(), tenant.clone(), 200), ("l2".into(), "tb".into(), 401)]);
    for (table, key) in [
        ("delivery_log", vec!["tenant_id", "id", "answered_at"]),
        ("key_use_rollups", vec!["hour", "tenant_id", "key_id"]),
        ("key_failure_rollups", vec!["hour", "tenant_id", "key_id", "reason"]),
    ] {
        let keys = unique_keys(&t.db, table).await.unwrap().unwrap();
        let pk = keys.iter().find(|k| k.kind == "primary key").expect("a primary key");
        assert_eq!(pk.columns, key, "{table}");
    }

    // One accepted and one tampered delivery under the key, counted and
    // flushed: the migrated rows are the ones the upsert adds to.
    let tel = Telemetry::default();
    let body = created("r-1");
    let good = signed(&s, Scheme::StandardWebhooks, &body, now_s(), "msg_1");
    let mut tampered = signed(&s, Scheme::StandardWebhooks, &body, now_s(), "msg_2");
    let forged = "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    tampered.iter_mut().filter(|(k, _)| k == "webhook-signature").for_each(|(_, v)| *v = forged.into());
    for h in [good, tampered] {
        let outcome = deliver(&s, &h, &body).await;
        tel.record(Some(&ep), &outcome, Some(&key), std::time::Duration::from_millis(1));
    }
    tel.flush(&t.db).await.unwrap();
    // The flush counts in its own clock's hour: if a new hour began since
    // the rows went in, its counts are rows beside them, so only the sums
    // can be checked then.
    let new_hour = domain::clock::now_ms() / 3_600_000 != hour;
    let summed = |mut rows: Vec<(String, i64)>| {
        if new_hour {
            let mut sums = std::collections::BTreeMap::<String, i64>::new();
            rows.iter().for_each(|(k, n)| *sums.entry(k.clone()).or_default() += n);
            return sums.into_iter().collect();
        }
        rows.sort();
        rows
    };
    let uses =
        key_use_rollup::Entity::find().all(&t.db).await.unwrap().into_iter().map(|r| (r.key_id, r.count)).collect();
    assert_eq!(summed(uses), [("k2".into(), 4), (key.clone(), 4)]);
    let failed =
        key_failure_rollup::Entity::find().all(&t.db).await.unwrap().into_iter().map(|r| (r.reason, r.count)).collect();
    assert_eq!(summed(failed), [("expired".into(), 6), ("mismatch".into(), 6)]);
});
