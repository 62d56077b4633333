//! Drills and sign-off evidence for `/evidence` (docs/contract.md §5). Each call
//! authenticates; the domain authorizes (on-call gets 403).

use leptos::prelude::*;
use server_fn::codec::GetUrl;
use views::evidence::DrillRunView;

use super::AppError;
use crate::dto::EvidencePageDto;

#[cfg(feature = "ssr")]
fn scope(tenant: Option<String>) -> Option<String> {
    tenant.filter(|t| !t.trim().is_empty())
}

/// The page's data for one scope (a tenant, or the whole deployment).
#[server(prefix = "/fn", endpoint = "evidence_page", input = GetUrl)]
pub async fn evidence_page(tenant: Option<String>) -> Result<EvidencePageDto, AppError> {
    use domain::evidence::{export, runs, signoff};
    use views::roles::{Permission, role_allows};

    use crate::ssr;
    let (st, p) = ssr::request().await?;
    let tenant = scope(tenant);
    let run_list = runs::list(&st.db, &p, 10).await?;
    let slug = domain::ids::named_filter(tenant.as_deref())?;
    let exports = export::list(&st.db, &p, slug.as_ref(), 1).await?;
    let (bundle, since) = match exports.first() {
        Some(latest) => {
            let b = export::stored(&st.db, &st.vault, &p, &latest.digest).await?;
            let since = signoff::since_last_approval(&st.db, &st.vault, &p, slug.as_ref(), &b.evidence).await?;
            let dto = crate::dto::BundleDto {
                digest: b.digest.clone(),
                actor: latest.actor.clone(),
                via: latest.via.clone(),
                created_at: latest.created_at.clone(),
                evidence: b.evidence,
            };
            (Some(dto), Some(since))
        }
        None => (None, None),
    };
    let signoffs = signoff::list(&st.db, &p, slug.as_ref(), 50).await?;
    let tenants = if p.tenant_filter().is_none() {
        domain::registry::tenants::list(&st.db, &p).await?.into_iter().map(|t| t.slug.into_string()).collect()
    } else {
        Vec::new()
    };
    let signer = domain::service_keys::evidence_signer(&st.db, &st.vault).await?;
    let public_key = signer.public_key_base64();
    Ok(EvidencePageDto {
        tenant: tenant.or_else(|| bundle.as_ref().and_then(|b| b.evidence.tenant.clone())),
        tenants,
        can_sign_off: role_allows(p.role, Permission::SignOffEvidence),
        runs: run_list,
        bundle,
        since,
        signoffs,
        public_key_pem: domain::crypto::service::public_key_pem(&public_key).unwrap_or_default(),
        public_key,
    })
}

/// One run, for the live progress poll (`auto`: never keeps a session alive).
#[server(prefix = "/fn", endpoint = "drill_run", input = GetUrl)]
pub async fn drill_run(run_id: String, auto: Option<bool>) -> Result<DrillRunView, AppError> {
    use crate::ssr;
    let (st, p) = ssr::polled_request(auto).await?;
    Ok(domain::evidence::runs::get(&st.db, &p, &run_id).await?)
}

/// Starts a drill run in the background; the page then shows its progress.
#[server(prefix = "/fn", endpoint = "start_drills")]
pub async fn start_drills(tenant: Option<String>) -> Result<(), AppError> {
    use crate::{components::format::with_query, ssr};
    let (st, p) = ssr::request().await?;
    let run = domain::evidence::runs::start(&st.db, &p).await?;
    st.drills.spawn(p, run.run_id.clone());
    leptos_axum::redirect(&with_query(
        "/evidence",
        &[("tenant", scope(tenant).as_deref().unwrap_or("")), ("run", &run.run_id)],
    ));
    Ok(())
}

/// Exports a fresh signed bundle (recorded; the page shows it). Within the
/// caller's export budget.
#[server(prefix = "/fn", endpoint = "export_evidence")]
pub async fn export_evidence(tenant: Option<String>) -> Result<(), AppError> {
    use crate::{components::format::with_query, ssr};
    let (st, p) = ssr::request().await?;
    let tenant = scope(tenant);
    st.budgets.exports.take(&p)?;
    let done = domain::evidence::export::export(
        &st.db,
        &st.vault,
        &p,
        domain::ids::named_filter(tenant.as_deref())?.as_ref(),
        domain::evidence::export::Via::Console,
        evidence_html::render,
    )
    .await?;
    leptos_axum::redirect(&with_query(
        "/evidence",
        &[("tenant", tenant.as_deref().unwrap_or("")), ("exported", &done.bundle.digest)],
    ));
    Ok(())
}

/// Approves or rejects the bundle with this digest. `acknowledge`: a
/// comment per critical finding id (`acknowledge[drill_failed]=…`); blank
/// ones are left out, so the domain names them if an approval needs them.
#[server(prefix = "/fn", endpoint = "sign_off_evidence")]
pub async fn sign_off_evidence(
    tenant: Option<String>,
    digest: String,
    decision: String,
    comment: String,
    acknowledge: Option<std::collections::BTreeMap<String, String>>,
) -> Result<(), AppError> {
    use domain::evidence::signoff::{self, NewAcknowledgement, NewSignoff};

    use crate::{components::format::with_query, ssr};
    let (st, p) = ssr::request().await?;
    let acknowledge = acknowledge
        .unwrap_or_default()
        .into_iter()
        .filter(|(_, comment)| !comment.trim().is_empty())
        .map(|(finding, comment)| NewAcknowledgement { finding, comment })
        .collect();
    let s = signoff::sign_off(&st.db, &st.vault, &p, &NewSignoff { digest, decision, comment, acknowledge }).await?;
    leptos_axum::redirect(&with_query(
        "/evidence",
        &[("tenant", scope(tenant).as_deref().unwrap_or("")), ("signed", s.decision.as_str())],
    ));
    Ok(())
}
