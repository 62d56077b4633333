//! The built-in event handlers of the clinic-reminder domain (CONTRACT §3).
//! They run inside the claim transaction; an effect that cannot apply
//! returns a quarantine reason and the whole transaction rolls back.
//!
//! Reminders follow a small state machine, because events can arrive out of
//! order (seed 002): `canceled` is terminal, and a `reminder.scheduled` that
//! happened before the transition it would replace (by the envelope's
//! `occurred_at`, else the signed timestamp) applies nothing. Creation sets
//! no transition time, so the first transition always applies. Such an event
//! is [`Applied::Stale`]: claimed (so retries are duplicates), counted and
//! listed as `stale_transition`, never silently dropped. Each transition is
//! one conditional UPDATE, so two racing events cannot both pass the check.

use rand::Rng;
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QueryFilter, Set, TryInsertResult, sea_query::Expr,
};
use serde_json::{Value, json};

use super::envelope::Envelope;
use crate::{
    clock,
    crypto::{Aad, CryptoError},
    entity::{outbox_intent, reminder},
    ids,
    vault::Vault,
};

/// What an effect did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The effect and its intents were written.
    Done,
    /// A transition the reminder's state refuses: nothing was written.
    Stale,
}

/// Why an effect did not apply.
#[derive(Debug)]
pub enum EffectError {
    /// Persistent: keep the event in quarantine with this reason.
    Quarantine(&'static str),
    Db(DbErr),
    Crypto(CryptoError),
}

impl From<DbErr> for EffectError {
    fn from(e: DbErr) -> Self {
        EffectError::Db(e)
    }
}

fn inserted(r: TryInsertResult<u64>) -> bool {
    matches!(r, TryInsertResult::Inserted(n) if n > 0)
}

fn text_field<'a>(data: &'a Value, name: &str) -> Result<&'a str, EffectError> {
    data.get(name)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty() && s.len() <= 200)
        .ok_or(EffectError::Quarantine("invalid_data"))
}

fn time_field(data: &Value, name: &str) -> Result<Option<i64>, EffectError> {
    match data.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => clock::parse_rfc3339(s).map(Some).ok_or(EffectError::Quarantine("invalid_data")),
        Some(_) => Err(EffectError::Quarantine("invalid_data")),
    }
}

/// Where an event was received: its tenant and endpoint ids.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub tenant_id: &'a str,
    pub endpoint_id: &'a str,
}

/// When the event happened (ms): its envelope's `occurred_at`, else
/// `signed_at` (the signed timestamp, or the receipt time where the scheme
/// signs none).
pub fn occurred_at(env: &Envelope, signed_at: i64) -> Result<i64, EffectError> {
    match &env.occurred_at {
        Some(text) => clock::parse_rfc3339(text).ok_or(EffectError::Quarantine("invalid_data")),
        None => Ok(signed_at),
    }
}

/// Whether the reminder exists at all (after a transition matched nothing):
/// `Stale` if it does, else the quarantine reason.
async fn stale_or_missing<C: ConnectionTrait>(conn: &C, tenant: &str, id: &str) -> Result<Applied, EffectError> {
    match reminder::Entity::find_by_id((tenant.to_owned(), id.to_owned())).one(conn).await? {
        Some(_) => Ok(Applied::Stale),
        None => Err(EffectError::Quarantine("reminder_not_found")),
    }
}

/// Applies the event's effect and records its outbox intents, inside the
/// caller's transaction (the receiver's claim, or a quarantine release).
/// `signed_at` is when the sender says the event happened (ms), for the
/// transition rules when the envelope has no `occurred_at`.
pub async fn apply<C: ConnectionTrait>(
    conn: &C,
    vault: &Vault,
    at: Target<'_>,
    event_id: &str,
    env: &Envelope,
    signed_at: i64,
) -> Result<Applied, EffectError> {
    let now = clock::now_ms();
    let t = at.tenant_id;
    // Only transitions are ordered: a bad `occurred_at` on another type is
    // no reason to refuse it.
    let happened = || occurred_at(env, signed_at);
    match env.event_type.as_str() {
        "reminder.created" => {
            let id = text_field(&env.data, "reminder_id")?;
            let send_at = time_field(&env.data, "send_at")?.ok_or(EffectError::Quarantine("invalid_data"))?;
            let res = reminder::Entity::insert(reminder::ActiveModel {
                tenant_id: Set(t.to_owned()),
                reminder_id: Set(id.to_owned()),
                status: Set("scheduled".into()),
                send_at: Set(send_at),
                created_at: Set(now),
                updated_at: Set(now),
                // Creation is no transition: the first `scheduled` or
                // `canceled` applies whenever it happened (it may have been
                // quarantined until the reminder existed).
                state_at: Set(None),
            })
            .on_conflict_do_nothing_on([reminder::Column::TenantId, reminder::Column::ReminderId])
            .exec_without_returning(conn)
            .await?;
            if !inserted(res) {
                return Err(EffectError::Quarantine("reminder_exists"));
            }
        }
        "reminder.scheduled" => {
            let id = text_field(&env.data, "reminder_id")?;
            let send_at = time_field(&env.data, "send_at")?;
            let happened = happened()?;
            let mut update = reminder::Entity::update_many()
                .col_expr(reminder::Column::Status, Expr::value("scheduled"))
                .col_expr(reminder::Column::StateAt, Expr::value(Some(happened)))
                .col_expr(reminder::Column::UpdatedAt, Expr::value(now));
            if let Some(at) = send_at {
                update = update.col_expr(reminder::Column::SendAt, Expr::value(at));
            }
            // Not after a cancellation (terminal), nor over a newer state.
            let res = update
                .filter(reminder::Column::TenantId.eq(t))
                .filter(reminder::Column::ReminderId.eq(id))
                .filter(reminder::Column::Status.ne("canceled"))
                .filter(
                    Condition::any()
                        .add(reminder::Column::StateAt.is_null())
                        .add(reminder::Column::StateAt.lte(happened)),
                )
                .exec(conn)
                .await?;
            if res.rows_affected == 0 {
                return stale_or_missing(conn, t, id).await;
            }
            let key = format!("reminder_notice:{}:{event_id}", at.endpoint_id);
            insert_intent(
                conn,
                vault,
                t,
                "reminder_notice",
                &key,
                json!({"reminder_id": id, "event_id": event_id}),
                now,
            )
            .await?;
        }
        "reminder.canceled" => {
            let id = text_field(&env.data, "reminder_id")?;
            let happened = happened()?;
            let res = reminder::Entity::update_many()
                .col_expr(reminder::Column::Status, Expr::value("canceled"))
                .col_expr(reminder::Column::StateAt, Expr::value(Some(happened)))
                .col_expr(reminder::Column::UpdatedAt, Expr::value(now))
                .filter(reminder::Column::TenantId.eq(t))
                .filter(reminder::Column::ReminderId.eq(id))
                .filter(reminder::Column::Status.ne("canceled"))
                .exec(conn)
                .await?;
            if res.rows_affected == 0 {
                return stale_or_missing(conn, t, id).await;
            }
        }
        "otp.requested" => {
            let request = text_field(&env.data, "otp_request_id")?;
            let channel = text_field(&env.data, "channel")?;
            if channel != "sms" && channel != "email" {
                return Err(EffectError::Quarantine("invalid_data"));
            }
            // Minted once, here; a second event for the same request id hits
            // the unique key and mints nothing.
            let code = format!("{:06}", rand::rngs::OsRng.gen_range(0..1_000_000u32));
            let key = format!("otp:{request}");
            insert_intent(
                conn,
                vault,
                t,
                "otp",
                &key,
                json!({"otp_request_id": request, "channel": channel, "code": code}),
                now,
            )
            .await?;
        }
        _ => return Err(EffectError::Quarantine("unknown_event_type")),
    }
    Ok(Applied::Done)
}

/// Records an outbox intent; at most one per (tenant, idempotency key).
/// Returns whether a new one was written.
async fn insert_intent<C: ConnectionTrait>(
    conn: &C,
    vault: &Vault,
    tenant_id: &str,
    kind: &str,
    key: &str,
    payload: Value,
    now: i64,
) -> Result<bool, EffectError> {
    let id = ids::new_id();
    let (sealed, kek_version) = vault
        .seal(&Aad::outbox_payload(tenant_id, &id), payload.to_string().as_bytes())
        .map_err(EffectError::Crypto)?;
    let res = outbox_intent::Entity::insert(outbox_intent::ActiveModel {
        id: Set(id),
        tenant_id: Set(tenant_id.to_owned()),
        kind: Set(kind.to_owned()),
        idempotency_key: Set(key.to_owned()),
        payload_ciphertext: Set(sealed),
        kek_version: Set(kek_version as i32),
        status: Set("pending".into()),
        attempts: Set(0),
        next_attempt_at: Set(now),
        created_at: Set(now),
        ..Default::default()
    })
    .on_conflict_do_nothing_on([outbox_intent::Column::TenantId, outbox_intent::Column::IdempotencyKey])
    .exec_without_returning(conn)
    .await?;
    Ok(inserted(res))
}
