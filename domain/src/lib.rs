//! Signet's product logic, shared by the server (receiver, API, CLI) and the
//! Leptos server functions. No HTTP and no UI in here.

pub mod audit;
pub mod auth;
pub mod bodies;
pub mod break_glass;
pub mod budget;
pub mod clock;
pub mod clock_offset;
pub mod crypto;
pub mod db;
pub mod entity;
pub mod envelope;
pub mod error;
pub mod events;
pub mod evidence;
pub mod ids;
pub mod job_lease;
pub mod jobs;
pub mod kek;
pub mod onboarding;
pub mod outbox;
pub mod paging;
pub mod quarantine;
pub mod receiver;
pub mod registry;
pub mod replay;
pub mod retention;
pub mod retry_policy;
pub mod rollout;
pub mod service_keys;
pub mod startup;
pub mod stats;
pub mod text;
pub mod vault;

pub use error::{DomainError, DomainResult};

/// The `tracing` target of the spans exported as OpenTelemetry traces (a
/// webhook's verification, claim and answer; an outbox send). The server
/// enables it only while an OTLP exporter runs and never logs it, so with
/// traces off these spans are disabled at their call site and cost nothing.
pub const TRACE_TARGET: &str = "signet_trace";
