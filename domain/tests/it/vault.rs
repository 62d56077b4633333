use domain::{crypto::MasterKey, vault::VaultOpenError};
use sea_orm::EntityTrait;

use crate::{db_test, support::TestDb};

db_test!(wrong_master_key_refuses_to_load_and_changes_nothing, async |t: &TestDb| {
    let (other, _) = MasterKey::generate();
    let before = domain::entity::kek_version::Entity::find().all(&t.db).await.unwrap();
    let err = domain::startup::open_vault(&t.db, other).await.unwrap_err();
    assert!(matches!(err, VaultOpenError::WrongMasterKey(1)), "{err:?}");
    assert!(err.to_string().contains("not the key"));
    let after = domain::entity::kek_version::Entity::find().all(&t.db).await.unwrap();
    assert_eq!(before, after);
    // The right key still loads.
    domain::startup::open_vault(&t.db, MasterKey::from_base64(&t.master_b64).unwrap()).await.unwrap();
});
