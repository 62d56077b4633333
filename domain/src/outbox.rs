//! Outbox delivery: claiming due intents, recording the outcome, and the
//! on-call view and manual retry.
//!
//! An intent is leased (`sending`, `lease_until`) in a short transaction —
//! `FOR UPDATE SKIP LOCKED` on PostgreSQL, so several instances never take
//! the same one; SQLite's single writer serialises claims — and sent outside
//! any transaction. If the sender dies between sending and marking, the
//! lease expires and the intent is sent again with the same idempotency key
//! (its id) and the same payload: the receiving side deduplicates. Payloads
//! (OTP codes included) were minted and sealed when the intent was created
//! and are never re-minted.

use rand::Rng;
use sea_orm::{
    ColumnTrait, Condition, DatabaseConnection, DbBackend, EntityTrait, QueryFilter, QueryOrder, QuerySelect,
    sea_query::{Expr, ExprTrait, LockBehavior, LockType},
};
use serde_json::{Value, json};

use views::{
    ids::TenantSlug,
    outbox::{OutboxStatus, OutboxView},
    retry_policy::RetryPolicy,
    roles::Permission,
};

use crate::{
    audit::{self, Change},
    auth::{Principal, Scope},
    clock,
    crypto::Aad,
    db,
    entity::{outbox_intent as intent, tenant},
    error::{DomainError, DomainResult},
    ids,
    registry::tenants,
    vault::Vault,
};

/// Capped full-jitter exponential backoff and the attempt limit.
#[derive(Debug, Clone, Copy)]
pub struct RetryRule {
    pub base_ms: i64,
    pub cap_ms: i64,
    pub max_attempts: i32,
}

impl RetryRule {
    /// A uniformly random delay in `[0, min(cap, base · 2^(attempt-1))]`.
    pub fn delay_ms(&self, attempt: i32) -> i64 {
        let exp = self.base_ms.saturating_mul(1i64 << (attempt - 1).clamp(0, 30));
        rand::thread_rng().gen_range(0..=Ord::max(Ord::min(exp, self.cap_ms), 0))
    }
}

/// A leased intent with its decrypted payload, ready to send.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// Also the `Idempotency-Key`.
    pub id: String,
    pub tenant_id: String,
    pub tenant_slug: String,
    pub kind: String,
    pub idempotency_key: String,
    pub payload: Value,
    /// The tenant's relay URL; `None` sends to the local file sink.
    pub notify_url: Option<String>,
    /// Including this one.
    pub attempts: i32,
    /// The tenant's retry policy: when disabled a failed send is `dead` at once.
    pub retries_enabled: bool,
    /// The W3C `traceparent` of the webhook that created the intent, if it
    /// was stored (traces were exported then).
    pub trace_context: Option<String>,
}

/// Leases up to `limit` due intents (pending and due, or sending with an
/// expired lease) for `lease_ms`.
pub async fn claim_batch(
    db: &DatabaseConnection,
    vault: &Vault,
    limit: u64,
    lease_ms: i64,
) -> DomainResult<Vec<Delivery>> {
    let now = clock::now_ms();
    let due = Condition::any()
        .add(
            Condition::all()
                .add(intent::Column::Status.eq(OutboxStatus::Pending))
                .add(intent::Column::NextAttemptAt.lte(now)),
        )
        .add(
            Condition::all()
                .add(intent::Column::Status.eq(OutboxStatus::Sending))
                .add(intent::Column::LeaseUntil.lt(now)),
        );
    // The drills' intents prove the effect happened once; they are never
    // sent anywhere.
    let due = Condition::all().add(due).add(crate::registry::tenants::not_synthetic_tenant(intent::Column::TenantId));
    // A plain read first: an idle worker never takes SQLite's write lock.
    if intent::Entity::find()
        .select_only()
        .column(intent::Column::Id)
        .filter(due.clone())
        .limit(1)
        .into_tuple::<String>()
        .one(db)
        .await?
        .is_none()
    {
        return Ok(Vec::new());
    }
    let txn = db::begin_write(db).await?;
    let mut q = intent::Entity::find().filter(due).order_by_asc(intent::Column::NextAttemptAt).limit(limit);
    if db.get_database_backend() == DbBackend::Postgres {
        q = q.lock_with_behavior(LockType::Update, LockBehavior::SkipLocked);
    }
    let rows = q.all(&txn).await?;
    if rows.is_empty() {
        txn.commit().await?;
        return Ok(Vec::new());
    }
    let ids: Vec<String> = rows.iter().map(|r| r.id.clone()).collect();
    intent::Entity::update_many()
        .col_expr(intent::Column::Status, Expr::value(OutboxStatus::Sending))
        .col_expr(intent::Column::LeaseUntil, Expr::value(now + lease_ms))
        .col_expr(intent::Column::Attempts, Expr::col(intent::Column::Attempts).add(1))
        .filter(intent::Column::Id.is_in(ids))
        .exec(&txn)
        .await?;
    txn.commit().await?;

    let tenant_ids: Vec<&str> = rows.iter().map(|r| r.tenant_id.as_str()).collect();
    let tenants: Vec<tenant::Model> =
        tenant::Entity::find().filter(tenant::Column::Id.is_in(tenant_ids)).all(db).await?;
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        // One intent that cannot be opened (a missing KEK version, a damaged
        // row) goes dead with the reason instead of failing the whole batch,
        // which would otherwise be re-leased forever.
        let opened = match tenants.iter().find(|t| t.id == r.tenant_id) {
            None => Err("its tenant no longer exists".to_owned()),
            Some(t) => match vault.open(db, &Aad::outbox_payload(&r.tenant_id, &r.id), &r.payload_ciphertext).await {
                Err(e) => Err(format!("the payload cannot be decrypted: {e}")),
                Ok(plain) => serde_json::from_slice::<Value>(&plain)
                    .map(|p| (t, p))
                    .map_err(|_| "the sealed payload is not JSON".to_owned()),
            },
        };
        let (t, payload) = match opened {
            Ok(ok) => ok,
            Err(why) => {
                tracing::error!(intent = %r.id, reason = %why, "outbox intent cannot be sent; marked dead");
                mark_dead(db, &r.id, &why).await?;
                continue;
            }
        };
        out.push(Delivery {
            tenant_slug: t.slug.clone(),
            notify_url: t.notify_url.clone(),
            retries_enabled: t.retry_policy == RetryPolicy::Enabled,
            attempts: r.attempts + 1,
            id: r.id,
            tenant_id: r.tenant_id,
            kind: r.kind,
            idempotency_key: r.idempotency_key,
            payload,
            trace_context: r.trace_context,
        });
    }
    Ok(out)
}

/// Gives up on a leased intent that can never be sent as stored.
async fn mark_dead(db: &DatabaseConnection, id: &str, error: &str) -> DomainResult<()> {
    intent::Entity::update_many()
        .col_expr(intent::Column::Status, Expr::value(OutboxStatus::Dead))
        .col_expr(intent::Column::LeaseUntil, Expr::value(Option::<i64>::None))
        .col_expr(intent::Column::LastError, Expr::value(error.to_owned()))
        .filter(intent::Column::Id.eq(id))
        .filter(intent::Column::Status.eq(OutboxStatus::Sending))
        .exec(db)
        .await?;
    Ok(())
}

/// Records a successful send (only while this worker still holds the lease
/// state; a late duplicate mark changes nothing).
pub async fn mark_sent(db: &DatabaseConnection, id: &str) -> DomainResult<()> {
    intent::Entity::update_many()
        .col_expr(intent::Column::Status, Expr::value(OutboxStatus::Sent))
        .col_expr(intent::Column::DeliveredAt, Expr::value(clock::now_ms()))
        .col_expr(intent::Column::LeaseUntil, Expr::value(Option::<i64>::None))
        .col_expr(intent::Column::LastError, Expr::value(Option::<String>::None))
        .filter(intent::Column::Id.eq(id))
        .filter(intent::Column::Status.eq(OutboxStatus::Sending))
        .exec(db)
        .await?;
    Ok(())
}

/// Records a failed send: back to `pending` after a backoff, or `dead` when
/// the failure is permanent, the attempts are used up, or the tenant's
/// retry policy is disabled. Returns the new status, or `None` when this
/// worker's lease had lapsed and another worker owns the intent now
/// (nothing was recorded).
pub async fn mark_failed(
    db: &DatabaseConnection,
    d: &Delivery,
    error: &str,
    permanent: bool,
    rule: &RetryRule,
) -> DomainResult<Option<OutboxStatus>> {
    let dead = permanent || !d.retries_enabled || d.attempts >= rule.max_attempts;
    let status = if dead { OutboxStatus::Dead } else { OutboxStatus::Pending };
    let error: String = error.chars().take(500).collect();
    let res = intent::Entity::update_many()
        .col_expr(intent::Column::Status, Expr::value(status))
        .col_expr(
            intent::Column::NextAttemptAt,
            Expr::value(clock::now_ms() + if dead { 0 } else { rule.delay_ms(d.attempts) }),
        )
        .col_expr(intent::Column::LeaseUntil, Expr::value(Option::<i64>::None))
        .col_expr(intent::Column::LastError, Expr::value(error))
        .filter(intent::Column::Id.eq(&d.id))
        .filter(intent::Column::Status.eq(OutboxStatus::Sending))
        .exec(db)
        .await?;
    Ok((res.rows_affected == 1).then_some(status))
}

pub(crate) fn view(r: intent::Model, slug: TenantSlug) -> OutboxView {
    OutboxView {
        id: r.id,
        tenant: slug,
        kind: r.kind,
        idempotency_key: r.idempotency_key,
        status: r.status,
        attempts: r.attempts,
        next_attempt_at: clock::rfc3339(r.next_attempt_at),
        created_at: clock::rfc3339(r.created_at),
        delivered_at: clock::rfc3339_opt(r.delivered_at),
        last_error: r.last_error,
    }
}

/// Newest first, at most `limit` (1–500).
pub async fn list(
    db: &DatabaseConnection,
    principal: &Principal,
    tenant_slug: Option<&TenantSlug>,
    status: Option<&str>,
    limit: u64,
) -> DomainResult<Vec<OutboxView>> {
    let mut q =
        intent::Entity::find().order_by_desc(intent::Column::CreatedAt).limit(limit.clamp(1, views::paging::LIST.max));
    match (tenant_slug, principal.tenant_filter()) {
        (Some(slug), _) => {
            let t = tenants::find(db, principal, slug).await?;
            principal.authorize(Permission::ReadEvents, Scope::Tenant(&t.id))?;
            q = q.filter(intent::Column::TenantId.eq(t.id));
        }
        (None, Some(own)) => {
            principal.authorize(Permission::ReadEvents, Scope::Tenant(own))?;
            q = q.filter(intent::Column::TenantId.eq(own));
        }
        (None, None) => {
            principal.authorize(Permission::ReadEvents, Scope::Global)?;
            q = q.filter(crate::registry::tenants::not_synthetic_tenant(intent::Column::TenantId));
        }
    }
    if let Some(text) = status.filter(|s| !s.is_empty()) {
        let s = OutboxStatus::parse(text).ok_or_else(|| {
            DomainError::invalid(
                "invalid_status",
                format!("status must be pending, sending, sent or dead, got {text:?}"),
            )
        })?;
        q = q.filter(intent::Column::Status.eq(s));
    }
    let rows = q.all(db).await?;
    let tenant_ids: Vec<&str> = rows.iter().map(|r| r.tenant_id.as_str()).collect();
    let slugs: Vec<tenant::Model> = tenant::Entity::find().filter(tenant::Column::Id.is_in(tenant_ids)).all(db).await?;
    rows.into_iter()
        .map(|r| {
            // An intent's tenant is always stored (a foreign key): a missing
            // one is a corrupt row, as a stored slug outside its rule is.
            let slug = slugs.iter().find(|t| t.id == r.tenant_id).map_or("", |t| t.slug.as_str());
            Ok(view(r, ids::stored(slug)?))
        })
        .collect()
}

/// On-call's manual retry of a dead intent: same id, same idempotency key,
/// same payload; the attempt count starts over.
pub async fn retry(db: &DatabaseConnection, principal: &Principal, id: &str) -> DomainResult<OutboxView> {
    let txn = db::begin_write(db).await?;
    let r = intent::Entity::find().filter(intent::Column::Id.eq(id)).one(&txn).await?.ok_or(DomainError::NotFound)?;
    if !principal.can_see_tenant(&r.tenant_id) {
        return Err(DomainError::NotFound);
    }
    let auth = principal.authorize(Permission::TriageEvents, Scope::Tenant(&r.tenant_id))?;
    let res = intent::Entity::update_many()
        .col_expr(intent::Column::Status, Expr::value(OutboxStatus::Pending))
        .col_expr(intent::Column::Attempts, Expr::value(0))
        .col_expr(intent::Column::NextAttemptAt, Expr::value(clock::now_ms()))
        .filter(intent::Column::Id.eq(id))
        .filter(intent::Column::Status.eq(OutboxStatus::Dead))
        .exec(&txn)
        .await?;
    if res.rows_affected != 1 {
        return Err(DomainError::conflict(
            "not_dead",
            format!("only dead intents can be retried by hand; this one is {}", r.status),
        ));
    }
    audit::record(
        &txn,
        auth.actor(),
        Change {
            action: "outbox.retry",
            target_kind: "outbox_intent",
            target_id: id,
            tenant_id: Some(&r.tenant_id),
            before: Some(json!({"status": r.status, "attempts": r.attempts, "last_error": r.last_error})),
            after: Some(json!({"status": OutboxStatus::Pending})),
        },
    )
    .await?;
    txn.commit().await?;
    let r = intent::Entity::find().filter(intent::Column::Id.eq(id)).one(db).await?.ok_or(DomainError::NotFound)?;
    let slug = tenant::Entity::find_by_id(r.tenant_id.clone()).one(db).await?.map(|t| t.slug).unwrap_or_default();
    Ok(view(r, ids::stored(&slug)?))
}
