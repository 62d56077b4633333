//! Output conventions: with `--json`, one JSON value on stdout; otherwise
//! human text. Errors: one line on stderr.

use serde::Serialize;

/// A CLI failure: a stable code and a one-line message.
#[derive(Debug)]
pub struct CliError {
    pub code: String,
    pub message: String,
}

impl CliError {
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        CliError { code: code.to_owned(), message: message.into() }
    }
}

impl From<domain::DomainError> for CliError {
    fn from(e: domain::DomainError) -> Self {
        if let domain::DomainError::Db(inner) = &e {
            return CliError::new("database", format!("database error: {inner}"));
        }
        CliError::new(e.code(), e.public_message())
    }
}

impl From<crate::config::ConfigError> for CliError {
    fn from(e: crate::config::ConfigError) -> Self {
        CliError::new("config", e.to_string())
    }
}

impl From<sea_orm::DbErr> for CliError {
    fn from(e: sea_orm::DbErr) -> Self {
        CliError::new("database", format!("database error: {e}"))
    }
}

pub fn error(json: bool, e: &CliError) {
    let line = e.message.replace('\n', " ");
    if json {
        eprintln!("{}", serde_json::json!({"error": e.code, "message": line}));
    } else {
        eprintln!("error: {line}");
    }
}

/// Prints `value` as JSON, or `human` as text.
pub fn emit<T: Serialize>(json: bool, value: &T, human: impl FnOnce() -> String) {
    if json {
        match serde_json::to_string(value) {
            Ok(s) => println!("{s}"),
            Err(e) => eprintln!("error: cannot encode output: {e}"),
        }
    } else {
        println!("{}", human());
    }
}
