//! `signet retention`: show, set, the redelivery horizon, and the purge.

use domain::auth::Principal;
use domain::ids::named;
use sea_orm::DatabaseConnection;

use super::{
    RetentionCmd,
    output::{CliError, emit},
};

pub(super) async fn retention(
    json: bool,
    db: &DatabaseConnection,
    p: &Principal,
    cmd: RetentionCmd,
) -> Result<(), CliError> {
    use domain::retention::{self, RetentionChange, parse_duration, purge};
    use views::retention::{RetentionView, human};
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
            let v = retention::get(db, p, &named(&t)?, &named(&e)?).await?;
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
            let v = retention::set(db, p, &named(&tenant)?, &named(&endpoint)?, &change).await?;
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
                     {} minute rollups, {} hourly rollups, {} delivery-log rows, {} daily partitions dropped \
                     ({} bodies of open quarantine entries carried forward)",
                    r.claims_deleted,
                    r.quarantine_deleted,
                    r.bodies_cleared,
                    r.replay_deleted,
                    r.minute_rollups_deleted,
                    r.hourly_rollups_deleted,
                    r.deliveries_deleted,
                    r.partitions_dropped,
                    r.bodies_carried
                )
            });
        }
    }
    Ok(())
}
