//! The rows and steps both claim paths share: replay records (gate 6),
//! claims (gate 9), the verdict against an existing claim, and the commit
//! with its fault points. The primary key on the claim decides duplicates.

use std::time::Duration;

use std::collections::HashSet;

use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseTransaction, DbBackend, DbErr, EntityTrait, QueryFilter, Set, Statement,
    TryInsertResult, Value,
};

use crate::{
    bodies::ClaimKey,
    clock,
    crypto::Aad,
    db,
    entity::{event_body, inbox_claim, replay_record},
    receiver::{
        effects::{self, EffectError},
        faults::{DrillFault, Faults},
        outcome::{Outcome, Refusal},
        verify::Verified,
    },
    vault::Vault,
};
use views::{events::ClaimOutcome, quarantine::QuarantineReason};

/// The replay record's primary key, the target of its `ON CONFLICT`.
pub(super) const REPLAY_KEY: [replay_record::Column; 4] = [
    replay_record::Column::TenantId,
    replay_record::Column::EndpointId,
    replay_record::Column::MessageDigest,
    replay_record::Column::SignedAt,
];

pub(super) fn inserted(r: TryInsertResult<u64>) -> bool {
    matches!(r, TryInsertResult::Inserted(n) if n > 0)
}

/// The replay record for this signed message, kept as long as the endpoint
/// says ([`super::cache::EndpointCtx::replay_keep_ms`]).
pub(super) fn replay_row(v: &Verified) -> Option<replay_record::ActiveModel> {
    let digest = v.message_digest()?;
    Some(replay_record::ActiveModel {
        tenant_id: Set(v.endpoint().tenant_id.clone()),
        endpoint_id: Set(v.endpoint().endpoint_id.clone()),
        message_digest: Set(digest.to_owned()),
        signed_at: Set(v.replay_signed_at()),
        expires_at: Set(clock::now_ms() + v.endpoint().replay_keep_ms),
    })
}

/// Gate 6's verdict for a signed message accepted before: a replay, except
/// where the signature leaves the event id out (GitHub) and the stored claim
/// of this very id has the same body: that is the provider redelivering it,
/// a duplicate.
pub(super) async fn replayed(conn: &impl ConnectionTrait, v: &Verified, event_id: &str) -> Result<Outcome, DbErr> {
    if v.signed_without_id()
        && let Some(found @ Outcome::Duplicate { .. }) = existing(conn, v, event_id).await?
    {
        return Ok(found);
    }
    Ok(Outcome::Refused(Refusal::Replay))
}

/// Gate 6 inside `txn`: `false` when this exact signed message was accepted
/// before.
pub(super) async fn record_message(txn: &DatabaseTransaction, v: &Verified) -> Result<bool, DbErr> {
    let Some(row) = replay_row(v) else { return Ok(true) };
    let res =
        replay_record::Entity::insert(row).on_conflict_do_nothing_on(REPLAY_KEY).exec_without_returning(txn).await?;
    Ok(inserted(res))
}

/// A claim and its sealed body, as the claim paths insert them.
pub(super) struct ClaimRow {
    claim: inbox_claim::Model,
    body: event_body::Model,
}

/// The claim row for this delivery and its body, sealed with the event's
/// AAD, both dated now.
pub(super) fn claim_row(
    vault: &Vault,
    v: &Verified,
    event_id: &str,
    event_type: Option<&str>,
    outcome: ClaimOutcome,
) -> Result<ClaimRow, DbErr> {
    let ep = v.endpoint();
    let received_at = clock::now_ms();
    let (sealed, kek) = vault
        .seal(&Aad::event_body(&ep.tenant_id, &ep.endpoint_id, event_id), v.body())
        .map_err(|e| DbErr::Custom(format!("sealing the body failed: {e}")))?;
    let claim = inbox_claim::Model {
        tenant_id: ep.tenant_id.clone(),
        endpoint_id: ep.endpoint_id.clone(),
        event_id: event_id.to_owned(),
        body_digest: v.body_digest().to_owned(),
        event_type: event_type.map(str::to_owned),
        key_id: v.key_id().to_owned(),
        outcome,
        received_at,
        first_answer: Some(outcome),
        message_digest: v.message_digest().map(str::to_owned),
    };
    let body = crate::bodies::row(&ep.tenant_id, &ep.endpoint_id, event_id, received_at, sealed, kek);
    Ok(ClaimRow { claim, body })
}

/// Inserts the claims whose keys are new and the body of each of those,
/// inside `txn`; returns the keys that were new. The claim's primary key
/// decides: a claim already stored is left as it is, and its body with it.
pub(super) async fn insert_claims(txn: &DatabaseTransaction, rows: Vec<ClaimRow>) -> Result<HashSet<ClaimKey>, DbErr> {
    if rows.is_empty() {
        return Ok(HashSet::new());
    }
    let backend = txn.get_database_backend();
    let (sql, values) = if backend == DbBackend::Postgres { with_statement(rows) } else { statement_pairs(rows) };
    keys(txn.query_all_raw(Statement::from_sql_and_values(backend, sql, values)).await?)
}

fn keys(rows: Vec<sea_orm::QueryResult>) -> Result<HashSet<ClaimKey>, DbErr> {
    rows.iter()
        .map(|r| Ok((r.try_get("", "tenant_id")?, r.try_get("", "endpoint_id")?, r.try_get("", "event_id")?)))
        .collect()
}

/// The claim columns the claim paths write, in [`claim_values`]' order.
const CLAIM_COLUMNS: &str = concat!(
    "tenant_id, endpoint_id, event_id, body_digest, event_type, key_id, outcome, received_at, ",
    "first_answer, message_digest"
);
const BODY_COLUMNS: &str = "endpoint_id, received_at, tenant_id, event_id, filed_at, kek_version, body_ciphertext";

/// A claim's ten values, in [`CLAIM_COLUMNS`]' order.
fn claim_values(c: inbox_claim::Model) -> [Value; 10] {
    [
        c.tenant_id.into(),
        c.endpoint_id.into(),
        c.event_id.into(),
        c.body_digest.into(),
        c.event_type.into(),
        c.key_id.into(),
        c.outcome.as_str().into(),
        c.received_at.into(),
        c.first_answer.map(|a| a.as_str()).into(),
        c.message_digest.into(),
    ]
}

/// PostgreSQL: one statement, a data-modifying `WITH`. The claims' insert
/// returns the keys that were new; the bodies of exactly those go in beside
/// them (`$n` placeholders).
fn with_statement(rows: Vec<ClaimRow>) -> (String, Vec<Value>) {
    let mut values: Vec<Value> = Vec::with_capacity(rows.len() * 15);
    let mut param = |v: Value| {
        values.push(v);
        format!("${}", values.len())
    };
    let (mut claims, mut bodies) = (Vec::with_capacity(rows.len()), Vec::with_capacity(rows.len()));
    for ClaimRow { claim, body: b } in rows {
        let fields: Vec<String> = claim_values(claim).into_iter().map(&mut param).collect();
        claims.push(format!("({})", fields.join(", ")));
        let key = [b.tenant_id, b.endpoint_id, b.event_id].map(|k| param(k.into()));
        let kek = param(b.kek_version.into());
        let sealed = param(b.body_ciphertext.into());
        bodies.push(format!("({}::text, {}::text, {}::text, {kek}::integer, {sealed}::bytea)", key[0], key[1], key[2]));
    }
    let sql = format!(
        "WITH c AS (INSERT INTO inbox_claims ({CLAIM_COLUMNS}) VALUES {claims} \
         ON CONFLICT (tenant_id, endpoint_id, event_id) DO NOTHING \
         RETURNING tenant_id, endpoint_id, event_id, received_at), \
         v (tenant_id, endpoint_id, event_id, kek_version, body_ciphertext) AS (VALUES {bodies}), \
         b AS (INSERT INTO event_bodies ({BODY_COLUMNS}) \
         SELECT c.endpoint_id, c.received_at, c.tenant_id, c.event_id, c.received_at, v.kek_version, \
         v.body_ciphertext FROM c JOIN v USING (tenant_id, endpoint_id, event_id)) \
         SELECT tenant_id, endpoint_id, event_id FROM c",
        claims = claims.join(", "),
        bodies = bodies.join(", "),
    );
    (sql, values)
}

/// SQLite: per claim, its insert and then its body's, which `changes()`
/// skips when the claim was already there, sent as one query (the driver
/// runs every statement of the text, binding the values in order): one
/// hand-off to the database's thread, as when the body was a column.
fn statement_pairs(rows: Vec<ClaimRow>) -> (String, Vec<Value>) {
    let mut values: Vec<Value> = Vec::with_capacity(rows.len() * 17);
    let mut sql = String::new();
    for ClaimRow { claim, body: b } in rows {
        values.extend(claim_values(claim));
        values.extend([
            b.endpoint_id.into(),
            b.received_at.into(),
            b.tenant_id.into(),
            b.event_id.into(),
            b.filed_at.into(),
            b.kek_version.into(),
            b.body_ciphertext.into(),
        ]);
        sql.push_str(&format!(
            "INSERT INTO inbox_claims ({CLAIM_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
             ON CONFLICT (tenant_id, endpoint_id, event_id) DO NOTHING RETURNING tenant_id, endpoint_id, event_id; \
             INSERT INTO event_bodies ({BODY_COLUMNS}) SELECT ?, ?, ?, ?, ?, ?, ? WHERE changes() = 1;"
        ));
    }
    (sql, values)
}

/// The verdict against a claim an insert inside `txn` just conflicted with
/// (so it must exist).
pub(super) async fn conflicted(txn: &DatabaseTransaction, v: &Verified, event_id: &str) -> Result<Outcome, DbErr> {
    existing(txn, v, event_id).await?.ok_or_else(|| DbErr::Custom("claim conflicted but is not visible".into()))
}

/// This request's verdict against the claim already stored for its event id,
/// if there is one: a duplicate when the bodies match, else an identity
/// conflict.
pub(super) async fn existing(
    conn: &impl ConnectionTrait,
    v: &Verified,
    event_id: &str,
) -> Result<Option<Outcome>, DbErr> {
    let ep = v.endpoint();
    let Some(claim) =
        inbox_claim::Entity::find_by_id((ep.tenant_id.clone(), ep.endpoint_id.clone(), event_id.to_owned()))
            .one(conn)
            .await?
    else {
        return Ok(None);
    };
    Ok(Some(if claim.body_digest == v.body_digest() {
        Outcome::Duplicate { event_id: event_id.to_owned(), original: claim.outcome }
    } else {
        Outcome::IdentityConflict { event_id: event_id.to_owned() }
    }))
}

/// The answer for a claim whose effect ran: applied, or a stale transition,
/// which the claim (inserted as `applied`) then records as its outcome.
pub(super) async fn settled(
    txn: &DatabaseTransaction,
    v: &Verified,
    event_id: &str,
    applied: effects::Applied,
) -> Result<Outcome, DbErr> {
    if applied == effects::Applied::Done {
        return Ok(Outcome::Applied { event_id: event_id.to_owned() });
    }
    let ep = v.endpoint();
    let stale = || sea_orm::sea_query::Expr::value(ClaimOutcome::StaleTransition.as_str());
    inbox_claim::Entity::update_many()
        .col_expr(inbox_claim::Column::Outcome, stale())
        .col_expr(inbox_claim::Column::FirstAnswer, stale())
        .filter(inbox_claim::Column::TenantId.eq(&ep.tenant_id))
        .filter(inbox_claim::Column::EndpointId.eq(&ep.endpoint_id))
        .filter(inbox_claim::Column::EventId.eq(event_id))
        .exec(txn)
        .await?;
    Ok(Outcome::StaleTransition { event_id: event_id.to_owned() })
}

/// What a commit leaves to do once the write turn is released: the
/// post-commit stalls of the fault points. Sleeping while holding the turn
/// would hold up every other tenant's claims on SQLite for the whole stall.
#[must_use = "the post-commit stall runs only when awaited"]
#[derive(Debug, Default)]
pub(super) struct AfterCommit(Option<Duration>);

impl AfterCommit {
    pub async fn wait(self) {
        if let Some(stall) = self.0 {
            tokio::time::sleep(stall).await;
        }
    }
}

/// Commits a transaction that applied effects, with the fault points before
/// the commit (see `faults`); those after it are returned, for the caller to
/// run after releasing its write turn. Drill faults apply only to the drill
/// tenant (`synthetic`).
pub(super) async fn commit(txn: DatabaseTransaction, faults: &Faults, synthetic: bool) -> Result<AfterCommit, DbErr> {
    let drill = if synthetic { faults.drill.take() } else { None };
    if let Some(DrillFault::HoldBeforeCommit { reached }) = &drill {
        reached.notify_one();
        // Until the drill kills this process; the open transaction dies
        // with it, which is what the drill observes.
        std::future::pending::<()>().await;
    }
    if let Some(stall) = faults.stall_effect {
        tokio::time::sleep(stall).await;
    }
    txn.commit().await?;
    if faults.lose_commit_answer() {
        return Err(db::lost_connection_error());
    }
    let drill_stall = match drill {
        Some(DrillFault::StallAfterCommit(stall)) => Some(stall),
        _ => None,
    };
    let stall = match (drill_stall, faults.stall_after_commit) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    };
    Ok(AfterCommit(stall))
}

/// An effect that did not apply: its quarantine reason, or the database or
/// sealing failure that is not the event's fault.
pub(super) fn quarantine_reason(e: EffectError) -> Result<QuarantineReason, DbErr> {
    match e {
        EffectError::Quarantine(reason) => Ok(reason),
        EffectError::Db(e) => Err(e),
        EffectError::Crypto(e) => Err(DbErr::Custom(format!("sealing an outbox payload failed: {e}"))),
    }
}
