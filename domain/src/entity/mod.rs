//! sea-orm entities, one module a table. Migrations own the schema; these
//! mirror it.

pub mod api_token;
pub mod audit_entry;
pub mod audit_head;
pub mod bulk_release;
pub mod bulk_release_item;
pub mod endpoint;
pub mod event_rollup;
pub mod inbox_claim;
pub mod kek_version;
pub mod key_approval;
pub mod login_throttle;
pub mod outbox_intent;
pub mod quarantine_entry;
pub mod redelivery_horizon;
pub mod reminder;
pub mod replay_record;
pub mod retention_version;
pub mod retry_policy_version;
pub mod session;
pub mod signing_key;
pub mod tenant;
pub mod user;
