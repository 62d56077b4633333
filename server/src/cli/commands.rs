//! One function a command: parse, call one domain function, print.

use std::io::Read;

use domain::{
    auth::{Principal, Role, tokens, users},
    crypto::Password,
    registry::{
        endpoints::{self, NewEndpoint},
        keys::{self, Approval, CredentialKind, KeyFilter, ProvisionRequest, ProvisionedKey},
        tenants::{self, NewTenant},
    },
    vault::Vault,
};
use sea_orm::DatabaseConnection;
use serde_json::json;

use super::{
    Cli, Command, DrillCmd, EndpointCmd, KekCmd, KeyCmd, QuarantineCmd, RetentionCmd, RetryPolicyCmd, TenantCmd,
    TokenCmd, UserCmd,
    output::{CliError, emit},
};
use crate::config::{DbArgs, ServeArgs};

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
            return send(
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
        Command::Tenant(TenantCmd::Create { tenant, name, notify_url }) => {
            let t = tenants::create(&db, p, NewTenant { slug: tenant, name, notify_url }).await?;
            emit(json, &t, || format!("created tenant {} ({})", t.slug, t.name));
        }
        Command::Tenant(TenantCmd::List) => {
            let ts = tenants::list(&db, p).await?;
            emit(json, &ts, || ts.iter().map(|t| format!("{}\t{}", t.slug, t.name)).collect::<Vec<_>>().join("\n"));
        }
        Command::Endpoint(EndpointCmd::Create {
            tenant,
            endpoint,
            scheme,
            event_types,
            tolerance_secs,
            max_body_bytes,
            preset,
            profile,
        }) => {
            let scheme = domain::registry::parse_scheme(&scheme)?;
            let hmac_profile = hmac_profile_arg(preset, profile)?;
            let event_types = listed(event_types);
            let e = endpoints::create(
                &db,
                p,
                &tenant,
                NewEndpoint {
                    slug: endpoint,
                    scheme,
                    event_types,
                    tolerance_secs: Some(tolerance_secs),
                    max_body_bytes: Some(max_body_bytes),
                    hmac_profile,
                },
            )
            .await?;
            emit(json, &e, || {
                format!(
                    "created endpoint {}/{} ({}); receive at /hooks/{}/{}",
                    e.tenant, e.slug, e.scheme, e.tenant, e.slug
                )
            });
        }
        Command::Endpoint(EndpointCmd::List { tenant }) => {
            let es = endpoints::list(&db, p, &tenant).await?;
            emit(json, &es, || {
                es.iter()
                    .map(|e| format!("{}\t{}\t{}", e.slug, e.scheme, e.event_types.join(",")))
                    .collect::<Vec<_>>()
                    .join("\n")
            });
        }
        Command::Endpoint(EndpointCmd::EventKey { tenant, endpoint, fields, none, reason }) => {
            use domain::registry::event_key;
            let v = if fields.is_some() || none {
                let reason = reason.ok_or_else(|| {
                    CliError::new("reason_required", "a change of the event key needs --reason <text>")
                })?;
                event_key::set(&db, p, &tenant, &endpoint, fields, &reason).await?
            } else {
                event_key::get(&db, p, &tenant, &endpoint).await?
            };
            emit(json, &v, || match &v.fields {
                Some(f) => {
                    format!("{}/{}: events without an id are identified by {}", v.tenant, v.endpoint, f.join(" + "))
                }
                None => format!("{}/{}: events without an id are quarantined (missing_event_id)", v.tenant, v.endpoint),
            });
        }
        Command::Key(cmd) => key_command(json, &cli.db, &db, p, cmd).await?,
        Command::User(UserCmd::Create { username, role, tenant }) => {
            let role = parse_role(&role)?;
            let (password, generated) = read_password_from_stdin()?;
            let u = users::create(
                &db,
                p,
                users::NewUser { username, role, tenant, password: Password::new(password.to_string()) },
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
        Command::User(UserCmd::List) => {
            let us = users::list(&db, p).await?;
            emit(json, &us, || {
                us.iter()
                    .map(|u| format!("{}\t{}\t{}", u.username, u.role, u.tenant.as_deref().unwrap_or("-")))
                    .collect::<Vec<_>>()
                    .join("\n")
            });
        }
        Command::Token(TokenCmd::Create { name, role, tenant }) => {
            let role = parse_role(&role)?;
            let t = tokens::create(&db, p, &name, role, tenant.as_deref()).await?;
            let out = json!({
                "token": t.token.expose(),
                "id": t.view.id,
                "name": t.view.name,
                "role": t.view.role,
                "tenant": t.view.tenant,
            });
            emit(json, &out, || format!("token {} ({}), shown once:\n{}", t.view.name, t.view.role, t.token.expose()));
        }
        Command::Token(TokenCmd::Revoke { token_id }) => {
            let t = tokens::revoke(&db, p, &token_id).await?;
            emit(json, &t, || format!("revoked token {}", t.id));
        }
        Command::Token(TokenCmd::List) => {
            let ts = tokens::list(&db, p).await?;
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
        Command::Kek(cmd) => kek(json, &cli.db, &db, p, cmd).await?,
        Command::Quarantine(cmd) => quarantine(json, &cli.db, &db, p, cmd).await?,
        Command::RetryPolicy(cmd) => retry_policy(json, &cli.db, &db, p, cmd).await?,
        Command::Retention(cmd) => retention(json, &db, p, cmd).await?,
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn send(
    json: bool,
    url: String,
    scheme: String,
    secret: String,
    file: Option<std::path::PathBuf>,
    event_id: Option<String>,
    github_event: Option<String>,
    hmac_profile: Option<domain::registry::hmac_profile::HmacProfileBody>,
    max_attempts: u32,
    base_delay_ms: u64,
    max_delay_ms: u64,
    ca_cert: Option<std::path::PathBuf>,
) -> Result<(), CliError> {
    use super::send::{SendArgs, run};
    let ca_pem = match &ca_cert {
        Some(path) => Some(
            std::fs::read(path)
                .map_err(|e| CliError::new("ca_cert", format!("cannot read {}: {e}", path.display())))?,
        ),
        None => None,
    };
    let scheme = domain::registry::parse_scheme(&scheme)?;
    let profile = match (scheme, hmac_profile) {
        (domain::registry::Scheme::Hmac, Some(body)) => Some(domain::registry::hmac_profile::resolve(&body)?.0),
        (domain::registry::Scheme::Hmac, None) => {
            return Err(CliError::new("invalid_hmac_profile", "scheme hmac needs --preset or --profile"));
        }
        (_, Some(_)) => {
            return Err(CliError::new("invalid_hmac_profile", "--preset and --profile are for scheme hmac only"));
        }
        (_, None) => None,
    };
    let secret = domain::crypto::SigningSecret::parse(&secret)
        .ok_or_else(|| CliError::new("invalid_secret", "the secret is empty"))?;
    let body = match &file {
        Some(path) => {
            std::fs::read(path).map_err(|e| CliError::new("file", format!("cannot read {}: {e}", path.display())))?
        }
        None => {
            let mut buf = Vec::new();
            std::io::stdin()
                .read_to_end(&mut buf)
                .map_err(|e| CliError::new("stdin", format!("cannot read the body from stdin: {e}")))?;
            buf
        }
    };
    let event_id = event_id.unwrap_or_else(|| format!("msg_{}", uuid::Uuid::new_v4().simple()));
    let args = SendArgs {
        url,
        scheme,
        secret,
        body,
        event_id,
        github_event,
        profile,
        max_attempts,
        base_delay: std::time::Duration::from_millis(base_delay_ms),
        max_delay: std::time::Duration::from_millis(max_delay_ms),
        ca_pem,
    };
    let report = run(args, |a| {
        let status = a.status.map(|s| s.to_string()).unwrap_or_else(|| "no answer".into());
        let then = match (a.next, a.wait_ms) {
            ("retry", Some(ms)) => format!("retrying in {:.1} s", ms as f64 / 1000.0),
            ("done", _) => "delivered".into(),
            _ => "giving up".into(),
        };
        // Progress goes to stderr so `--json` keeps stdout to one value.
        eprintln!("attempt {}: {status} {} → {then}", a.attempt, a.response.trim());
    })
    .await?;
    let delivered = report.delivered;
    emit(json, &report, || {
        if delivered {
            format!("delivered {} after {} attempt(s)", report.event_id, report.attempts.len())
        } else {
            format!("not delivered after {} attempt(s)", report.attempts.len())
        }
    });
    if delivered { Ok(()) } else { Err(CliError::new("not_delivered", "the receiver did not accept the webhook")) }
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

async fn quarantine(
    json: bool,
    args: &DbArgs,
    db: &DatabaseConnection,
    p: &Principal,
    cmd: QuarantineCmd,
) -> Result<(), CliError> {
    use domain::quarantine::{self, QuarantineFilter};
    let done =
        |v: &quarantine::QuarantineView| format!("{} {} ({}/{} {})", v.status, v.id, v.tenant, v.endpoint, v.event_id);
    match cmd {
        QuarantineCmd::List { tenant, reason, status } => {
            let l = quarantine::list(
                db,
                p,
                &QuarantineFilter { tenant, reason, status, limit: Some(500), ..Default::default() },
            )
            .await?;
            emit(json, &l, || {
                let mut lines = vec![format!("{} matching", l.total)];
                lines.extend(l.items.iter().map(|q| {
                    format!("{}  {}  {}/{}  {}  {}", q.quarantined_at, q.id, q.tenant, q.endpoint, q.event_id, q.reason)
                }));
                lines.join("\n")
            });
        }
        QuarantineCmd::Release { id, reason } => {
            let vault = open_vault(args, db).await?;
            let v = quarantine::release(db, &vault, p, &id, &reason).await?;
            emit(json, &v, || done(&v));
        }
        QuarantineCmd::Discard { id, reason } => {
            let v = quarantine::discard(db, p, &id, &reason).await?;
            emit(json, &v, || done(&v));
        }
    }
    Ok(())
}

async fn retry_policy(
    json: bool,
    args: &DbArgs,
    db: &DatabaseConnection,
    p: &Principal,
    cmd: RetryPolicyCmd,
) -> Result<(), CliError> {
    use domain::{
        break_glass::{self, RolloutOverrideView, SetOutcome},
        retry_policy,
        rollout::Rollout,
    };
    let show =
        |v: &retry_policy::RetryPolicyView| format!("{}: retries {} (version {})", v.tenant, v.policy, v.version);
    let line = |o: &RolloutOverrideView| {
        format!("{}\t{}\t{}\t{}\t{}", o.id, o.status, o.requested_by, o.created_at, o.override_reason)
    };
    match cmd {
        RetryPolicyCmd::Show { tenant } => {
            let v = retry_policy::get(db, p, &tenant).await?;
            emit(json, &v, || show(&v));
        }
        RetryPolicyCmd::Set { tenants, policy, reason, override_reason: Some(why), rollout } => {
            let [tenant] = tenants.as_slice() else {
                return Err(CliError::new(
                    "override_per_tenant",
                    "break-glass is per tenant: name exactly one tenant with --override-reason",
                ));
            };
            let vault = open_vault(args, db).await?;
            let gate = Rollout { vault: &vault, drill_max_age_days: rollout.rollout_drill_max_age_days };
            match break_glass::set(db, &gate, p, tenant, &policy, &reason, Some(why.as_str())).await? {
                SetOutcome::Changed(v) => {
                    emit(json, &v, || format!("{} (the rollout order is met: no override needed)", show(&v)))
                }
                SetOutcome::Requested(o) => emit(json, &o, || {
                    format!(
                        "override {} for {} is pending: a second person must approve it \
                         (signet retry-policy approve-override {} {} --reviewer NAME) before {}\nmissing: {}",
                        o.id,
                        o.tenant,
                        o.tenant,
                        o.id,
                        o.expires_at,
                        o.missing.join("; ")
                    )
                }),
            }
        }
        RetryPolicyCmd::Set { tenants, policy, reason, override_reason: None, rollout } => {
            let vault = open_vault(args, db).await?;
            let gate = Rollout { vault: &vault, drill_max_age_days: rollout.rollout_drill_max_age_days };
            retry_policy::set_cohort(db, &gate, p, &tenants, &policy, &reason).await?;
            let mut views = Vec::new();
            for t in &tenants {
                views.push(retry_policy::get(db, p, t).await?);
            }
            emit(json, &views, || views.iter().map(show).collect::<Vec<_>>().join("\n"));
        }
        RetryPolicyCmd::Overrides { tenant } => {
            let os = break_glass::list(db, p, &tenant).await?;
            emit(json, &os, || os.iter().map(line).collect::<Vec<_>>().join("\n"));
        }
        RetryPolicyCmd::ApproveOverride { tenant, id, reviewer, comment } => {
            let o = break_glass::approve(db, p, &tenant, &id, Some(&reviewer), &comment).await?;
            emit(json, &o, || {
                format!("approved {}: retries enabled (version {})", line(&o), o.policy_version.unwrap_or(0))
            });
        }
        RetryPolicyCmd::RejectOverride { tenant, id, reviewer, comment } => {
            let o = break_glass::reject(db, p, &tenant, &id, Some(&reviewer), &comment).await?;
            emit(json, &o, || format!("rejected {}", line(&o)));
        }
        RetryPolicyCmd::Rollback { tenant, reason, rollout } => {
            let vault = open_vault(args, db).await?;
            let gate = Rollout { vault: &vault, drill_max_age_days: rollout.rollout_drill_max_age_days };
            let v = retry_policy::rollback(db, &gate, p, &tenant, &reason).await?;
            emit(json, &v, || show(&v));
        }
    }
    Ok(())
}

async fn retention(json: bool, db: &DatabaseConnection, p: &Principal, cmd: RetentionCmd) -> Result<(), CliError> {
    use domain::retention::{self, RetentionChange, RetentionView, human, parse_duration, purge};
    let line = |v: &RetentionView| {
        let flag = if v.below_horizon {
            format!(
                "\tBELOW HORIZON: decided {}, raise it (the purge keeps claims for the horizon meanwhile)",
                human(v.current.dedup_secs)
            )
        } else if v.below_manual_resend {
            format!(
                "\tBELOW MANUAL RESEND: decided {} against a manual resend window of {} (risk accepted)",
                human(v.current.dedup_secs),
                human(v.manual_resend_secs)
            )
        } else {
            String::new()
        };
        format!(
            "{}/{}\t{}\tclaims {} (horizon {})\tbodies {}\tv{} by {}: {}{flag}",
            v.tenant,
            v.endpoint,
            v.scheme,
            human(v.effective_dedup_secs),
            human(v.horizon_secs),
            human(v.current.body_secs),
            v.current.version,
            v.current.actor,
            v.current.reason
        )
    };
    match cmd {
        RetentionCmd::Show { tenant: Some(t), endpoint: Some(e) } => {
            let v = retention::get(db, p, &t, &e).await?;
            emit(json, &v, || {
                let mut out = vec![line(&v)];
                out.extend(v.history.iter().skip(1).map(|h| {
                    format!(
                        "  v{} {}: claims {} bodies {} by {}: {}",
                        h.version,
                        h.created_at,
                        human(h.dedup_secs),
                        human(h.body_secs),
                        h.actor,
                        h.reason
                    )
                }));
                out.join("\n")
            });
        }
        RetentionCmd::Show { tenant: None, endpoint: None } => {
            let o = retention::overview(db, p).await?;
            emit(json, &o, || {
                let mut out: Vec<String> = o
                    .horizons
                    .iter()
                    .map(|h| {
                        let source = h.source.as_deref().map(|s| format!("\tsource: {s}")).unwrap_or_default();
                        let manual = h
                            .manual_resend_source
                            .as_deref()
                            .map(|s| format!("\tmanual resend {} (source: {s})", human(h.manual_resend_secs)))
                            .unwrap_or_default();
                        format!(
                            "horizon {}\t{}\tv{} by {}: {}{source}{manual}",
                            h.scheme,
                            human(h.horizon_secs),
                            h.version,
                            h.actor,
                            h.reason
                        )
                    })
                    .collect();
                out.extend(o.endpoints.iter().map(line));
                out.join("\n")
            });
        }
        RetentionCmd::Show { .. } => {
            return Err(CliError::new("usage", "give both <tenant> and <endpoint>, or neither for the overview"));
        }
        RetentionCmd::Set { tenant, endpoint, dedup, body, reason, accept_risk } => {
            let change = RetentionChange {
                dedup_secs: dedup.as_deref().map(parse_duration).transpose()?,
                body_secs: body.as_deref().map(parse_duration).transpose()?,
                reason,
                accept_risk,
            };
            let v = retention::set(db, p, &tenant, &endpoint, &change).await?;
            emit(json, &v, || line(&v));
        }
        RetentionCmd::Horizon { scheme, duration, reason } => {
            let h = retention::set_horizon(db, p, &scheme, parse_duration(&duration)?, &reason).await?;
            emit(json, &h, || {
                format!("{} redelivery horizon is now {} (version {})", h.scheme, human(h.horizon_secs), h.version)
            });
        }
        RetentionCmd::Purge => {
            let r = purge::run(db, domain::clock::now_ms(), purge::DEFAULT_BATCH).await?;
            emit(json, &r, || {
                format!(
                    "purged: {} claims, {} resolved quarantine entries, {} bodies cleared, {} replay records, \
                     {} minute rollups, {} hourly rollups, {} delivery-log rows, {} daily partitions dropped",
                    r.claims_deleted,
                    r.quarantine_deleted,
                    r.bodies_cleared,
                    r.replay_deleted,
                    r.minute_rollups_deleted,
                    r.hourly_rollups_deleted,
                    r.deliveries_deleted,
                    r.partitions_dropped
                )
            });
        }
    }
    Ok(())
}

async fn open_db(args: &DbArgs) -> Result<DatabaseConnection, CliError> {
    let url = args.url()?;
    let db = domain::db::connect(&url).await?;
    domain::db::migrate(&db).await?;
    Ok(db)
}

pub(super) async fn open_vault(args: &DbArgs, db: &DatabaseConnection) -> Result<Vault, CliError> {
    let master = args.master_key(db).await?;
    let vault = domain::startup::open_vault(db, master).await.map_err(|e| CliError::new("vault", e.to_string()))?;
    Ok(vault.with_files(args.deployment_files()))
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

/// The key as JSON, with what is shown once: `secret` for an HMAC key,
/// `private_key` for a generated pair, nothing for an uploaded public key.
fn key_json(k: &ProvisionedKey) -> serde_json::Value {
    let mut v = serde_json::to_value(&k.key).unwrap_or_default();
    if let (Some(obj), Some(secret)) = (v.as_object_mut(), &k.secret) {
        let field = if k.key.credential == CredentialKind::Ed25519 { "private_key" } else { "secret" };
        obj.insert(field.into(), json!(secret.expose()));
    }
    v
}

fn approval_from(approve_as: Option<String>, what: &str) -> Approval {
    match approve_as {
        Some(reviewer) => Approval::ApproveAs { comment: format!("approved at {what} via CLI"), reviewer },
        None => Approval::Pending,
    }
}

async fn key_command(
    json: bool,
    args: &DbArgs,
    db: &DatabaseConnection,
    p: &Principal,
    cmd: KeyCmd,
) -> Result<(), CliError> {
    match cmd {
        KeyCmd::Provision { tenant, endpoint, owner, rotation_owner, event_types, approve_as, v1a } => {
            let event_types = listed(event_types);
            let vault = open_vault(args, db).await?;
            let k = keys::provision(
                db,
                &vault,
                p,
                &tenant,
                &endpoint,
                ProvisionRequest {
                    owner,
                    rotation_owner,
                    event_types,
                    credential: v1a.credential().unwrap_or_default(),
                },
                approval_from(approve_as, "provisioning"),
            )
            .await?;
            emit(json, &key_json(&k), || secret_text(&k));
        }
        KeyCmd::Rotate { key_id, overlap_secs, approve_as, v1a } => {
            let vault = open_vault(args, db).await?;
            let approval = approval_from(approve_as, "rotation");
            let k = keys::rotate_with(db, &vault, p, &key_id, Some(overlap_secs), approval, v1a.credential()).await?;
            emit(json, &key_json(&k), || secret_text(&k));
        }
        KeyCmd::Approve { key_id, reviewer, comment } => {
            let k = keys::approve(db, p, &key_id, Some(&reviewer), &comment).await?;
            emit(json, &k, || format!("approved {} ({}); status {}", k.key_id, k.event_types.join(","), k.status));
        }
        KeyCmd::Reject { key_id, reviewer, comment } => {
            let k = keys::reject(db, p, &key_id, Some(&reviewer), &comment).await?;
            emit(json, &k, || format!("rejected {}", k.key_id));
        }
        KeyCmd::Revoke { key_id, reason } => {
            let reason = reason
                .filter(|r| !r.trim().is_empty())
                .ok_or_else(|| CliError::new("reason_required", "revocation needs a reason: --reason <text>"))?;
            let k = keys::revoke(db, p, &key_id, &reason).await?;
            emit(json, &k, || format!("revoked {} ({})", k.key_id, reason));
        }
        KeyCmd::List { tenant } => {
            let ks = keys::list(db, p, &KeyFilter { tenant, ..Default::default() }).await?;
            emit(json, &ks, || {
                ks.iter()
                    .map(|k| {
                        format!(
                            "{}\t{}/{}\t{}\t{}",
                            k.key_id,
                            k.tenant,
                            k.endpoint,
                            k.status,
                            k.expires_at.as_deref().unwrap_or("-")
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            });
        }
    }
    Ok(())
}

fn secret_text(k: &ProvisionedKey) -> String {
    let head = format!("key {} for {}/{} is {}", k.key.key_id, k.key.tenant, k.key.endpoint, k.key.status);
    match (&k.secret, &k.key.public_key) {
        (Some(secret), None) => format!("{head}\nsecret (shown once, store it now): {}", secret.expose()),
        (Some(private), Some(public)) => format!(
            "{head}\npublic key (stored): {public}\nv1a private key for the provider (shown once; kept sealed): {}",
            private.expose()
        ),
        (None, public) => format!("{head}\npublic key (stored; Signet holds nothing that can sign): {}", {
            public.as_deref().unwrap_or_default()
        }),
    }
}

/// Progress of a rewrap, on stderr (at most every half second).
fn rewrap_progress() -> impl FnMut(&domain::kek::RewrapView) {
    let mut last = std::time::Instant::now();
    move |v| {
        if last.elapsed() >= std::time::Duration::from_millis(500) || !v.is_running() {
            last = std::time::Instant::now();
            eprintln!(
                "{}: {} of about {} rows resealed under v{} ({} read)",
                v.source, v.rewrapped, v.total, v.target_version, v.scanned
            );
        }
    }
}

async fn kek(json: bool, args: &DbArgs, db: &DatabaseConnection, p: &Principal, cmd: KekCmd) -> Result<(), CliError> {
    use domain::kek;
    match cmd {
        KekCmd::Rotate => {
            let vault = open_vault(args, db).await?;
            let rotation = kek::rotate(db, &vault, p, kek::DEFAULT_STALE_AFTER_MS).await?;
            let done = kek::run(db, &vault, &rotation.rewrap.id, rewrap_progress()).await?;
            let report = serde_json::json!({
                "kek_version": rotation.kek_version,
                "added_version": rotation.added_version,
                "rewrap": done,
            });
            emit(json, &report, || {
                format!(
                    "{} KEK version {}; resealed {} of {} rows read",
                    if rotation.added_version { "added" } else { "resumed the rewrap to" },
                    rotation.kek_version,
                    done.rewrapped,
                    done.scanned
                )
            });
        }
        KekCmd::Rewrap => {
            let vault = open_vault(args, db).await?;
            let job = kek::start_rewrap(db, &vault, p, kek::DEFAULT_STALE_AFTER_MS).await?;
            let done = kek::run(db, &vault, &job.id, rewrap_progress()).await?;
            emit(json, &done, || {
                format!(
                    "resealed {} rows under KEK version {} ({} read)",
                    done.rewrapped, done.target_version, done.scanned
                )
            });
        }
        KekCmd::Status => {
            let o = kek::overview(db, p, kek::Counting::Always, kek::DEFAULT_STALE_AFTER_MS).await?;
            emit(json, &o, || {
                let mut lines: Vec<String> = o
                    .versions
                    .iter()
                    .map(|v| {
                        let rows: Vec<String> = v.rows.iter().map(|(k, n)| format!("{k} {n}")).collect();
                        format!(
                            "v{}{}\t{}\t{}",
                            v.version,
                            if v.newest { " (newest)" } else { "" },
                            v.created_at,
                            rows.join(", ")
                        )
                    })
                    .collect();
                lines.extend(
                    o.retired.iter().map(|r| format!("v{} retired {} by {}", r.version, r.retired_at, r.retired_by)),
                );
                if let Some(j) = &o.latest_rewrap {
                    lines.push(format!("latest rewrap: {} ({} resealed, {} read)", j.status, j.rewrapped, j.scanned));
                }
                lines.join("\n")
            });
        }
        KekCmd::Retire { version } => {
            let vault = open_vault(args, db).await?;
            let r = kek::retire(db, &vault, p, version).await?;
            emit(json, &r, || format!("retired KEK version {}", r.version));
        }
    }
    Ok(())
}

/// `--event-types "a, b"`: each item trimmed, blanks dropped (the domain
/// takes exactly the listed types, as the API does).
fn listed(items: Option<Vec<String>>) -> Option<Vec<String>> {
    items.map(|l| l.iter().map(|t| t.trim()).filter(|t| !t.is_empty()).map(str::to_owned).collect())
}

/// `--preset NAME` or `--profile FILE` (JSON, strict: an unknown field is
/// refused, naming it), for scheme `hmac`.
fn hmac_profile_arg(
    preset: Option<String>,
    file: Option<std::path::PathBuf>,
) -> Result<Option<domain::registry::hmac_profile::HmacProfileBody>, CliError> {
    use domain::registry::hmac_profile::{HmacPreset, HmacProfileBody};
    if let Some(name) = preset {
        let p = HmacPreset::from_name(&name)
            .ok_or_else(|| CliError::new("invalid_hmac_profile", format!("unknown preset {name:?}")))?;
        return Ok(Some(HmacProfileBody::preset(p)));
    }
    let Some(path) = file else { return Ok(None) };
    let bytes =
        std::fs::read(&path).map_err(|e| CliError::new("profile", format!("cannot read {}: {e}", path.display())))?;
    Ok(Some(domain::registry::hmac_profile::parse_json(&bytes)?))
}
