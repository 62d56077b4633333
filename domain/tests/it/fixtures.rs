//! Principals and a small registry to act on.

use domain::{
    auth::{Actor, Principal, Role},
    registry::{
        Scheme,
        endpoints::{self, NewEndpoint},
        keys::{self, Approval, ProvisionRequest, ProvisionedKey},
        tenants::{self, NewTenant, TenantView},
    },
};

use crate::support::TestDb;

pub fn user(role: Role, tenant_id: Option<&str>) -> Principal {
    Principal {
        actor: Actor::User { id: format!("id-{}", role.as_str()), username: format!("{}-user", role.as_str()) },
        role,
        tenant_id: tenant_id.map(str::to_owned),
    }
}

pub fn admin() -> Principal {
    user(Role::Admin, None)
}

pub fn reviewer() -> Principal {
    user(Role::Reviewer, None)
}

pub fn oncall() -> Principal {
    user(Role::Oncall, None)
}

pub async fn tenant(t: &TestDb, slug: &str) -> TenantView {
    tenants::create(&t.db, &admin(), NewTenant { slug: slug.into(), name: None, notify_url: None })
        .await
        .expect("tenant")
}

pub async fn endpoint(t: &TestDb, tenant: &str, slug: &str, types: Option<&[&str]>) {
    endpoints::create(
        &t.db,
        &admin(),
        tenant,
        NewEndpoint {
            slug: slug.into(),
            scheme: Scheme::StandardWebhooks,
            event_types: types.map(|ts| ts.iter().map(|s| s.to_string()).collect()),
            tolerance_secs: None,
            max_body_bytes: None,
        },
    )
    .await
    .expect("endpoint");
}

/// A tenant `clinic-a` with endpoint `reminders` and an active key.
pub async fn active_key(t: &TestDb) -> ProvisionedKey {
    tenant(t, "clinic-a").await;
    endpoint(t, "clinic-a", "reminders", Some(&["reminder.created", "otp.requested"])).await;
    keys::provision(
        &t.db,
        &t.vault,
        &admin(),
        "clinic-a",
        "reminders",
        ProvisionRequest::default(),
        Approval::ApproveAs { reviewer: "rev".into(), comment: "ok".into() },
    )
    .await
    .expect("provision")
}

/// Audit entries with this action, oldest first: (target id, after).
pub async fn audit_entries(t: &TestDb, action: &str) -> Vec<(String, serde_json::Value)> {
    use domain::entity::audit_entry;
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
    audit_entry::Entity::find()
        .filter(audit_entry::Column::Action.eq(action))
        .order_by_asc(audit_entry::Column::Seq)
        .all(&t.db)
        .await
        .expect("audit entries")
        .into_iter()
        .map(|e| {
            (
                e.target_id,
                e.after.as_deref().map_or(serde_json::Value::Null, |a| serde_json::from_str(a).expect("after is JSON")),
            )
        })
        .collect()
}

/// Turns the tenant's retry policy on (new tenants start with it off).
pub async fn enable_retries(t: &TestDb, slug: &str) {
    domain::retry_policy::set(&t.db, &admin(), slug, "enabled", "test: retries on").await.expect("enable retries");
}
