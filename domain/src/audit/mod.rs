//! The audit log: an append-only, keyed hash chain.
//!
//! Every change made through the UI, the API or the CLI appends an entry in
//! the same transaction as the change itself, so a change without its entry
//! (or the reverse) cannot commit. Each entry stores the previous entry's
//! link; since the chain is keyed (`key`), each link is an HMAC-SHA256 under
//! a key sealed in the vault, so editing an entry and re-chaining the rest
//! needs the master key. `signet audit verify` recomputes the chain;
//! [`Checkpoint`]s exported outside the database (signed, in every evidence
//! bundle) let verification catch a chain that was replaced wholesale.
//!
//! Appends lock the single `audit_head` row first. That serialises appenders
//! so the chain never forks, on PostgreSQL as on SQLite. Admin actions are
//! rare; the webhook hot path never appends here. Triggers refuse UPDATE and
//! DELETE on the table (migration 000010).

pub mod anchor;
pub mod key;

use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Set,
    sea_query::ExprTrait,
};
use serde::Serialize;
use serde_json::Value;

use crate::{
    auth::principal::{Actor, Principal, Scope},
    clock,
    crypto::{CryptoError, sha256_hex},
    entity::{audit_entry, audit_head, audit_verified},
    error::{DomainError, DomainResult},
    service_keys::{self, AUDIT_MAC},
};
use views::{
    audit::{AuditView, BrokenEntry, ChainReport, Checkpoint},
    roles::Permission,
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
    record_many(conn, actor, vec![change]).await
}

/// Appends `changes`, in order, inside the caller's transaction, and
/// returns the last one's sequence number.
pub async fn record_many<C: ConnectionTrait>(conn: &C, actor: &Actor, changes: Vec<Change<'_>>) -> DomainResult<i64> {
    let n = changes.len() as i64;
    // Take the head row's lock before reading it (UPDATE locks on both
    // engines), reserving the sequence numbers.
    audit_head::Entity::update_many()
        .col_expr(audit_head::Column::Seq, sea_orm::sea_query::Expr::col(audit_head::Column::Seq).add(n))
        .filter(audit_head::Column::Id.eq(1))
        .exec(conn)
        .await?;
    let head = audit_head::Entity::find_by_id(1)
        .one(conn)
        .await?
        .ok_or_else(|| DomainError::conflict("audit_head_missing", "audit head row is missing"))?;
    // Never an unkeyed link once the chain is keyed: without the key this
    // process cannot append, and the change fails with it.
    let chain_key = head.key_id.as_deref().and_then(key::get).ok_or(CryptoError::MissingServiceKey("audit MAC"))?;
    let at = clock::now_ms();
    let mut prev = head.hash;
    let mut entries = Vec::with_capacity(changes.len());
    for (i, change) in changes.into_iter().enumerate() {
        let entry = audit_entry::Model {
            seq: head.seq - n + 1 + i as i64,
            at,
            actor: actor.name().to_owned(),
            actor_kind: actor.kind().to_owned(),
            action: change.action.to_owned(),
            target_kind: change.target_kind.to_owned(),
            target_id: change.target_id.to_owned(),
            tenant_id: change.tenant_id.map(str::to_owned),
            before: change.before.map(|v| v.to_string()),
            after: change.after.map(|v| v.to_string()),
            prev_hash: prev,
            hash: String::new(),
            alg: key::KEYED.to_owned(),
        };
        let hash = chain_key.mac_hex(keyed_input(&entry).as_bytes());
        prev = hash.clone();
        entries.push(insertable(audit_entry::Model { hash, ..entry }));
    }
    // 13 columns a row: 500 rows stay far below either engine's bind limit.
    let mut rest = entries;
    while !rest.is_empty() {
        let tail = rest.split_off(rest.len().min(500));
        audit_entry::Entity::insert_many(rest).exec_without_returning(conn).await?;
        rest = tail;
    }
    audit_head::Entity::update_many()
        .col_expr(audit_head::Column::Hash, sea_orm::sea_query::Expr::value(prev))
        .filter(audit_head::Column::Id.eq(1))
        .exec(conn)
        .await?;
    Ok(head.seq)
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
            alg: Set(e.alg),
        }
    }
}

/// A canonical JSON array of every field but the link itself.
fn canonical(e: &audit_entry::Model) -> String {
    serde_json::json!([
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
    ])
    .to_string()
}

/// The link of an entry written before the chain was keyed.
fn plain_link(e: &audit_entry::Model) -> String {
    sha256_hex(canonical(e).as_bytes())
}

/// What a keyed link is the MAC of (domain-separated from the plain form).
fn keyed_input(e: &audit_entry::Model) -> String {
    format!("signet-audit-v2\n{}", canonical(e))
}

/// Recomputes the whole chain from its first entry, in batches, and reports
/// the first broken entry. The verification mark (how far an earlier
/// verification got) must still hold. When the chain holds, the mark moves
/// to its head, so later [`verify_new`] calls start there. The audit MAC
/// key must be loaded (`startup::open_vault`).
pub async fn verify_chain(db: &DatabaseConnection) -> DomainResult<ChainReport> {
    verify(db, false, true).await
}

/// Verifies only what was appended since the last verification (the mark,
/// see [`verify_chain`]): O(new entries). The mark itself must still hold:
/// its MAC, and the link of the entry it names, which catches a tail that
/// was cut and re-headed after that verification. Entries before the mark
/// are not recomputed (an edit there, which needs the triggers dropped, is
/// found by the next full [`verify_chain`]). `advance`: move the mark to
/// the head when the chain holds (writes one row; read-only callers pass
/// false).
pub async fn verify_new(db: &DatabaseConnection, advance: bool) -> DomainResult<ChainReport> {
    verify(db, true, advance).await
}

async fn verify(db: &DatabaseConnection, from_mark: bool, advance: bool) -> DomainResult<ChainReport> {
    const BATCH: u64 = 1000;
    // One snapshot for the head and the walk: an entry appended between
    // them (with its new head, in one transaction) would otherwise look
    // like a head left behind by a cut tail.
    let snap = crate::db::begin_snapshot(db).await?;
    let head = audit_head::Entity::find_by_id(1).one(&snap).await?;
    let (head_seq, head_hash) = head.as_ref().map(|h| (h.seq, h.hash.clone())).unwrap_or((0, GENESIS_HASH.to_owned()));
    let key_row = service_keys::find(&snap, AUDIT_MAC).await?;
    let chain_key = match &key_row {
        Some(row) => Some(key::get(&row.key_id).ok_or(CryptoError::MissingServiceKey("audit MAC"))?),
        None => None,
    };
    let mut verified_from_seq = 0i64;
    let report = |entries: i64, checked: i64, from: i64, broken: Option<BrokenEntry>| ChainReport {
        entries,
        ok: broken.is_none(),
        first_broken: broken,
        head_seq,
        head_hash: head_hash.clone(),
        keyed_since_seq: chain_key.as_ref().map(|k| k.since_seq),
        verified_from_seq: from,
        checked,
    };
    let Some(chain_key) = chain_key.clone() else {
        let reason = "the audit MAC key is missing from the database: the chain cannot be authenticated".to_owned();
        return Ok(report(0, 0, 0, Some(BrokenEntry { seq: 1, reason })));
    };
    if head.as_ref().and_then(|h| h.key_id.as_deref()) != Some(chain_key.key_id.as_str()) {
        let reason = "the audit head names another MAC key than the one sealed in the vault".to_owned();
        return Ok(report(0, 0, 0, Some(BrokenEntry { seq: head_seq + 1, reason })));
    }
    let mut expected_prev = GENESIS_HASH.to_owned();
    let mut expected_seq = 1i64;
    let mut count = 0i64;
    // The mark must hold on either path: a full walk of a chain whose tail
    // was cut and re-headed finds nothing wrong, the mark does.
    if let Some(mark) = audit_verified::Entity::find_by_id(1).one(&snap).await? {
        if !chain_key.verify_hex(&mark_input(mark.seq, &mark.hash), &mark.mac) {
            let reason = "the verification mark was altered (its MAC does not verify)".to_owned();
            return Ok(report(0, 0, 0, Some(BrokenEntry { seq: mark.seq, reason })));
        }
        let at = clock::rfc3339(mark.verified_at);
        match audit_entry::Entity::find_by_id(mark.seq).one(&snap).await? {
            Some(e) if e.hash == mark.hash => {}
            _ => {
                let reason = format!(
                    "entry {} was verified at {at} but is gone or carries another link now: the chain was cut or \
                     rewritten since",
                    mark.seq
                );
                return Ok(report(0, 0, mark.seq, Some(BrokenEntry { seq: mark.seq, reason })));
            }
        }
        if from_mark {
            verified_from_seq = mark.seq;
            expected_prev = mark.hash;
            expected_seq = mark.seq + 1;
            count = mark.seq;
        }
    }
    let mut checked = 0i64;
    loop {
        let batch = audit_entry::Entity::find()
            .filter(audit_entry::Column::Seq.gte(expected_seq))
            .order_by_asc(audit_entry::Column::Seq)
            .limit(BATCH)
            .all(&snap)
            .await?;
        if batch.is_empty() {
            break;
        }
        for e in &batch {
            let broken = |reason: String| Some(BrokenEntry { seq: e.seq, reason });
            if e.seq != expected_seq {
                let reason = format!("entry {expected_seq} is missing (next is {})", e.seq);
                return Ok(report(count, checked, verified_from_seq, Some(BrokenEntry { seq: expected_seq, reason })));
            }
            if e.prev_hash != expected_prev {
                let why = "previous-hash link does not match the entry before it";
                return Ok(report(count, checked, verified_from_seq, broken(why.into())));
            }
            let intact = if e.seq < chain_key.since_seq {
                e.alg == key::PLAIN && plain_link(e) == e.hash
            } else {
                e.alg == key::KEYED && chain_key.verify_hex(keyed_input(e).as_bytes(), &e.hash)
            };
            if !intact {
                let why = "contents do not match the entry's keyed link (altered or re-chained)";
                return Ok(report(count, checked, verified_from_seq, broken(why.into())));
            }
            expected_prev = e.hash.clone();
            expected_seq += 1;
            count += 1;
            checked += 1;
        }
    }
    if head_seq != count || head_hash != expected_prev {
        let reason = format!(
            "the chain ends at entry {count} but the head records entry {head_seq}: entries were removed from the end"
        );
        return Ok(report(count, checked, verified_from_seq, Some(BrokenEntry { seq: count + 1, reason })));
    }
    snap.commit().await?;
    if advance && count > verified_from_seq {
        advance_mark(db, &chain_key, count, &expected_prev).await?;
    }
    Ok(report(count, checked, verified_from_seq, None))
}

/// What the verification mark's MAC covers.
fn mark_input(seq: i64, hash: &str) -> Vec<u8> {
    format!("signet-audit-verified-v1\n{seq}\n{hash}").into_bytes()
}

/// Moves the mark forward to (seq, hash); never back (two verifiers racing
/// both leave the further one).
async fn advance_mark(db: &DatabaseConnection, chain_key: &key::ChainKey, seq: i64, hash: &str) -> DomainResult<()> {
    let row = audit_verified::ActiveModel {
        id: Set(1),
        seq: Set(seq),
        hash: Set(hash.to_owned()),
        mac: Set(chain_key.mac_hex(&mark_input(seq, hash))),
        verified_at: Set(clock::now_ms()),
    };
    let txn = crate::db::begin_write(db).await?;
    let inserted = audit_verified::Entity::insert(row.clone())
        .on_conflict_do_nothing_on([audit_verified::Column::Id])
        .exec_without_returning(&txn)
        .await?;
    if !matches!(inserted, sea_orm::TryInsertResult::Inserted(n) if n > 0) {
        audit_verified::Entity::update_many()
            .set(row)
            .filter(audit_verified::Column::Id.eq(1))
            .filter(audit_verified::Column::Seq.lt(seq))
            .exec(&txn)
            .await?;
    }
    txn.commit().await?;
    Ok(())
}

/// The current head as a checkpoint.
pub async fn checkpoint(db: &DatabaseConnection) -> DomainResult<Checkpoint> {
    let head = audit_head::Entity::find_by_id(1).one(db).await?.ok_or(DomainError::NotFound)?;
    Ok(Checkpoint { seq: head.seq, head: head.hash, at: clock::rfc3339(clock::now_ms()) })
}

/// Whether the stored chain still contains `cp`: the entry at its sequence
/// number carries its link. An error says what differs.
pub async fn matches_checkpoint(db: &DatabaseConnection, cp: &Checkpoint) -> DomainResult<Result<(), String>> {
    if cp.seq == 0 {
        return Ok(Ok(()));
    }
    Ok(match audit_entry::Entity::find_by_id(cp.seq).one(db).await? {
        None => Err(format!("entry {} of the checkpoint is gone from the chain", cp.seq)),
        Some(e) if e.hash != cp.head => {
            Err(format!("entry {} no longer has the link the checkpoint recorded: the chain was rewritten", cp.seq))
        }
        Some(_) => Ok(()),
    })
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
pub async fn list(
    db: &DatabaseConnection,
    principal: &Principal,
    filter: &AuditFilter,
) -> DomainResult<Vec<AuditView>> {
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
    let limit = crate::paging::limit(views::paging::LIST, filter.limit)?;
    Ok(q.limit(limit).all(db).await?.into_iter().map(AuditView::from).collect())
}
