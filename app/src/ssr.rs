//! Server-side glue for the server functions: shared state, who is asking,
//! error mapping and DTO conversions. Compiled only with `ssr`.

pub mod client_addr;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use domain::{
    DomainError,
    auth::{
        Principal,
        sessions::{Activity, SessionPolicy},
    },
    crypto::{SigningSecret, sha256_hex},
    vault::Vault,
};
use http::{header, request::Parts};
use leptos::prelude::*;
use leptos_axum::ResponseOptions;
use sea_orm::DatabaseConnection;

use crate::{api::AppError, dto};

/// Cookie carrying the session token.
pub const SESSION_COOKIE: &str = "signet_session";
/// The name when cookies are `Secure`: the `__Host-` prefix makes browsers
/// refuse it unless it is Secure, host-only and `Path=/`, so a sibling
/// subdomain cannot plant a session.
pub const SECURE_SESSION_COOKIE: &str = "__Host-signet_session";

/// The session cookie's name for this deployment.
pub fn session_cookie_name(secure: bool) -> &'static str {
    if secure { SECURE_SESSION_COOKIE } else { SESSION_COOKIE }
}

/// Whether cookies are `Secure`: always, unless the public URL is
/// explicitly plain http on the loopback name or address (development).
pub fn cookies_secure(public_url: &str) -> bool {
    let Some(rest) = public_url.strip_prefix("http://") else { return true };
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = host
        .rsplit_once(':')
        .filter(|(h, port)| !h.is_empty() && port.bytes().all(|b| b.is_ascii_digit()))
        .map_or(host, |(h, _)| h);
    !matches!(host, "localhost" | "127.0.0.1" | "[::1]")
}

/// What the console's server functions need, and the server shares with its
/// own handlers (`/api/v1`, evidence downloads). Built once in `serve` from
/// the configuration; the server's router state (`server::http::state`)
/// holds it and puts it in every server function's context.
#[derive(Clone)]
pub struct SharedState {
    pub db: DatabaseConnection,
    pub vault: Arc<Vault>,
    pub sessions: SessionPolicy,
    /// Set the cookie's `Secure` flag and `__Host-` name: always, except
    /// for a plain-http loopback public URL ([`cookies_secure`]).
    pub secure_cookies: bool,
    pub reveals: Arc<RevealStore<SigningSecret>>,
    /// Quarantined bodies decrypted by a POST, waiting for the page it
    /// redirects to (see `api::operations::reveal_quarantine_body`).
    pub body_views: Arc<RevealStore<views::quarantine::RevealedBody>>,
    pub setup: Arc<SetupToken>,
    /// Fields masked when a quarantined body is shown.
    pub redaction: Arc<domain::quarantine::redact::Redaction>,
    /// When a silent bulk-release runner counts as interrupted.
    pub bulk_stale_ms: i64,
    /// When a silent KEK rewrap runner counts as interrupted
    /// (`SIGNET_KEK_STALE_SECS`, the automatic resume's threshold too).
    pub kek_stale_ms: i64,
    /// How recent a passing drill run must be to enable retries
    /// (`SIGNET_ROLLOUT_DRILL_MAX_AGE_DAYS`).
    pub rollout_drill_max_age_days: u32,
    /// Test fault points (`SIGNET_FAULTS`, debug builds), read once at start.
    pub faults: domain::receiver::faults::Faults,
    /// The receiver `/hooks` runs, for test deliveries (`domain::onboarding`).
    pub receiver: Arc<domain::receiver::Receiver>,
    /// The URL people use (`SIGNET_PUBLIC_URL`), for the `/hooks` URLs shown
    /// to providers.
    pub public_url: String,
    /// Runs started drill runs in the background (the server owns how
    /// drills reach its receiver).
    pub drills: Arc<dyn domain::evidence::runs::DrillSpawner>,
    /// Per-caller budgets for expensive calls (429 beyond them).
    pub budgets: Arc<domain::budget::Budgets>,
    /// Reverse proxies whose forwarding headers name the client
    /// (`SIGNET_TRUSTED_PROXIES`).
    pub trusted_proxies: Arc<client_addr::TrustedProxies>,
}

impl SharedState {
    /// What the rollout gate needs from this process.
    pub fn rollout(&self) -> domain::rollout::Rollout<'_> {
        domain::rollout::Rollout { vault: &self.vault, drill_max_age_days: self.rollout_drill_max_age_days }
    }
}

/// What is shown once, right after the POST that produced it: a new key's
/// secret after provision or rotation, a quarantined body after the request
/// that decrypted it. A form post (with or without JavaScript) ends in a
/// redirect, so the value cannot travel in the response; it waits here, in
/// memory only, bound to the session that created it, for at most the
/// store's time to live, and the page after the redirect takes it.
pub struct RevealStore<T> {
    items: Mutex<HashMap<String, Reveal<T>>>,
    ttl: Duration,
    /// Held at most; a new value evicts the oldest beyond it.
    cap: usize,
}

struct Reveal<T> {
    session_digest: String,
    /// What the value belongs to (a key id, a quarantine entry id).
    subject: String,
    value: T,
    created: Instant,
}

/// The signing-secret store: ten minutes, unbounded (a key's secret that is
/// dropped unseen can only be rotated).
impl<T> Default for RevealStore<T> {
    fn default() -> Self {
        Self::new(Duration::from_secs(600), usize::MAX)
    }
}

impl<T> RevealStore<T> {
    pub fn new(ttl: Duration, cap: usize) -> Self {
        RevealStore { items: Mutex::default(), ttl, cap }
    }

    /// Stores a value; returns the one-time handle for the page that shows it.
    pub fn put(&self, session_token: &str, subject: &str, value: T) -> String {
        let handle = domain::crypto::random_token("").expose().to_owned();
        let mut items = self.items.lock().unwrap_or_else(|p| p.into_inner());
        items.retain(|_, r| r.created.elapsed() < self.ttl);
        while items.len() >= self.cap {
            let Some(oldest) = items.iter().min_by_key(|(_, r)| r.created).map(|(h, _)| h.clone()) else { break };
            items.remove(&oldest);
        }
        items.insert(
            handle.clone(),
            Reveal {
                session_digest: sha256_hex(session_token.as_bytes()),
                subject: subject.to_owned(),
                value,
                created: Instant::now(),
            },
        );
        handle
    }

    /// Removes and returns the value (with its subject) if it belongs to this
    /// session and has not expired. A second call returns `None`. Another
    /// session's request (a guessed or leaked handle) removes nothing: the
    /// owner still gets it.
    pub fn take(&self, session_token: &str, handle: &str) -> Option<(String, T)> {
        let mut items = self.items.lock().unwrap_or_else(|p| p.into_inner());
        let mine = items.get(handle).is_some_and(|r| {
            domain::crypto::constant_time_eq(
                r.session_digest.as_bytes(),
                sha256_hex(session_token.as_bytes()).as_bytes(),
            )
        });
        if !mine {
            return None;
        }
        let r = items.remove(handle)?;
        (r.created.elapsed() < self.ttl).then_some((r.subject, r.value))
    }
}

/// The one-time bootstrap token, printed at start while no user exists.
#[derive(Default)]
pub struct SetupToken {
    digest: Mutex<Option<String>>,
}

impl SetupToken {
    /// Mints a new token (replacing any previous one) and returns it.
    pub fn mint(&self) -> String {
        let t = domain::crypto::random_token("setup_");
        *self.digest.lock().unwrap_or_else(|p| p.into_inner()) = Some(t.digest().to_owned());
        t.expose().to_owned()
    }
    pub fn matches(&self, token: &str) -> bool {
        let guard = self.digest.lock().unwrap_or_else(|p| p.into_inner());
        guard
            .as_deref()
            .is_some_and(|d| domain::crypto::constant_time_eq(d.as_bytes(), sha256_hex(token.as_bytes()).as_bytes()))
    }
    pub fn consume(&self) {
        *self.digest.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

pub fn state() -> Result<SharedState, AppError> {
    use_context::<SharedState>().ok_or_else(|| AppError::new("internal", "server state missing"))
}

fn parts() -> Option<Parts> {
    use_context::<Parts>()
}

/// The session token from the request's cookie, if any.
pub fn session_token() -> Option<String> {
    let secure = use_context::<SharedState>()?.secure_cookies;
    session_token_in(&parts()?.headers, secure)
}

/// The session token in these request headers, if any (for plain axum
/// routes of the console, such as evidence downloads).
pub fn session_token_in(headers: &http::HeaderMap, secure: bool) -> Option<String> {
    cookie_in(headers, session_cookie_name(secure))
}

fn cookie_in(headers: &http::HeaderMap, name: &str) -> Option<String> {
    for value in headers.get_all(header::COOKIE) {
        let Ok(text) = value.to_str() else { continue };
        for c in cookie::Cookie::split_parse(text).flatten() {
            if c.name() == name {
                return Some(c.value().to_owned());
            }
        }
    }
    None
}

/// Refuses unless this call is the request itself: a POST to `/fn/…`, which
/// the server's Origin check guards. A server function that decrypts calls
/// this first, so no page rendered for a GET can run it.
pub fn require_post() -> Result<(), AppError> {
    let direct = parts().is_some_and(|p| p.method == http::Method::POST && p.uri.path().starts_with("/fn/"));
    if direct { Ok(()) } else { Err(AppError::new("post_required", "this action runs only from its form")) }
}

/// The signed-in principal, or `Unauthenticated`.
pub async fn principal() -> Result<Principal, AppError> {
    maybe_principal().await?.ok_or_else(|| AppError::from(DomainError::Unauthenticated))
}

/// The server state and the signed-in principal: what nearly every server
/// function starts with.
pub async fn request() -> Result<(SharedState, Principal), AppError> {
    Ok((state()?, principal().await?))
}

/// [`request`] for a server function a page polls (see [`polled_principal`]).
pub async fn polled_request(auto: Option<bool>) -> Result<(SharedState, Principal), AppError> {
    Ok((state()?, polled_principal(auto).await?))
}

/// [`principal`] for a server function a page polls: with `auto` set (the
/// page's own refresh, not the person) the request does not keep an idle
/// session alive.
pub async fn polled_principal(auto: Option<bool>) -> Result<Principal, AppError> {
    let activity = if auto == Some(true) { Activity::Background } else { request_activity() };
    principal_with(activity).await?.ok_or_else(|| AppError::from(DomainError::Unauthenticated))
}

/// Like [`principal`] but `None` when nobody is signed in (without marking
/// the response as an error: pages use this to decide where to send you).
pub async fn maybe_principal() -> Result<Option<Principal>, AppError> {
    principal_with(request_activity()).await
}

async fn principal_with(activity: Activity) -> Result<Option<Principal>, AppError> {
    let st = state()?;
    let Some(token) = session_token() else { return Ok(None) };
    match domain::auth::sessions::authenticate(&st.db, st.sessions, &token, domain::clock::now_ms(), activity).await {
        Ok(p) => Ok(Some(p)),
        Err(DomainError::Unauthenticated) => Ok(None),
        Err(e) => Err(AppError::from(e)),
    }
}

/// A page that refreshes itself asks for `?auto=1` (its meta refresh) or
/// passes `auto=true` (its polls): such requests are
/// [`Activity::Background`]; everything else is the person at work.
fn request_activity() -> Activity {
    let background = parts().is_some_and(|p| is_background_query(p.uri.query().unwrap_or("")));
    if background { Activity::Background } else { Activity::User }
}

/// Whether a query string carries `auto=1` or `auto=true`.
pub fn is_background_query(query: &str) -> bool {
    query.split('&').any(|pair| matches!(pair, "auto=1" | "auto=true"))
}

/// Cookie remembering a browser the account signed in from (see
/// `domain::auth::throttle`): it exempts that browser from the account-wide
/// lock, never from its own.
pub const DEVICE_COOKIE: &str = "signet_device";
pub const SECURE_DEVICE_COOKIE: &str = "__Host-signet_device";
/// How long a browser keeps its device token.
pub const DEVICE_COOKIE_DAYS: i64 = 180;

/// The device token from the request's cookie, if any.
pub fn device_token() -> Option<String> {
    let secure = use_context::<SharedState>()?.secure_cookies;
    cookie_in(&parts()?.headers, if secure { SECURE_DEVICE_COOKIE } else { DEVICE_COOKIE })
}

/// Sets the device cookie on the response.
pub fn set_device_cookie(token: &str, secure: bool) {
    let c = cookie::Cookie::build((if secure { SECURE_DEVICE_COOKIE } else { DEVICE_COOKIE }, token.to_owned()))
        .path("/")
        .http_only(true)
        .same_site(cookie::SameSite::Strict)
        .secure(secure)
        .max_age(cookie::time::Duration::days(DEVICE_COOKIE_DAYS));
    if let (Some(res), Ok(v)) = (use_context::<ResponseOptions>(), http::HeaderValue::from_str(&c.build().to_string()))
    {
        res.append_header(header::SET_COOKIE, v);
    }
}

/// The client's address for login throttling: the socket peer, or what a
/// trusted proxy's forwarding header names ([`client_addr`]). A trusted
/// proxy's header that cannot be read refuses the request (400
/// `forwarding_invalid`) rather than charging the proxy's own address,
/// which every browser behind it shares.
pub fn client_ip() -> Result<String, AppError> {
    let Some((parts, st)) = parts().zip(use_context::<SharedState>()) else { return Ok("unknown".to_owned()) };
    let Some(peer) = parts.extensions.get::<axum::extract::ConnectInfo<std::net::SocketAddr>>().map(|c| c.0.ip())
    else {
        return Ok("unknown".to_owned());
    };
    match client_addr::client_addr(peer, &parts.headers, &st.trusted_proxies) {
        Ok(ip) => Ok(ip.to_string()),
        Err(e) => {
            tracing::warn!(peer = %peer, error = %e, "sign-in refused: a trusted proxy's forwarding header");
            if !is_form_post()
                && let Some(res) = use_context::<ResponseOptions>()
            {
                res.set_status(http::StatusCode::BAD_REQUEST);
            }
            Err(AppError::new(
                "forwarding_invalid",
                "the reverse proxy's forwarding header could not be read; the operator must fix the proxy",
            ))
        }
    }
}

/// A plain HTML form post (JavaScript off): errors travel in the redirect
/// URL, so the status code must stay a redirect.
fn is_form_post() -> bool {
    parts()
        .and_then(|p| p.headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).map(|v| v.contains("text/html")))
        .unwrap_or(false)
}

/// A domain refusal as the page shows it, mapped once: a status for
/// API-style callers, a public message for everyone, the detail only to the
/// log. (Here rather than beside `AppError`: the mapping is server-side.)
impl From<DomainError> for AppError {
    fn from(e: DomainError) -> Self {
        let status = match &e {
            DomainError::NotFound => 404,
            DomainError::Forbidden | DomainError::Refused { .. } => 403,
            DomainError::Unauthenticated => 401,
            DomainError::Invalid { .. } => 422,
            DomainError::Conflict { .. } => 409,
            DomainError::Throttled { .. } | DomainError::RateLimited { .. } => 429,
            DomainError::Db(err) => {
                tracing::error!(error = %err, "database error in a server function");
                500
            }
            DomainError::Crypto(err) => {
                tracing::error!(error = %err, "vault error in a server function");
                500
            }
        };
        if !is_form_post()
            && let Some(res) = use_context::<ResponseOptions>()
        {
            res.set_status(http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR));
            if let Some(secs) = e.retry_after_secs() {
                res.insert_header(header::RETRY_AFTER, http::HeaderValue::from(secs));
            }
        }
        AppError::new(e.code(), &e.public_message())
    }
}

/// Sets or clears the session cookie on the response.
pub fn set_session_cookie(token: Option<&str>, secure: bool, max_age_secs: i64) {
    let mut c = cookie::Cookie::build((session_cookie_name(secure), token.unwrap_or("").to_owned()))
        .path("/")
        .http_only(true)
        .same_site(cookie::SameSite::Strict)
        .secure(secure);
    c = if token.is_some() {
        c.max_age(cookie::time::Duration::seconds(max_age_secs))
    } else {
        c.max_age(cookie::time::Duration::ZERO)
    };
    if let (Some(res), Ok(v)) = (use_context::<ResponseOptions>(), http::HeaderValue::from_str(&c.build().to_string()))
    {
        res.append_header(header::SET_COOKIE, v);
    }
}

/// The DTO for the signed-in principal.
pub async fn me_dto(p: &Principal) -> Result<dto::Me, AppError> {
    let st = state()?;
    let tenant = match &p.tenant_id {
        Some(id) => domain::registry::tenants::list(&st.db, p)
            .await
            .map_err(AppError::from)?
            .into_iter()
            .find(|t| &t.id == id)
            .map(|t| t.slug.into_string()),
        None => None,
    };
    Ok(dto::Me { username: p.actor.name().to_owned(), role: p.role, tenant })
}

#[cfg(test)]
mod tests {
    /// A one-time secret is taken only by the session that created it; a
    /// request from another session removes nothing.
    #[test]
    fn reveal_is_taken_only_by_its_own_session() {
        let store = super::RevealStore::default();
        let handle = store.put("session-a", "key-1", domain::crypto::SigningSecret::generate());
        assert!(store.take("session-b", &handle).is_none());
        let (key, _) = store.take("session-a", &handle).expect("the owner still gets it");
        assert_eq!(key, "key-1");
        assert!(store.take("session-a", &handle).is_none(), "shown once");
    }

    /// Only the request itself, a POST to a server function (behind the
    /// Origin check), may decrypt: never a page being rendered for a GET.
    #[test]
    fn only_a_post_to_a_server_function_may_decrypt() {
        use leptos::prelude::{Owner, provide_context};
        let with_request = |req: http::Request<()>| {
            let owner = Owner::new();
            owner.with(|| {
                provide_context(req.into_parts().0);
                super::require_post().is_ok()
            })
        };
        assert!(Owner::new().with(|| super::require_post().is_err()), "no request at all");
        assert!(!with_request(http::Request::get("/quarantine/q-1?body=show").body(()).unwrap()));
        assert!(!with_request(http::Request::get("/fn/reveal_quarantine_body?id=q-1").body(()).unwrap()));
        assert!(!with_request(http::Request::post("/quarantine/q-1").body(()).unwrap()));
        assert!(with_request(http::Request::post("/fn/reveal_quarantine_body").body(()).unwrap()));
    }

    /// The body store holds few values, briefly: a full store drops its
    /// oldest, and an expired value is never handed out.
    #[test]
    fn a_bounded_store_drops_its_oldest_and_expired_values() {
        use std::time::Duration;
        let store = super::RevealStore::new(Duration::from_secs(60), 2);
        let first = store.put("s", "q-1", 1);
        std::thread::sleep(Duration::from_millis(2));
        let second = store.put("s", "q-2", 2);
        std::thread::sleep(Duration::from_millis(2));
        let third = store.put("s", "q-3", 3);
        assert!(store.take("s", &first).is_none(), "evicted");
        assert_eq!(store.take("s", &second), Some(("q-2".to_owned(), 2)));
        assert_eq!(store.take("s", &third), Some(("q-3".to_owned(), 3)));
        let expired = super::RevealStore::new(Duration::ZERO, 8);
        let handle = expired.put("s", "q-1", 1);
        assert!(expired.take("s", &handle).is_none());
    }

    #[test]
    fn cookies_are_secure_unless_the_public_url_is_plain_http_on_loopback() {
        use super::cookies_secure;
        for insecure in ["http://localhost:3000", "http://127.0.0.1:3101/", "http://localhost", "http://[::1]:8080"] {
            assert!(!cookies_secure(insecure), "{insecure}");
        }
        for secure in [
            "https://signet.example",
            "https://localhost:3000",
            "http://0.0.0.0:3000",
            "http://signet.internal:3000",
            "http://127.0.0.1.evil.example",
            "http://localhost.evil.example:80",
            "HTTP://example",
            "",
        ] {
            assert!(cookies_secure(secure), "{secure}");
        }
    }
}
