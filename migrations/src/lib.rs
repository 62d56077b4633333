//! Signet's schema, one set of migrations for SQLite and PostgreSQL.
//!
//! Each migration declares its own identifiers (a frozen snapshot), so later
//! changes to the domain entities never rewrite history.

pub use sea_orm_migration::prelude::*;

pub mod distribution;
pub mod expected;
pub mod partitioning;

mod m20261202_000001_registry;
mod m20261202_000002_receiver;
mod m20261202_000003_operations;
mod m20261202_000004_outbox_delivery;
mod m20261202_000005_retention;
mod m20261202_000006_hourly_rollups;
mod m20261202_000007_gauge_samples;
mod m20261202_000008_bulk_releases;
mod m20261203_000009_evidence;
mod m20261203_000010_audit_mac;
mod m20261204_000011_hardening;
mod m20261204_000012_edge_cases;
mod m20261204_000013_scope_author;
mod m20261205_000014_audit_verified;
mod m20261205_000015_login_windows;
mod m20261205_000016_kek_seal_counts;
mod m20261205_000017_drill_run_tenant;
mod m20261206_000021_build_identity;
mod m20261206_000031_signoff_integrity;
mod m20261206_000032_manual_resend;
mod m20261206_000051_reminder_state_order;
mod m20261206_000071_rollout_overrides;
mod m20261206_000075_drill_run_schemes;
mod m20261206_000081_delivery_log;
mod m20261206_000091_outbox_trace_context;
mod m20261206_000100_partitioned_logs;
mod m20261206_000110_job_leases;
mod m20261206_000121_tenant_keys;
mod m20261206_000131_public_key_credentials;
mod m20261206_000140_claim_first_answer;
mod m20261206_000150_hmac_profiles;
mod m20261206_000170_job_auto_resume;
mod m20261206_000190_sqlite_tenant_keys;
mod m20261206_000200_claims_sealed_index;
mod m20261207_000210_rollup_totals;
mod m20261207_000220_event_bodies;
mod m20261207_000230_partitioned_replay;

pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20261202_000001_registry::Migration),
            Box::new(m20261202_000002_receiver::Migration),
            Box::new(m20261202_000003_operations::Migration),
            Box::new(m20261202_000004_outbox_delivery::Migration),
            Box::new(m20261202_000005_retention::Migration),
            Box::new(m20261202_000006_hourly_rollups::Migration),
            Box::new(m20261202_000007_gauge_samples::Migration),
            Box::new(m20261202_000008_bulk_releases::Migration),
            Box::new(m20261203_000009_evidence::Migration),
            Box::new(m20261203_000010_audit_mac::Migration),
            Box::new(m20261204_000011_hardening::Migration),
            Box::new(m20261204_000012_edge_cases::Migration),
            Box::new(m20261204_000013_scope_author::Migration),
            Box::new(m20261205_000014_audit_verified::Migration),
            Box::new(m20261205_000015_login_windows::Migration),
            Box::new(m20261205_000016_kek_seal_counts::Migration),
            Box::new(m20261205_000017_drill_run_tenant::Migration),
            Box::new(m20261206_000021_build_identity::Migration),
            Box::new(m20261206_000031_signoff_integrity::Migration),
            Box::new(m20261206_000032_manual_resend::Migration),
            Box::new(m20261206_000051_reminder_state_order::Migration),
            Box::new(m20261206_000071_rollout_overrides::Migration),
            Box::new(m20261206_000075_drill_run_schemes::Migration),
            Box::new(m20261206_000081_delivery_log::Migration),
            Box::new(m20261206_000091_outbox_trace_context::Migration),
            Box::new(m20261206_000100_partitioned_logs::Migration),
            Box::new(m20261206_000110_job_leases::Migration),
            Box::new(m20261206_000121_tenant_keys::Migration),
            Box::new(m20261206_000131_public_key_credentials::Migration),
            Box::new(m20261206_000140_claim_first_answer::Migration),
            Box::new(m20261206_000150_hmac_profiles::Migration),
            Box::new(m20261206_000170_job_auto_resume::Migration),
            Box::new(m20261206_000190_sqlite_tenant_keys::Migration),
            Box::new(m20261206_000200_claims_sealed_index::Migration),
            Box::new(m20261207_000210_rollup_totals::Migration),
            Box::new(m20261207_000220_event_bodies::Migration),
            Box::new(m20261207_000230_partitioned_replay::Migration),
        ]
    }
}
