//! What Signet shows: the view types that the admin API, the CLI and the
//! console share, the role matrix, and the small enums they carry. Plain
//! data with serde (and OpenAPI schemas behind the `openapi` feature); no
//! database, no runtime, nothing of ours, so the browser build uses the very
//! same types the server sends.

pub mod audit;
pub mod decision;
pub mod events;
pub mod evidence;
pub mod hmac;
pub mod ids;
pub mod integral;
pub mod jobs;
pub mod jobs_overview;
pub mod kek;
pub mod keys;
pub mod onboarding;
#[cfg(feature = "openapi")]
pub mod openapi;
pub mod outbox;
pub mod paging;
pub mod quarantine;
pub mod registry;
pub mod retention;
pub mod retry_policy;
pub mod roles;
pub mod scheme;
pub mod stats;
mod string_enum;
pub mod users;
