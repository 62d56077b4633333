//! Read side of the receiver: received events' metadata (never bodies) and
//! the reminders they produced; one event's whole story (`story`).

pub mod story;

use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect};

use crate::{
    auth::{Principal, Scope},
    clock,
    entity::{endpoint, inbox_claim, reminder},
    error::{DomainError, DomainResult},
    registry::tenants,
};
use views::ids::TenantSlug;
use views::{
    events::{ClaimOutcome, EventView, ReminderView},
    roles::Permission,
};

/// Newest first; `status` filters by outcome.
pub async fn list_events(
    db: &DatabaseConnection,
    principal: &Principal,
    tenant_slug: &TenantSlug,
    status: Option<&str>,
    limit: u64,
) -> DomainResult<Vec<EventView>> {
    let t = tenants::find(db, principal, tenant_slug).await?;
    principal.authorize(Permission::ReadEvents, Scope::Tenant(&t.id))?;
    let mut q = inbox_claim::Entity::find()
        .filter(inbox_claim::Column::TenantId.eq(&t.id))
        .order_by_desc(inbox_claim::Column::ReceivedAt)
        .limit(limit.clamp(1, views::paging::LIST.max));
    if let Some(s) = status.filter(|s| !s.is_empty()) {
        let Some(outcome) = ClaimOutcome::parse(s) else {
            let words: Vec<&str> = ClaimOutcome::ALL.iter().map(|o| o.as_str()).collect();
            return Err(DomainError::invalid(
                "invalid_status",
                format!("status must be {}, got {s:?}", words.join(", ")),
            ));
        };
        q = q.filter(inbox_claim::Column::Outcome.eq(outcome));
    }
    let endpoints = endpoint::Entity::find().filter(endpoint::Column::TenantId.eq(&t.id)).all(db).await?;
    q.all(db)
        .await?
        .into_iter()
        .map(|c| {
            // A claim's endpoint is always stored (a foreign key): a missing
            // one is a corrupt row, as a stored slug outside its rule is.
            let endpoint = endpoints.iter().find(|e| e.id == c.endpoint_id).map_or("", |e| e.slug.as_str());
            Ok(EventView {
                endpoint: crate::ids::stored(endpoint)?,
                event_id: c.event_id,
                event_type: c.event_type,
                outcome: c.outcome,
                key_id: crate::ids::stored(&c.key_id)?,
                body_sha256: c.body_digest,
                received_at: clock::rfc3339(c.received_at),
            })
        })
        .collect()
}

pub async fn get_reminder(
    db: &DatabaseConnection,
    principal: &Principal,
    tenant_slug: &TenantSlug,
    reminder_id: &str,
) -> DomainResult<ReminderView> {
    let t = tenants::find(db, principal, tenant_slug).await?;
    principal.authorize(Permission::ReadEvents, Scope::Tenant(&t.id))?;
    let r = reminder::Entity::find_by_id((t.id, reminder_id.to_owned())).one(db).await?.ok_or(DomainError::NotFound)?;
    Ok(ReminderView {
        reminder_id: r.reminder_id,
        status: r.status,
        send_at: clock::rfc3339(r.send_at),
        created_at: clock::rfc3339(r.created_at),
        updated_at: clock::rfc3339(r.updated_at),
    })
}
