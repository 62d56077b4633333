//! `signet tenant`, `signet endpoint` and `signet key`: the registry.

use domain::ids::named;
use domain::{
    auth::Principal,
    registry::{
        endpoints::{self, NewEndpoint},
        keys::{self, Approval, KeyFilter, ProvisionRequest, ProvisionedKey},
        tenants::{self, NewTenant},
    },
};
use sea_orm::DatabaseConnection;
use serde_json::json;
use views::keys::CredentialKind;

use super::{
    EndpointCmd, KeyCmd, TenantCmd,
    open::open_vault,
    output::{CliError, emit},
};
use crate::config::DbArgs;

pub(super) async fn tenant(json: bool, db: &DatabaseConnection, p: &Principal, cmd: TenantCmd) -> Result<(), CliError> {
    match cmd {
        TenantCmd::Create { tenant, name, notify_url } => {
            let t = tenants::create(db, p, NewTenant { slug: tenant, name, notify_url }).await?;
            emit(json, &t, || format!("created tenant {} ({})", t.slug, t.name));
        }
        TenantCmd::List => {
            let ts = tenants::list(db, p).await?;
            emit(json, &ts, || ts.iter().map(|t| format!("{}\t{}", t.slug, t.name)).collect::<Vec<_>>().join("\n"));
        }
    }
    Ok(())
}

pub(super) async fn endpoint(
    json: bool,
    db: &DatabaseConnection,
    p: &Principal,
    cmd: EndpointCmd,
) -> Result<(), CliError> {
    match cmd {
        EndpointCmd::Create {
            tenant,
            endpoint,
            scheme,
            event_types,
            tolerance_secs,
            max_body_bytes,
            preset,
            profile,
        } => {
            let scheme = domain::registry::parse_scheme(&scheme)?;
            let hmac_profile = hmac_profile_arg(preset, profile)?;
            let event_types = listed(event_types);
            let e = endpoints::create(
                db,
                p,
                &named(&tenant)?,
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
        EndpointCmd::List { tenant } => {
            let es = endpoints::list(db, p, &named(&tenant)?).await?;
            emit(json, &es, || {
                es.iter()
                    .map(|e| format!("{}\t{}\t{}", e.slug, e.scheme, e.event_types.join(",")))
                    .collect::<Vec<_>>()
                    .join("\n")
            });
        }
        EndpointCmd::EventKey { tenant, endpoint, fields, none, reason } => {
            use domain::registry::event_key;
            let v = if fields.is_some() || none {
                let reason = reason.ok_or_else(|| {
                    CliError::new("reason_required", "a change of the event key needs --reason <text>")
                })?;
                event_key::set(db, p, &named(&tenant)?, &named(&endpoint)?, fields, &reason).await?
            } else {
                event_key::get(db, p, &named(&tenant)?, &named(&endpoint)?).await?
            };
            emit(json, &v, || match &v.fields {
                Some(f) => {
                    format!("{}/{}: events without an id are identified by {}", v.tenant, v.endpoint, f.join(" + "))
                }
                None => format!("{}/{}: events without an id are quarantined (missing_event_id)", v.tenant, v.endpoint),
            });
        }
    }
    Ok(())
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

pub(super) async fn key_command(
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
                &named(&tenant)?,
                &named(&endpoint)?,
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
            let k = keys::rotate_with(db, &vault, p, &named(&key_id)?, Some(overlap_secs), approval, v1a.credential())
                .await?;
            emit(json, &key_json(&k), || secret_text(&k));
        }
        KeyCmd::Approve { key_id, reviewer, comment } => {
            let k = keys::approve(db, p, &named(&key_id)?, Some(&reviewer), &comment).await?;
            emit(json, &k, || format!("approved {} ({}); status {}", k.key_id, k.event_types.join(","), k.status));
        }
        KeyCmd::Reject { key_id, reviewer, comment } => {
            let k = keys::reject(db, p, &named(&key_id)?, Some(&reviewer), &comment).await?;
            emit(json, &k, || format!("rejected {}", k.key_id));
        }
        KeyCmd::Revoke { key_id, reason } => {
            let reason = reason
                .filter(|r| !r.trim().is_empty())
                .ok_or_else(|| CliError::new("reason_required", "revocation needs a reason: --reason <text>"))?;
            let k = keys::revoke(db, p, &named(&key_id)?, &reason).await?;
            emit(json, &k, || format!("revoked {} ({})", k.key_id, reason));
        }
        KeyCmd::List { tenant } => {
            let tenant = domain::ids::named_filter(tenant.as_deref())?;
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

/// `--event-types "a, b"`: each item trimmed, blanks dropped (the domain
/// takes exactly the listed types, as the API does).
fn listed(items: Option<Vec<String>>) -> Option<Vec<String>> {
    items.map(|l| l.iter().map(|t| t.trim()).filter(|t| !t.is_empty()).map(str::to_owned).collect())
}

/// `--preset NAME` or `--profile FILE` (JSON, strict: an unknown field is
/// refused, naming it), for scheme `hmac`.
pub(super) fn hmac_profile_arg(
    preset: Option<String>,
    file: Option<std::path::PathBuf>,
) -> Result<Option<views::hmac::HmacProfileBody>, CliError> {
    use views::hmac::{HmacPreset, HmacProfileBody};
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
