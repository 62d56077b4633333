//! The audit log: an append-only hash chain.
//!
//! Every change made through the UI, the API or the CLI appends an entry in
//! the same transaction as the change itself, so a change without its entry
//! (or the reverse) cannot commit. Each entry stores the previous entry's
//! hash; `signet audit verify` recomputes the chain.
//!
//! Appends lock the single `audit_head` row first. That serialises appenders
//! so the chain never forks, on PostgreSQL as on SQLite. Admin actions are
//! rare; the webhook hot path never appends here.

use sea_orm::{
    sea_query::ExprTrait,
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect, Set,
};
use serde::Serialize;
use serde_json::Value;

use crate::{
    auth::{Actor, Permission, Principal, Scope},
    clock,
    crypto::sha256_hex,
    entity::{audit_entry, audit_head},
    error::{DomainError, DomainResult},
};

/// The hash stored as the "previous hash" of the first entry.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// One change to record. `before`/`after` are summaries; callers must never
/// put a secret in them.
#[derive(Debug, Clone)]
pub struct Change<'a> {
    pub action: &'a str,
    pub target_kind: &'a str,
    pub target_id: &'a str,
    pub tenant_id: Option<&'a str>,
    pub before: Option<Value>,
    pub after: Option<Value>,
}

/// Appends `change` inside the caller's transaction.
pub async fn record<C: ConnectionTrait>(conn: &C, actor: &Actor, change: Change<'_>) -> DomainResult<i64> {
    // Take the head row's lock before reading it (UPDATE locks on both engines).
    audit_head::Entity::update_many()
        .col_expr(audit_head::Column::Seq, sea_orm::sea_query::Expr::col(audit_head::Column::Seq).add(1))
        .filter(audit_head::Column::Id.eq(1))
        .exec(conn)
        .await?;
    let head = audit_head::Entity::find_by_id(1)
        .one(conn)
        .await?
        .ok_or_else(|| DomainError::conflict("audit_head_missing", "audit head row is missing"))?;
    let entry = audit_entry::Model {
        seq: head.seq,
        at: clock::now_ms(),
        actor: actor.name().to_owned(),
        actor_kind: actor.kind().to_owned(),
        action: change.action.to_owned(),
        target_kind: change.target_kind.to_owned(),
        target_id: change.target_id.to_owned(),
        tenant_id: change.tenant_id.map(str::to_owned),
        before: change.before.map(|v| v.to_string()),
        after: change.after.map(|v| v.to_string()),
        prev_hash: head.hash.clone(),
        hash: String::new(),
    };
    let hash = entry_hash(&entry);
    let seq = entry.seq;
    insertable(audit_entry::Model { hash: hash.clone(), ..entry }).insert(conn).await?;
    audit_head::Entity::update_many()
        .col_expr(audit_head::Column::Hash, sea_orm::sea_query::Expr::value(hash))
        .filter(audit_head::Column::Id.eq(1))
        .exec(conn)
        .await?;
    Ok(seq)
}

fn insertable(e: audit_entry::Model) -> audit_entry::ActiveModel {
    {
        audit_entry::ActiveModel {
            seq: Set(e.seq),
            at: Set(e.at),
            actor: Set(e.actor),
            actor_kind: Set(e.actor_kind),
            action: Set(e.action),
            target_kind: Set(e.target_kind),
            target_id: Set(e.target_id),
            tenant_id: Set(e.tenant_id),
            before: Set(e.before),
            after: Set(e.after),
            prev_hash: Set(e.prev_hash),
            hash: Set(e.hash),
        }
    }
}

/// SHA-256 over a canonical JSON array of every field but the hash itself.
fn entry_hash(e: &audit_entry::Model) -> String {
    let canonical = serde_json::json!([
        e.seq, e.at, e.actor_kind, e.actor, e.action, e.target_kind, e.target_id, e.tenant_id,
        e.before, e.after, e.prev_hash
    ]);
    sha256_hex(canonical.to_string().as_bytes())
}

/// Result of [`verify_chain`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChainReport {
    pub entries: i64,
    pub ok: bool,
    /// The first entry that does not verify, and why.
    pub first_broken: Option<BrokenEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BrokenEntry {
    pub seq: i64,
    pub reason: String,
}

/// Recomputes the whole chain in batches and reports the first broken entry.
pub async fn verify_chain(db: &DatabaseConnection) -> DomainResult<ChainReport> {
    const BATCH: u64 = 1000;
    let mut expected_prev = GENESIS_HASH.to_owned();
    let mut expected_seq = 1i64;
    let mut count = 0i64;
    loop {
        let batch = audit_entry::Entity::find()
            .filter(audit_entry::Column::Seq.gte(expected_seq))
            .order_by_asc(audit_entry::Column::Seq)
            .limit(BATCH)
            .all(db)
            .await?;
        if batch.is_empty() {
            break;
        }
        for e in &batch {
            let broken = |reason: String| ChainReport {
                entries: count,
                ok: false,
                first_broken: Some(BrokenEntry { seq: e.seq, reason }),
            };
            if e.seq != expected_seq {
                return Ok(ChainReport {
                    entries: count,
                    ok: false,
                    first_broken: Some(BrokenEntry {
                        seq: expected_seq,
                        reason: format!("entry {expected_seq} is missing (next is {})", e.seq),
                    }),
                });
            }
            if e.prev_hash != expected_prev {
                return Ok(broken("previous-hash link does not match the entry before it".into()));
            }
            if entry_hash(e) != e.hash {
                return Ok(broken("contents do not match the entry's hash (altered)".into()));
            }
            expected_prev = e.hash.clone();
            expected_seq += 1;
            count += 1;
        }
    }
    let head = audit_head::Entity::find_by_id(1).one(db).await?;
    if let Some(head) = head {
        if head.seq != count || head.hash != expected_prev {
            return Ok(ChainReport {
                entries: count,
                ok: false,
                first_broken: Some(BrokenEntry {
                    seq: count + 1,
                    reason: format!(
                        "the chain ends at entry {count} but the head records entry {}: entries were removed from the end",
                        head.seq
                    ),
                }),
            });
        }
    }
    Ok(ChainReport { entries: count, ok: true, first_broken: None })
}

/// An entry as shown in the UI and API.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditView {
    pub seq: i64,
    pub at: String,
    pub actor: String,
    pub actor_kind: String,
    pub action: String,
    pub target_kind: String,
    pub target_id: String,
    pub tenant_id: Option<String>,
    pub before: Option<Value>,
    pub after: Option<Value>,
    pub hash: String,
}

impl From<audit_entry::Model> for AuditView {
    fn from(e: audit_entry::Model) -> Self {
        AuditView {
            seq: e.seq,
            at: clock::rfc3339(e.at),
            actor: e.actor,
            actor_kind: e.actor_kind,
            action: e.action,
            target_kind: e.target_kind,
            target_id: e.target_id,
            tenant_id: e.tenant_id,
            before: e.before.and_then(|s| serde_json::from_str(&s).ok()),
            after: e.after.and_then(|s| serde_json::from_str(&s).ok()),
            hash: e.hash,
        }
    }
}

/// Filters for [`list`]. Empty fields do not filter.
#[derive(Debug, Clone, Default, serde::Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditFilter {
    pub actor: Option<String>,
    /// Prefix match, e.g. `key.` for every key action.
    pub action: Option<String>,
    pub tenant_id: Option<String>,
    /// Unix ms lower bound.
    pub since: Option<i64>,
    /// Only entries with `seq` below this (paging backwards).
    pub before_seq: Option<i64>,
    pub limit: Option<u64>,
}

/// Newest first. Clinic admins see only their tenant's entries.
pub async fn list(db: &DatabaseConnection, principal: &Principal, filter: &AuditFilter) -> DomainResult<Vec<AuditView>> {
    let scope = match principal.tenant_filter() {
        Some(t) => Scope::Tenant(t),
        None => Scope::Global,
    };
    principal.authorize(Permission::ReadAudit, scope)?;
    let mut q = audit_entry::Entity::find().order_by_desc(audit_entry::Column::Seq);
    if let Some(t) = principal.tenant_filter() {
        q = q.filter(audit_entry::Column::TenantId.eq(t));
    } else if let Some(t) = filter.tenant_id.as_deref().filter(|t| !t.is_empty()) {
        q = q.filter(audit_entry::Column::TenantId.eq(t));
    }
    if let Some(a) = filter.actor.as_deref().filter(|a| !a.is_empty()) {
        q = q.filter(audit_entry::Column::Actor.eq(a));
    }
    if let Some(a) = filter.action.as_deref().filter(|a| !a.is_empty()) {
        q = q.filter(audit_entry::Column::Action.starts_with(a));
    }
    if let Some(s) = filter.since {
        q = q.filter(audit_entry::Column::At.gte(s));
    }
    if let Some(b) = filter.before_seq {
        q = q.filter(audit_entry::Column::Seq.lt(b));
    }
    let limit = filter.limit.unwrap_or(100).clamp(1, 500);
    Ok(q.limit(limit).all(db).await?.into_iter().map(AuditView::from).collect())
}
