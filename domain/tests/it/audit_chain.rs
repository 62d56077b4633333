use std::sync::Arc;

use domain::{
    audit::{self, AuditFilter},
    auth::Role,
    entity::audit_entry,
    registry::tenants::{self, NewTenant},
};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};

use crate::{db_test, fixtures::*, support::TestDb};

db_test!(every_change_is_audited_and_chain_verifies, async |t: &TestDb| {
    let k = active_key(t).await;
    domain::registry::keys::revoke(&t.db, &admin(), &k.key.key_id, "test").await.unwrap();
    let entries = audit::list(&t.db, &admin(), &AuditFilter::default()).await.unwrap();
    let actions: Vec<&str> = entries.iter().rev().map(|e| e.action.as_str()).collect();
    assert_eq!(actions, ["tenant.create", "endpoint.create", "key.provision", "key.approve", "key.revoke"]);
    assert!(entries.iter().all(|e| e.actor == "admin-user" && e.actor_kind == "user"));
    let dump = serde_json::to_string(&entries).unwrap();
    assert!(!dump.contains(k.secret.expose()), "no secret in the audit log");
    let report = audit::verify_chain(&t.db).await.unwrap();
    assert!(report.ok, "{report:?}");
    assert_eq!(report.entries, 5);
});

db_test!(tampering_is_reported_at_the_first_broken_entry, async |t: &TestDb| {
    active_key(t).await;
    audit_entry::Entity::update_many()
        .col_expr(audit_entry::Column::Actor, sea_orm::sea_query::Expr::value("mallory"))
        .filter(audit_entry::Column::Seq.eq(3))
        .exec(&t.db)
        .await
        .unwrap();
    let report = audit::verify_chain(&t.db).await.unwrap();
    assert!(!report.ok);
    assert_eq!(report.first_broken.as_ref().unwrap().seq, 3);
});

db_test!(deleting_entries_is_reported, async |t: &TestDb| {
    active_key(t).await;
    audit_entry::Entity::delete_many().filter(audit_entry::Column::Seq.eq(2)).exec(&t.db).await.unwrap();
    let report = audit::verify_chain(&t.db).await.unwrap();
    assert_eq!(report.first_broken.unwrap().seq, 2);
});

db_test!(truncating_the_tail_is_reported, async |t: &TestDb| {
    active_key(t).await;
    audit_entry::Entity::delete_many().filter(audit_entry::Column::Seq.eq(4)).exec(&t.db).await.unwrap();
    let report = audit::verify_chain(&t.db).await.unwrap();
    assert!(!report.ok);
    assert_eq!(report.first_broken.unwrap().seq, 4);
});

db_test!(concurrent_appends_never_fork_the_chain, async |t: &TestDb| {
    let db = Arc::new(t.db.clone());
    let mut handles = Vec::new();
    for i in 0..24 {
        let db = db.clone();
        handles.push(tokio::spawn(async move {
            tenants::create(&db, &admin(), NewTenant { slug: format!("clinic-{i}"), name: None, notify_url: None }).await
        }));
    }
    for h in handles {
        h.await.unwrap().unwrap();
    }
    let report = audit::verify_chain(&t.db).await.unwrap();
    assert!(report.ok, "{report:?}");
    assert_eq!(report.entries, 24);
});

db_test!(clinic_admin_reads_only_its_tenant_audit, async |t: &TestDb| {
    let k = active_key(t).await;
    let b = tenant(t, "clinic-b").await;
    let a_id = domain::registry::tenants::get(&t.db, &admin(), "clinic-a").await.unwrap().id;
    let ca = user(Role::ClinicAdmin, Some(&a_id));
    let seen = audit::list(&t.db, &ca, &AuditFilter { tenant_id: Some(b.id.clone()), ..Default::default() }).await.unwrap();
    assert!(seen.iter().all(|e| e.tenant_id.as_deref() == Some(a_id.as_str())));
    assert!(seen.iter().any(|e| e.target_id == k.key.key_id));
    let filtered = audit::list(&t.db, &admin(), &AuditFilter { action: Some("key.".into()), ..Default::default() }).await.unwrap();
    assert!(filtered.iter().all(|e| e.action.starts_with("key.")));
    assert_eq!(filtered.len(), 2);
});
