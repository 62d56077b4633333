//! One function a command: parse, call one domain function, print.

use domain::auth::Principal;
use serde_json::json;

use super::{
    Cli, Command, DrillCmd,
    open::{open_db, open_vault},
    output::{CliError, emit},
    registry::hmac_profile_arg,
};
use crate::config::ServeArgs;

pub async fn dispatch(cli: Cli) -> Result<(), CliError> {
    let json = cli.json;
    let command = cli.command.unwrap_or_else(|| Command::Serve(default_serve_args()));
    let command = match command {
        Command::Serve(args) => return crate::serve::run(cli.db, args).await.map_err(|e| CliError::new("serve", e)),
        Command::Send {
            url,
            scheme,
            secret,
            file,
            event_id,
            github_event,
            preset,
            profile,
            max_attempts,
            base_delay_ms,
            max_delay_ms,
            ca_cert,
        } => {
            let hmac_profile = hmac_profile_arg(preset, profile)?;
            return super::send::command(
                json,
                url,
                scheme,
                secret,
                file,
                event_id,
                github_event,
                hmac_profile,
                max_attempts,
                base_delay_ms,
                max_delay_ms,
                ca_cert,
            )
            .await;
        }
        other => other,
    };
    let db = open_db(&cli.db).await?;
    // A drill child opens the vault itself and must not print anything else.
    if let Command::Drill(DrillCmd::Child) = command {
        let vault = std::sync::Arc::new(open_vault(&cli.db, &db).await?);
        return crate::drills::child(db, vault).await.map_err(|e| CliError::new("drill_child", e));
    }
    // Every change is audited, and appending to the keyed audit chain needs
    // its key, which opening the vault loads.
    let vault = match command {
        Command::Migrate => None,
        _ => Some(open_vault(&cli.db, &db).await?),
    };
    let cli_principal = Principal::cli();
    let p = &cli_principal;
    match command {
        Command::Drill(cmd) => super::evidence::drill(json, &cli.db, &db, vault, p, cmd).await?,
        Command::Evidence(cmd) => super::evidence::evidence(json, &cli.db, &db, vault, p, cmd).await?,
        Command::Audit(cmd) => super::evidence::audit(json, &db, vault, cmd).await?,
        Command::Event(cmd) => super::event::event(json, &db, vault, p, cmd).await?,
        Command::Serve(_) | Command::Send { .. } | Command::Config(_) => {}
        Command::Migrate => emit(json, &json!({"migrated": true}), || "migrations are up to date".into()),
        Command::Tenant(cmd) => super::registry::tenant(json, &db, p, cmd).await?,
        Command::Endpoint(cmd) => super::registry::endpoint(json, &db, p, cmd).await?,
        Command::Key(cmd) => super::registry::key_command(json, &cli.db, &db, p, cmd).await?,
        Command::User(cmd) => super::access::user(json, &db, p, cmd).await?,
        Command::Token(cmd) => super::access::token(json, &db, p, cmd).await?,
        Command::Kek(cmd) => super::kek::kek(json, &cli.db, &db, p, cmd).await?,
        Command::Jobs => super::jobs::jobs(json, &db, p).await?,
        Command::Quarantine(cmd) => super::quarantine::quarantine(json, &cli.db, &db, p, cmd).await?,
        Command::RetryPolicy(cmd) => super::retry_policy::retry_policy(json, &cli.db, &db, p, cmd).await?,
        Command::Retention(cmd) => super::retention::retention(json, &db, p, cmd).await?,
    }
    Ok(())
}

fn default_serve_args() -> ServeArgs {
    use clap::Parser;
    #[derive(Parser)]
    struct Only {
        #[command(flatten)]
        serve: ServeArgs,
    }
    Only::parse_from(["signet"]).serve
}
