//! Domain integration tests, each on SQLite and PostgreSQL.

mod support;

mod audit_chain;
mod auth;
mod bodies;
mod break_glass;
mod bulk_release;
mod cohort_check;
mod distribution;
mod evidence;
mod evidence_binding;
mod findings;
mod fixtures;
mod job_cancel;
mod job_lease;
mod job_resume;
mod kek;
mod keys;
mod operations;
mod ordering;
mod outbox;
mod partitions;
mod purge_order;
mod receiver;
mod registry;
mod release_fixtures;
mod replay_days;
mod retention;
mod rollout;
mod signoff;
mod stats;
mod story;
mod vault;
