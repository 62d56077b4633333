//! Bearer authentication and the one error mapping for the API.

use app::ssr::AppState;
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
        let mut res = (status, Json(ErrorBody { error: self.0.code().to_owned(), message: self.0.public_message() }))
            .into_response();
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
        let json =
            req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| {
                v.split(';').next().is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
            });
        if !json {
            return Err(ApiError(DomainError::invalid(
                "invalid_body",
                "send the body as Content-Type: application/json",
            )));
        }
        strict_json(&body_bytes(req, state).await?).map(ApiJson)
    }
}

/// The whole body (already bounded by `guards::control_body_limit`), or
/// our error format when it cannot be read.
async fn body_bytes<S: Send + Sync>(req: axum::extract::Request, state: &S) -> Result<axum::body::Bytes, ApiError> {
    <axum::body::Bytes as axum::extract::FromRequest<S>>::from_request(req, state)
        .await
        .map_err(|e| ApiError(DomainError::invalid("invalid_body", e.body_text())))
}

/// A `PATCH` naming no field: refused, so the caller does not read the 200
/// as a change.
pub fn nothing_to_change() -> ApiError {
    ApiError(DomainError::invalid("nothing_to_change", "the request names no field to change"))
}

/// Parses `bytes` as `T`, refusing unknown fields at any depth.
pub fn strict_json<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let invalid = |e: serde_json::Error| {
        ApiError(DomainError::invalid("invalid_body", format!("request body is not valid JSON for this call: {e}")))
    };
    let mut unknown = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_ignored::deserialize(&mut de, |path| unknown.push(path.to_string())).map_err(invalid)?;
    de.end().map_err(invalid)?;
    match unknown.first() {
        Some(field) => Err(ApiError(DomainError::invalid(
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
        let bytes = body_bytes(req, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJson(T::default()));
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
            Some((name, _)) => Err(ApiError(DomainError::invalid(
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
        ApiError(DomainError::invalid(
            "invalid_query",
            format!("query parameter `{}` does not fit this call: {e}", track.path()),
        ))
    })?;
    match unknown.first() {
        Some(name) => Err(ApiError(DomainError::invalid("unknown_field", format!("unknown query parameter `{name}`")))),
        None => Ok(value),
    }
}
