//! Drills and sign-off evidence (docs/contract.md §5): reviewers and admins for
//! every tenant, clinic admins for their own; on-call is refused.

use app::ssr::SharedState;
use axum::{
    Json,
    extract::{Path, State},
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use domain::evidence::{
    export::{self, Via},
    manifest::Manifest,
    record::Bundle,
    runs,
    signoff::{self, NewSignoff},
};
use domain::ids::named_filter;
use serde::{Deserialize, Serialize};
use views::evidence::{DrillRunView, Evidence, ExportView, SignoffView};

use super::auth::{ApiError, ApiJson, ApiPrincipal, ApiQuery, ErrorBody, NoBody, NoQuery, OptionalJson};
use super::params::{DigestPath, RunPath};

#[derive(Serialize, utoipa::ToSchema)]
pub struct StartedRun {
    pub run_id: String,
}

#[utoipa::path(post, path = "/drills", tag = "evidence",
    responses(
        (status = 202, body = StartedRun, description = "the run started; poll GET /api/v1/drills/{run_id}"),
        (status = 409, body = ErrorBody, description = "a drill run is already in progress"),
        (status = 429, body = ErrorBody,
         description = "the caller started 3 drill runs in the last 10 minutes (`drill_rate_limited`)",
         headers(("Retry-After" = u64, description = "seconds until the caller may start another run"))),
    ))]
pub async fn start_drills(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    _: NoBody,
) -> Result<(StatusCode, Json<StartedRun>), ApiError> {
    let run = runs::start(&st.db, &p).await?;
    st.drills.spawn(p, run.run_id.clone());
    Ok((StatusCode::ACCEPTED, Json(StartedRun { run_id: run.run_id })))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    /// At most this many (1–200, default 20).
    #[param(schema_with = views::paging::drill_runs_schema)]
    pub limit: Option<u64>,
}

#[utoipa::path(get, path = "/drills", tag = "evidence", params(ListParams),
    responses((status = 200, body = [DrillRunView])))]
pub async fn list_drills(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    ApiQuery(q): ApiQuery<ListParams>,
) -> Result<Json<Vec<DrillRunView>>, ApiError> {
    Ok(Json(runs::list(&st.db, &p, domain::paging::limit(views::paging::DRILL_RUNS, q.limit)?).await?))
}

#[utoipa::path(get, path = "/drills/{run_id}", tag = "evidence", params(RunPath),
    responses((status = 200, body = DrillRunView, description = "`passed` is null while the run is in progress")))]
pub async fn get_drill(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(RunPath { run_id }): Path<RunPath>,
) -> Result<Json<DrillRunView>, ApiError> {
    Ok(Json(runs::get(&st.db, &p, &run_id).await?))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct TenantParam {
    /// Limit every section to this tenant (a clinic admin always gets its own).
    pub tenant: Option<String>,
}

/// A bundle as the API answers it.
#[derive(Serialize, utoipa::ToSchema)]
pub struct EvidenceBody {
    /// Hex SHA-256 of `manifest.json` (what a sign-off names).
    pub digest: String,
    pub manifest: Manifest,
    /// Base64 Ed25519 signature over `manifest.json`'s exact bytes, which are
    /// `manifest` pretty-printed as `signet evidence export` writes them.
    pub signature: String,
    pub evidence: Evidence,
}

impl From<Bundle> for EvidenceBody {
    fn from(b: Bundle) -> Self {
        EvidenceBody { digest: b.digest, manifest: b.manifest, signature: b.signature, evidence: b.evidence }
    }
}

/// `POST /api/v1/evidence/exports`: what to export (`{}`, or no body at
/// all, for the whole deployment or a clinic admin's own tenant).
#[derive(Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExportRequest {
    /// Limit every section to this tenant (a clinic admin always gets its own).
    pub tenant: Option<String>,
}

#[utoipa::path(
    post, path = "/evidence/exports", tag = "evidence", request_body = ExportRequest,
    responses(
        (status = 201, body = EvidenceBody, description = "a fresh bundle, signed and stored"),
        (status = 200, body = EvidenceBody,
         description = "an identical bundle was already stored (same digest): that one, and nothing was written"),
        (status = 404, body = ErrorBody, description = "the tenant named does not exist or is out of scope"),
        (status = 429, body = ErrorBody,
         description = "over this caller's export budget (`export_rate_limited`); retry after `Retry-After`"),
    ),
)]
pub async fn create_export(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    OptionalJson(body): OptionalJson<ExportRequest>,
) -> Result<(StatusCode, Json<EvidenceBody>), ApiError> {
    st.budgets.exports.take(&p)?;
    let tenant = named_filter(body.tenant.as_deref())?;
    let done = export::export(&st.db, &st.vault, &p, tenant.as_ref(), Via::Api, evidence_html::render).await?;
    let status = if done.created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(done.bundle.into())))
}

#[utoipa::path(get, path = "/evidence", tag = "evidence", params(TenantParam),
    responses((status = 200, body = EvidenceBody,
        description = "the newest stored bundle of the scope, re-verified; 404 when none was exported yet"),
        (status = 409, body = ErrorBody, description = "the stored bundle fails its own check (`bundle_tampered`)")))]
pub async fn get_evidence(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    ApiQuery(q): ApiQuery<TenantParam>,
) -> Result<Json<EvidenceBody>, ApiError> {
    Ok(Json(export::latest(&st.db, &st.vault, &p, named_filter(q.tenant.as_deref())?.as_ref()).await?.into()))
}

#[utoipa::path(get, path = "/evidence/exports/{digest}", tag = "evidence", params(DigestPath),
    responses((status = 200, body = EvidenceBody, description = "one stored bundle, re-verified"),
        (status = 409, body = ErrorBody, description = "the stored bundle fails its own check (`bundle_tampered`)")))]
pub async fn get_export(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    Path(DigestPath { digest }): Path<DigestPath>,
) -> Result<Json<EvidenceBody>, ApiError> {
    Ok(Json(export::stored(&st.db, &st.vault, &p, &domain::ids::named(&digest)?).await?.into()))
}

/// The printable page is served with a policy that allows its one inline
/// style block (by hash) and nothing else: no script, no fetches.
pub fn html_response(html: String, filename: Option<&str>) -> Response {
    let mut res = ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response();
    let csp = format!(
        "default-src 'none'; style-src '{}'; img-src 'none'; \
         frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        evidence_html::style_hash()
    );
    if let Ok(v) = HeaderValue::from_str(&csp) {
        res.headers_mut().insert(header::CONTENT_SECURITY_POLICY, v);
    }
    if let Some(name) = filename
        && let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{name}\""))
    {
        res.headers_mut().insert(header::CONTENT_DISPOSITION, v);
    }
    res
}

#[utoipa::path(
    get, path = "/evidence.html", tag = "evidence", params(TenantParam),
    responses(
        (status = 200, content_type = "text/html", description = "the printable page of the newest stored bundle"),
        (status = 409, body = ErrorBody, description = "the stored bundle fails its own check (`bundle_tampered`)"),
    ),
)]
pub async fn get_evidence_html(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    ApiQuery(q): ApiQuery<TenantParam>,
) -> Result<Response, ApiError> {
    let b = export::latest(&st.db, &st.vault, &p, named_filter(q.tenant.as_deref())?.as_ref()).await?;
    Ok(html_response(b.evidence_html, None))
}

#[utoipa::path(get, path = "/evidence/exports", tag = "evidence", params(TenantParam),
    responses((status = 200, body = [ExportView])))]
pub async fn list_exports(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    ApiQuery(q): ApiQuery<TenantParam>,
) -> Result<Json<Vec<ExportView>>, ApiError> {
    Ok(Json(export::list(&st.db, &p, named_filter(q.tenant.as_deref())?.as_ref(), 50).await?))
}

#[utoipa::path(
    post, path = "/evidence/signoffs", tag = "evidence", request_body = NewSignoff,
    responses(
        (status = 201, body = SignoffView),
        (status = 409, body = ErrorBody,
         description = "`stale_bundle`: a newer bundle of the scope exists (only the newest can be signed off); \
                        `already_signed`: this reviewer signed this bundle before; `bundle_tampered`: the stored \
                        bundle fails its digest or signature check"),
        (status = 422, body = ErrorBody,
         description = "unknown digest, bad decision or missing comment; `unacknowledged_findings`: an approval \
                        leaves critical findings (named) without an acknowledgement; `unknown_finding`: an \
                        acknowledgement names a finding id the bundle does not carry; \
                        `acknowledgement_comment_required`: an acknowledgement without a comment"),
    ),
)]
pub async fn sign_off(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
    ApiJson(body): ApiJson<NewSignoff>,
) -> Result<(StatusCode, Json<SignoffView>), ApiError> {
    Ok((StatusCode::CREATED, Json(signoff::sign_off(&st.db, &st.vault, &p, &body).await?)))
}

#[utoipa::path(get, path = "/evidence/signoffs", tag = "evidence", params(TenantParam),
    responses((status = 200, body = [SignoffView])))]
pub async fn list_signoffs(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    ApiQuery(q): ApiQuery<TenantParam>,
) -> Result<Json<Vec<SignoffView>>, ApiError> {
    Ok(Json(signoff::list(&st.db, &p, named_filter(q.tenant.as_deref())?.as_ref(), 100).await?))
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct PublicKeyBody {
    pub algorithm: String,
    /// Base64 of the 32-byte Ed25519 public key.
    pub public_key: String,
    pub pem: String,
}

#[utoipa::path(get, path = "/evidence/public-key", tag = "evidence",
    responses((status = 200, body = PublicKeyBody)))]
pub async fn public_key(
    State(st): State<SharedState>,
    ApiPrincipal(p): ApiPrincipal,
    _: NoQuery,
) -> Result<Json<PublicKeyBody>, ApiError> {
    // Anyone who may read evidence may learn the key that signs it.
    export::scoped_tenant_id(&st.db, &p, None).await?;
    let signer = domain::service_keys::evidence_signer(&st.db, &st.vault).await?;
    let public_key = signer.public_key_base64();
    let pem = domain::crypto::service::public_key_pem(&public_key).unwrap_or_default();
    Ok(Json(PublicKeyBody { algorithm: "ed25519".into(), public_key, pem }))
}
