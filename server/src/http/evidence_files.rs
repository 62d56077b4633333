//! `/evidence/files/{digest}/{file}`: the four files of an exported bundle,
//! byte for byte as they were signed, for the console's downloads and its
//! "open the printable page" link. Authenticated by the console session;
//! the domain decides who may see which bundle.

use app::ssr::SharedState;
use axum::{
    extract::{Path, Query, State},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use domain::{
    DomainError,
    evidence::{export, manifest},
};
use views::ids::Digest;

use super::api::{ApiError, evidence::html_response};

#[derive(serde::Deserialize)]
pub struct Download {
    /// `?download=1`: save the page instead of showing it.
    download: Option<String>,
}

pub async fn file(
    State(st): State<SharedState>,
    headers: HeaderMap,
    Path((digest, name)): Path<(String, String)>,
    Query(q): Query<Download>,
) -> Response {
    let token = app::ssr::session_token_in(&headers, st.secure_cookies);
    let principal = match token {
        Some(t) => {
            domain::auth::sessions::authenticate(
                &st.db,
                st.sessions,
                &t,
                domain::clock::now_ms(),
                domain::auth::sessions::Activity::User,
            )
            .await
        }
        None => Err(DomainError::Unauthenticated),
    };
    let principal = match principal {
        Ok(p) => p,
        Err(e) => return ApiError::Domain(e).into_response(),
    };
    // The digest as stored, in lower case: any other spelling names no
    // bundle (the console links only the stored one).
    let digest = match domain::ids::named::<Digest>(&digest) {
        Ok(d) if d == digest => d,
        _ => return ApiError::Domain(DomainError::NotFound).into_response(),
    };
    let bundle = match export::stored(&st.db, &st.vault, &principal, &digest).await {
        Ok(b) => b,
        Err(e) => return ApiError::Domain(e).into_response(),
    };
    let attachment = |content_type: &'static str, body: String| {
        let mut res = ([(header::CONTENT_TYPE, content_type)], body).into_response();
        if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{name}\"")) {
            res.headers_mut().insert(header::CONTENT_DISPOSITION, v);
        }
        res
    };
    match name.as_str() {
        manifest::EVIDENCE_HTML => {
            html_response(bundle.evidence_html, q.download.is_some().then_some(manifest::EVIDENCE_HTML))
        }
        manifest::EVIDENCE_JSON => attachment("application/json", bundle.evidence_json),
        manifest::MANIFEST_JSON => attachment("application/json", bundle.manifest_json),
        manifest::MANIFEST_SIG => attachment("text/plain; charset=utf-8", format!("{}\n", bundle.signature)),
        _ => (StatusCode::NOT_FOUND, "no such file in a bundle").into_response(),
    }
}
