//! Server functions: thin adapters over `domain`. Each one authenticates and
//! lets the domain authorize; none trusts what the page chose to show.
//! Reads are GET; everything that changes state is POST, and the server's
//! Origin check covers every POST under `/fn/`.

pub mod audit;
pub mod events;
pub mod evidence;
#[cfg(feature = "ssr")]
pub mod forms;
pub mod kek;
pub mod keys;
pub mod operations;
pub mod registry;
pub mod retention;
pub mod review;
pub mod session;
pub mod stats;
pub mod users;

use serde::{Deserialize, Serialize};
use server_fn::{ServerFnError, codec::JsonEncoding, error::FromServerFnError};

/// The error every server function returns: a stable code and a message
/// fit to show the user.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct AppError {
    pub code: String,
    pub message: String,
}

impl AppError {
    pub fn new(code: &str, message: &str) -> Self {
        AppError { code: code.to_owned(), message: message.to_owned() }
    }
}

impl FromServerFnError for AppError {
    type Encoder = JsonEncoding;

    fn from_server_fn_error(value: server_fn::error::ServerFnErrorErr) -> Self {
        AppError::new("request_failed", &value.to_string())
    }
}

impl From<ServerFnError> for AppError {
    fn from(e: ServerFnError) -> Self {
        AppError::new("request_failed", &e.to_string())
    }
}

/// Splits a comma/space separated form field into a list.
pub fn split_list(text: &str) -> Vec<String> {
    text.split([',', ' ', '\n']).map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect()
}

/// Parses an optional numeric form field, with a clear error.
pub fn parse_opt_i64(field: &str, text: &Option<String>) -> Result<Option<i64>, AppError> {
    match text.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(s) => {
            s.parse().map(Some).map_err(|_| AppError::new("invalid_number", &format!("{field} must be a whole number")))
        }
    }
}
