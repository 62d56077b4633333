//! Bearer authentication and the one error mapping for the API.

use crate::http::state::AppState;
use axum::{
    Json,
    extract::FromRequestParts,
    http::request::Parts,
    response::{IntoResponse, Response},
};
use domain::{DomainError, auth::Principal};
use http::{StatusCode, header};
use serde::Serialize;

/// The error body every API failure carries.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    pub error: String,
    pub message: String,
}

/// Every way an API call can fail, with its status: the one table both the
/// responses and the OpenAPI document read ([`super::ErrorResponses`] adds
/// each to the operations that can answer it, so the two cannot drift).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    Unauthenticated,
    Forbidden,
    NotFound,
    Conflict,
    /// Over the control-body limit (`guards::control_body_limit`).
    TooLarge,
    UnsupportedMediaType,
    Invalid,
    /// Too many sign-in failures, or an expensive call (an export, a drill
    /// run) over its per-caller budget; with `Retry-After`.
    Throttled,
    Internal,
    /// Not answered within the request timeout (`limits::request_timeout`).
    Unavailable,
}

impl Failure {
    pub const ALL: [Failure; 10] = [
        Failure::Unauthenticated,
        Failure::Forbidden,
        Failure::NotFound,
        Failure::Conflict,
        Failure::TooLarge,
        Failure::UnsupportedMediaType,
        Failure::Invalid,
        Failure::Throttled,
        Failure::Internal,
        Failure::Unavailable,
    ];

    pub fn status(self) -> StatusCode {
        match self {
            Failure::Unauthenticated => StatusCode::UNAUTHORIZED,
            Failure::Forbidden => StatusCode::FORBIDDEN,
            Failure::NotFound => StatusCode::NOT_FOUND,
            Failure::Conflict => StatusCode::CONFLICT,
            Failure::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Failure::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Failure::Invalid => StatusCode::UNPROCESSABLE_ENTITY,
            Failure::Throttled => StatusCode::TOO_MANY_REQUESTS,
            Failure::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            Failure::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// What the document says the status means.
    pub fn description(self) -> &'static str {
        match self {
            Failure::Unauthenticated => "no valid bearer token (`unauthenticated`)",
            Failure::Forbidden => {
                "the caller's role does not allow this (`forbidden`), or four eyes refuse it (`self_approval`)"
            }
            Failure::NotFound => "no such resource, or one outside the caller's tenant (`not_found`)",
            Failure::Conflict => "the call conflicts with stored state; nothing was changed",
            Failure::TooLarge => "the body is over 64 KiB (`body_too_large`)",
            Failure::UnsupportedMediaType => {
                "the body is not sent as `Content-Type: application/json` (`unsupported_media_type`)"
            }
            Failure::Invalid => {
                "a field or query parameter the call does not take (`unknown_field`), a query value out of range \
                 (`invalid_query`), or a value the call refuses (the code says which)"
            }
            Failure::Throttled => "too many attempts or calls (`throttled`, `rate_limited`); retry after `Retry-After`",
            Failure::Internal => "an internal failure (`internal`); the detail goes only to the server log",
            Failure::Unavailable => "not answered within the request timeout (`timeout`); retry after `Retry-After`",
        }
    }

    fn of(e: &DomainError) -> Failure {
        match e {
            DomainError::NotFound => Failure::NotFound,
            DomainError::Forbidden | DomainError::Refused { .. } => Failure::Forbidden,
            DomainError::Unauthenticated => Failure::Unauthenticated,
            DomainError::Invalid { .. } => Failure::Invalid,
            DomainError::Conflict { .. } => Failure::Conflict,
            DomainError::Throttled { .. } | DomainError::RateLimited { .. } => Failure::Throttled,
            DomainError::Db(_) | DomainError::Crypto(_) => Failure::Internal,
        }
    }
}

/// An API failure on its way out: status, code and a public message; the
/// detail of internal errors goes only to the log.
#[derive(Debug)]
pub enum ApiError {
    Domain(DomainError),
    /// A body sent as anything but JSON.
    UnsupportedMediaType,
}

impl ApiError {
    pub fn not_found() -> Self {
        ApiError::Domain(DomainError::NotFound)
    }

    fn failure(&self) -> Failure {
        match self {
            ApiError::Domain(e) => Failure::of(e),
            ApiError::UnsupportedMediaType => Failure::UnsupportedMediaType,
        }
    }
}

impl From<DomainError> for ApiError {
    fn from(e: DomainError) -> Self {
        ApiError::Domain(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let failure = self.failure();
        let retry_after = match &self {
            ApiError::Domain(e) => e.retry_after_secs(),
            ApiError::UnsupportedMediaType => None,
        };
        let body = match &self {
            ApiError::Domain(e) => {
                match e {
                    DomainError::Db(e) => tracing::error!(error = %e, "database error in an API call"),
                    DomainError::Crypto(e) => tracing::error!(error = %e, "vault error in an API call"),
                    _ => {}
                }
                ErrorBody { error: e.code().to_owned(), message: e.public_message() }
            }
            ApiError::UnsupportedMediaType => ErrorBody {
                error: "unsupported_media_type".to_owned(),
                message: "send the body as Content-Type: application/json".to_owned(),
            },
        };
        let mut res = (failure.status(), Json(body)).into_response();
        if let ApiError::Domain(e) = &self
            && let Some(secs) = e.retry_after_secs()
        {
            res.headers_mut().insert(header::RETRY_AFTER, http::HeaderValue::from(secs));
        }
        if failure == Failure::Unauthenticated {
            res.headers_mut().insert(header::WWW_AUTHENTICATE, http::HeaderValue::from_static("Bearer"));
        }
        if let Some(secs) = retry_after {
            res.headers_mut().insert(header::RETRY_AFTER, http::HeaderValue::from(secs.max(1)));
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
            .ok_or(ApiError::Domain(DomainError::Unauthenticated))?;
        let p = domain::auth::tokens::authenticate(&state.shared.db, bearer, domain::clock::now_ms()).await?;
        Ok(ApiPrincipal(p))
    }
}

/// A JSON body extractor whose rejection is our error format. Strict: a
/// field the call does not take is refused (422 `unknown_field`, naming it)
/// rather than silently ignored, so a caller never believes a change was
/// made that was not.
pub struct ApiJson<T>(pub T);

impl<T, S> axum::extract::FromRequest<S> for ApiJson<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Self::Rejection> {
        if !is_json(&req) {
            return Err(ApiError::UnsupportedMediaType);
        }
        strict_json(&body_bytes(req, state).await?).map(ApiJson)
    }
}

/// Whether the request declares a JSON body.
fn is_json(req: &axum::extract::Request) -> bool {
    req.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(';').next().is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json")))
}

/// The whole body (already bounded by `guards::control_body_limit`), or
/// our error format when it cannot be read.
async fn body_bytes<S: Send + Sync>(req: axum::extract::Request, state: &S) -> Result<axum::body::Bytes, ApiError> {
    <axum::body::Bytes as axum::extract::FromRequest<S>>::from_request(req, state)
        .await
        .map_err(|e| ApiError::Domain(DomainError::invalid("invalid_body", e.body_text())))
}

/// A `PATCH` naming no field: refused, so the caller does not read the 200
/// as a change.
pub fn nothing_to_change() -> ApiError {
    ApiError::Domain(DomainError::invalid("nothing_to_change", "the request names no field to change"))
}

/// Parses `bytes` as `T`, refusing unknown fields at any depth.
pub fn strict_json<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let invalid = |e: serde_json::Error| {
        ApiError::Domain(DomainError::invalid(
            "invalid_body",
            format!("request body is not valid JSON for this call: {e}"),
        ))
    };
    let mut unknown = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_ignored::deserialize(&mut de, |path| unknown.push(path.to_string())).map_err(invalid)?;
    de.end().map_err(invalid)?;
    match unknown.first() {
        Some(field) => Err(ApiError::Domain(DomainError::invalid(
            "unknown_field",
            format!("unknown field `{field}` in the request body; nothing was changed"),
        ))),
        None => Ok(value),
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
        let json = is_json(&req);
        let bytes = body_bytes(req, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJson(T::default()));
        }
        if !json {
            return Err(ApiError::UnsupportedMediaType);
        }
        strict_json(&bytes).map(OptionalJson)
    }
}

/// A query-string extractor with the same strictness as [`ApiJson`]: a
/// parameter the call does not take is 422 `unknown_field` (named), a value
/// that does not parse is 422 `invalid_query`, never a silent default.
pub struct ApiQuery<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiQuery<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        strict_query(parts.uri.query().unwrap_or("")).map(ApiQuery)
    }
}

/// For calls that take no query string: any parameter is 422
/// `unknown_field` (named), as it would be where the call takes some.
pub struct NoQuery;

impl<S: Send + Sync> FromRequestParts<S> for NoQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        match form_urlencoded::parse(parts.uri.query().unwrap_or("").as_bytes()).next() {
            Some((name, _)) => Err(ApiError::Domain(DomainError::invalid(
                "unknown_field",
                format!("unknown query parameter `{name}`: this call takes none"),
            ))),
            None => Ok(NoQuery),
        }
    }
}

/// For calls that take no body: none, or an empty JSON object (what many
/// clients send with a POST), is fine; a field is 422 `unknown_field`
/// (named), as anywhere else, so options the call does not take are never
/// dropped without a word.
pub struct NoBody;

#[derive(serde::Deserialize, Default)]
struct Empty {}

impl<S: Send + Sync> axum::extract::FromRequest<S> for NoBody {
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Self::Rejection> {
        OptionalJson::<Empty>::from_request(req, state).await.map(|_| NoBody)
    }
}

/// Parses a query string as `T`, refusing unknown parameters.
pub fn strict_query<T: serde::de::DeserializeOwned>(query: &str) -> Result<T, ApiError> {
    let mut unknown = Vec::new();
    let mut track = serde_path_to_error::Track::new();
    let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
    let value: T = serde_ignored::deserialize(serde_path_to_error::Deserializer::new(de, &mut track), |path| {
        unknown.push(path.to_string())
    })
    .map_err(|e| {
        ApiError::Domain(DomainError::invalid(
            "invalid_query",
            format!("query parameter `{}` does not fit this call: {e}", track.path()),
        ))
    })?;
    match unknown.first() {
        Some(name) => {
            Err(ApiError::Domain(DomainError::invalid("unknown_field", format!("unknown query parameter `{name}`"))))
        }
        None => Ok(value),
    }
}
