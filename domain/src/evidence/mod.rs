//! Sign-off evidence (docs/contract.md §5; the sign-off artifact of
//! docs/architecture.md#rollout-order-and-sign-off).
//!
//! - [`drills`] and [`runs`]: the design's test matrix, run on the live
//!   deployment through the real receiver, checked against the database;
//!   [`scheme_drill`] verifies each signature scheme on its own
//!   [`drill_fixture`] endpoint, and each `hmac` profile ([`hmac_drill`]).
//! - [`cohort`]: the live cohort check of tenants with retries enabled.
//! - [`bundle`]: `evidence.json`, read live: credentials and who may touch
//!   them, the constraints in the database catalog ([`catalog`]), the latest
//!   drills, retention, retry policy, metrics, the audit chain, findings.
//! - [`manifest`], [`export`]: the signed manifest, and the record of every
//!   export. The printable page (`evidence.html`) is the `evidence-html`
//!   crate's: the export takes its renderer, and this crate has no HTML.
//! - [`record`]: a stored bundle re-verified, and the sign-off decisions,
//!   as the rollout gate and break-glass read them.
//! - [`identity`], [`durability`], [`files`]: the build, the database's
//!   durability settings and the modes of the files the bundle is bound to.
//! - [`signoff`]: reviewers' decisions on a bundle, and what changed since
//!   the last approval.

pub mod bundle;
pub mod catalog;
pub mod cohort;
pub mod distribution;
pub mod drill_fixture;
pub mod drills;
pub mod durability;
pub mod export;
pub mod files;
pub mod hmac_drill;
pub mod identity;
pub mod manifest;
pub mod record;
pub mod runs;
pub mod scheme_drill;
pub mod signoff;
