//! Tenants and endpoints.

use leptos::prelude::*;
use server_fn::codec::GetUrl;

use super::AppError;
use crate::dto::{OnboardingPage, TenantOverview, TenantSummary};

#[server(prefix = "/fn", endpoint = "list_tenants", input = GetUrl)]
pub async fn list_tenants() -> Result<Vec<TenantSummary>, AppError> {
    use crate::ssr;
    use domain::registry::{endpoints, keys, tenants};
    let (st, p) = ssr::request().await?;
    let all_keys = keys::list(&st.db, &p, &Default::default()).await?;
    let mut out = Vec::new();
    for t in tenants::list(&st.db, &p).await? {
        let endpoint_count = endpoints::list(&st.db, &p, &t.slug).await?.len();
        let mine = all_keys.iter().filter(|k| k.tenant == t.slug);
        let (mut active_keys, mut pending_keys) = (0, 0);
        for k in mine {
            match k.status {
                views::keys::KeyStatus::Active | views::keys::KeyStatus::Retiring => active_keys += 1,
                views::keys::KeyStatus::PendingApproval => pending_keys += 1,
                _ => {}
            }
        }
        out.push(TenantSummary { tenant: t, endpoint_count, active_keys, pending_keys });
    }
    Ok(out)
}

#[server(prefix = "/fn", endpoint = "create_tenant")]
pub async fn create_tenant(slug: String, name: String, notify_url: Option<String>) -> Result<(), AppError> {
    use crate::ssr;
    use domain::registry::tenants::{self, NewTenant};
    let (st, p) = ssr::request().await?;
    let t = tenants::create(
        &st.db,
        &p,
        NewTenant { slug: slug.trim().to_owned(), name: Some(name).filter(|n| !n.trim().is_empty()), notify_url },
    )
    .await?;
    leptos_axum::redirect(&format!("/tenants/{}", t.slug));
    Ok(())
}

/// A tenant with its endpoints and their keys.
#[server(prefix = "/fn", endpoint = "load_tenant", input = GetUrl)]
pub async fn load_tenant(slug: String) -> Result<TenantOverview, AppError> {
    use crate::{dto::EndpointKeys, ssr};
    use domain::{
        auth::Scope,
        registry::{endpoints, keys, tenants},
    };
    use views::roles::Permission;
    let (st, p) = ssr::request().await?;
    let tenant = domain::ids::named(&slug)?;
    let t = tenants::get(&st.db, &p, &tenant).await?;
    let can_manage = p.authorize(Permission::ManageKeys, Scope::Tenant(&t.id)).is_ok();
    let all_keys =
        keys::list(&st.db, &p, &keys::KeyFilter { tenant: Some(tenant.clone()), ..Default::default() }).await?;
    let eps = endpoints::list(&st.db, &p, &tenant).await?;
    let (mut active_keys, mut pending_keys) = (0, 0);
    for k in &all_keys {
        match k.status {
            views::keys::KeyStatus::Active | views::keys::KeyStatus::Retiring => active_keys += 1,
            views::keys::KeyStatus::PendingApproval => pending_keys += 1,
            _ => {}
        }
    }
    let endpoint_count = eps.len();
    let endpoints = eps
        .into_iter()
        .map(|e| EndpointKeys {
            keys: all_keys.iter().filter(|k| k.endpoint == e.slug).cloned().collect(),
            endpoint: e,
        })
        .collect();
    Ok(TenantOverview {
        tenant: TenantSummary { tenant: t, endpoint_count, active_keys, pending_keys },
        endpoints,
        can_manage,
        now_ms: domain::clock::now_ms(),
    })
}

/// `event_types`: comma-separated; empty means any type. Scheme `hmac`
/// takes `hmac_preset` (a preset's name) or `hmac_profile` (a custom
/// profile as JSON), never both; other schemes take neither.
#[server(prefix = "/fn", endpoint = "create_endpoint")]
#[allow(clippy::too_many_arguments)]
pub async fn create_endpoint(
    tenant: String,
    slug: String,
    scheme: String,
    event_types: Option<String>,
    tolerance_secs: Option<String>,
    max_body_bytes: Option<String>,
    hmac_preset: Option<String>,
    hmac_profile: Option<String>,
) -> Result<(), AppError> {
    use super::{parse_opt_i64, split_list};
    use crate::ssr;
    use domain::registry::endpoints::{self, NewEndpoint};
    let (st, p) = ssr::request().await?;
    let scheme = domain::registry::parse_scheme(scheme.trim())?;
    let types = event_types.as_deref().map(split_list).filter(|l| !l.is_empty());
    endpoints::create(
        &st.db,
        &p,
        &domain::ids::named(&tenant)?,
        NewEndpoint {
            slug: slug.trim().to_owned(),
            scheme,
            event_types: types,
            tolerance_secs: parse_opt_i64("tolerance", &tolerance_secs)?,
            max_body_bytes: parse_opt_i64("max body size", &max_body_bytes)?,
            hmac_profile: profile_from_form(hmac_preset, hmac_profile)?,
        },
    )
    .await?;
    leptos_axum::redirect(&format!("/tenants/{tenant}"));
    Ok(())
}

/// The form's HMAC profile: a preset chosen from the list, or a custom
/// profile pasted as JSON (read as strictly as the API reads it). Blank
/// fields are absent; whether the scheme takes a profile is the domain's
/// check.
#[cfg(feature = "ssr")]
fn profile_from_form(
    preset: Option<String>,
    json: Option<String>,
) -> Result<Option<views::hmac::HmacProfileBody>, AppError> {
    use domain::{DomainError, registry::hmac_profile};
    use views::hmac::{HmacPreset, HmacProfileBody};
    let given = |v: Option<String>| v.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty());
    let invalid = |why: String| AppError::from(DomainError::invalid("invalid_hmac_profile", why));
    match (given(preset), given(json)) {
        (Some(_), Some(_)) => {
            Err(invalid("hmac_profile: choose a preset or write a custom profile, not both".to_owned()))
        }
        (Some(name), None) => HmacPreset::from_name(&name)
            .map(|p| Some(HmacProfileBody::preset(p)))
            .ok_or_else(|| invalid(format!("hmac_profile.preset: unknown preset {name:?} (dvir, shopify, slack)"))),
        (None, Some(text)) => Ok(Some(hmac_profile::parse_json(text.as_bytes())?)),
        (None, None) => Ok(None),
    }
}

/// Enables or disables an endpoint (`enabled`: "true"/"false").
#[server(prefix = "/fn", endpoint = "set_endpoint_enabled")]
pub async fn set_endpoint_enabled(tenant: String, endpoint: String, enabled: String) -> Result<(), AppError> {
    use crate::ssr;
    use domain::registry::endpoints::{self, EndpointPatch};
    let (st, p) = ssr::request().await?;
    let enabled = enabled == "true";
    endpoints::update(
        &st.db,
        &p,
        &domain::ids::named(&tenant)?,
        &domain::ids::named(&endpoint)?,
        EndpointPatch { enabled: Some(enabled), ..Default::default() },
    )
    .await?;
    leptos_axum::redirect(&format!("/tenants/{tenant}"));
    Ok(())
}

/// An endpoint's onboarding guide (URL, scheme, headers, examples, `v1a`
/// public keys) and its newest test delivery.
#[server(prefix = "/fn", endpoint = "endpoint_onboarding", input = GetUrl)]
pub async fn endpoint_onboarding(tenant: String, endpoint: String) -> Result<OnboardingPage, AppError> {
    use crate::ssr;
    use domain::{auth::Scope, onboarding, registry::tenants};
    use views::roles::Permission;
    let (st, p) = ssr::request().await?;
    let (tenant, endpoint) = (domain::ids::named(&tenant)?, domain::ids::named(&endpoint)?);
    let guide = onboarding::guide(&st.db, &p, &tenant, &endpoint, &st.public_url).await?;
    let t = tenants::find(&st.db, &p, &tenant).await?;
    let can_send = p.authorize(Permission::ManageEndpoints, Scope::Tenant(&t.id)).is_ok();
    Ok(OnboardingPage { guide, can_send })
}

/// Sends a test delivery through the real receiver, signed with the
/// endpoint's own key (nothing of it is kept), and shows the endpoint's
/// page, which reads its gate outcomes back from the audit log.
#[server(prefix = "/fn", endpoint = "send_test_delivery")]
pub async fn send_test_delivery(tenant: String, endpoint: String, event_type: Option<String>) -> Result<(), AppError> {
    use crate::ssr;
    use domain::onboarding::{self, TestRequest};
    ssr::require_post()?;
    let (st, p) = ssr::request().await?;
    let event_type = event_type.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty());
    let sent = onboarding::send_test(
        &st.db,
        &st.vault,
        &st.receiver,
        &p,
        &domain::ids::named(&tenant)?,
        &domain::ids::named(&endpoint)?,
        TestRequest { event_type },
    )
    .await?;
    leptos_axum::redirect(&format!("/tenants/{tenant}/endpoints/{endpoint}?tested={}#test-delivery", sent.event_id));
    Ok(())
}
