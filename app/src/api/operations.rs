//! Quarantine triage and the per-tenant retry policy.

use leptos::prelude::*;
use server_fn::codec::GetUrl;
use views::quarantine::BulkReleaseView;
use views::quarantine::QuarantineList;
use views::quarantine::QuarantineView;
use views::quarantine::RevealedBody;
use views::retry_policy::RetryPolicyView;
use views::retry_policy::RolloutOverrideView;

use super::AppError;

#[cfg(feature = "ssr")]
fn filter(
    tenant: Option<String>,
    endpoint: Option<String>,
    reason: Option<String>,
    status: Option<String>,
    age: Option<String>,
) -> views::quarantine::QuarantineFilter {
    views::quarantine::QuarantineFilter { tenant, endpoint, reason, status, age, limit: Some(200) }
}

#[server(prefix = "/fn", endpoint = "list_quarantine", input = GetUrl)]
pub async fn list_quarantine(
    tenant: Option<String>,
    endpoint: Option<String>,
    reason: Option<String>,
    status: Option<String>,
    age: Option<String>,
) -> Result<QuarantineList, AppError> {
    use crate::ssr;
    let (st, p) = ssr::request().await?;
    let f = domain::quarantine::Filter::named(filter(tenant, endpoint, reason, status, age))?;
    Ok(domain::quarantine::list(&st.db, &p, &f).await?)
}

#[server(prefix = "/fn", endpoint = "quarantine_detail", input = GetUrl)]
pub async fn quarantine_detail(id: String) -> Result<QuarantineView, AppError> {
    use crate::ssr;
    let (st, p) = ssr::request().await?;
    Ok(domain::quarantine::get(&st.db, &p, &id).await?)
}

/// Decrypts the body (on-call and admin only), writes the audit entry, and
/// sends the browser back to the entry's page, which shows the redacted body
/// once ([`shown_quarantine_body`]). Only this POST decrypts, after the
/// Origin check; it refuses to run inside the rendering of a page, whose
/// GET no such check guards.
#[server(prefix = "/fn", endpoint = "reveal_quarantine_body")]
pub async fn reveal_quarantine_body(id: String) -> Result<(), AppError> {
    use crate::ssr;
    ssr::require_post()?;
    let (st, p) = ssr::request().await?;
    let token = ssr::session_token().ok_or_else(|| AppError::new("unauthenticated", "sign in again"))?;
    let body = domain::quarantine::reveal_body(&st.db, &st.vault, &p, &id, &st.redaction).await?;
    let handle = st.body_views.put(&token, &id, body);
    leptos_axum::redirect(&format!("/quarantine/{id}?view={handle}"));
    Ok(())
}

/// The body [`reveal_quarantine_body`] decrypted for this session, once.
/// `None` once shown, after two minutes, or for another session's `view`.
/// It decrypts nothing and records nothing: the reveal did both. POST
/// because it consumes the view.
#[server(prefix = "/fn", endpoint = "shown_quarantine_body")]
pub async fn shown_quarantine_body(id: String, view: String) -> Result<Option<RevealedBody>, AppError> {
    use crate::ssr;
    let (st, p) = ssr::request().await?;
    p.authorize(views::roles::Permission::RevealBodies, domain::auth::Scope::Global)?;
    let Some(token) = ssr::session_token() else { return Ok(None) };
    Ok(st.body_views.take(&token, &view).filter(|(entry, _)| *entry == id).map(|(_, body)| body))
}

#[server(prefix = "/fn", endpoint = "release_quarantine")]
pub async fn release_quarantine(id: String, reason: String) -> Result<(), AppError> {
    use crate::ssr;
    let (st, p) = ssr::request().await?;
    domain::quarantine::release(&st.db, &st.vault, &p, &id, &reason).await?;
    leptos_axum::redirect(&format!("/quarantine/{id}?done=released"));
    Ok(())
}

#[server(prefix = "/fn", endpoint = "discard_quarantine")]
pub async fn discard_quarantine(id: String, reason: String) -> Result<(), AppError> {
    use crate::ssr;
    let (st, p) = ssr::request().await?;
    domain::quarantine::discard(&st.db, &p, &id, &reason).await?;
    leptos_axum::redirect(&format!("/quarantine/{id}?done=discarded"));
    Ok(())
}

/// Starts releasing every open entry matching the filter in the background
/// and shows its progress page.
#[server(prefix = "/fn", endpoint = "start_bulk_release")]
pub async fn start_bulk_release(
    tenant: Option<String>,
    endpoint: Option<String>,
    reason_filter: Option<String>,
    age: Option<String>,
    reason: String,
) -> Result<(), AppError> {
    use domain::quarantine::bulk_release;

    use crate::ssr;
    let (st, p) = ssr::request().await?;
    domain::text::require_reason(&reason)?;
    let f = domain::quarantine::Filter::named(filter(tenant, endpoint, reason_filter, None, age))?;
    let job = bulk_release::start(&st.db, &p, &f, &reason).await?;
    bulk_release::spawn(st.db.clone(), st.vault.clone(), p, job.id.clone(), &st.faults);
    leptos_axum::redirect(&format!("/quarantine/bulk/{}", job.id));
    Ok(())
}

/// `auto`: the progress page's own poll (never keeps a session alive).
#[server(prefix = "/fn", endpoint = "bulk_release", input = GetUrl)]
pub async fn bulk_release(id: String, auto: Option<bool>) -> Result<BulkReleaseView, AppError> {
    use crate::ssr;
    let (st, p) = ssr::polled_request(auto).await?;
    Ok(domain::quarantine::bulk_release::get(&st.db, &p, &id, st.bulk_stale_ms).await?)
}

/// The latest few bulk releases the caller may see, newest first.
#[server(prefix = "/fn", endpoint = "recent_bulk_releases", input = GetUrl)]
pub async fn recent_bulk_releases() -> Result<Vec<BulkReleaseView>, AppError> {
    use crate::ssr;
    let (st, p) = ssr::request().await?;
    Ok(domain::quarantine::bulk_release::recent(&st.db, &p, 5, st.bulk_stale_ms).await?)
}

#[server(prefix = "/fn", endpoint = "resume_bulk_release")]
pub async fn resume_bulk_release(id: String) -> Result<(), AppError> {
    use crate::ssr;
    let (st, p) = ssr::request().await?;
    domain::quarantine::bulk_release::resume(&st.db, &st.vault, &p, &id, st.bulk_stale_ms, &st.faults).await?;
    leptos_axum::redirect(&format!("/quarantine/bulk/{id}"));
    Ok(())
}

/// Stops a bulk release for good: what it released stays released, the
/// rest stays in quarantine.
#[server(prefix = "/fn", endpoint = "cancel_bulk_release")]
pub async fn cancel_bulk_release(id: String) -> Result<(), AppError> {
    use crate::ssr;
    let (st, p) = ssr::request().await?;
    domain::quarantine::bulk_release::cancel(&st.db, &p, &id, st.bulk_stale_ms).await?;
    leptos_axum::redirect(&format!("/quarantine/bulk/{id}"));
    Ok(())
}

#[server(prefix = "/fn", endpoint = "retry_policy", input = GetUrl)]
pub async fn retry_policy(tenant: String) -> Result<RetryPolicyView, AppError> {
    use crate::ssr;
    let (st, p) = ssr::request().await?;
    Ok(domain::retry_policy::get(&st.db, &p, &domain::ids::named(&tenant)?).await?)
}

/// A blank override reason means none (the console's field is optional).
#[server(prefix = "/fn", endpoint = "set_retry_policy")]
pub async fn set_retry_policy(
    tenant: String,
    policy: String,
    reason: String,
    override_reason: Option<String>,
) -> Result<(), AppError> {
    use crate::ssr;
    use domain::break_glass::{self, SetOutcome};
    let (st, p) = ssr::request().await?;
    let why = override_reason.filter(|r| !r.trim().is_empty());
    let (slug, policy) = (domain::ids::named(&tenant)?, domain::retry_policy::parse(&policy)?);
    let out = break_glass::set(&st.db, &st.rollout(), &p, &slug, policy, &reason, why.as_deref()).await?;
    let done = if matches!(out, SetOutcome::Requested(_)) { "override-requested" } else { "changed" };
    leptos_axum::redirect(&format!("/tenants/{tenant}?policy={done}#retry-policy"));
    Ok(())
}

/// The tenant's break-glass requests, newest first.
#[server(prefix = "/fn", endpoint = "retry_overrides", input = GetUrl)]
pub async fn retry_overrides(tenant: String) -> Result<Vec<RolloutOverrideView>, AppError> {
    use crate::ssr;
    let (st, p) = ssr::request().await?;
    Ok(domain::break_glass::list(&st.db, &p, &domain::ids::named(&tenant)?).await?)
}

/// A second person's decision on a pending override (`approve` or `reject`).
#[server(prefix = "/fn", endpoint = "decide_override")]
pub async fn decide_override(tenant: String, id: String, decision: String, comment: String) -> Result<(), AppError> {
    use crate::ssr;
    use domain::break_glass;
    let (st, p) = ssr::request().await?;
    match decision.as_str() {
        "approve" => break_glass::approve(&st.db, &p, &domain::ids::named(&tenant)?, &id, None, &comment).await?,
        "reject" => break_glass::reject(&st.db, &p, &domain::ids::named(&tenant)?, &id, None, &comment).await?,
        _ => return Err(domain::DomainError::invalid("invalid_decision", "decision must be approve or reject").into()),
    };
    leptos_axum::redirect(&format!("/tenants/{tenant}?policy=override-{decision}d#retry-policy"));
    Ok(())
}

#[server(prefix = "/fn", endpoint = "rollback_retry_policy")]
pub async fn rollback_retry_policy(tenant: String, reason: String) -> Result<(), AppError> {
    use crate::ssr;
    let (st, p) = ssr::request().await?;
    domain::retry_policy::rollback(&st.db, &st.rollout(), &p, &domain::ids::named(&tenant)?, &reason).await?;
    leptos_axum::redirect(&format!("/tenants/{tenant}?policy=rolled-back#retry-policy"));
    Ok(())
}

/// What an administrator sees beside the cohort form
/// (docs/architecture.md#rollout-order-and-sign-off: enable retries only after
/// the drills, for a small cohort): every tenant with its policy, and the
/// latest drill run.
#[server(prefix = "/fn", endpoint = "cohort_context", input = GetUrl)]
pub async fn cohort_context() -> Result<crate::dto::CohortContextDto, AppError> {
    use crate::ssr;
    let (st, p) = ssr::request().await?;
    p.authorize(views::roles::Permission::ManageRetryPolicy, domain::auth::Scope::Global)?;
    let tenants = domain::registry::tenants::list(&st.db, &p)
        .await?
        .into_iter()
        .map(|t| crate::dto::CohortTenantDto {
            retries_enabled: t.retry_policy == views::retry_policy::RetryPolicy::Enabled,
            slug: t.slug.into_string(),
        })
        .collect();
    let latest = domain::evidence::runs::list(&st.db, &p, 1).await?.into_iter().next();
    let latest_drills = latest.map(|r| crate::dto::CohortDrillsDto {
        passed: r.passed,
        status: r.status,
        finished_at: r.finished_at.or(Some(r.started_at)),
        failed: r.drills.iter().filter(|d| !d.passed).map(|d| d.name.clone()).collect(),
        schemes: r.schemes,
    });
    Ok(crate::dto::CohortContextDto { tenants, latest_drills })
}

/// `tenants`: the slugs moved together in one transaction (checkboxes
/// named `tenants[i]`).
#[server(prefix = "/fn", endpoint = "set_retry_policy_cohort")]
pub async fn set_retry_policy_cohort(
    tenants: Option<Vec<String>>,
    policy: String,
    reason: String,
) -> Result<(), AppError> {
    use crate::ssr;
    let (st, p) = ssr::request().await?;
    let slugs = tenants
        .unwrap_or_default()
        .iter()
        .filter(|t| !t.trim().is_empty())
        .map(|t| domain::ids::named(t))
        .collect::<Result<Vec<views::ids::TenantSlug>, _>>()?;
    let word = domain::retry_policy::parse(&policy)?;
    let n = domain::retry_policy::set_cohort(&st.db, &st.rollout(), &p, &slugs, word, &reason).await?;
    leptos_axum::redirect(&format!("/tenants?cohort={n}&policy={}", crate::components::format::query_value(&policy)));
    Ok(())
}

#[server(prefix = "/fn", endpoint = "list_outbox", input = GetUrl)]
pub async fn list_outbox(
    tenant: Option<String>,
    status: Option<String>,
) -> Result<Vec<views::outbox::OutboxView>, AppError> {
    use crate::ssr;
    let (st, p) = ssr::request().await?;
    let tenant = domain::ids::named_filter(tenant.as_deref())?;
    Ok(domain::outbox::list(&st.db, &p, tenant.as_ref(), status.as_deref(), 200).await?)
}

/// Sends a dead intent again (same idempotency key), audited.
#[server(prefix = "/fn", endpoint = "retry_outbox")]
pub async fn retry_outbox(id: String) -> Result<(), AppError> {
    use crate::ssr;
    let (st, p) = ssr::request().await?;
    domain::outbox::retry(&st.db, &p, &id).await?;
    leptos_axum::redirect(&format!("/outbox?retried={id}"));
    Ok(())
}
