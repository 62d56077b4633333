//! The domain's one error type. Edges map it once: the `code` and user
//! message go to the caller, the source of `Db`/`Crypto` only to the log.

use sea_orm::DbErr;

use crate::crypto::CryptoError;

#[derive(Debug, thiserror::Error)]
pub enum DomainError {
    /// Absent, or outside the caller's tenant (the two are indistinguishable
    /// on purpose).
    #[error("not found")]
    NotFound,
    /// The caller's role does not allow this.
    #[error("your role does not allow this action")]
    Forbidden,
    /// The role allows this action in general, but not here; the message
    /// says why (approving a key you created yourself).
    #[error("{message}")]
    Refused { code: &'static str, message: String },
    /// No valid session or token.
    #[error("authentication required")]
    Unauthenticated,
    /// Bad input; the message says what to fix.
    #[error("{message}")]
    Invalid { code: &'static str, message: String },
    /// The request conflicts with stored state; nothing was changed.
    #[error("{message}")]
    Conflict { code: &'static str, message: String },
    /// Too many failed logins.
    #[error("too many failed attempts; try again in {retry_after_secs} s")]
    Throttled { retry_after_secs: i64 },
    /// One caller asked for an expensive action (an export, a drill run)
    /// more often than its budget allows; nothing was done. The message
    /// says which limit and how long to wait.
    #[error("{message}")]
    RateLimited { code: &'static str, message: String, retry_after_secs: i64 },
    #[error("database error")]
    Db(#[from] DbErr),
    #[error("vault error")]
    Crypto(#[from] CryptoError),
}

impl DomainError {
    pub fn invalid(code: &'static str, message: impl Into<String>) -> Self {
        DomainError::Invalid { code, message: message.into() }
    }
    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        DomainError::Conflict { code, message: message.into() }
    }
    /// A change that names only values already stored: refused, so the
    /// caller never reads success as "something changed".
    pub fn nothing_to_change() -> Self {
        DomainError::invalid("nothing_to_change", "every value given is already the stored one; nothing was changed")
    }
    /// How long a refused caller should wait (`Retry-After`), for the two
    /// refusals that are about time.
    pub fn retry_after_secs(&self) -> Option<i64> {
        match self {
            DomainError::Throttled { retry_after_secs } | DomainError::RateLimited { retry_after_secs, .. } => {
                Some((*retry_after_secs).max(1))
            }
            _ => None,
        }
    }
    /// Stable machine-readable code for API bodies and tests.
    pub fn code(&self) -> &'static str {
        match self {
            DomainError::NotFound => "not_found",
            DomainError::Forbidden => "forbidden",
            DomainError::Unauthenticated => "unauthenticated",
            DomainError::Invalid { code, .. }
            | DomainError::Conflict { code, .. }
            | DomainError::Refused { code, .. }
            | DomainError::RateLimited { code, .. } => code,
            DomainError::Throttled { .. } => "throttled",
            DomainError::Db(_) | DomainError::Crypto(_) => "internal",
        }
    }
    /// What may be shown to the caller: never a database or vault detail.
    pub fn public_message(&self) -> String {
        match self {
            DomainError::Db(_) | DomainError::Crypto(_) => "internal error; the server log has details".to_owned(),
            other => other.to_string(),
        }
    }
}

/// An id outside its rule, given as input: 422 with the rule's code and
/// message (`invalid_slug`, `invalid_event_id`, …).
impl From<views::ids::IdError> for DomainError {
    fn from(e: views::ids::IdError) -> Self {
        DomainError::Invalid { code: e.code, message: e.message }
    }
}

pub type DomainResult<T> = Result<T, DomainError>;
