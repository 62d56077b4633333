use std::sync::Arc;

use domain::{
    audit::{self, AuditFilter},
    entity::audit_entry,
    registry::tenants::{self, NewTenant},
};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder};
use views::roles::Role;

use crate::{db_test, fixtures::*, support::TestDb};

/// An attacker who owns the database: the append-only triggers are no
/// obstacle to them (the keyed links are what must catch them).
async fn as_database_owner(t: &TestDb) {
    let sql = if t.is_postgres() {
        "ALTER TABLE audit_log DISABLE TRIGGER USER"
    } else {
        "DROP TRIGGER audit_log_no_update; DROP TRIGGER audit_log_no_delete;"
    };
    t.db.execute_unprepared(sql).await.unwrap();
}

db_test!(every_change_is_audited_and_chain_verifies, async |t: &TestDb| {
    let k = active_key(t).await;
    domain::registry::keys::revoke(&t.db, &admin(), &k.key.key_id, "test").await.unwrap();
    let entries = audit::list(&t.db, &admin(), &AuditFilter::default()).await.unwrap();
    let actions: Vec<&str> = entries.iter().rev().map(|e| e.action.as_str()).collect();
    assert_eq!(actions, ["tenant.create", "endpoint.create", "key.provision", "key.approve", "key.revoke"]);
    assert!(entries.iter().all(|e| e.actor == "admin-user" && e.actor_kind == "user"));
    let dump = serde_json::to_string(&entries).unwrap();
    assert!(!dump.contains(k.secret.as_ref().unwrap().expose()), "no secret in the audit log");
    let report = audit::verify_chain(&t.db).await.unwrap();
    assert!(report.ok, "{report:?}");
    assert_eq!(report.entries, 5);
});

db_test!(tampering_is_reported_at_the_first_broken_entry, async |t: &TestDb| {
    active_key(t).await;
    as_database_owner(t).await;
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
    as_database_owner(t).await;
    audit_entry::Entity::delete_many().filter(audit_entry::Column::Seq.eq(2)).exec(&t.db).await.unwrap();
    let report = audit::verify_chain(&t.db).await.unwrap();
    assert_eq!(report.first_broken.unwrap().seq, 2);
});

db_test!(truncating_the_tail_is_reported, async |t: &TestDb| {
    active_key(t).await;
    as_database_owner(t).await;
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
            tenants::create(&db, &admin(), NewTenant { slug: format!("clinic-{i}"), name: None, notify_url: None })
                .await
        }));
    }
    for h in handles {
        h.await.unwrap().unwrap();
    }
    let report = audit::verify_chain(&t.db).await.unwrap();
    assert!(report.ok, "{report:?}");
    assert_eq!(report.entries, 24);
});

db_test!(verifying_while_entries_are_appended_never_reports_a_break, async |t: &TestDb| {
    let db = t.db.clone();
    let appender = tokio::spawn(async move {
        for i in 0..40 {
            let new = NewTenant { slug: format!("clinic-{i}"), name: None, notify_url: None };
            tenants::create(&db, &admin(), new).await.unwrap();
        }
    });
    let mut runs = 0;
    while !appender.is_finished() {
        let report = audit::verify_chain(&t.db).await.unwrap();
        assert!(report.ok, "an append during the walk is not a break: {report:?}");
        runs += 1;
    }
    appender.await.unwrap();
    assert!(runs > 1, "the verifications overlapped the appends");
    let report = audit::verify_chain(&t.db).await.unwrap();
    assert!(report.ok && report.entries == 40, "{report:?}");
});

db_test!(clinic_admin_reads_only_its_tenant_audit, async |t: &TestDb| {
    let k = active_key(t).await;
    let b = tenant(t, "clinic-b").await;
    let a_id = domain::registry::tenants::get(&t.db, &admin(), &"clinic-a".parse().unwrap()).await.unwrap().id;
    let ca = user(Role::ClinicAdmin, Some(&a_id));
    let seen =
        audit::list(&t.db, &ca, &AuditFilter { tenant_id: Some(b.id.clone()), ..Default::default() }).await.unwrap();
    assert!(seen.iter().all(|e| e.tenant_id.as_deref() == Some(a_id.as_str())));
    assert!(seen.iter().any(|e| k.key.key_id == e.target_id));
    let filtered =
        audit::list(&t.db, &admin(), &AuditFilter { action: Some("key.".into()), ..Default::default() }).await.unwrap();
    assert!(filtered.iter().all(|e| e.action.starts_with("key.")));
    assert_eq!(filtered.len(), 2);
});

db_test!(the_database_refuses_to_edit_or_delete_audit_entries, async |t: &TestDb| {
    active_key(t).await;
    let edit = audit_entry::Entity::update_many()
        .col_expr(audit_entry::Column::Actor, sea_orm::sea_query::Expr::value("mallory"))
        .filter(audit_entry::Column::Seq.eq(1))
        .exec(&t.db)
        .await;
    assert!(edit.is_err(), "UPDATE of an audit entry must be refused");
    assert!(audit_entry::Entity::delete_many().exec(&t.db).await.is_err(), "DELETE must be refused");
    assert!(audit::verify_chain(&t.db).await.unwrap().ok);
});

// The attack plain SHA-256 links cannot catch: edit an entry, then
// recompute every later link (and the head) with SHA-256 as before.
db_test!(an_edit_rechained_with_plain_sha256_fails_verification, async |t: &TestDb| {
    active_key(t).await;
    as_database_owner(t).await;
    let entries = audit_entry::Entity::find().order_by_asc(audit_entry::Column::Seq).all(&t.db).await.unwrap();
    let mut prev = audit::GENESIS_HASH.to_owned();
    for mut e in entries {
        if e.seq == 2 {
            e.actor = "mallory".into();
        }
        e.prev_hash = prev.clone();
        let canonical = serde_json::json!([
            e.seq,
            e.at,
            e.actor_kind,
            e.actor,
            e.action,
            e.target_kind,
            e.target_id,
            e.tenant_id,
            e.before,
            e.after,
            e.prev_hash
        ]);
        e.hash = domain::crypto::sha256_hex(canonical.to_string().as_bytes());
        prev = e.hash.clone();
        let seq = e.seq;
        let mut a: audit_entry::ActiveModel = e.into();
        a.seq = sea_orm::ActiveValue::Unchanged(seq);
        for c in [audit_entry::Column::Actor, audit_entry::Column::PrevHash, audit_entry::Column::Hash] {
            sea_orm::ActiveModelTrait::reset(&mut a, c);
        }
        sea_orm::ActiveModelTrait::update(a, &t.db).await.unwrap();
    }
    domain::entity::audit_head::Entity::update_many()
        .col_expr(domain::entity::audit_head::Column::Hash, sea_orm::sea_query::Expr::value(prev))
        .exec(&t.db)
        .await
        .unwrap();
    let report = audit::verify_chain(&t.db).await.unwrap();
    assert!(!report.ok, "a re-chained edit must not verify");
    assert_eq!(report.first_broken.unwrap().seq, 1, "every keyed link is now wrong, from the first");
    // Relabelling the entries as pre-key (plain) entries does not help: the
    // key's sealed binding says where keying began.
    audit_entry::Entity::update_many()
        .col_expr(audit_entry::Column::Alg, sea_orm::sea_query::Expr::value("sha256"))
        .exec(&t.db)
        .await
        .unwrap();
    assert!(!audit::verify_chain(&t.db).await.unwrap().ok);
});

db_test!(removing_the_audit_key_is_detected_and_never_replaced_silently, async |t: &TestDb| {
    active_key(t).await;
    domain::entity::service_key::Entity::delete_by_id(domain::service_keys::AUDIT_MAC.to_owned())
        .exec(&t.db)
        .await
        .unwrap();
    let report = audit::verify_chain(&t.db).await.unwrap();
    assert!(!report.ok);
    assert!(report.first_broken.unwrap().reason.contains("key is missing"));
    // A restart must not mint a new key over a keyed chain.
    let err = domain::audit::key::load(&t.db, &t.vault).await.unwrap_err();
    assert_eq!(err.code(), "audit_key_missing");
});

db_test!(a_signed_checkpoint_catches_a_replaced_chain, async |t: &TestDb| {
    active_key(t).await;
    let cp = audit::checkpoint(&t.db).await.unwrap();
    assert_eq!(cp.seq, 4);
    assert_eq!(audit::matches_checkpoint(&t.db, &cp).await.unwrap(), Ok(()));
    // More entries later: the checkpoint is still part of the chain.
    tenants::create(&t.db, &admin(), NewTenant { slug: "clinic-z".into(), name: None, notify_url: None })
        .await
        .unwrap();
    assert_eq!(audit::matches_checkpoint(&t.db, &cp).await.unwrap(), Ok(()));
    as_database_owner(t).await;
    audit_entry::Entity::update_many()
        .col_expr(audit_entry::Column::Hash, sea_orm::sea_query::Expr::value("0".repeat(64)))
        .filter(audit_entry::Column::Seq.eq(4))
        .exec(&t.db)
        .await
        .unwrap();
    assert!(audit::matches_checkpoint(&t.db, &cp).await.unwrap().is_err());
});

// Verification from the mark recomputes only what was appended since the
// last one: with 100 k entries stored, appending 10 costs 10 links, not
// 100 k (counted, and timed against the full walk).
db_test!(verification_from_the_mark_costs_only_the_new_entries, async |t: &TestDb| {
    use domain::{audit::Change, auth::Actor};
    for _ in 0..10 {
        let txn = domain::db::begin_write(&t.db).await.unwrap();
        let changes = (0..10_000)
            .map(|_| Change {
                action: "test.seed",
                target_kind: "test",
                target_id: "seed",
                tenant_id: None,
                before: None,
                after: None,
            })
            .collect();
        audit::record_many(&txn, &Actor::System, changes).await.unwrap();
        txn.commit().await.unwrap();
    }
    let started = std::time::Instant::now();
    let full = audit::verify_chain(&t.db).await.unwrap();
    let full_took = started.elapsed();
    assert!(full.ok, "{full:?}");
    assert_eq!((full.entries, full.checked, full.verified_from_seq), (100_000, 100_000, 0));
    // Nothing new: the mark holds and nothing is recomputed.
    let none = audit::verify_new(&t.db, false).await.unwrap();
    assert_eq!((none.ok, none.checked, none.verified_from_seq), (true, 0, 100_000), "{none:?}");
    for i in 0..10 {
        tenants::create(&t.db, &admin(), NewTenant { slug: format!("clinic-{i}"), name: None, notify_url: None })
            .await
            .unwrap();
    }
    let started = std::time::Instant::now();
    let new = audit::verify_new(&t.db, false).await.unwrap();
    let new_took = started.elapsed();
    assert!(new.ok, "{new:?}");
    assert_eq!((new.entries, new.checked, new.verified_from_seq), (100_010, 10, 100_000));
    assert!(new_took * 10 < full_took, "10 new entries took {new_took:?}, the whole chain {full_took:?}");
});

// The mark catches what a full walk of a re-headed chain cannot see: the
// tail cut after a verification, and the head rewritten to the new end.
// And the mark itself cannot be moved by hand.
db_test!(a_tail_cut_after_a_verification_is_caught_from_the_mark, async |t: &TestDb| {
    active_key(t).await;
    assert!(audit::verify_new(&t.db, true).await.unwrap().ok);
    as_database_owner(t).await;
    let entries = audit_entry::Entity::find().order_by_asc(audit_entry::Column::Seq).all(&t.db).await.unwrap();
    let keep = &entries[entries.len() - 3];
    audit_entry::Entity::delete_many().filter(audit_entry::Column::Seq.gt(keep.seq)).exec(&t.db).await.unwrap();
    t.db.execute_unprepared(&format!("UPDATE audit_head SET seq = {}, hash = '{}'", keep.seq, keep.hash))
        .await
        .unwrap();
    let report = audit::verify_new(&t.db, false).await.unwrap();
    assert!(!report.ok);
    let broken = report.first_broken.unwrap();
    assert_eq!(broken.seq, entries.last().unwrap().seq, "{broken:?}");
    assert!(broken.reason.contains("cut or rewritten"), "{broken:?}");
    let full = audit::verify_chain(&t.db).await.unwrap();
    assert!(!full.ok, "the full walk checks the mark too: {full:?}");
    // Moving the mark back by hand is refused too.
    t.db.execute_unprepared(&format!("UPDATE audit_verified SET seq = {}, hash = '{}'", keep.seq, keep.hash))
        .await
        .unwrap();
    let report = audit::verify_new(&t.db, false).await.unwrap();
    assert!(report.first_broken.unwrap().reason.contains("mark was altered"));
});
