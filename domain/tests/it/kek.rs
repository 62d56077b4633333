//! KEK rotation reseals every sealed column, resumes after an interruption,
//! and a version is retired only once nothing uses it.

use domain::{
    DomainError,
    crypto::{Aad, MasterKey},
    entity::{event_body, kek_rewrap, kek_version, outbox_intent, service_key, signing_key},
    kek,
    receiver::Outcome,
    registry::keys::{self, Approval, ProvisionRequest},
};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::json;
use views::{jobs::RunStatus, scheme::Scheme};

use crate::{
    db_test,
    fixtures::*,
    receiver::{created, deliver, now_s, setup, signed},
    support::TestDb,
};

/// Every sealed row opens with a vault loaded afresh from the database.
pub(crate) async fn everything_opens(t: &TestDb) -> usize {
    let fresh = domain::startup::open_vault(&t.db, MasterKey::from_base64(&t.master_b64).unwrap()).await.unwrap();
    let ring = fresh.ring();
    let mut n = 0;
    for k in signing_key::Entity::find().all(&t.db).await.unwrap() {
        if k.secret_ciphertext.is_empty() {
            continue; // an uploaded public key: nothing sealed
        }
        ring.open(&Aad::signing_key(&k.tenant_id, &k.endpoint_id, &k.id), &k.secret_ciphertext).unwrap();
        n += 1;
    }
    for k in service_key::Entity::find().all(&t.db).await.unwrap() {
        ring.open(&Aad::service_key(&k.purpose, &k.key_id, &k.binding), &k.ciphertext).unwrap();
        n += 1;
    }
    for o in outbox_intent::Entity::find().all(&t.db).await.unwrap() {
        ring.open(&Aad::outbox_payload(&o.tenant_id, &o.id), &o.payload_ciphertext).unwrap();
        n += 1;
    }
    for b in event_body::Entity::find().all(&t.db).await.unwrap() {
        ring.open(&Aad::event_body(&b.tenant_id, &b.endpoint_id, &b.event_id), &b.body_ciphertext).unwrap();
        n += 1;
    }
    n
}

/// Rows per version across every source.
pub(crate) async fn by_version(t: &TestDb) -> std::collections::BTreeMap<u32, u64> {
    let mut out = std::collections::BTreeMap::new();
    for ((_, v), n) in kek::counts(&t.db).await.unwrap() {
        *out.entry(v).or_default() += n;
    }
    out
}

/// A registry, events with bodies, outbox intents (an OTP among them) and
/// the service keys, all under version 1.
pub(crate) async fn fill(t: &TestDb) -> usize {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    for i in 0..5 {
        keys::provision(
            &t.db,
            &t.vault,
            &admin(),
            &"clinic-a".parse().unwrap(),
            &"hooks".parse().unwrap(),
            ProvisionRequest::default(),
            Approval::Pending,
        )
        .await
        .unwrap();
        let body = created(&format!("r-{i}"));
        assert!(matches!(
            deliver(&s, &signed(&s, Scheme::StandardWebhooks, &body, now_s(), &format!("m{i}")), &body).await,
            Outcome::Applied { .. }
        ));
    }
    let otp = json!({"type": "otp.requested", "data": {"otp_request_id": "otp-1", "channel": "sms"}})
        .to_string()
        .into_bytes();
    assert!(matches!(
        deliver(&s, &signed(&s, Scheme::StandardWebhooks, &otp, now_s(), "m-otp"), &otp).await,
        Outcome::Applied { .. }
    ));
    domain::service_keys::evidence_signer(&t.db, &t.vault).await.unwrap();
    everything_opens(t).await
}

/// Pretends the newest version was added long enough ago to retire others.
async fn age_versions(t: &TestDb) {
    kek_version::Entity::update_many()
        .col_expr(kek_version::Column::CreatedAt, sea_orm::sea_query::Expr::value(0i64))
        .exec(&t.db)
        .await
        .unwrap();
}

db_test!(rotation_reseals_every_sealed_column_and_retires_the_old_version, async |t: &TestDb| {
    let sealed = fill(t).await;
    assert!(sealed >= 14, "keys, service keys, intents and bodies: {sealed}");
    assert_eq!(by_version(t).await.keys().copied().collect::<Vec<_>>(), vec![1]);
    let rotation = kek::rotate(&t.db, &t.vault, &admin(), kek::DEFAULT_STALE_AFTER_MS).await.unwrap();
    assert!(rotation.added_version);
    assert_eq!(rotation.kek_version, 2);
    assert_eq!(rotation.rewrap.total, sealed as u64);
    let mut seen = Vec::new();
    let done = kek::run(&t.db, &t.vault, &rotation.rewrap.id, |v| seen.push(v.clone())).await.unwrap();
    assert_eq!(done.status, RunStatus::Finished);
    assert_eq!(done.rewrapped, sealed as u64, "each row resealed once");
    assert!(seen.windows(2).all(|w| w[0].scanned <= w[1].scanned), "progress only moves forward");
    assert_eq!(by_version(t).await.into_iter().collect::<Vec<_>>(), vec![(2, sealed as u64)]);
    assert_eq!(everything_opens(t).await, sealed);
    // Version 1 is unused now, but the newest is a moment old: instances may
    // not all have loaded it yet.
    let early = kek::retire(&t.db, &t.vault, &admin(), 1).await;
    assert!(matches!(early, Err(DomainError::Conflict { code: "kek_rotated_recently", .. })), "{early:?}");
    age_versions(t).await;
    assert!(matches!(
        kek::retire(&t.db, &t.vault, &admin(), 2).await,
        Err(DomainError::Conflict { code: "kek_newest", .. })
    ));
    let retired = kek::retire(&t.db, &t.vault, &admin(), 1).await.unwrap();
    assert_eq!(retired.version, 1);
    assert!(kek_version::Entity::find_by_id(1).one(&t.db).await.unwrap().is_none(), "the key itself is gone");
    assert!(matches!(
        kek::retire(&t.db, &t.vault, &admin(), 1).await,
        Err(DomainError::Conflict { code: "kek_retired", .. })
    ));
    let o = kek::overview(&t.db, &admin(), kek::Counting::Always, kek::DEFAULT_STALE_AFTER_MS).await.unwrap();
    assert_eq!(o.versions.len(), 1);
    assert_eq!(o.retired.len(), 1);
    assert_eq!(o.stale_rows, 0);
    assert_eq!(everything_opens(t).await, sealed);
    // Only administrators manage KEKs.
    for who in [reviewer(), user(views::roles::Role::Oncall, None)] {
        assert!(matches!(
            kek::overview(&t.db, &who, kek::Counting::Always, kek::DEFAULT_STALE_AFTER_MS).await,
            Err(DomainError::Forbidden)
        ));
        assert!(matches!(
            kek::rotate(&t.db, &t.vault, &who, kek::DEFAULT_STALE_AFTER_MS).await,
            Err(DomainError::Forbidden)
        ));
    }
});

db_test!(public_keys_seal_nothing_and_rewraps_pass_them_by, async |t: &TestDb| {
    let sealed = fill(t).await;
    let public = domain::crypto::asymmetric::PrivateKey::generate().public_key().encode();
    let req = ProvisionRequest { credential: keys::NewCredential::PublicKey(public.clone()), ..Default::default() };
    let k = keys::provision(
        &t.db,
        &t.vault,
        &admin(),
        &"clinic-a".parse().unwrap(),
        &"hooks".parse().unwrap(),
        req,
        Approval::Pending,
    )
    .await
    .unwrap();
    assert!(k.secret.is_none(), "nothing secret to show");
    assert_eq!(k.key.public_key.as_deref(), Some(public.as_str()));
    assert_eq!(everything_opens(t).await, sealed, "the public key added no sealed row");
    assert_eq!(by_version(t).await.into_iter().collect::<Vec<_>>(), vec![(1, sealed as u64)]);
    let rotation = kek::rotate(&t.db, &t.vault, &admin(), kek::DEFAULT_STALE_AFTER_MS).await.unwrap();
    assert_eq!(rotation.rewrap.total, sealed as u64);
    let done = kek::run(&t.db, &t.vault, &rotation.rewrap.id, |_| {}).await.unwrap();
    assert_eq!(done.status, RunStatus::Finished, "{done:?}");
    assert_eq!(done.rewrapped, sealed as u64);
    let row = signing_key::Entity::find_by_id(k.key.key_id.clone()).one(&t.db).await.unwrap().unwrap();
    assert_eq!((row.kek_version, row.secret_ciphertext.len()), (0, 0), "left as it was");
    assert_eq!(row.public_key.as_deref(), Some(public.as_str()));
    age_versions(t).await;
    kek::retire(&t.db, &t.vault, &admin(), 1).await.unwrap();
});

// A pair Signet generated keeps its private key sealed (for test
// deliveries): a rewrap moves it like any sealed row, so retiring the old
// version never strands it, and it still opens to the key that was shown.
db_test!(a_generated_pairs_private_key_is_sealed_and_rewrapped, async |t: &TestDb| {
    let sealed = fill(t).await;
    let req = ProvisionRequest { credential: keys::NewCredential::GenerateEd25519, ..Default::default() };
    let k = keys::provision(
        &t.db,
        &t.vault,
        &admin(),
        &"clinic-a".parse().unwrap(),
        &"hooks".parse().unwrap(),
        req,
        Approval::Pending,
    )
    .await
    .unwrap();
    let shown = k.secret.as_ref().map(|s| s.expose().to_owned()).unwrap();
    assert!(shown.starts_with("whsk_"), "the private key is shown once");
    assert_eq!(by_version(t).await.into_iter().collect::<Vec<_>>(), vec![(1, sealed as u64 + 1)]);
    let rotation = kek::rotate(&t.db, &t.vault, &admin(), kek::DEFAULT_STALE_AFTER_MS).await.unwrap();
    assert_eq!(rotation.rewrap.total, sealed as u64 + 1);
    let done = kek::run(&t.db, &t.vault, &rotation.rewrap.id, |_| {}).await.unwrap();
    assert_eq!(done.status, RunStatus::Finished, "{done:?}");
    age_versions(t).await;
    kek::retire(&t.db, &t.vault, &admin(), 1).await.unwrap();
    let row = signing_key::Entity::find_by_id(k.key.key_id.clone()).one(&t.db).await.unwrap().unwrap();
    assert_eq!(row.kek_version, 2, "rewrapped under the new version");
    let opened = keys::open_secret(&t.db, &t.vault, &row).await.unwrap();
    assert_eq!(opened.expose(), shown);
    assert_eq!(everything_opens(t).await, sealed + 1);
});

db_test!(a_version_that_still_seals_rows_cannot_be_retired, async |t: &TestDb| {
    let sealed = fill(t).await;
    let rotation = kek::rotate(&t.db, &t.vault, &admin(), kek::DEFAULT_STALE_AFTER_MS).await.unwrap();
    age_versions(t).await;
    // The rewrap has not run: version 1 still seals everything.
    match kek::retire(&t.db, &t.vault, &admin(), 1).await {
        Err(DomainError::Conflict { code: "kek_in_use", message }) => {
            assert!(message.contains("event_bodies"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    assert!(kek_version::Entity::find_by_id(1).one(&t.db).await.unwrap().is_some());
    kek::run(&t.db, &t.vault, &rotation.rewrap.id, |_| {}).await.unwrap();
    kek::retire(&t.db, &t.vault, &admin(), 1).await.unwrap();
    assert_eq!(everything_opens(t).await, sealed);
});

db_test!(an_interrupted_rewrap_resumes_where_it_stopped, async |t: &TestDb| {
    let sealed = fill(t).await;
    let rotation = kek::rotate(&t.db, &t.vault, &admin(), kek::DEFAULT_STALE_AFTER_MS).await.unwrap();
    let job = kek_rewrap::Entity::find_by_id(rotation.rewrap.id.clone()).one(&t.db).await.unwrap().unwrap();
    // One window (the signing keys), then the runner dies.
    let after_one = kek::step(&t.db, &t.vault, &job.id, &job.runner, kek::WINDOW).await.unwrap().unwrap();
    assert!(after_one.rewrapped > 0 && after_one.rewrapped < sealed as u64, "{after_one:?}");
    // A second start while it runs is refused; a rotation resumes rather
    // than adding a version.
    assert!(matches!(
        kek::start_rewrap(&t.db, &t.vault, &admin(), kek::DEFAULT_STALE_AFTER_MS).await,
        Err(DomainError::Conflict { code: "rewrap_in_progress", .. })
    ));
    // A page polling the running job counts no rows (that reads every
    // sealed table); asked outright, the rows are counted.
    let polled =
        kek::overview(&t.db, &admin(), kek::Counting::NotWhileRewrapping, kek::DEFAULT_STALE_AFTER_MS).await.unwrap();
    assert!(!polled.counted && polled.versions.iter().all(|v| v.total_rows == 0 && !v.retirable), "{polled:?}");
    assert_eq!(polled.latest_rewrap.map(|j| j.rewrapped), Some(after_one.rewrapped));
    let asked = kek::overview(&t.db, &admin(), kek::Counting::Always, kek::DEFAULT_STALE_AFTER_MS).await.unwrap();
    assert!(asked.counted && asked.stale_rows > 0, "{asked:?}");
    kek_rewrap::Entity::update_many()
        .col_expr(kek_rewrap::Column::UpdatedAt, sea_orm::sea_query::Expr::value(0i64))
        .filter(kek_rewrap::Column::Id.eq(&job.id))
        .exec(&t.db)
        .await
        .unwrap();
    assert_eq!(
        kek::get(&t.db, &admin(), &job.id, kek::DEFAULT_STALE_AFTER_MS).await.unwrap().status,
        RunStatus::Interrupted
    );
    let resumed = kek::rotate(&t.db, &t.vault, &admin(), kek::DEFAULT_STALE_AFTER_MS).await.unwrap();
    assert!(!resumed.added_version);
    assert_eq!((resumed.kek_version, resumed.rewrap.id.clone()), (2, job.id.clone()));
    // The old runner wakes up: it no longer owns the job and does nothing.
    assert!(kek::step(&t.db, &t.vault, &job.id, &job.runner, kek::WINDOW).await.unwrap().is_none());
    let done = kek::run(&t.db, &t.vault, &job.id, |_| {}).await.unwrap();
    assert_eq!(done.status, RunStatus::Finished);
    assert_eq!(done.rewrapped, sealed as u64, "no row resealed twice, none missed");
    assert_eq!(by_version(t).await.into_iter().collect::<Vec<_>>(), vec![(2, sealed as u64)]);
    // A clean rotation afterwards adds version 3.
    let third = kek::rotate(&t.db, &t.vault, &admin(), kek::DEFAULT_STALE_AFTER_MS).await.unwrap();
    assert!(third.added_version);
    assert_eq!(third.kek_version, 3);
});

// One threshold for "interrupted": the one the caller passes (the server's
// `SIGNET_KEK_STALE_SECS`). A runner silent for 5 s reads as running under
// the default minute and as interrupted under 2 s; a person's Resume and a
// rotation follow the same reading.
db_test!(the_stale_threshold_is_the_callers_for_the_label_and_the_resume, async |t: &TestDb| {
    fill(t).await;
    let rotation = kek::rotate(&t.db, &t.vault, &admin(), kek::DEFAULT_STALE_AFTER_MS).await.unwrap();
    let id = rotation.rewrap.id;
    kek_rewrap::Entity::update_many()
        .col_expr(kek_rewrap::Column::UpdatedAt, sea_orm::sea_query::Expr::value(domain::clock::now_ms() - 5_000))
        .filter(kek_rewrap::Column::Id.eq(&id))
        .exec(&t.db)
        .await
        .unwrap();
    let (minute, short) = (kek::DEFAULT_STALE_AFTER_MS, 2_000);
    assert_eq!(kek::get(&t.db, &admin(), &id, minute).await.unwrap().status, RunStatus::Running);
    assert_eq!(kek::get(&t.db, &admin(), &id, short).await.unwrap().status, RunStatus::Interrupted);
    let latest = |o: views::kek::KekOverview| o.latest_rewrap.unwrap().status;
    let o = kek::overview(&t.db, &admin(), kek::Counting::NotWhileRewrapping, short).await.unwrap();
    assert_eq!(latest(o), RunStatus::Interrupted);
    let o = kek::overview(&t.db, &admin(), kek::Counting::NotWhileRewrapping, minute).await.unwrap();
    assert_eq!(latest(o), RunStatus::Running);
    for refused in [
        kek::resume(&t.db, &admin(), &id, minute).await.map(|_| ()),
        kek::start_rewrap(&t.db, &t.vault, &admin(), minute).await.map(|_| ()),
        kek::rotate(&t.db, &t.vault, &admin(), minute).await.map(|_| ()),
    ] {
        assert!(matches!(refused, Err(DomainError::Conflict { code: "rewrap_in_progress", .. })), "{refused:?}");
    }
    let resumed = kek::resume(&t.db, &admin(), &id, short).await.unwrap();
    assert_eq!((resumed.id, resumed.status), (id, RunStatus::Running));
});

db_test!(events_arriving_during_a_rewrap_are_sealed_under_the_newest, async |t: &TestDb| {
    fill(t).await;
    let rotation = kek::rotate(&t.db, &t.vault, &admin(), kek::DEFAULT_STALE_AFTER_MS).await.unwrap();
    let s = crate::receiver::Setup {
        r: std::sync::Arc::new(domain::receiver::Receiver::new(
            t.db.clone(),
            t.vault.clone(),
            domain::receiver::faults::Faults::default(),
        )),
        ..setup_again(t).await
    };
    let body = created("r-late");
    assert!(matches!(
        deliver(&s, &signed(&s, Scheme::StandardWebhooks, &body, now_s(), "m-late"), &body).await,
        Outcome::Applied { .. }
    ));
    let late =
        event_body::Entity::find().filter(event_body::Column::EventId.eq("m-late")).one(&t.db).await.unwrap().unwrap();
    assert_eq!(late.kek_version, 2);
    kek::run(&t.db, &t.vault, &rotation.rewrap.id, |_| {}).await.unwrap();
    assert_eq!(by_version(t).await.keys().copied().collect::<Vec<_>>(), vec![2]);
});

/// The setup's key again (a new secret for the same endpoint).
async fn setup_again(t: &TestDb) -> crate::receiver::Setup {
    let k = keys::provision(
        &t.db,
        &t.vault,
        &admin(),
        &"clinic-a".parse().unwrap(),
        &"hooks".parse().unwrap(),
        ProvisionRequest::default(),
        Approval::ApproveAs { reviewer: "rev".into(), comment: String::new() },
    )
    .await
    .unwrap();
    crate::receiver::Setup {
        r: std::sync::Arc::new(domain::receiver::Receiver::new(
            t.db.clone(),
            t.vault.clone(),
            domain::receiver::faults::Faults::default(),
        )),
        secret: k.secret.unwrap(),
        key_id: k.key.key_id.into_string(),
    }
}

db_test!(small_windows_walk_composite_keys_without_gaps, async |t: &TestDb| {
    let sealed = fill(t).await;
    let rotation = kek::rotate(&t.db, &t.vault, &admin(), kek::DEFAULT_STALE_AFTER_MS).await.unwrap();
    let job = kek_rewrap::Entity::find_by_id(rotation.rewrap.id.clone()).one(&t.db).await.unwrap().unwrap();
    let mut last = None;
    for _ in 0..200 {
        let v = kek::step(&t.db, &t.vault, &job.id, &job.runner, 2).await.unwrap().unwrap();
        if !v.is_running() {
            last = Some(v);
            break;
        }
    }
    let done = last.expect("finished within 200 windows of two rows");
    assert_eq!(done.rewrapped, sealed as u64);
    assert_eq!(done.scanned, sealed as u64, "every row read once (every row here is sealed)");
    assert_eq!(by_version(t).await.into_iter().collect::<Vec<_>>(), vec![(2, sealed as u64)]);
    assert_eq!(everything_opens(t).await, sealed);
});

/// `kek_versions.seals` of `version`.
async fn seals(t: &TestDb, version: i32) -> i64 {
    kek_version::Entity::find_by_id(version).one(&t.db).await.unwrap().unwrap().seals
}

// Seals are counted per KEK version before they are made, so the stored
// count is never below what was sealed, whichever processes sealed it; a
// process that counted none seals nothing; the version in use past 2^30
// seals is a finding in the evidence.
db_test!(seals_are_counted_ahead_per_version_and_flagged_at_2_30, async |t: &TestDb| {
    use domain::{evidence::bundle, vault::SEALS_WARN_AT};
    let master = || MasterKey::from_base64(&t.master_b64).unwrap();
    let sealed = fill(t).await as i64;
    // A second process provisions a key: its seal is counted too.
    let other = domain::startup::open_vault(&t.db, master()).await.unwrap();
    keys::provision(
        &t.db,
        &other,
        &admin(),
        &"clinic-a".parse().unwrap(),
        &"hooks".parse().unwrap(),
        ProvisionRequest::default(),
        Approval::Pending,
    )
    .await
    .unwrap();
    let rows = sealed + 1;
    assert_eq!(everything_opens(t).await as i64, rows);
    let counted = seals(t, 1).await;
    assert!(counted >= rows, "never under: {counted} counted, {rows} sealed");
    assert!(counted <= rows + 2 * 65_536 + 8192, "over by at most what two processes reserved: {counted}");
    // Without a count raised first, a process seals nothing.
    let idle = domain::startup::open_vault(&t.db, master()).await.unwrap();
    assert_eq!(idle.seal(&Aad::outbox_payload("t", "i"), b"{}"), Err(domain::crypto::CryptoError::SealsNotReserved));
    // The rewrap's reseals count under the new version.
    let rotation = kek::rotate(&t.db, &t.vault, &admin(), kek::DEFAULT_STALE_AFTER_MS).await.unwrap();
    kek::run(&t.db, &t.vault, &rotation.rewrap.id, |_| {}).await.unwrap();
    assert!(seals(t, 2).await >= rows, "{} counted under v2", seals(t, 2).await);
    let high = |e: &views::evidence::Evidence| {
        e.findings.iter().filter(|f| f.id == "kek_seal_count_high").map(|f| f.subject.clone()).collect::<Vec<_>>()
    };
    // Just under 2^30 on the version in use (and far past it on the old
    // one, which seals nothing any more): no finding.
    let set = |version: i32, n: i64| {
        kek_version::Entity::update_many()
            .col_expr(kek_version::Column::Seals, sea_orm::sea_query::Expr::value(n))
            .filter(kek_version::Column::Version.eq(version))
            .exec(&t.db)
    };
    set(1, 4 * SEALS_WARN_AT).await.unwrap();
    set(2, SEALS_WARN_AT - 1).await.unwrap();
    let e = bundle::collect(&t.db, &t.vault, &reviewer(), None).await.unwrap();
    assert_eq!(high(&e), Vec::<String>::new());
    let v2 = e.deployment.kek_seals.iter().find(|k| k.newest).unwrap();
    assert_eq!((v2.version, v2.seals), (2, SEALS_WARN_AT - 1));
    // A process starting to seal counts its block first, which crosses it.
    let next = domain::startup::open_vault(&t.db, master()).await.unwrap();
    next.reserve_seals(&t.db, 1).await.unwrap();
    next.seal(&Aad::outbox_payload("t", "i"), b"{}").unwrap();
    let e = bundle::collect(&t.db, &t.vault, &reviewer(), None).await.unwrap();
    assert_eq!(high(&e), ["kek v2"]);
    assert!(e.findings.iter().any(|f| f.id == "kek_seal_count_high" && f.severity == "warning"));
});
