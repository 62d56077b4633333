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
mod jobs;
mod listen;
mod metrics;
mod otel;
mod outbox_worker;
mod serve;

use std::process::ExitCode;

/// Every allocation goes through mimalloc (see its entry in Cargo.toml).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args = cli::parse();
    let telemetry = match otel::init(args.is_server(), &args.log_format) {
        Ok(guard) => guard,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(cli::run(args));
    drop(runtime);
    telemetry.shutdown();
    code
}
