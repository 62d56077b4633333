//! Integration tests against the real `signet` binary, each on SQLite and
//! PostgreSQL.

mod support;

mod alerts;
mod break_glass;
mod bulk_release;
mod cli;
mod config_check;
mod dashboard;
mod docs;
mod drain;
mod drills;
mod evidence;
mod hmac;
mod hooks;
mod jobs;
mod kek;
mod limits;
mod openapi;
mod ordering;
mod outbox;
mod partitions;
mod rbac;
mod receivers;
mod retention;
mod rollout;
mod secrecy;
mod send_tls;
mod sessions;
mod startup;
mod story;
mod systemd;
mod tenant_filters;
mod test_delivery;
mod traces;
mod v1a;
