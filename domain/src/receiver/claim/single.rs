//! The one-event transaction: gates 6 to 9 for a single delivery, with its
//! effect and outbox intents, or its quarantine entry, committed together.

use sea_orm::{DatabaseTransaction, DbErr, EntityTrait, Set};

use super::{
    context::{ClaimContext, Traffic},
    rollbacks::RollbackReason,
    rows::{
        AfterCommit, claim_row, commit, conflicted, existing, insert_claims, quarantine_reason, record_message,
        replayed, settled,
    },
};
use crate::{
    clock, db,
    entity::quarantine_entry,
    ids,
    receiver::{
        admission::{Admission, Job},
        effects,
        outcome::{Outcome, Refusal},
        verify::Verified,
    },
};
use views::{
    events::ClaimOutcome,
    quarantine::{QuarantineReason, QuarantineStatus},
};

/// One attempt at gates 6–9, and what is left to do once the caller has
/// released its write turn. A test delivery (`Traffic::Test`) takes the
/// same steps and rolls back where real traffic commits.
pub(super) async fn attempt(
    ctx: &ClaimContext,
    a: &Admission,
    traffic: Traffic,
) -> Result<(Outcome, AfterCommit), DbErr> {
    if ctx.faults.transient {
        return Err(DbErr::ConnectionAcquire(sea_orm::ConnAcquireErr::Timeout));
    }
    let job = match a {
        Admission::Admitted(job) => job,
        // The quarantine transaction runs the replay check (gate 6) itself.
        Admission::Quarantine(h, reason) => {
            let outcome = quarantine(ctx, &h.verified, &h.event_id, h.event_type.as_deref(), *reason, traffic).await?;
            return Ok((outcome, AfterCommit::default()));
        }
        // Gate 6 before gate 8: a replay is answered as one.
        Admission::Refused(h, refusal) => {
            let txn = db::begin_write(&ctx.db).await?;
            let (verdict, why) = match record_message(&txn, &h.verified).await? {
                false => (replayed(&txn, &h.verified, &h.event_id).await?, RollbackReason::Replay),
                true => (Outcome::Refused(*refusal), RollbackReason::Refused),
            };
            txn.rollback().await?;
            ctx.rolled_back_for(traffic, why);
            return Ok((verdict, AfterCommit::default()));
        }
    };
    apply(ctx, job, traffic).await
}

/// The verdict for a retry that gate 6 refused as a replay after an earlier
/// attempt failed: a duplicate when the event's claim says that attempt
/// committed (with this body), else the replay.
pub(super) async fn replayed_after_failure(ctx: &ClaimContext, a: &Admission) -> Outcome {
    let event_id = match a {
        Admission::Admitted(job) => &job.event_id,
        Admission::Quarantine(held, _) | Admission::Refused(held, _) => &held.event_id,
    };
    match existing(&ctx.db, a.verified(), event_id).await {
        Ok(Some(found @ Outcome::Duplicate { .. })) => found,
        _ => Outcome::Refused(Refusal::Replay),
    }
}

/// Commits real traffic; rolls a test delivery back.
async fn finish(
    ctx: &ClaimContext,
    txn: DatabaseTransaction,
    v: &Verified,
    traffic: Traffic,
) -> Result<AfterCommit, DbErr> {
    match traffic {
        Traffic::Live => commit(txn, &ctx.faults, v.endpoint().synthetic).await,
        Traffic::Test => {
            txn.rollback().await?;
            Ok(AfterCommit::default())
        }
    }
}

/// Gates 6 and 9 and the effect for an admitted delivery.
async fn apply(ctx: &ClaimContext, job: &Job, traffic: Traffic) -> Result<(Outcome, AfterCommit), DbErr> {
    let Job { verified: v, event_id, envelope: env, trace_context } = job;
    let txn = db::begin_write(&ctx.db).await?;
    if !record_message(&txn, v).await? {
        let verdict = replayed(&txn, v, event_id).await?;
        txn.rollback().await?;
        ctx.rolled_back_for(traffic, RollbackReason::Replay);
        return Ok((verdict, AfterCommit::default()));
    }
    if let Some(existing) = insert_claim(ctx, &txn, v, event_id, Some(&env.event_type), ClaimOutcome::Applied).await? {
        // The replay record stays for real traffic (this signed message was
        // accepted); a test delivery keeps nothing.
        let after = match traffic {
            Traffic::Live => txn.commit().await,
            Traffic::Test => txn.rollback().await,
        };
        after?;
        return Ok((existing, AfterCommit::default()));
    }
    let at = effects::Target {
        tenant_id: &v.endpoint().tenant_id,
        endpoint_id: &v.endpoint().endpoint_id,
        trace_context: trace_context.as_deref(),
    };
    match effects::apply(&txn, &ctx.vault, at, event_id, env, effects::Order::Sender).await {
        Ok(applied) => {
            let outcome = settled(&txn, v, event_id, applied).await?;
            let after = finish(ctx, txn, v, traffic).await?;
            Ok((outcome, after))
        }
        Err(e) => {
            let reason = quarantine_reason(e)?;
            txn.rollback().await?;
            ctx.rolled_back_for(traffic, RollbackReason::Quarantine);
            let outcome = quarantine(ctx, v, event_id, Some(&env.event_type), reason, traffic).await?;
            Ok((outcome, AfterCommit::default()))
        }
    }
}

/// Inserts the claim; `None` when it was new, else the existing claim's
/// verdict for this request.
async fn insert_claim(
    ctx: &ClaimContext,
    txn: &DatabaseTransaction,
    v: &Verified,
    event_id: &str,
    event_type: Option<&str>,
    outcome: ClaimOutcome,
) -> Result<Option<Outcome>, DbErr> {
    let row = claim_row(&ctx.vault, v, event_id, event_type, outcome)?;
    if !insert_claims(txn, vec![row]).await?.is_empty() {
        return Ok(None);
    }
    conflicted(txn, v, event_id).await.map(Some)
}

/// Records an authenticated event that cannot apply: replay record, claim
/// (outcome `quarantined`, so retries are duplicates) and the quarantine
/// entry, in their own transaction (rolled back for a test delivery).
pub(super) async fn quarantine(
    ctx: &ClaimContext,
    v: &Verified,
    event_id: &str,
    event_type: Option<&str>,
    reason: QuarantineReason,
    traffic: Traffic,
) -> Result<Outcome, DbErr> {
    let txn = db::begin_write(&ctx.db).await?;
    if !record_message(&txn, v).await? {
        let verdict = replayed(&txn, v, event_id).await?;
        txn.rollback().await?;
        ctx.rolled_back_for(traffic, RollbackReason::Replay);
        return Ok(verdict);
    }
    if let Some(existing) = insert_claim(ctx, &txn, v, event_id, event_type, ClaimOutcome::Quarantined).await? {
        match traffic {
            Traffic::Live => txn.commit().await?,
            Traffic::Test => txn.rollback().await?,
        }
        return Ok(existing);
    }
    let ep = v.endpoint();
    quarantine_entry::Entity::insert(quarantine_entry::ActiveModel {
        id: Set(ids::new_id()),
        tenant_id: Set(ep.tenant_id.clone()),
        endpoint_id: Set(ep.endpoint_id.clone()),
        event_id: Set(event_id.to_owned()),
        reason: Set(reason),
        status: Set(QuarantineStatus::Open),
        created_at: Set(clock::now_ms()),
        ..Default::default()
    })
    .exec_without_returning(&txn)
    .await?;
    match traffic {
        Traffic::Live => txn.commit().await?,
        Traffic::Test => txn.rollback().await?,
    }
    Ok(Outcome::Quarantined { event_id: event_id.to_owned(), reason })
}
