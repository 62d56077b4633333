//! Signet's product logic, shared by the server (receiver, API, CLI) and the
//! Leptos server functions. No HTTP and no UI in here.

pub mod audit;
pub mod auth;
pub mod clock;
pub mod crypto;
pub mod db;
pub mod entity;
pub mod error;
pub mod events;
pub mod evidence;
pub mod ids;
pub mod integral;
pub mod kek;
pub mod ops;
pub mod outbox;
pub mod paging;
pub mod receiver;
pub mod registry;
#[cfg(feature = "openapi")]
pub mod schema;
pub mod service_keys;
pub mod startup;
pub mod text;
pub mod vault;

pub use error::{DomainError, DomainResult};
