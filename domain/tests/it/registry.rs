use domain::{
    DomainError, db,
    entity::{endpoint, signing_key},
    registry::{
        endpoints::{self, EndpointPatch, NewEndpoint},
        keys,
        tenants::{self, NewTenant, TenantPatch},
    },
};
use sea_orm::{ActiveModelTrait, EntityTrait, Set};
use views::{roles::Role, scheme::Scheme};

use crate::{db_test, fixtures::*, support::TestDb};

db_test!(migrations_are_idempotent, async |t: &TestDb| {
    db::migrate(&t.db).await.expect("second run");
    db::migrate(&t.db).await.expect("third run");
});

db_test!(tenant_slugs_are_validated_and_unique, async |t: &TestDb| {
    let bad =
        tenants::create(&t.db, &admin(), NewTenant { slug: "Clinic A".into(), name: None, notify_url: None }).await;
    assert!(matches!(bad, Err(DomainError::Invalid { code: "invalid_slug", .. })));
    tenant(t, "clinic-a").await;
    let dup = tenants::create(
        &t.db,
        &admin(),
        NewTenant { slug: "clinic-a".into(), name: Some("Other".into()), notify_url: None },
    )
    .await;
    assert!(matches!(dup, Err(DomainError::Conflict { code: "tenant_exists", .. })), "{dup:?}");
    let url = tenants::create(
        &t.db,
        &admin(),
        NewTenant { slug: "x".into(), name: None, notify_url: Some("ftp://nope".into()) },
    )
    .await;
    assert!(matches!(url, Err(DomainError::Invalid { code: "invalid_notify_url", .. })));
    // The stored tenant was not touched by the failed duplicate.
    assert_eq!(tenants::get(&t.db, &admin(), &"clinic-a".parse().unwrap()).await.unwrap().name, "clinic-a");
});

db_test!(clinic_admin_sees_only_its_tenant, async |t: &TestDb| {
    let a = tenant(t, "clinic-a").await;
    tenant(t, "clinic-b").await;
    endpoint(t, "clinic-b", "hooks", None).await;
    let ca = user(Role::ClinicAdmin, Some(&a.id));
    let listed = tenants::list(&t.db, &ca).await.unwrap();
    assert_eq!(listed.iter().map(|t| t.slug.as_str()).collect::<Vec<_>>(), ["clinic-a"]);
    assert!(matches!(tenants::get(&t.db, &ca, &"clinic-b".parse().unwrap()).await, Err(DomainError::NotFound)));
    assert!(matches!(endpoints::list(&t.db, &ca, &"clinic-b".parse().unwrap()).await, Err(DomainError::NotFound)));
    assert!(matches!(
        endpoints::get(&t.db, &ca, &"clinic-b".parse().unwrap(), &"hooks".parse().unwrap()).await,
        Err(DomainError::NotFound)
    ));
    let create = endpoints::create(
        &t.db,
        &ca,
        &"clinic-b".parse().unwrap(),
        NewEndpoint {
            slug: "evil".into(),
            scheme: Scheme::Github,
            event_types: None,
            tolerance_secs: None,
            max_body_bytes: None,
            hmac_profile: None,
        },
    )
    .await;
    assert!(matches!(create, Err(DomainError::NotFound)));
    // Its own tenant works; tenant settings are admin-only.
    endpoint(t, "clinic-a", "hooks", None).await;
    assert!(endpoints::get(&t.db, &ca, &"clinic-a".parse().unwrap(), &"hooks".parse().unwrap()).await.is_ok());
    let patch = tenants::update(
        &t.db,
        &ca,
        &"clinic-a".parse().unwrap(),
        TenantPatch { name: Some("x".into()), notify_url: None },
    )
    .await;
    assert!(matches!(patch, Err(DomainError::Forbidden)));
    // Reviewers and on-call read everything but change nothing here.
    for role in [Role::Reviewer, Role::Oncall] {
        let p = user(role, None);
        assert_eq!(tenants::list(&t.db, &p).await.unwrap().len(), 2);
        let e = endpoints::update(
            &t.db,
            &p,
            &"clinic-a".parse().unwrap(),
            &"hooks".parse().unwrap(),
            EndpointPatch { enabled: Some(false), ..Default::default() },
        )
        .await;
        assert!(matches!(e, Err(DomainError::Forbidden)), "{role}");
    }
});

db_test!(endpoint_slugs_unique_per_tenant, async |t: &TestDb| {
    tenant(t, "clinic-a").await;
    tenant(t, "clinic-b").await;
    endpoint(t, "clinic-a", "hooks", None).await;
    endpoint(t, "clinic-b", "hooks", None).await;
    let dup = endpoints::create(
        &t.db,
        &admin(),
        &"clinic-a".parse().unwrap(),
        NewEndpoint {
            slug: "hooks".into(),
            scheme: Scheme::Stripe,
            event_types: None,
            tolerance_secs: None,
            max_body_bytes: None,
            hmac_profile: None,
        },
    )
    .await;
    assert!(matches!(dup, Err(DomainError::Conflict { code: "endpoint_exists", .. })), "{dup:?}");
    let kept = endpoints::get(&t.db, &admin(), &"clinic-a".parse().unwrap(), &"hooks".parse().unwrap()).await.unwrap();
    assert_eq!(kept.scheme, Scheme::StandardWebhooks, "the original was not overwritten");
    let bad = endpoints::create(
        &t.db,
        &admin(),
        &"clinic-a".parse().unwrap(),
        NewEndpoint {
            slug: "x".into(),
            scheme: Scheme::Stripe,
            event_types: None,
            tolerance_secs: Some(0),
            max_body_bytes: None,
            hmac_profile: None,
        },
    )
    .await;
    assert!(matches!(bad, Err(DomainError::Invalid { code: "invalid_tolerance", .. })));
});

db_test!(database_enforces_key_endpoint_tenant_binding, async |t: &TestDb| {
    let k = active_key(t).await;
    let b = tenant(t, "clinic-b").await;
    let row = signing_key::Entity::find_by_id(k.key.key_id.clone()).one(&t.db).await.unwrap().unwrap();
    // A key row claiming clinic-b but pointing at clinic-a's endpoint.
    let mut forged: signing_key::ActiveModel = row.clone().into();
    forged.id = Set("key_forged".into());
    forged.tenant_id = Set(b.id.clone());
    let forged = signet_insert(forged, t).await;
    assert!(forged.is_err(), "composite foreign key must refuse a cross-tenant key");
    // Duplicate key id.
    let mut dup: signing_key::ActiveModel = row.into();
    dup.id = Set(k.key.key_id.to_string());
    let dup = signet_insert(dup, t).await;
    assert!(dup.as_ref().is_err_and(db::is_unique_violation), "{dup:?}");
    // An endpoint for a tenant that does not exist.
    let orphan = raw_endpoint("e-orphan", "no-such-tenant", "github").insert(&t.db).await;
    assert!(orphan.is_err());
});

async fn signet_insert(m: signing_key::ActiveModel, t: &TestDb) -> Result<signing_key::Model, sea_orm::DbErr> {
    m.insert(&t.db).await
}

db_test!(narrowing_endpoint_types_refused_while_keys_use_them, async |t: &TestDb| {
    let k = active_key(t).await;
    assert_eq!(k.key.event_types, ["otp.requested", "reminder.created"]);
    let narrow = endpoints::update(
        &t.db,
        &admin(),
        &"clinic-a".parse().unwrap(),
        &"reminders".parse().unwrap(),
        EndpointPatch { event_types: Some(vec!["reminder.created".into()]), ..Default::default() },
    )
    .await;
    assert!(matches!(narrow, Err(DomainError::Conflict { code: "key_scope_outside_endpoint", .. })), "{narrow:?}");
    let widen = endpoints::update(
        &t.db,
        &admin(),
        &"clinic-a".parse().unwrap(),
        &"reminders".parse().unwrap(),
        EndpointPatch {
            event_types: Some(vec!["reminder.created".into(), "otp.requested".into(), "reminder.canceled".into()]),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(widen.event_types.len(), 3);
});

// Event-type lists are looked at only for a caller allowed to make the
// change, and only up to 256 entries: a long list from anyone else costs
// nothing but the permission check.
db_test!(event_type_lists_are_authorized_first_and_capped, async |t: &TestDb| {
    let k = active_key(t).await;
    let a = tenants::get(&t.db, &admin(), &"clinic-a".parse().unwrap()).await.unwrap();
    let long: Vec<String> = (0..20_000).map(|i| format!("t{}", i % 7)).collect();
    let invalid = vec!["Not A Type".to_owned()];
    let new = |types: &Vec<String>| NewEndpoint {
        slug: "more".into(),
        scheme: Scheme::StandardWebhooks,
        event_types: Some(types.clone()),
        tolerance_secs: None,
        max_body_bytes: None,
        hmac_profile: None,
    };
    for types in [&long, &invalid] {
        // On-call may not create endpoints: refused as such, whatever the list.
        let r = endpoints::create(&t.db, &oncall(), &"clinic-a".parse().unwrap(), new(types)).await;
        assert!(matches!(r, Err(DomainError::Forbidden)), "{r:?}");
        // Another clinic's admin does not learn the tenant exists.
        let other = user(Role::ClinicAdmin, Some("someone-else"));
        let r = endpoints::create(&t.db, &other, &"clinic-a".parse().unwrap(), new(types)).await;
        assert!(matches!(r, Err(DomainError::NotFound)), "{r:?}");
        let r = keys::set_scope(&t.db, &oncall(), &k.key.key_id, types).await;
        assert!(matches!(r, Err(DomainError::Forbidden)), "{r:?}");
    }
    // The clinic's own admin is told what is wrong with the list.
    let ca = user(Role::ClinicAdmin, Some(&a.id));
    let r = endpoints::create(&t.db, &ca, &"clinic-a".parse().unwrap(), new(&long)).await;
    assert!(matches!(r, Err(DomainError::Invalid { code: "too_many_event_types", .. })), "{r:?}");
    let r = keys::set_scope(&t.db, &ca, &k.key.key_id, &long).await;
    assert!(matches!(r, Err(DomainError::Invalid { code: "too_many_event_types", .. })), "{r:?}");
    // 256 entries, repeats included, are fine and come back as a set.
    let most: Vec<String> = (0..256).map(|i| format!("t{}", i % 100)).collect();
    let e = endpoints::create(&t.db, &ca, &"clinic-a".parse().unwrap(), new(&most)).await.unwrap();
    assert_eq!(e.event_types.len(), 100);
    assert!(e.event_types.windows(2).all(|w| w[0] < w[1]), "sorted, no repeats");
    let scoped = keys::set_scope(&t.db, &ca, &k.key.key_id, &vec!["reminder.created".to_owned(); 256]).await.unwrap();
    assert_eq!(scoped.event_types, ["reminder.created"]);
});

// Migration 000150 widened the scheme CHECK (SQLite: the recorded table SQL
// edited in place; PostgreSQL: the constraint replaced): `hmac` goes in,
// a name outside the list is still refused by the database itself.
db_test!(the_database_admits_scheme_hmac_and_nothing_else_new, async |t: &TestDb| {
    let a = tenant(t, "clinic-a").await;
    let row = |id: &str, scheme: &str| raw_endpoint(id, &a.id, scheme);
    assert!(row("e-hmac", "hmac").insert(&t.db).await.is_ok());
    assert!(row("e-md5", "md5").insert(&t.db).await.is_err(), "the CHECK still refuses other names");
    db::migrate(&t.db).await.expect("the migration is idempotent");
});

/// An endpoint row written straight to the table, past the registry's
/// checks, so the database's own constraints are what decide.
fn raw_endpoint(id: &str, tenant_id: &str, scheme: &str) -> endpoint::ActiveModel {
    endpoint::ActiveModel {
        id: Set(id.into()),
        tenant_id: Set(tenant_id.into()),
        slug: Set(id.into()),
        scheme: Set(scheme.into()),
        event_types: Set("[\"*\"]".into()),
        tolerance_secs: Set(300),
        timestamp_floor: Set(None),
        replay_partitioned_from: Set(None),
        event_id_fields: Set(None),
        hmac_profile: Set(None),
        max_body_bytes: Set(1024),
        enabled: Set(true),
        created_at: Set(0),
    }
}
