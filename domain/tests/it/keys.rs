use std::sync::Arc;

use domain::{
    DomainError,
    auth::Principal,
    clock,
    entity::signing_key,
    registry::keys::{self, Approval, KeyFilter, ProvisionRequest},
};
use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Set, Statement};
use views::{ids::KeyId, keys::KeyStatus, roles::Role};

use crate::{db_test, fixtures::*, support::TestDb};

async fn accepted(t: &TestDb, key_id: &KeyId) -> Vec<KeyId> {
    let row = signing_key::Entity::find_by_id(key_id.to_string()).one(&t.db).await.unwrap().unwrap();
    keys::accepted_key_rows(&t.db, &row.endpoint_id, clock::now_ms())
        .await
        .unwrap()
        .into_iter()
        .map(|k| k.id.parse().unwrap())
        .collect()
}

db_test!(provision_pending_then_approve, async |t: &TestDb| {
    let a = tenant(t, "clinic-a").await;
    endpoint(t, "clinic-a", "reminders", Some(&["reminder.created", "otp.requested"])).await;
    let ca = user(Role::ClinicAdmin, Some(&a.id));
    let p = keys::provision(
        &t.db,
        &t.vault,
        &ca,
        &"clinic-a".parse().unwrap(),
        &"reminders".parse().unwrap(),
        ProvisionRequest {
            owner: Some("dr-ops".into()),
            rotation_owner: None,
            event_types: Some(vec!["otp.requested".into()]),
            ..Default::default()
        },
        Approval::Pending,
    )
    .await
    .unwrap();
    assert!(p.secret.as_ref().unwrap().expose().starts_with("whsec_"));
    assert_eq!(p.key.status, KeyStatus::PendingApproval);
    assert_eq!(p.key.event_types, ["otp.requested"]);
    assert_eq!(p.key.owner, "dr-ops");
    assert_eq!(p.key.rotation_owner, "dr-ops");
    assert!(accepted(t, &p.key.key_id).await.is_empty(), "pending keys do not verify");

    // A clinic admin may not approve its own key, nor ask for instant approval.
    let denied = keys::approve(&t.db, &ca, &p.key.key_id, None, "").await;
    assert!(matches!(denied, Err(DomainError::Forbidden)));
    let instant = keys::provision(
        &t.db,
        &t.vault,
        &ca,
        &"clinic-a".parse().unwrap(),
        &"reminders".parse().unwrap(),
        ProvisionRequest::default(),
        Approval::ApproveAs { reviewer: "me".into(), comment: String::new() },
    )
    .await;
    assert!(matches!(instant, Err(DomainError::Forbidden)));

    // Scope wider than the endpoint is refused.
    let wide = keys::provision(
        &t.db,
        &t.vault,
        &ca,
        &"clinic-a".parse().unwrap(),
        &"reminders".parse().unwrap(),
        ProvisionRequest { event_types: Some(vec!["reminder.canceled".into()]), ..Default::default() },
        Approval::Pending,
    )
    .await;
    assert!(matches!(wide, Err(DomainError::Invalid { code: "scope_exceeds_endpoint", .. })));

    let approved =
        keys::approve(&t.db, &reviewer(), &p.key.key_id, None, "scope matches the reminder integration").await.unwrap();
    assert_eq!(approved.status, KeyStatus::Active);
    assert!(approved.scope_approved);
    assert_eq!(accepted(t, &p.key.key_id).await, std::slice::from_ref(&p.key.key_id));
    let history = keys::approval_history(&t.db, &reviewer(), Some(&p.key.key_id), 10).await.unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].reviewer, "reviewer-user");
    assert_eq!(history[0].scope_hash, approved.scope_hash);
    assert_eq!(history[0].scope["event_types"], serde_json::json!(["otp.requested"]));
    let again = keys::approve(&t.db, &reviewer(), &p.key.key_id, None, "").await;
    assert!(matches!(again, Err(DomainError::Conflict { code: "not_pending", .. })));
});

db_test!(reject_needs_a_comment, async |t: &TestDb| {
    tenant(t, "clinic-a").await;
    endpoint(t, "clinic-a", "reminders", None).await;
    let p = keys::provision(
        &t.db,
        &t.vault,
        &admin(),
        &"clinic-a".parse().unwrap(),
        &"reminders".parse().unwrap(),
        ProvisionRequest::default(),
        Approval::Pending,
    )
    .await
    .unwrap();
    let bare = keys::reject(&t.db, &reviewer(), &p.key.key_id, None, "  ").await;
    assert!(matches!(bare, Err(DomainError::Invalid { code: "reason_required", .. })));
    let r = keys::reject(&t.db, &reviewer(), &p.key.key_id, None, "wildcard scope is too broad").await.unwrap();
    assert_eq!(r.status, KeyStatus::Rejected);
    assert!(accepted(t, &p.key.key_id).await.is_empty());
});

db_test!(rotation_keeps_old_key_until_replacement_is_active, async |t: &TestDb| {
    let k = active_key(t).await;
    let old = k.key.key_id.clone();
    let new = keys::rotate(
        &t.db,
        &t.vault,
        &user(Role::ClinicAdmin, Some(&tenant_id(t).await)),
        &old,
        Some(3600),
        Approval::Pending,
    )
    .await
    .unwrap();
    assert_eq!(new.key.status, KeyStatus::PendingApproval);
    assert_eq!(new.key.replaces_key_id.as_ref(), Some(&old));
    assert_ne!(new.secret.as_ref().unwrap().expose(), k.secret.as_ref().unwrap().expose());
    assert_eq!(accepted(t, &old).await, std::slice::from_ref(&old), "old key still sole accepted key");
    assert_eq!(keys::get(&t.db, &admin(), &old).await.unwrap().status, KeyStatus::Active);
    // A second rotation while one is pending is refused.
    let twice = keys::rotate(&t.db, &t.vault, &admin(), &old, None, Approval::Pending).await;
    assert!(matches!(twice, Err(DomainError::Conflict { code: "rotation_pending", .. })), "{twice:?}");

    let before = clock::now_ms();
    keys::approve(&t.db, &reviewer(), &new.key.key_id, None, "same scope").await.unwrap();
    let old_view = keys::get(&t.db, &admin(), &old).await.unwrap();
    assert_eq!(old_view.status, KeyStatus::Retiring);
    let exp = old_view.expires_at_ms.unwrap();
    assert!(exp >= before + 3_600_000 && exp <= clock::now_ms() + 3_600_000, "overlap starts at activation");
    let mut set = accepted(t, &old).await;
    set.sort();
    let mut want = vec![old.clone(), new.key.key_id.clone()];
    want.sort();
    assert_eq!(set, want, "accepted set = active + retiring");
});

async fn tenant_id(t: &TestDb) -> String {
    domain::registry::tenants::get(&t.db, &admin(), &"clinic-a".parse().unwrap()).await.unwrap().id
}

db_test!(overlap_bounds_and_two_retiring_limit, async |t: &TestDb| {
    let k = active_key(t).await;
    for bad in [0, 59, 7 * 24 * 3600 + 1] {
        let r = keys::rotate(&t.db, &t.vault, &admin(), &k.key.key_id, Some(bad), Approval::Pending).await;
        assert!(matches!(r, Err(DomainError::Invalid { code: "invalid_overlap", .. })), "{bad}");
    }
    let approve = || Approval::ApproveAs { reviewer: "rev".into(), comment: String::new() };
    let r1 = keys::rotate(&t.db, &t.vault, &admin(), &k.key.key_id, None, approve()).await.unwrap();
    assert_eq!(r1.key.status, KeyStatus::Active, "a caller who may approve gets an active key");
    let r2 = keys::rotate(&t.db, &t.vault, &admin(), &r1.key.key_id, None, approve()).await.unwrap();
    let r3 = keys::rotate(&t.db, &t.vault, &admin(), &r2.key.key_id, None, approve()).await;
    assert!(matches!(r3, Err(DomainError::Conflict { code: "too_many_retiring", .. })), "{r3:?}");
    assert_eq!(accepted(t, &k.key.key_id).await.len(), 3, "one active and two retiring");
    // Expired retiring keys drop out of the accepted set and free a slot.
    signing_key::Entity::update_many()
        .col_expr(signing_key::Column::ExpiresAt, sea_orm::sea_query::Expr::value(clock::now_ms() - 1))
        .filter(signing_key::Column::Id.eq(k.key.key_id.as_str()))
        .exec(&t.db)
        .await
        .unwrap();
    assert_eq!(keys::get(&t.db, &admin(), &k.key.key_id).await.unwrap().status, KeyStatus::Expired);
    assert_eq!(accepted(t, &k.key.key_id).await.len(), 2);
    assert_eq!(keys::sweep_expired(&t.db, clock::now_ms()).await.unwrap(), 1);
    assert!(keys::rotate(&t.db, &t.vault, &admin(), &r2.key.key_id, None, approve()).await.is_ok());
});

db_test!(revoke_is_immediate_and_needs_a_reason, async |t: &TestDb| {
    let k = active_key(t).await;
    let bare = keys::revoke(&t.db, &admin(), &k.key.key_id, "").await;
    assert!(matches!(bare, Err(DomainError::Invalid { code: "reason_required", .. })));
    let r = keys::revoke(&t.db, &admin(), &k.key.key_id, "laptop lost").await.unwrap();
    assert_eq!(r.status, KeyStatus::Revoked);
    assert_eq!(r.revoked_reason.as_deref(), Some("laptop lost"));
    assert!(accepted(t, &k.key.key_id).await.is_empty());
    let again = keys::revoke(&t.db, &admin(), &k.key.key_id, "again").await;
    assert!(matches!(again, Err(DomainError::Conflict { code: "not_revocable", .. })));
    let rotate = keys::rotate(&t.db, &t.vault, &admin(), &k.key.key_id, None, Approval::Pending).await;
    assert!(matches!(rotate, Err(DomainError::Conflict { code: "not_active", .. })));
});

db_test!(scope_change_needs_new_approval, async |t: &TestDb| {
    let k = active_key(t).await;
    let changed = keys::set_scope(&t.db, &admin(), &k.key.key_id, &["reminder.created".into()]).await.unwrap();
    assert_eq!(changed.status, KeyStatus::PendingApproval);
    assert!(!changed.scope_approved);
    assert!(accepted(t, &k.key.key_id).await.is_empty(), "changed scope stops verifying");
    // Four eyes: whoever changed the scope cannot approve it, admins included.
    let own = keys::approve(&t.db, &admin(), &k.key.key_id, None, "mine").await;
    assert!(matches!(own, Err(DomainError::Refused { code: "self_approval", .. })), "{own:?}");
    let named = keys::approve(&t.db, &Principal::cli(), &k.key.key_id, Some("admin-user"), "as the changer").await;
    assert!(matches!(named, Err(DomainError::Refused { code: "self_approval", .. })), "{named:?}");
    let again = keys::approve(&t.db, &reviewer(), &k.key.key_id, None, "narrowed").await.unwrap();
    assert!(again.scope_approved);
    assert_eq!(accepted(t, &k.key.key_id).await.len(), 1);
    // Tampering with the scope in the database also stops verification.
    signing_key::Entity::update_many()
        .col_expr(signing_key::Column::ScopeHash, sea_orm::sea_query::Expr::value("0".repeat(64)))
        .exec(&t.db)
        .await
        .unwrap();
    assert!(accepted(t, &k.key.key_id).await.is_empty());
});

db_test!(other_tenant_keys_are_not_found, async |t: &TestDb| {
    let k = active_key(t).await;
    let b = tenant(t, "clinic-b").await;
    let cb = user(Role::ClinicAdmin, Some(&b.id));
    assert!(matches!(keys::get(&t.db, &cb, &k.key.key_id).await, Err(DomainError::NotFound)));
    assert!(matches!(keys::revoke(&t.db, &cb, &k.key.key_id, "x").await, Err(DomainError::NotFound)));
    assert!(matches!(
        keys::rotate(&t.db, &t.vault, &cb, &k.key.key_id, None, Approval::Pending).await,
        Err(DomainError::NotFound)
    ));
    assert!(keys::list(&t.db, &cb, &KeyFilter::default()).await.unwrap().is_empty());
    assert!(matches!(
        keys::list(&t.db, &cb, &KeyFilter { tenant: Some("clinic-a".parse().unwrap()), ..Default::default() }).await,
        Err(DomainError::NotFound)
    ));
});

db_test!(secret_is_sealed_and_bound_to_its_row, async |t: &TestDb| {
    let k = active_key(t).await;
    let secret = k.secret.as_ref().unwrap().expose().to_owned();
    let row = signing_key::Entity::find_by_id(k.key.key_id.clone()).one(&t.db).await.unwrap().unwrap();
    assert!(!String::from_utf8_lossy(&row.secret_ciphertext).contains(&secret));
    assert_eq!(keys::open_secret(&t.db, &t.vault, &row).await.unwrap().expose(), secret);
    // Views never carry it.
    let listed = serde_json::to_string(&keys::list(&t.db, &admin(), &KeyFilter::default()).await.unwrap()).unwrap();
    assert!(!listed.contains(&secret));
    // The ciphertext copied onto another key row does not open there.
    let other = keys::provision(
        &t.db,
        &t.vault,
        &admin(),
        &"clinic-a".parse().unwrap(),
        &"reminders".parse().unwrap(),
        ProvisionRequest::default(),
        Approval::Pending,
    )
    .await
    .unwrap();
    let mut moved: signing_key::ActiveModel =
        signing_key::Entity::find_by_id(other.key.key_id.clone()).one(&t.db).await.unwrap().unwrap().into();
    moved.secret_ciphertext = Set(row.secret_ciphertext.clone());
    let moved = moved.update(&t.db).await.unwrap();
    assert!(keys::open_secret(&t.db, &t.vault, &moved).await.is_err());
    // Nothing in the whole database holds the secret in plaintext.
    assert_no_plaintext(t, &secret).await;
});

/// Scans every text and blob column of every table for `needle`.
pub async fn assert_no_plaintext(t: &TestDb, needle: &str) {
    let backend = t.db.get_database_backend();
    let tables_sql = if t.is_postgres() {
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
    } else {
        "SELECT name AS table_name FROM sqlite_master WHERE type = 'table'"
    };
    let tables = t.db.query_all_raw(Statement::from_string(backend, tables_sql)).await.unwrap();
    for row in tables {
        let table: String = row.try_get("", "table_name").unwrap();
        let dump_sql = if t.is_postgres() {
            format!("SELECT CAST(t AS TEXT) AS dump FROM \"{table}\" t")
        } else {
            let cols =
                t.db.query_all_raw(Statement::from_string(
                    backend,
                    format!("SELECT name FROM pragma_table_info('{table}')"),
                ))
                .await
                .unwrap();
            let parts: Vec<String> = cols
                .iter()
                .map(|c| format!("COALESCE(CAST(\"{}\" AS TEXT), '')", c.try_get::<String>("", "name").unwrap()))
                .collect();
            format!("SELECT {} AS dump FROM \"{table}\"", parts.join(" || '|' || "))
        };
        for r in t.db.query_all_raw(Statement::from_string(backend, dump_sql)).await.unwrap() {
            let dump: String = r.try_get("", "dump").unwrap_or_default();
            assert!(!dump.contains(needle), "plaintext secret found in table {table}");
        }
    }
}

db_test!(concurrent_rotations_of_one_key_create_one_replacement, async |t: &TestDb| {
    let k = active_key(t).await;
    let db = Arc::new(t.db.clone());
    let vault = t.vault.clone();
    let mut handles = Vec::new();
    for _ in 0..8 {
        let (db, vault, id) = (db.clone(), vault.clone(), k.key.key_id.clone());
        handles.push(tokio::spawn(async move {
            keys::rotate(&db, &vault, &admin(), &id, None, Approval::Pending).await.map(|p| p.key.key_id)
        }));
    }
    let mut ok = 0;
    for h in handles {
        match h.await.unwrap() {
            Ok(_) => ok += 1,
            Err(DomainError::Conflict { code: "rotation_pending", .. }) => {}
            Err(e) => panic!("unexpected error: {e:?}"),
        }
    }
    assert_eq!(ok, 1, "exactly one rotation wins");
    let pending =
        keys::list(&t.db, &admin(), &KeyFilter { status: Some(KeyStatus::PendingApproval), ..Default::default() })
            .await
            .unwrap();
    assert_eq!(pending.len(), 1);
});
