//! The built-in event handlers of the clinic-reminder domain (docs/contract.md §3).
//! They run inside the claim transaction; an effect that cannot apply
//! returns a quarantine reason and the whole transaction rolls back.
//!
//! Reminders follow a small state machine, because events can arrive out of
//! order (docs/architecture.md#replays-order-and-retention). Transitions are
//! ordered only by the sender, never by when a delivery was signed or arrived:
//! a re-signed retry of an old `reminder.scheduled` carries a fresh signature
//! timestamp.
//! - `canceled` is terminal: nothing applies after it, in any order.
//! - A `reminder.scheduled` with an `occurred_at` that happened before the
//!   ordered transition it would replace applies nothing.
//! - A transition without an `occurred_at` applies only where it contradicts
//!   no transition applied since creation (a `scheduled` whose `send_at`, if
//!   any, is the reminder's): otherwise which one is newer is unknown, and it
//!   is quarantined as `ambiguous_order` for on-call. So is an ordered one
//!   that contradicts a state set without order. A cancellation never
//!   contradicts: being terminal, it is the last transition in either order.
//!
//! Creation is no transition, so the first transition always applies. An
//! event the rules refuse without ambiguity is [`Applied::Stale`]: claimed
//! (so retries are duplicates), counted and listed as `stale_transition`,
//! never silently dropped. Each transition is one conditional UPDATE, so two
//! racing events cannot both pass the check.

use rand::Rng;
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QueryFilter, Set, TryInsertResult, sea_query::Expr,
};
use serde_json::{Value, json};
use views::{
    events::{ReminderStatus, StateOrder},
    outbox::OutboxStatus,
    quarantine::QuarantineReason,
};

use crate::envelope::Envelope;
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
    Quarantine(QuarantineReason),
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
        .ok_or(EffectError::Quarantine(QuarantineReason::InvalidData))
}

fn time_field(data: &Value, name: &str) -> Result<Option<i64>, EffectError> {
    match data.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => {
            clock::parse_rfc3339(s).map(Some).ok_or(EffectError::Quarantine(QuarantineReason::InvalidData))
        }
        Some(_) => Err(EffectError::Quarantine(QuarantineReason::InvalidData)),
    }
}

/// Where an event was received: its tenant and endpoint ids.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub tenant_id: &'a str,
    pub endpoint_id: &'a str,
    /// The receiving webhook's W3C `traceparent`, kept with the outbox
    /// intents (only while traces are exported).
    pub trace_context: Option<&'a str>,
}

/// How a transition is placed against the reminder's current state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// By the sender's `occurred_at`; without one, only where nothing
    /// applied since creation contradicts it (see the module notes).
    Sender,
    /// On-call released an `ambiguous_order` entry: that decision stands in
    /// for the missing order, so only the terminal rule can refuse it.
    Triage,
}

/// When the event happened (ms), if the sender says: its envelope's
/// `occurred_at`. Never the signed or received time
/// (docs/architecture.md#replays-order-and-retention).
pub fn occurred_at(env: &Envelope) -> Result<Option<i64>, EffectError> {
    match &env.occurred_at {
        Some(text) => {
            clock::parse_rfc3339(text).map(Some).ok_or(EffectError::Quarantine(QuarantineReason::InvalidData))
        }
        None => Ok(None),
    }
}

/// Why a transition's conditional UPDATE matched nothing: the reminder is
/// missing (`reminder_not_found`), canceled or ordered after it (`Stale`), or
/// which one is newer is unknown (`ambiguous_order`). `unordered`: the event
/// carried no sender order.
async fn refused<C: ConnectionTrait>(
    conn: &C,
    tenant: &str,
    id: &str,
    unordered: bool,
) -> Result<Applied, EffectError> {
    let Some(row) = reminder::Entity::find_by_id((tenant.to_owned(), id.to_owned())).one(conn).await? else {
        return Err(EffectError::Quarantine(QuarantineReason::ReminderNotFound));
    };
    if row.status == ReminderStatus::Canceled {
        return Ok(Applied::Stale);
    }
    if unordered || row.state_order == Some(StateOrder::Unordered) {
        return Err(EffectError::Quarantine(QuarantineReason::AmbiguousOrder));
    }
    Ok(Applied::Stale)
}

/// Applies the event's effect and records its outbox intents, inside the
/// caller's transaction (the receiver's claim, or a quarantine release),
/// placing a reminder transition by `order`.
pub async fn apply<C: ConnectionTrait>(
    conn: &C,
    vault: &Vault,
    at: Target<'_>,
    event_id: &str,
    env: &Envelope,
    order: Order,
) -> Result<Applied, EffectError> {
    let now = clock::now_ms();
    let t = at.tenant_id;
    // Only transitions are ordered: a bad `occurred_at` on another type is
    // no reason to refuse it. The state they set records how it was ordered.
    let ordering = || -> Result<(Option<i64>, Option<i64>, StateOrder), EffectError> {
        let happened = occurred_at(env)?;
        Ok(match (order, happened) {
            (Order::Sender, Some(t)) => (happened, Some(t), StateOrder::OccurredAt),
            _ => (happened, None, StateOrder::Unordered),
        })
    };
    match env.event_type.as_str() {
        "reminder.created" => {
            let id = text_field(&env.data, "reminder_id")?;
            let send_at =
                time_field(&env.data, "send_at")?.ok_or(EffectError::Quarantine(QuarantineReason::InvalidData))?;
            let res = reminder::Entity::insert(reminder::ActiveModel {
                tenant_id: Set(t.to_owned()),
                reminder_id: Set(id.to_owned()),
                status: Set(ReminderStatus::Scheduled),
                send_at: Set(send_at),
                created_at: Set(now),
                updated_at: Set(now),
                // Creation is no transition: the first `scheduled` or
                // `canceled` applies whenever it happened (it may have been
                // quarantined until the reminder existed).
                state_at: Set(None),
                state_order: Set(None),
            })
            .on_conflict_do_nothing_on([reminder::Column::TenantId, reminder::Column::ReminderId])
            .exec_without_returning(conn)
            .await?;
            if !inserted(res) {
                return Err(EffectError::Quarantine(QuarantineReason::ReminderExists));
            }
        }
        "reminder.scheduled" => {
            let id = text_field(&env.data, "reminder_id")?;
            let send_at = time_field(&env.data, "send_at")?;
            let (happened, state_at, state_order) = ordering()?;
            let mut update = reminder::Entity::update_many()
                .col_expr(reminder::Column::Status, Expr::value(ReminderStatus::Scheduled))
                .col_expr(reminder::Column::StateAt, Expr::value(state_at))
                .col_expr(reminder::Column::StateOrder, Expr::value(Some(state_order)))
                .col_expr(reminder::Column::UpdatedAt, Expr::value(now));
            if let Some(at) = send_at {
                update = update.col_expr(reminder::Column::SendAt, Expr::value(at));
            }
            // The current state agrees with this event: applying it moves
            // nothing but the notice, so its place in the order is moot.
            let agrees = send_at.map(|at| reminder::Column::SendAt.eq(at));
            let placed = match (order, happened) {
                (Order::Triage, _) => None,
                // Over no transition, an older ordered one, or a state set
                // without order that it agrees with.
                (Order::Sender, Some(happened)) => Some(
                    Condition::any()
                        .add(reminder::Column::StateOrder.is_null())
                        .add(
                            Condition::all()
                                .add(reminder::Column::StateOrder.eq(StateOrder::OccurredAt))
                                .add(reminder::Column::StateAt.lte(happened)),
                        )
                        .add(
                            Condition::all()
                                .add(reminder::Column::StateOrder.eq(StateOrder::Unordered))
                                .add_option(agrees),
                        ),
                ),
                // Over no transition, or a state it agrees with.
                (Order::Sender, None) => {
                    agrees.map(|agrees| Condition::any().add(reminder::Column::StateOrder.is_null()).add(agrees))
                }
            };
            // Never after a cancellation (terminal).
            let mut update = update
                .filter(reminder::Column::TenantId.eq(t))
                .filter(reminder::Column::ReminderId.eq(id))
                .filter(reminder::Column::Status.ne(ReminderStatus::Canceled));
            if let Some(placed) = placed {
                update = update.filter(placed);
            }
            if update.exec(conn).await?.rows_affected == 0 {
                return refused(conn, t, id, order == Order::Sender && happened.is_none()).await;
            }
            let key = format!("reminder_notice:{}:{event_id}", at.endpoint_id);
            insert_intent(
                conn,
                vault,
                at,
                "reminder_notice",
                &key,
                json!({"reminder_id": id, "event_id": event_id}),
                now,
            )
            .await?;
        }
        "reminder.canceled" => {
            let id = text_field(&env.data, "reminder_id")?;
            let (_, state_at, state_order) = ordering()?;
            let res = reminder::Entity::update_many()
                .col_expr(reminder::Column::Status, Expr::value(ReminderStatus::Canceled))
                .col_expr(reminder::Column::StateAt, Expr::value(state_at))
                .col_expr(reminder::Column::StateOrder, Expr::value(Some(state_order)))
                .col_expr(reminder::Column::UpdatedAt, Expr::value(now))
                .filter(reminder::Column::TenantId.eq(t))
                .filter(reminder::Column::ReminderId.eq(id))
                .filter(reminder::Column::Status.ne(ReminderStatus::Canceled))
                .exec(conn)
                .await?;
            if res.rows_affected == 0 {
                // Only a cancellation refuses one: stale, in any order.
                return refused(conn, t, id, false).await;
            }
        }
        "otp.requested" => {
            let request = text_field(&env.data, "otp_request_id")?;
            let channel = text_field(&env.data, "channel")?;
            if channel != "sms" && channel != "email" {
                return Err(EffectError::Quarantine(QuarantineReason::InvalidData));
            }
            // Minted once, here; a second event for the same request id hits
            // the unique key and mints nothing.
            let code = format!("{:06}", rand::rngs::OsRng.gen_range(0..1_000_000u32));
            let key = format!("otp:{request}");
            insert_intent(
                conn,
                vault,
                at,
                "otp",
                &key,
                json!({"otp_request_id": request, "channel": channel, "code": code}),
                now,
            )
            .await?;
        }
        _ => return Err(EffectError::Quarantine(QuarantineReason::UnknownEventType)),
    }
    Ok(Applied::Done)
}

/// Records an outbox intent; at most one per (tenant, idempotency key).
/// Returns whether a new one was written.
async fn insert_intent<C: ConnectionTrait>(
    conn: &C,
    vault: &Vault,
    at: Target<'_>,
    kind: &str,
    key: &str,
    payload: Value,
    now: i64,
) -> Result<bool, EffectError> {
    let (id, tenant_id) = (ids::new_id(), at.tenant_id);
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
        status: Set(OutboxStatus::Pending),
        attempts: Set(0),
        next_attempt_at: Set(now),
        created_at: Set(now),
        trace_context: Set(at.trace_context.map(str::to_owned)),
        ..Default::default()
    })
    .on_conflict_do_nothing_on([outbox_intent::Column::TenantId, outbox_intent::Column::IdempotencyKey])
    .exec_without_returning(conn)
    .await?;
    Ok(inserted(res))
}
