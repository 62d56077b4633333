use domain::{
    crypto::MasterKey,
    entity::signing_key,
    registry::keys::{self, Approval, ProvisionRequest},
    vault::{rotate_kek, Vault, VaultOpenError},
};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};

use crate::{db_test, fixtures::*, support::TestDb};

db_test!(wrong_master_key_refuses_to_load_and_changes_nothing, async |t: &TestDb| {
    let (other, _) = MasterKey::generate();
    let before = domain::entity::kek_version::Entity::find().all(&t.db).await.unwrap();
    let err = Vault::load(&t.db, other).await.unwrap_err();
    assert!(matches!(err, VaultOpenError::WrongMasterKey(1)), "{err:?}");
    assert!(err.to_string().contains("not the key"));
    let after = domain::entity::kek_version::Entity::find().all(&t.db).await.unwrap();
    assert_eq!(before, after);
    // The right key still loads.
    Vault::load(&t.db, MasterKey::from_base64(&t.master_b64).unwrap()).await.unwrap();
});

db_test!(kek_rotation_rewraps_everything_and_resumes, async |t: &TestDb| {
    let k = active_key(t).await;
    let mut secrets = vec![(k.key.key_id.clone(), k.secret.expose().to_owned())];
    for _ in 0..5 {
        let p = keys::provision(&t.db, &t.vault, &admin(), "clinic-a", "reminders", ProvisionRequest::default(), Approval::Pending).await.unwrap();
        secrets.push((p.key.key_id.clone(), p.secret.expose().to_owned()));
    }
    let mut seen = Vec::new();
    let report = rotate_kek(&t.db, &t.vault, &domain::auth::Principal::cli(), |p| seen.push(p)).await.unwrap();
    assert_eq!(report.kek_version, 2);
    assert!(report.added_version);
    assert_eq!(report.rewrapped, 6);
    assert_eq!(seen.last().unwrap().remaining, 0);
    let stale = signing_key::Entity::find().filter(signing_key::Column::KekVersion.ne(2)).all(&t.db).await.unwrap();
    assert!(stale.is_empty());
    // Every secret still opens, in a fresh process view of the ring.
    let fresh = Vault::load(&t.db, MasterKey::from_base64(&t.master_b64).unwrap()).await.unwrap();
    for (id, secret) in &secrets {
        let row = signing_key::Entity::find_by_id(id.clone()).one(&t.db).await.unwrap().unwrap();
        assert_eq!(keys::open_secret(&t.db, &fresh, &row).await.unwrap().expose(), secret);
    }
    // Simulate an interrupted run: a row left under version 1 (as if the
    // process died mid-way). Re-running resumes instead of adding version 3.
    let row = signing_key::Entity::find_by_id(secrets[0].0.clone()).one(&t.db).await.unwrap().unwrap();
    let resealed_v1 = reseal_under_version(t, &row, 1).await;
    signing_key::Entity::update_many()
        .col_expr(signing_key::Column::SecretCiphertext, sea_orm::sea_query::Expr::value(resealed_v1))
        .col_expr(signing_key::Column::KekVersion, sea_orm::sea_query::Expr::value(1))
        .filter(signing_key::Column::Id.eq(&row.id))
        .exec(&t.db)
        .await
        .unwrap();
    let again = rotate_kek(&t.db, &t.vault, &domain::auth::Principal::cli(), |_| {}).await.unwrap();
    assert!(!again.added_version, "resumed");
    assert_eq!(again.kek_version, 2);
    assert_eq!(again.rewrapped, 1);
    // A clean third run adds version 3.
    let third = rotate_kek(&t.db, &t.vault, &domain::auth::Principal::cli(), |_| {}).await.unwrap();
    assert!(third.added_version);
    assert_eq!(third.kek_version, 3);
});

/// Seals a row's secret under an older KEK version, using a ring that holds
/// only that version (loaded from the database with the master key).
async fn reseal_under_version(t: &TestDb, row: &signing_key::Model, version: u32) -> Vec<u8> {
    use domain::crypto::{Aad, Keyring};
    let master = MasterKey::from_base64(&t.master_b64).unwrap();
    let wrapped = domain::entity::kek_version::Entity::find_by_id(version as i32).one(&t.db).await.unwrap().unwrap();
    let kek = master.unwrap_kek(version, &wrapped.wrapped_key).unwrap();
    let mut ring = Keyring::new();
    ring.insert(version, kek);
    let aad = Aad::signing_key(&row.tenant_id, &row.endpoint_id, &row.id);
    let plain = t.vault.ring().open(&aad, &row.secret_ciphertext).unwrap();
    ring.seal(&aad, &plain).unwrap()
}
