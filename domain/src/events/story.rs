//! One event's whole story (issue 25 item 4): every answer Signet gave to a
//! delivery naming it (the first accepted one from its claim, the others
//! from the delivery log), its claim, replay records, quarantine entry with its
//! triage, the reminder transition, outbox intents and the audit entries
//! that name them. Metadata only: the body is read here only to find which
//! reminder or OTP request it named, and is never returned; the quarantine
//! entry links to its audited reveal.

use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect};

use crate::{
    auth::{Principal, Scope},
    bodies, clock,
    crypto::Aad,
    entity::{
        audit_entry, delivery_log, endpoint, event_body, inbox_claim, outbox_intent, quarantine_entry, reminder,
        replay_record,
    },
    envelope,
    error::{DomainError, DomainResult},
    outbox, quarantine,
    registry::tenants,
    vault::Vault,
};
use views::ids::{EndpointSlug, EventId, TenantSlug};
use views::{
    events::{
        ClaimOutcome, EventRef, EventStory, StoryClaim, StoryDelivery, StoryQuarantine, StoryReminder, StoryReplay,
    },
    roles::Permission,
};

/// At most this many deliveries and audit entries are shown (oldest first).
pub const MAX_ROWS: u64 = 500;

/// The story of `event_id` at `tenant_slug`/`endpoint_slug`. An unknown
/// tenant, endpoint or event, or one outside the caller's tenant, is
/// `NotFound` alike.
pub async fn story(
    db: &DatabaseConnection,
    vault: &Vault,
    principal: &Principal,
    tenant_slug: &TenantSlug,
    endpoint_slug: &EndpointSlug,
    event_id: &EventId,
) -> DomainResult<EventStory> {
    let event_id = event_id.as_str();
    let t = tenants::find(db, principal, tenant_slug).await?;
    principal.authorize(Permission::ReadEvents, Scope::Tenant(&t.id))?;
    principal.authorize(Permission::ReadAudit, Scope::Tenant(&t.id))?;
    let ep = endpoint::Entity::find()
        .filter(endpoint::Column::TenantId.eq(&t.id))
        .filter(endpoint::Column::Slug.eq(endpoint_slug.as_str()))
        .one(db)
        .await?
        .ok_or(DomainError::NotFound)?;
    let claim = inbox_claim::Entity::find_by_id((t.id.clone(), ep.id.clone(), event_id.to_owned())).one(db).await?;
    let body = match &claim {
        Some(c) => bodies::of(db, c).await?,
        None => None,
    };
    let logged = delivery_log::Entity::find()
        .filter(delivery_log::Column::TenantId.eq(&t.id))
        .filter(delivery_log::Column::EndpointId.eq(&ep.id))
        .filter(delivery_log::Column::EventId.eq(event_id))
        .order_by_asc(delivery_log::Column::AnsweredAt)
        .limit(MAX_ROWS)
        .all(db)
        .await?;
    let entry = quarantine_entry::Entity::find()
        .filter(quarantine_entry::Column::TenantId.eq(&t.id))
        .filter(quarantine_entry::Column::EndpointId.eq(&ep.id))
        .filter(quarantine_entry::Column::EventId.eq(event_id))
        .one(db)
        .await?;
    if claim.is_none() && logged.is_empty() && entry.is_none() {
        return Err(DomainError::NotFound);
    }

    let first = claim.as_ref().map(|c| first_delivery(c, &ep.scheme)).transpose()?.flatten();
    let digests: Vec<String> = logged
        .iter()
        .filter_map(|d| d.message_digest.clone())
        .chain(claim.as_ref().and_then(|c| c.message_digest.clone()))
        .collect();
    let replay = if digests.is_empty() {
        Vec::new()
    } else {
        replay_record::Entity::find()
            .filter(replay_record::Column::TenantId.eq(&ep.tenant_id))
            .filter(replay_record::Column::EndpointId.eq(&ep.id))
            .filter(replay_record::Column::MessageDigest.is_in(digests))
            .all(db)
            .await?
    };
    let named = match &claim {
        Some(c) => named_ids(db, vault, c, body.as_ref()).await,
        None => Named::default(),
    };
    let reminder = match (&claim, named.reminder_id) {
        (Some(c), Some(id)) => {
            let current = reminder::Entity::find_by_id((t.id.clone(), id.clone())).one(db).await?;
            Some(StoryReminder {
                reminder_id: id,
                transition: c.event_type.clone().unwrap_or_default(),
                outcome: c.outcome,
                current: current.map(|r| views::events::ReminderView {
                    reminder_id: r.reminder_id,
                    status: r.status,
                    send_at: clock::rfc3339(r.send_at),
                    created_at: clock::rfc3339(r.created_at),
                    updated_at: clock::rfc3339(r.updated_at),
                }),
            })
        }
        _ => None,
    };
    // The intents the effect created: a reminder notice is keyed by the
    // event, an OTP by the request id the event named.
    let mut keys = vec![format!("reminder_notice:{}:{event_id}", ep.id)];
    keys.extend(named.otp_request_id.map(|r| format!("otp:{r}")));
    let intents = outbox_intent::Entity::find()
        .filter(outbox_intent::Column::TenantId.eq(&t.id))
        .filter(outbox_intent::Column::IdempotencyKey.is_in(keys))
        .order_by_asc(outbox_intent::Column::CreatedAt)
        .all(db)
        .await?;

    let mut targets: Vec<String> = intents.iter().map(|i| i.id.clone()).collect();
    targets.extend(entry.as_ref().map(|e| e.id.clone()));
    targets.push(event_id.to_owned());
    let audit: Vec<views::audit::AuditView> = audit_entry::Entity::find()
        .filter(audit_entry::Column::TenantId.eq(&t.id))
        .filter(audit_entry::Column::TargetId.is_in(targets))
        .order_by_asc(audit_entry::Column::Seq)
        .limit(MAX_ROWS)
        .all(db)
        .await?
        .into_iter()
        .map(Into::into)
        .collect();
    let quarantine = match entry {
        Some(e) => {
            let id = e.id.clone();
            let triage = audit.iter().filter(|a| a.target_kind == "quarantine" && a.target_id == id).cloned().collect();
            let entry = quarantine::views(db, vec![e]).await?.remove(0);
            Some(StoryQuarantine { entry, triage, reveal: format!("/api/v1/quarantine/{id}?include_body=true") })
        }
        None => None,
    };
    Ok(EventStory {
        claim: claim
            .map(|c| {
                Ok::<_, DomainError>(StoryClaim {
                    key_id: crate::ids::stored(&c.key_id)?,
                    event_type: c.event_type,
                    outcome: c.outcome,
                    body_sha256: c.body_digest,
                    body_stored: body.is_some(),
                    received_at: clock::rfc3339(c.received_at),
                })
            })
            .transpose()?,
        deliveries: deliveries(first, logged)?,
        replay: replay
            .into_iter()
            .map(|r| StoryReplay {
                kept_until: clock::rfc3339(crate::replay::kept_until(db.get_database_backend(), &r)),
                expires_at: clock::rfc3339(r.expires_at),
                message_sha256: r.message_digest,
            })
            .collect(),
        quarantine,
        reminder,
        outbox: intents.into_iter().map(|i| outbox::view(i, tenant_slug.clone())).collect(),
        audit,
    })
}

/// The event's first accepted delivery, as its claim records it (the
/// delivery log keeps only the other answers; see `receiver::gates`), at the
/// time the claim was made. `None` for claims older than that record and
/// for the compound-key claims a release takes.
fn first_delivery(c: &inbox_claim::Model, scheme: &str) -> DomainResult<Option<(i64, StoryDelivery)>> {
    let Some(answer) = c.first_answer else { return Ok(None) };
    let status = if answer == ClaimOutcome::Quarantined { 202 } else { 200 };
    let key_id = Some(crate::ids::stored(&c.key_id)?);
    let at = c.received_at;
    Ok(Some((
        at,
        StoryDelivery {
            answered_at: clock::rfc3339(at),
            status,
            answer: answer.as_str().to_owned(),
            key_id,
            scheme: scheme.to_owned(),
        },
    )))
}

/// Every answered delivery, oldest first: the claim's and the logged ones.
fn deliveries(
    first: Option<(i64, StoryDelivery)>,
    logged: Vec<delivery_log::Model>,
) -> DomainResult<Vec<StoryDelivery>> {
    let logged = logged.into_iter().map(|d| {
        let delivery = StoryDelivery {
            answered_at: clock::rfc3339(d.answered_at),
            status: u16::try_from(d.status).unwrap_or_default(),
            answer: d.answer,
            key_id: d.key_id.as_deref().map(crate::ids::stored).transpose()?,
            scheme: d.scheme,
        };
        Ok((d.answered_at, delivery))
    });
    let mut all: Vec<(i64, StoryDelivery)> = first.into_iter().map(Ok).chain(logged).collect::<DomainResult<_>>()?;
    // Stable: a refusal logged in the same millisecond as the claim stays after it.
    all.sort_by_key(|(at, _)| *at);
    Ok(all.into_iter().map(|(_, d)| d).collect())
}

/// The event a quarantine entry or an outbox intent belongs to, for links
/// from their rows. Only reminder notices name their event; an OTP intent
/// (keyed by its request id) is `NotFound`, as is anything outside the
/// caller's tenant.
pub async fn locate(
    db: &DatabaseConnection,
    principal: &Principal,
    quarantine_id: Option<&str>,
    intent_id: Option<&str>,
) -> DomainResult<EventRef> {
    if let Some(id) = quarantine_id.filter(|s| !s.is_empty()) {
        let q = quarantine::get(db, principal, id).await?;
        return Ok(EventRef { tenant: q.tenant, endpoint: q.endpoint, event_id: q.event_id });
    }
    let Some(id) = intent_id.filter(|s| !s.is_empty()) else {
        return Err(DomainError::invalid("nothing_to_find", "name a quarantine entry or an outbox intent"));
    };
    let i = outbox_intent::Entity::find()
        .filter(outbox_intent::Column::Id.eq(id))
        .one(db)
        .await?
        .ok_or(DomainError::NotFound)?;
    if !principal.can_see_tenant(&i.tenant_id) {
        return Err(DomainError::NotFound);
    }
    principal.authorize(Permission::ReadEvents, Scope::Tenant(&i.tenant_id))?;
    let (endpoint_id, event_id) = i
        .idempotency_key
        .strip_prefix("reminder_notice:")
        .and_then(|rest| rest.split_once(':'))
        .ok_or(DomainError::NotFound)?;
    let e = endpoint::Entity::find_by_id(endpoint_id.to_owned())
        .one(db)
        .await?
        .filter(|e| e.tenant_id == i.tenant_id)
        .ok_or(DomainError::NotFound)?;
    let t =
        crate::entity::tenant::Entity::find_by_id(i.tenant_id.clone()).one(db).await?.ok_or(DomainError::NotFound)?;
    Ok(EventRef { tenant: t.slug, endpoint: crate::ids::stored(&e.slug)?, event_id: event_id.to_owned() })
}

/// What the event's body named, for finding the rows its effect touched.
#[derive(Default)]
struct Named {
    reminder_id: Option<String>,
    otp_request_id: Option<String>,
}

/// Reads the two ids from the sealed body; nothing else of it leaves this
/// function. A purged or unreadable body names nothing.
async fn named_ids(
    db: &DatabaseConnection,
    vault: &Vault,
    c: &inbox_claim::Model,
    body: Option<&event_body::Model>,
) -> Named {
    let Some(sealed) = body.map(|b| b.body_ciphertext.as_slice()) else { return Named::default() };
    let body = match vault.open(db, &Aad::event_body(&c.tenant_id, &c.endpoint_id, &c.event_id), sealed).await {
        Ok(body) => body,
        Err(e) => {
            tracing::warn!(error = %e, "opening an event body for its story failed");
            return Named::default();
        }
    };
    let Some(env) = envelope::parse(&body) else { return Named::default() };
    let field = |name: &str| env.data.get(name).and_then(|v| v.as_str()).map(str::to_owned);
    match env.event_type.as_str() {
        t if t.starts_with("reminder.") => Named { reminder_id: field("reminder_id"), otp_request_id: None },
        "otp.requested" => Named { reminder_id: None, otp_request_id: field("otp_request_id") },
        _ => Named::default(),
    }
}
