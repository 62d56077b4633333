//! Bearer authentication and the one error mapping for the API.

use app::ssr::AppState;
use axum::{
    extract::FromRequestParts,
    http::request::Parts,
    response::{IntoResponse, Response},
    Json,
};
use domain::{auth::Principal, DomainError};
use http::{header, StatusCode};
use serde::Serialize;

/// The error body every API failure carries.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    pub error: String,
    pub message: String,
}

/// A domain error on its way out: status, code and a public message; the
/// detail of internal errors goes only to the log.
#[derive(Debug)]
pub struct ApiError(pub DomainError);

impl ApiError {
    pub fn not_found() -> Self {
        ApiError(DomainError::NotFound)
    }
}

impl From<DomainError> for ApiError {
    fn from(e: DomainError) -> Self {
        ApiError(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match &self.0 {
            DomainError::NotFound => StatusCode::NOT_FOUND,
            DomainError::Forbidden | DomainError::Refused { .. } => StatusCode::FORBIDDEN,
            DomainError::Unauthenticated => StatusCode::UNAUTHORIZED,
            DomainError::Invalid { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            DomainError::Conflict { .. } => StatusCode::CONFLICT,
            DomainError::Throttled { .. } => StatusCode::TOO_MANY_REQUESTS,
            DomainError::Db(e) => {
                tracing::error!(error = %e, "database error in an API call");
                StatusCode::INTERNAL_SERVER_ERROR
            }
            DomainError::Crypto(e) => {
                tracing::error!(error = %e, "vault error in an API call");
                StatusCode::INTERNAL_SERVER_ERROR
            }
        };
        let mut res = (status, Json(ErrorBody { error: self.0.code().to_owned(), message: self.0.public_message() })).into_response();
        if status == StatusCode::UNAUTHORIZED {
            res.headers_mut().insert(header::WWW_AUTHENTICATE, http::HeaderValue::from_static("Bearer"));
        }
        res
    }
}

/// The caller, from `Authorization: Bearer sgt_…`.
pub struct ApiPrincipal(pub Principal);

impl FromRequestParts<AppState> for ApiPrincipal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let bearer = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .ok_or(ApiError(DomainError::Unauthenticated))?;
        let p = domain::auth::tokens::authenticate(&state.db, bearer, domain::clock::now_ms()).await?;
        Ok(ApiPrincipal(p))
    }
}

/// A JSON body extractor whose rejection is our error format.
pub struct ApiJson<T>(pub T);

impl<T, S> axum::extract::FromRequest<S> for ApiJson<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Self::Rejection> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(v)) => Ok(ApiJson(v)),
            Err(rejection) => Err(ApiError(DomainError::invalid("invalid_body", rejection.body_text()))),
        }
    }
}

/// A JSON body that may be absent (then `T::default()`).
pub struct OptionalJson<T>(pub T);

impl<T, S> axum::extract::FromRequest<S> for OptionalJson<T>
where
    T: serde::de::DeserializeOwned + Default,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = axum::body::Bytes::from_request(req, state)
            .await
            .map_err(|e| ApiError(DomainError::invalid("invalid_body", e.body_text())))?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJson(T::default()));
        }
        serde_json::from_slice(&bytes)
            .map(OptionalJson)
            .map_err(|e| ApiError(DomainError::invalid("invalid_body", format!("request body is not valid JSON for this call: {e}"))))
    }
}
