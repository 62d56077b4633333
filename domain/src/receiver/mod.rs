//! Webhook intake: `POST /hooks/{tenant}/{endpoint}` (docs/contract.md §3).
//!
//! Threat model notes:
//! - Tenant identity comes from the URL path and the credential that
//!   verified, never from the payload. An envelope naming another tenant is
//!   refused.
//! - Verify, then parse: the body is only interpreted after a signature from
//!   the endpoint's accepted key set matched the exact received bytes.
//!   Comparison is constant-time; every candidate signature and key is tried.
//! - Nothing from a request refused at gates 1–6 or 8 is stored but a
//!   delivery-log row (time, answer, key id, scheme and the event id it
//!   names: `claim::log`), a counter and a log line with reason, tenant,
//!   endpoint and key id at most.
//! - Exactly one effect per event: the claim `(tenant, endpoint, event id)` is
//!   decided by the primary key inside the same transaction as the replay
//!   record, the business effect and the outbox intents; the caller answers
//!   only after commit. A duplicate repeats nothing.
#![deny(clippy::unwrap_used, clippy::expect_used)]

//!
//! Where a webhook goes: [`gates::receive`] runs gates 1–5 (`cache`,
//! `verify`), decides gates 7 and 8 (`admission`), and hands the result to
//! the one claim interface (`claim`), which runs gates 6 and 9 in a group
//! commit (`claim::batch`) or alone (`claim::single`), with the effect
//! (`effects`) in the same transaction.

mod admission;
mod attribution;
pub mod cache;
mod claim;
pub mod effects;
pub mod faults;
pub mod gates;
pub mod outcome;
pub mod telemetry;
pub mod verify;

pub use claim::{BatchStats, DeliveryLogStats, Rollbacks, Traffic};
pub use gates::{Buffered, Delivery, Receipt, Receiver, TestDeliveries, address, receive, rehearse};
pub use outcome::{Outcome, Refusal};
