//! Integration tests against the real `signet` binary, each on SQLite and
//! PostgreSQL.

mod support;

mod cli;
mod hooks;
mod outbox;
mod rbac;
mod secrecy;
mod startup;
