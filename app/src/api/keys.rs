//! Provision, rotate, revoke, and the one-time secret reveal.

use leptos::prelude::*;
use server_fn::codec::GetUrl;
use views::keys::KeyView;

use super::AppError;
use crate::dto::RevealDto;

#[cfg(feature = "ssr")]
fn approval_for(
    p: &domain::auth::Principal,
    approve_as: &Option<String>,
    what: &str,
) -> domain::registry::keys::Approval {
    use domain::registry::keys::Approval;
    match approve_as.as_deref().map(str::trim).filter(|r| !r.is_empty()) {
        // The domain refuses a reviewer who is the creator (four eyes).
        Some(reviewer) => Approval::ApproveAs {
            reviewer: reviewer.to_owned(),
            comment: format!("approved at {what}, entered by {}", p.actor.name()),
        },
        None => Approval::Pending,
    }
}

/// Sends the browser to the reveal page for a freshly created secret.
#[cfg(feature = "ssr")]
/// Shows a new key's secret once; a key with nothing secret (a `v1a`
/// public key) goes to its tenant's page instead.
fn redirect_to_reveal(
    st: &crate::ssr::SharedState,
    key: &views::keys::KeyView,
    secret: Option<domain::crypto::SigningSecret>,
) -> Result<(), AppError> {
    let key_id = &key.key_id;
    let Some(secret) = secret else {
        leptos_axum::redirect(&format!("/tenants/{}?created={key_id}", key.tenant));
        return Ok(());
    };
    let token = crate::ssr::session_token().ok_or_else(|| AppError::new("unauthenticated", "sign in again"))?;
    let handle = st.reveals.put(&token, key_id.as_str(), secret);
    leptos_axum::redirect(&format!("/keys/{key_id}/secret?reveal={handle}"));
    Ok(())
}

/// `event_types`: comma-separated subset of the endpoint's; empty means all
/// of the endpoint's types. `approve_as` (admins): activate at once.
#[server(prefix = "/fn", endpoint = "provision_key")]
pub async fn provision_key(
    tenant: String,
    endpoint: String,
    owner: Option<String>,
    rotation_owner: Option<String>,
    event_types: Option<String>,
    approve_as: Option<String>,
) -> Result<(), AppError> {
    use super::split_list;
    use crate::ssr;
    use domain::registry::keys::{self, ProvisionRequest};
    let (st, p) = ssr::request().await?;
    let nonempty = |s: Option<String>| s.map(|x| x.trim().to_owned()).filter(|x| !x.is_empty());
    let req = ProvisionRequest {
        owner: nonempty(owner),
        rotation_owner: nonempty(rotation_owner),
        event_types: event_types.as_deref().map(split_list).filter(|l| !l.is_empty()),
        ..Default::default()
    };
    let approval = approval_for(&p, &approve_as, "provisioning");
    let created = keys::provision(
        &st.db,
        &st.vault,
        &p,
        &domain::ids::named(&tenant)?,
        &domain::ids::named(&endpoint)?,
        req,
        approval,
    )
    .await?;
    redirect_to_reveal(&st, &created.key, created.secret)
}

/// `overlap_hours`: how long the old key keeps working once the new one is
/// active (default 24, at most 168).
#[server(prefix = "/fn", endpoint = "rotate_key")]
pub async fn rotate_key(
    key_id: String,
    overlap_hours: Option<String>,
    approve_as: Option<String>,
) -> Result<(), AppError> {
    use crate::ssr;
    use domain::registry::keys;
    let (st, p) = ssr::request().await?;
    let overlap = match overlap_hours.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        None => None,
        Some(h) => Some(
            h.parse::<f64>()
                .ok()
                .filter(|h| h.is_finite() && *h > 0.0)
                .map(|h| (h * 3600.0).round() as i64)
                .ok_or_else(|| AppError::new("invalid_overlap", "overlap must be a positive number of hours"))?,
        ),
    };
    let approval = approval_for(&p, &approve_as, "rotation");
    let created = keys::rotate(&st.db, &st.vault, &p, &domain::ids::named(&key_id)?, overlap, approval).await?;
    redirect_to_reveal(&st, &created.key, created.secret)
}

#[server(prefix = "/fn", endpoint = "revoke_key")]
pub async fn revoke_key(key_id: String, reason: String) -> Result<(), AppError> {
    use crate::ssr;
    let (st, p) = ssr::request().await?;
    let k = domain::registry::keys::revoke(&st.db, &p, &domain::ids::named(&key_id)?, &reason).await?;
    leptos_axum::redirect(&format!("/tenants/{}?revoked={}", k.tenant, k.key_id));
    Ok(())
}

#[server(prefix = "/fn", endpoint = "get_key", input = GetUrl)]
pub async fn get_key(key_id: String) -> Result<KeyView, AppError> {
    use crate::ssr;
    let (st, p) = ssr::request().await?;
    Ok(domain::registry::keys::get(&st.db, &p, &domain::ids::named(&key_id)?).await?)
}

/// Returns a new key's secret exactly once. POST because it consumes it.
/// `None` once it has been shown (or after ten minutes).
#[server(prefix = "/fn", endpoint = "reveal_secret")]
pub async fn reveal_secret(key_id: String, reveal: String) -> Result<Option<RevealDto>, AppError> {
    use crate::ssr;
    let (st, p) = ssr::request().await?;
    let k = domain::registry::keys::get(&st.db, &p, &domain::ids::named(&key_id)?).await?;
    let Some(token) = ssr::session_token() else { return Ok(None) };
    match st.reveals.take(&token, &reveal) {
        Some((id, secret)) if id == key_id => Ok(Some(RevealDto { key: k, secret: secret.expose().to_owned() })),
        _ => Ok(None),
    }
}
