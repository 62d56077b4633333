//! `signet`: the webhook receiver, its admin console and API, and the
//! operator CLI, in one binary. `signet` alone means `signet serve`.

#![recursion_limit = "256"]

mod anchor;
mod cli;
mod config;
mod config_check;
mod drills;
mod egress;
mod http;
mod listen;
mod metrics;
mod outbox_worker;
mod purge_task;
mod serve;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args = cli::parse();
    init_tracing(args.is_server());
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(cli::run(args))
}

/// Logs go to stderr (stdout is reserved for command output and `--json`).
/// The server logs at info; CLI commands only warn, so a failing command's
/// stderr is its one error line. Never a secret, a password or a payload:
/// callers choose fields.
fn init_tracing(server: bool) {
    let default = if server { "info,sqlx=warn,sea_orm=warn,sea_orm_migration=warn" } else { "warn" };
    let filter = tracing_subscriber::EnvFilter::try_from_env("SIGNET_LOG")
        .or_else(|_| tracing_subscriber::EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
}
