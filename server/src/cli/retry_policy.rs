//! `signet retry-policy`: show, set (with its break-glass override),
//! overrides and their review, and rollback.

use domain::auth::Principal;
use domain::ids::named;
use sea_orm::DatabaseConnection;
use views::ids::TenantSlug;

use super::{
    RetryPolicyCmd,
    open::open_vault,
    output::{CliError, emit},
};
use crate::config::DbArgs;

pub(super) async fn retry_policy(
    json: bool,
    args: &DbArgs,
    db: &DatabaseConnection,
    p: &Principal,
    cmd: RetryPolicyCmd,
) -> Result<(), CliError> {
    use domain::{
        break_glass::{self, SetOutcome},
        retry_policy,
        rollout::Rollout,
    };
    use views::retry_policy::RolloutOverrideView;
    let show = |v: &views::retry_policy::RetryPolicyView| {
        format!("{}: retries {} (version {})", v.tenant, v.policy, v.version)
    };
    let line = |o: &RolloutOverrideView| {
        format!("{}\t{}\t{}\t{}\t{}", o.id, o.status, o.requested_by, o.created_at, o.override_reason)
    };
    match cmd {
        RetryPolicyCmd::Show { tenant } => {
            let v = retry_policy::get(db, p, &named(&tenant)?).await?;
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
            let (tenant, policy) = (named(tenant)?, retry_policy::parse(&policy)?);
            match break_glass::set(db, &gate, p, &tenant, policy, &reason, Some(why.as_str())).await? {
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
            let tenants = tenants.iter().map(|t| named(t)).collect::<Result<Vec<TenantSlug>, _>>()?;
            retry_policy::set_cohort(db, &gate, p, &tenants, retry_policy::parse(&policy)?, &reason).await?;
            let mut views = Vec::new();
            for t in &tenants {
                views.push(retry_policy::get(db, p, t).await?);
            }
            emit(json, &views, || views.iter().map(show).collect::<Vec<_>>().join("\n"));
        }
        RetryPolicyCmd::Overrides { tenant } => {
            let os = break_glass::list(db, p, &named(&tenant)?).await?;
            emit(json, &os, || os.iter().map(line).collect::<Vec<_>>().join("\n"));
        }
        RetryPolicyCmd::ApproveOverride { tenant, id, reviewer, comment } => {
            let o = break_glass::approve(db, p, &named(&tenant)?, &id, Some(&reviewer), &comment).await?;
            emit(json, &o, || {
                format!("approved {}: retries enabled (version {})", line(&o), o.policy_version.unwrap_or(0))
            });
        }
        RetryPolicyCmd::RejectOverride { tenant, id, reviewer, comment } => {
            let o = break_glass::reject(db, p, &named(&tenant)?, &id, Some(&reviewer), &comment).await?;
            emit(json, &o, || format!("rejected {}", line(&o)));
        }
        RetryPolicyCmd::Rollback { tenant, reason, rollout } => {
            let vault = open_vault(args, db).await?;
            let gate = Rollout { vault: &vault, drill_max_age_days: rollout.rollout_drill_max_age_days };
            let v = retry_policy::rollback(db, &gate, p, &named(&tenant)?, &reason).await?;
            emit(json, &v, || show(&v));
        }
    }
    Ok(())
}
