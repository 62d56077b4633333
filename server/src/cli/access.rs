//! `signet user` and `signet token`: who may act, and as what.

use std::io::Read;

use domain::{
    auth::{Principal, TenantName, tokens, users},
    crypto::Password,
};
use sea_orm::DatabaseConnection;
use serde_json::json;
use views::roles::Role;

use super::{
    TokenCmd, UserCmd,
    output::{CliError, emit},
};

pub(super) async fn user(json: bool, db: &DatabaseConnection, p: &Principal, cmd: UserCmd) -> Result<(), CliError> {
    match cmd {
        UserCmd::Create { username, role, tenant } => {
            let role = parse_role(&role)?;
            let (password, generated) = read_password_from_stdin()?;
            let u = users::create(
                db,
                p,
                users::NewUser {
                    username,
                    role,
                    tenant: TenantName::given(tenant.as_deref()),
                    password: Password::new(password.to_string()),
                },
            )
            .await?;
            let out = json!({"user": u, "password": generated.as_deref()});
            emit(json, &out, || match &generated {
                Some(pw) => {
                    format!("created {} ({}). Generated password, shown once: {}", u.username, u.role, pw.as_str())
                }
                None => format!("created {} ({})", u.username, u.role),
            });
        }
        UserCmd::List => {
            let us = users::list(db, p).await?;
            emit(json, &us, || {
                us.iter()
                    .map(|u| format!("{}\t{}\t{}", u.username, u.role, u.tenant.as_ref().map_or("-", |t| t.as_str())))
                    .collect::<Vec<_>>()
                    .join("\n")
            });
        }
    }
    Ok(())
}

pub(super) async fn token(json: bool, db: &DatabaseConnection, p: &Principal, cmd: TokenCmd) -> Result<(), CliError> {
    match cmd {
        TokenCmd::Create { name, role, tenant } => {
            let role = parse_role(&role)?;
            let t = tokens::create(db, p, &name, role, TenantName::given(tenant.as_deref()).as_ref()).await?;
            let out = json!({
                "token": t.token.expose(),
                "id": t.view.id,
                "name": t.view.name,
                "role": t.view.role,
                "tenant": t.view.tenant,
            });
            emit(json, &out, || format!("token {} ({}), shown once:\n{}", t.view.name, t.view.role, t.token.expose()));
        }
        TokenCmd::Revoke { token_id } => {
            let t = tokens::revoke(db, p, &token_id).await?;
            emit(json, &t, || format!("revoked token {}", t.id));
        }
        TokenCmd::List => {
            let ts = tokens::list(db, p).await?;
            emit(json, &ts, || {
                ts.iter()
                    .map(|t| {
                        format!(
                            "{}\t{}\t{}\t{}",
                            t.id,
                            t.name,
                            t.role,
                            if t.revoked_at.is_some() { "revoked" } else { "active" }
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            });
        }
    }
    Ok(())
}

fn parse_role(text: &str) -> Result<Role, CliError> {
    Role::parse(text).ok_or_else(|| {
        CliError::new("invalid_role", format!("role must be admin, reviewer, clinic-admin or oncall, got {text:?}"))
    })
}

/// Reads a password from stdin; empty stdin means "generate one".
fn read_password_from_stdin() -> Result<(zeroize::Zeroizing<String>, Option<zeroize::Zeroizing<String>>), CliError> {
    let mut buf = zeroize::Zeroizing::new(String::new());
    if !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        std::io::stdin()
            .read_to_string(&mut buf)
            .map_err(|e| CliError::new("stdin", format!("cannot read password from stdin: {e}")))?;
    }
    let trimmed = zeroize::Zeroizing::new(buf.trim_end_matches(['\r', '\n']).to_owned());
    if trimmed.is_empty() {
        let generated = Password::generate();
        let text = zeroize::Zeroizing::new(generated.expose().to_owned());
        Ok((text.clone(), Some(text)))
    } else {
        Ok((trimmed, None))
    }
}
