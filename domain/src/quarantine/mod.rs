//! Quarantine triage: list, inspect, release, discard.
//!
//! A quarantined event is authenticated and claimed (its retries are
//! duplicates) but had no effect. Release re-runs the handler against the
//! current state in one transaction whose first statement moves the entry
//! from `open` to `released`: a second, concurrent release waits on that row
//! and then matches nothing, so the effect happens exactly once. If the
//! handler still cannot apply, the transaction rolls back and the entry stays
//! open with the new error recorded.

mod bulk_item;
pub mod bulk_release;
mod filter;
pub mod redact;

use std::collections::HashMap;
use views::{
    events::ClaimOutcome,
    keys::KeyStatus,
    quarantine::{
        BulkItemOutcome, QuarantineList, QuarantineReason, QuarantineReasonCount, QuarantineStatus, QuarantineView,
        RevealedBody,
    },
    roles::Permission,
    scheme::EventTypes,
};

use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect,
    Set, TryInsertResult, sea_query::Expr,
};
use serde_json::json;

pub use filter::Filter;
use filter::{nonempty, scope_condition, with_reason};
use redact::Redaction;

use crate::{
    audit::{self, Change},
    auth::{Actor, Principal, Scope},
    bodies, clock,
    crypto::Aad,
    db,
    entity::{endpoint, inbox_claim, quarantine_entry as entry, signing_key, tenant},
    envelope,
    error::{DomainError, DomainResult},
    receiver::effects::{self, Applied, EffectError, Target},
    registry::{endpoints, event_key},
    text::require_reason,
    vault::Vault,
};

pub async fn list(db: &DatabaseConnection, principal: &Principal, filter: &Filter) -> DomainResult<QuarantineList> {
    let f = &filter.given;
    let limit = crate::paging::limit(views::paging::LIST, f.limit)?;
    let scope = scope_condition(db, principal, filter).await?;
    let by_reason: Vec<QuarantineReasonCount> = entry::Entity::find()
        .select_only()
        .column(entry::Column::Reason)
        .column_as(entry::Column::Id.count(), "n")
        .filter(scope.clone())
        .group_by(entry::Column::Reason)
        .order_by_asc(entry::Column::Reason)
        .into_tuple::<(QuarantineReason, i64)>()
        .all(db)
        .await?
        .into_iter()
        .map(|(reason, n)| QuarantineReasonCount { reason, count: n.max(0) as u64 })
        .collect();
    // The total follows from the counts: one reason's, or all of them.
    let total = match nonempty(&f.reason) {
        Some(r) => by_reason.iter().find(|c| c.reason.as_str() == r).map_or(0, |c| c.count),
        None => by_reason.iter().map(|c| c.count).sum(),
    };
    let rows = entry::Entity::find()
        .filter(with_reason(scope, f))
        .order_by_desc(entry::Column::CreatedAt)
        .limit(limit)
        .all(db)
        .await?;
    Ok(QuarantineList { total, by_reason, items: views(db, rows).await? })
}

/// Joins slugs and claim metadata onto entries (a handful of queries, not
/// one per row).
pub(crate) async fn views<C: ConnectionTrait>(conn: &C, rows: Vec<entry::Model>) -> DomainResult<Vec<QuarantineView>> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let tenant_ids: Vec<&str> = rows.iter().map(|r| r.tenant_id.as_str()).collect();
    let slugs: HashMap<String, String> = tenant::Entity::find()
        .filter(tenant::Column::Id.is_in(tenant_ids.clone()))
        .all(conn)
        .await?
        .into_iter()
        .map(|t| (t.id, t.slug))
        .collect();
    let endpoints: HashMap<String, String> = endpoint::Entity::find()
        .filter(endpoint::Column::TenantId.is_in(tenant_ids))
        .all(conn)
        .await?
        .into_iter()
        .map(|e| (e.id, e.slug))
        .collect();
    let mut any = Condition::any();
    for r in &rows {
        any = any.add(
            Condition::all()
                .add(inbox_claim::Column::TenantId.eq(&r.tenant_id))
                .add(inbox_claim::Column::EndpointId.eq(&r.endpoint_id))
                .add(inbox_claim::Column::EventId.eq(&r.event_id)),
        );
    }
    let claims: HashMap<(String, String, String), inbox_claim::Model> = inbox_claim::Entity::find()
        .filter(any)
        .all(conn)
        .await?
        .into_iter()
        .map(|c| ((c.tenant_id.clone(), c.endpoint_id.clone(), c.event_id.clone()), c))
        .collect();
    let with_body = bodies::stored(conn, &claims.values().collect::<Vec<_>>()).await?;
    rows.into_iter()
        .map(|r| {
            let claim = claims.get(&(r.tenant_id.clone(), r.endpoint_id.clone(), r.event_id.clone()));
            // An entry's endpoint is always stored (a foreign key): a missing
            // one is a corrupt row, as a stored slug outside its rule is.
            let endpoint = endpoints.get(&r.endpoint_id).map_or("", String::as_str);
            Ok(QuarantineView {
                tenant: slugs.get(&r.tenant_id).cloned().unwrap_or_default(),
                endpoint: crate::ids::stored(endpoint)?,
                event_type: claim.and_then(|c| c.event_type.clone()),
                key_id: claim.map(|c| crate::ids::stored(&c.key_id)).transpose()?,
                body_sha256: claim.map(|c| c.body_digest.clone()),
                body_stored: with_body.contains(&(r.tenant_id.clone(), r.endpoint_id.clone(), r.event_id.clone())),
                quarantined_at: clock::rfc3339(r.created_at),
                resolved_at: clock::rfc3339_opt(r.resolved_at),
                id: r.id,
                event_id: r.event_id,
                reason: r.reason,
                status: r.status,
                resolved_by: r.resolved_by,
                resolution_note: r.resolution_note,
                last_release_error: r.last_release_error,
            })
        })
        .collect()
}

/// The entry, if the caller may see its tenant (else not found).
async fn find<C: ConnectionTrait>(conn: &C, principal: &Principal, id: &str) -> DomainResult<entry::Model> {
    let e = entry::Entity::find().filter(entry::Column::Id.eq(id)).one(conn).await?.ok_or(DomainError::NotFound)?;
    if !principal.can_see_tenant(&e.tenant_id) {
        return Err(DomainError::NotFound);
    }
    Ok(e)
}

async fn view_of<C: ConnectionTrait>(conn: &C, e: entry::Model) -> DomainResult<QuarantineView> {
    Ok(views(conn, vec![e]).await?.remove(0))
}

pub async fn get(db: &DatabaseConnection, principal: &Principal, id: &str) -> DomainResult<QuarantineView> {
    let e = find(db, principal, id).await?;
    principal.authorize(Permission::ReadEvents, Scope::Tenant(&e.tenant_id))?;
    view_of(db, e).await
}

async fn claim_of<C: ConnectionTrait>(conn: &C, e: &entry::Model) -> DomainResult<inbox_claim::Model> {
    inbox_claim::Entity::find_by_id((e.tenant_id.clone(), e.endpoint_id.clone(), e.event_id.clone()))
        .one(conn)
        .await?
        .ok_or_else(|| DomainError::conflict("claim_missing", "the event's claim is no longer stored"))
}

/// The claim's body, read through `conn` (a release's own transaction: a
/// second pooled connection while it holds one could wait on the pool).
async fn open_body<C: ConnectionTrait>(
    conn: &C,
    db: &DatabaseConnection,
    vault: &Vault,
    claim: &inbox_claim::Model,
) -> DomainResult<zeroize::Zeroizing<Vec<u8>>> {
    let body = bodies::of(conn, claim)
        .await?
        .ok_or_else(|| DomainError::conflict("body_purged", "the event's body has been purged by body retention"))?;
    vault.open(db, &Aad::event_body(&claim.tenant_id, &claim.endpoint_id, &claim.event_id), &body.body_ciphertext).await
}

fn audit_change<'a>(action: &'a str, e: &'a entry::Model, after: serde_json::Value) -> Change<'a> {
    Change {
        action,
        target_kind: "quarantine",
        target_id: &e.id,
        tenant_id: Some(&e.tenant_id),
        before: Some(json!({"status": e.status, "reason": e.reason, "event_id": e.event_id})),
        after: Some(after),
    }
}

/// Decrypts the body for an on-call engineer or admin, redacted, and
/// records that it was seen.
pub async fn reveal_body(
    db: &DatabaseConnection,
    vault: &Vault,
    principal: &Principal,
    id: &str,
    redaction: &Redaction,
) -> DomainResult<RevealedBody> {
    let e = find(db, principal, id).await?;
    let auth = principal.authorize(Permission::RevealBodies, Scope::Tenant(&e.tenant_id))?;
    let claim = claim_of(db, &e).await?;
    let body = open_body(db, db, vault, &claim).await?;
    let txn = db::begin_write(db).await?;
    audit::record(
        &txn,
        auth.actor(),
        audit_change("quarantine.reveal_body", &e, json!({"redacted_fields": redaction.fields()})),
    )
    .await?;
    txn.commit().await?;
    let size_bytes = body.len() as u64;
    Ok(match serde_json::from_slice::<serde_json::Value>(&body) {
        Ok(mut v) => {
            redaction.apply(&mut v);
            RevealedBody {
                json: true,
                text: serde_json::to_string_pretty(&v).unwrap_or_default(),
                redacted_fields: redaction.fields().to_vec(),
                size_bytes,
            }
        }
        // Nothing in it can be found and masked, so none of it is shown (it
        // may be health data in any format).
        Err(_) => RevealedBody { json: false, text: String::new(), redacted_fields: Vec::new(), size_bytes },
    })
}

fn already_resolved(e: &entry::Model) -> DomainError {
    DomainError::conflict(
        "already_resolved",
        format!(
            "this event was already {} by {} at {}",
            e.status,
            e.resolved_by.as_deref().unwrap_or("someone"),
            clock::rfc3339_opt(e.resolved_at).unwrap_or_default()
        ),
    )
}

/// Moves an open entry to `status` inside `conn`; false when it was not open
/// (another triage won).
async fn resolve<C: ConnectionTrait>(
    conn: &C,
    id: &str,
    status: QuarantineStatus,
    actor: &Actor,
    note: &str,
) -> DomainResult<bool> {
    let res = entry::Entity::update_many()
        .col_expr(entry::Column::Status, Expr::value(status))
        .col_expr(entry::Column::ResolvedAt, Expr::value(clock::now_ms()))
        .col_expr(entry::Column::ResolvedBy, Expr::value(actor.name()))
        .col_expr(entry::Column::ResolutionNote, Expr::value(note))
        .filter(entry::Column::Id.eq(id))
        .filter(entry::Column::Status.eq(QuarantineStatus::Open))
        .exec(conn)
        .await?;
    Ok(res.rows_affected == 1)
}

/// Re-runs the handler; on success the event is applied, exactly once.
pub async fn release(
    db: &DatabaseConnection,
    vault: &Vault,
    principal: &Principal,
    id: &str,
    reason: &str,
) -> DomainResult<QuarantineView> {
    release_marking(db, vault, principal, id, reason, None).await?;
    get(db, principal, id).await
}

/// [`release`]; with `mark`, a bulk release's item is recorded as released
/// in the same transaction as the effect, so a crash can never leave an
/// event released but its item pending (or counted as someone else's).
async fn release_marking(
    db: &DatabaseConnection,
    vault: &Vault,
    principal: &Principal,
    id: &str,
    reason: &str,
    mark: Option<&bulk_item::Mark<'_>>,
) -> DomainResult<()> {
    let reason = require_reason(reason)?;
    let e = find(db, principal, id).await?;
    let auth = principal.authorize(Permission::TriageEvents, Scope::Tenant(&e.tenant_id))?;
    // The effect may seal an outbox payload.
    vault.reserve_seals(db, 1).await?;
    let txn = db::begin_write(db).await?;
    if !resolve(&txn, id, QuarantineStatus::Released, auth.actor(), &reason).await? {
        txn.rollback().await?;
        return Err(already_resolved(&find(db, principal, id).await?));
    }
    let claim = claim_of(&txn, &e).await?;
    let failure = match open_body(&txn, db, vault, &claim).await {
        Err(err @ DomainError::Conflict { .. }) => {
            txn.rollback().await?;
            return Err(err);
        }
        Err(err) => return Err(err),
        Ok(body) => match envelope::parse(&body) {
            None => QuarantineReason::MalformedEnvelope.as_str(),
            Some(env) => match scope_refusal(&txn, &e, &claim, &env)
                .await?
                .map_or(claim_compound_id(&txn, &e, &claim, &env).await?, Err)
            {
                Err(refusal) => refusal,
                Ok(compound_id) => {
                    // A release continues no webhook's trace.
                    let at = Target { tenant_id: &e.tenant_id, endpoint_id: &e.endpoint_id, trace_context: None };
                    match effects::apply(&txn, vault, at, &e.event_id, &env, release_order(&e)).await {
                        Ok(applied) => {
                            // A transition the reminder has moved past since:
                            // released, and recorded as the stale one it is.
                            let outcome = if applied == Applied::Done {
                                ClaimOutcome::Applied
                            } else {
                                ClaimOutcome::StaleTransition
                            };
                            // The entry's claim, and the compound-key claim a
                            // missing-id release took (see `claim_compound_id`).
                            inbox_claim::Entity::update_many()
                                .col_expr(inbox_claim::Column::Outcome, Expr::value(outcome))
                                .filter(inbox_claim::Column::TenantId.eq(&e.tenant_id))
                                .filter(inbox_claim::Column::EndpointId.eq(&e.endpoint_id))
                                .filter(
                                    inbox_claim::Column::EventId
                                        .is_in(std::iter::once(e.event_id.clone()).chain(compound_id)),
                                )
                                .exec(&txn)
                                .await?;
                            if applied == Applied::Stale {
                                // Resolved, but say so: nothing was applied.
                                entry::Entity::update_many()
                                .col_expr(
                                    entry::Column::ResolutionNote,
                                    Expr::value(format!(
                                        "{reason} (stale transition: the reminder had moved past it, nothing applied)"
                                    )),
                                )
                                .filter(entry::Column::Id.eq(id))
                                .exec(&txn)
                                .await?;
                            }
                            let after =
                                json!({"status": QuarantineStatus::Released, "outcome": outcome, "note": reason});
                            audit::record(&txn, auth.actor(), audit_change("quarantine.release", &e, after)).await?;
                            if let Some(it) = mark {
                                bulk_item::record_in(&txn, it, BulkItemOutcome::Released, None).await?;
                            }
                            txn.commit().await?;
                            return Ok(());
                        }
                        Err(EffectError::Quarantine(why)) => why.as_str(),
                        Err(EffectError::Db(err)) => return Err(err.into()),
                        Err(EffectError::Crypto(err)) => return Err(err.into()),
                    }
                }
            },
        },
    };
    txn.rollback().await?;
    record_failed_release(db, &auth, &e, failure, &reason).await?;
    Err(DomainError::conflict(
        "release_failed",
        format!("the event still cannot apply ({failure}); it stays in quarantine"),
    ))
}

/// How a release places a reminder transition. An entry quarantined as
/// `ambiguous_order`, or whose last release failed as one, is on-call's to
/// order: releasing it is the decision that it is the newest, so it applies
/// unless the reminder was canceled. Any other entry meets the sender's
/// order rules, so an ambiguity found now fails the release and says so,
/// and a second release is that decision.
fn release_order(e: &entry::Model) -> effects::Order {
    let ambiguous = QuarantineReason::AmbiguousOrder;
    if e.reason == ambiguous || e.last_release_error.as_deref() == Some(ambiguous.as_str()) {
        effects::Order::Triage
    } else {
        effects::Order::Sender
    }
}

/// Gate 8 again, at release: the key that verified the event still exists
/// for this endpoint, has not been revoked (a revocation says the key is not
/// trusted, so neither is what it signed), and its scope (as it stands now)
/// permits the type; an envelope tenant is this tenant. An event quarantined
/// before gate 8 ran, or whose key's scope narrowed or key was revoked
/// since, does not apply by release (it can still be discarded).
async fn scope_refusal<C: ConnectionTrait>(
    conn: &C,
    e: &entry::Model,
    claim: &inbox_claim::Model,
    env: &envelope::Envelope,
) -> DomainResult<Option<&'static str>> {
    let key = signing_key::Entity::find_by_id(claim.key_id.clone()).one(conn).await?;
    if key.as_ref().is_some_and(|k| k.status == KeyStatus::Revoked) {
        return Ok(Some("key_revoked"));
    }
    let permitted = key.is_some_and(|k| {
        k.tenant_id == e.tenant_id
            && k.endpoint_id == e.endpoint_id
            && EventTypes::from_json(&k.event_types).permits(&env.event_type)
    });
    if !permitted {
        return Ok(Some("event_type_not_permitted"));
    }
    if let Some(claimed) = env.tenant.as_deref() {
        let slug = tenant::Entity::find_by_id(e.tenant_id.clone()).one(conn).await?.map(|t| t.slug);
        if slug.as_deref() != Some(claimed) {
            return Ok(Some("tenant_mismatch"));
        }
    }
    Ok(None)
}

/// An event quarantined for want of an id, released while its endpoint has
/// a compound key that identifies it: the release also claims that id (in
/// the same transaction), so the event applies once whichever comes first,
/// this release or the sender's redelivery under the key. A claim already
/// there means it did come: `applied_under_event_key`, nothing applies.
/// `Ok(Some(id))`: the id claimed; `Ok(None)`: no compound key applies.
async fn claim_compound_id<C: ConnectionTrait>(
    conn: &C,
    e: &entry::Model,
    claim: &inbox_claim::Model,
    env: &envelope::Envelope,
) -> DomainResult<Result<Option<String>, &'static str>> {
    if e.reason != QuarantineReason::MissingEventId {
        return Ok(Ok(None));
    }
    let fields = endpoint::Entity::find_by_id(e.endpoint_id.clone())
        .one(conn)
        .await?
        .and_then(|ep| endpoints::parse_event_key(ep.event_id_fields.as_deref()));
    let Some(id) = fields.and_then(|f| event_key::compound_id(&f, env)) else { return Ok(Ok(None)) };
    let inserted = inbox_claim::Entity::insert(inbox_claim::ActiveModel {
        event_id: Set(id.clone()),
        outcome: Set(ClaimOutcome::Applied),
        // No delivery was answered under this id: its story has none.
        first_answer: Set(None),
        message_digest: Set(None),
        ..inbox_claim::ActiveModel::from(claim.clone())
    })
    .on_conflict_do_nothing()
    .exec_without_returning(conn)
    .await?;
    Ok(if matches!(inserted, TryInsertResult::Inserted(n) if n > 0) {
        Ok(Some(id))
    } else {
        Err("applied_under_event_key")
    })
}

async fn record_failed_release(
    db: &DatabaseConnection,
    auth: &crate::auth::Authorized,
    e: &entry::Model,
    failure: &str,
    note: &str,
) -> DomainResult<()> {
    let txn = db::begin_write(db).await?;
    entry::Entity::update_many()
        .col_expr(entry::Column::LastReleaseError, Expr::value(failure))
        .filter(entry::Column::Id.eq(&e.id))
        .filter(entry::Column::Status.eq(QuarantineStatus::Open))
        .exec(&txn)
        .await?;
    audit::record(
        &txn,
        auth.actor(),
        audit_change(
            "quarantine.release_failed",
            e,
            json!({"status": QuarantineStatus::Open, "error": failure, "note": note}),
        ),
    )
    .await?;
    txn.commit().await?;
    Ok(())
}

/// Gives up on the event, with a reason. Its claim stays, so provider
/// retries remain duplicates.
pub async fn discard(
    db: &DatabaseConnection,
    principal: &Principal,
    id: &str,
    reason: &str,
) -> DomainResult<QuarantineView> {
    let reason = require_reason(reason)?;
    let e = find(db, principal, id).await?;
    let auth = principal.authorize(Permission::TriageEvents, Scope::Tenant(&e.tenant_id))?;
    let txn = db::begin_write(db).await?;
    if !resolve(&txn, id, QuarantineStatus::Discarded, auth.actor(), &reason).await? {
        txn.rollback().await?;
        return Err(already_resolved(&find(db, principal, id).await?));
    }
    audit::record(
        &txn,
        auth.actor(),
        audit_change("quarantine.discard", &e, json!({"status": QuarantineStatus::Discarded, "note": reason})),
    )
    .await?;
    txn.commit().await?;
    get(db, principal, id).await
}
