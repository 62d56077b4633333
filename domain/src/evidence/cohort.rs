//! The live cohort check (docs/architecture.md#rollout-order-and-sign-off,
//! after enabling retries): for each tenant whose retry policy is enabled,
//! since the policy version that enabled it, every event has one claim, at most
//! one reminder transition and at most one outbox intent per kind. Any breach
//! is named.
//!
//! Each check is one `GROUP BY … HAVING COUNT(*) > 1` in the database (a
//! bundle is exported beside millions of events), read twice: the first
//! [`BREACHES_SHOWN`] rows, and how many there are.
//! - `duplicate_claim`: more than one claim row for an (endpoint, event id).
//!   The claim's primary key forbids it; the check does not trust that.
//! - `repeated_transition`: more than one `reminder_notice` intent for one
//!   event. Applying a `reminder.scheduled` writes exactly one, in the
//!   transaction of the transition, keyed by endpoint and event
//!   (`receiver::effects`): it is the per-event record of a transition.
//!   (A cancellation writes no row of its own; it is terminal, so a second
//!   one never applies.)
//! - `duplicate_intent`: more than one intent of another kind under one
//!   idempotency key (an OTP per request id), which names no event.

use std::collections::HashMap;

use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect, QueryTrait,
    sea_query::{Alias, Expr, Query, SelectStatement},
};

use crate::{
    clock,
    entity::{endpoint, inbox_claim, outbox_intent, retry_policy_version as version, tenant},
    error::DomainResult,
};

use views::{
    evidence::{CohortBreach, CohortCheck},
    retry_policy::RetryPolicy,
};

/// Breaches listed per tenant and check; `breaches_total` counts them all.
pub const BREACHES_SHOWN: u64 = 50;
/// The outbox kind whose intent records a reminder transition.
const NOTICE: &str = "reminder_notice";

/// The check for every tenant with retries enabled (or only `scope`),
/// the drill tenant excepted.
pub async fn check(db: &DatabaseConnection, scope: Option<&tenant::Model>) -> DomainResult<Vec<CohortCheck>> {
    let mut q = tenant::Entity::find()
        .filter(tenant::Column::Synthetic.eq(false))
        .filter(tenant::Column::RetryPolicy.eq(RetryPolicy::Enabled))
        .order_by_asc(tenant::Column::Slug);
    if let Some(t) = scope {
        q = q.filter(tenant::Column::Id.eq(&t.id));
    }
    let mut out = Vec::new();
    for t in q.all(db).await? {
        out.push(tenant_check(db, &t).await?);
    }
    Ok(out)
}

/// When retries were enabled: the oldest version of the newest run of
/// `enabled` versions (enabling twice in a row does not restart it).
async fn enabled_since(db: &DatabaseConnection, t: &tenant::Model) -> DomainResult<i64> {
    let history = version::Entity::find()
        .filter(version::Column::TenantId.eq(&t.id))
        .order_by_desc(version::Column::Version)
        .all(db)
        .await?;
    Ok(history.iter().take_while(|v| v.policy == RetryPolicy::Enabled).last().map_or(t.created_at, |v| v.created_at))
}

async fn tenant_check(db: &DatabaseConnection, t: &tenant::Model) -> DomainResult<CohortCheck> {
    let since = enabled_since(db, t).await?;
    let slugs: HashMap<String, String> = endpoint::Entity::find()
        .filter(endpoint::Column::TenantId.eq(&t.id))
        .all(db)
        .await?
        .into_iter()
        .map(|e| (e.id, e.slug))
        .collect();
    let claims = || {
        inbox_claim::Entity::find()
            .filter(inbox_claim::Column::TenantId.eq(&t.id))
            .filter(inbox_claim::Column::ReceivedAt.gte(since))
    };
    let rows: i64 = claims()
        .select_only()
        .column_as(Expr::cust("CAST(COUNT(*) AS BIGINT)"), "n")
        .into_tuple()
        .one(db)
        .await?
        .unwrap_or(0);

    let mut breaches = Vec::new();
    let mut total = 0;

    let dup_claims = claims()
        .select_only()
        .column(inbox_claim::Column::EndpointId)
        .column(inbox_claim::Column::EventId)
        .column_as(Expr::cust("CAST(COUNT(*) AS BIGINT)"), "n")
        .group_by(inbox_claim::Column::EndpointId)
        .group_by(inbox_claim::Column::EventId)
        .having(Expr::cust("COUNT(*) > 1"));
    let (groups, grouped_rows) = count_groups(db, dup_claims.clone().into_query()).await?;
    total += groups;
    // Events, not rows: an event claimed twice is one event.
    let events_checked = (rows.max(0) as u64).saturating_sub(grouped_rows) + groups;
    let rows: Vec<(String, String, i64)> = dup_claims
        .order_by_asc(inbox_claim::Column::EndpointId)
        .order_by_asc(inbox_claim::Column::EventId)
        .limit(BREACHES_SHOWN)
        .into_tuple()
        .all(db)
        .await?;
    for (endpoint_id, event_id, n) in rows {
        breaches.push(CohortBreach {
            check: "duplicate_claim".into(),
            event_id: Some(event_id),
            endpoint: Some(slugs.get(&endpoint_id).cloned().unwrap_or(endpoint_id)),
            what: format!("{n} claim rows for one event"),
        });
    }

    let dup_intents = outbox_intent::Entity::find()
        .filter(outbox_intent::Column::TenantId.eq(&t.id))
        .filter(outbox_intent::Column::CreatedAt.gte(since))
        .select_only()
        .column(outbox_intent::Column::Kind)
        .column(outbox_intent::Column::IdempotencyKey)
        .column_as(Expr::cust("CAST(COUNT(*) AS BIGINT)"), "n")
        .group_by(outbox_intent::Column::Kind)
        .group_by(outbox_intent::Column::IdempotencyKey)
        .having(Expr::cust("COUNT(*) > 1"));
    total += count_groups(db, dup_intents.clone().into_query()).await?.0;
    let rows: Vec<(String, String, i64)> = dup_intents
        .order_by_asc(outbox_intent::Column::Kind)
        .order_by_asc(outbox_intent::Column::IdempotencyKey)
        .limit(BREACHES_SHOWN)
        .into_tuple()
        .all(db)
        .await?;
    for (kind, key, n) in rows {
        breaches.push(intent_breach(&slugs, &kind, &key, n));
    }

    Ok(CohortCheck {
        tenant: t.slug.clone(),
        enabled_since: clock::rfc3339(since),
        enabled_since_ms: since,
        events_checked,
        breaches_total: total,
        breaches,
    })
}

/// A repeated intent, named by the event its key names when it names one
/// (`reminder_notice:{endpoint id}:{event id}`).
fn intent_breach(slugs: &HashMap<String, String>, kind: &str, key: &str, n: i64) -> CohortBreach {
    let notice = key.strip_prefix(NOTICE).and_then(|k| k.strip_prefix(':')).and_then(|k| k.split_once(':'));
    match notice {
        Some((endpoint_id, event_id)) if kind == NOTICE => CohortBreach {
            check: "repeated_transition".into(),
            event_id: Some(event_id.to_owned()),
            endpoint: Some(slugs.get(endpoint_id).cloned().unwrap_or_else(|| endpoint_id.to_owned())),
            what: format!("{n} reminder transitions applied ({n} {NOTICE} intents)"),
        },
        _ => CohortBreach {
            check: "duplicate_intent".into(),
            event_id: None,
            endpoint: None,
            what: format!("{n} {kind} intents under idempotency key {key}"),
        },
    }
}

/// How many groups a `GROUP BY … HAVING` query (with its count as `n`)
/// returns, and the rows in them, counted in the database.
async fn count_groups(db: &DatabaseConnection, grouped: SelectStatement) -> DomainResult<(u64, u64)> {
    let stmt = Query::select()
        .expr_as(Expr::cust("CAST(COUNT(*) AS BIGINT)"), Alias::new("groups"))
        .expr_as(Expr::cust("CAST(COALESCE(SUM(n), 0) AS BIGINT)"), Alias::new("rows"))
        .from_subquery(grouped, Alias::new("g"))
        .to_owned();
    let Some(row) = db.query_one(&stmt).await? else { return Ok((0, 0)) };
    let (groups, rows): (i64, i64) = (row.try_get("", "groups")?, row.try_get("", "rows")?);
    Ok((groups.max(0) as u64, rows.max(0) as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notice_keys_name_their_event_and_endpoint() {
        let slugs = HashMap::from([("ep1".to_owned(), "reminders".to_owned())]);
        let b = intent_breach(&slugs, NOTICE, "reminder_notice:ep1:evt:with:colons", 2);
        assert_eq!(b.check, "repeated_transition");
        assert_eq!((b.event_id.as_deref(), b.endpoint.as_deref()), (Some("evt:with:colons"), Some("reminders")));
        let otp = intent_breach(&slugs, "otp", "otp:req-1", 3);
        assert_eq!(
            (otp.check.as_str(), otp.event_id, otp.what.as_str()),
            ("duplicate_intent", None, "3 otp intents under idempotency key otp:req-1")
        );
    }
}
