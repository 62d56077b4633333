//! `signet quarantine`: list, release and discard.

use domain::auth::Principal;
use sea_orm::DatabaseConnection;

use super::{
    QuarantineCmd,
    open::open_vault,
    output::{CliError, emit},
};
use crate::config::DbArgs;

pub(super) async fn quarantine(
    json: bool,
    args: &DbArgs,
    db: &DatabaseConnection,
    p: &Principal,
    cmd: QuarantineCmd,
) -> Result<(), CliError> {
    use domain::quarantine;
    use views::quarantine::QuarantineFilter;
    let done = |v: &views::quarantine::QuarantineView| {
        format!("{} {} ({}/{} {})", v.status, v.id, v.tenant, v.endpoint, v.event_id)
    };
    match cmd {
        QuarantineCmd::List { tenant, reason, status } => {
            let l = quarantine::list(
                db,
                p,
                &quarantine::Filter::named(QuarantineFilter {
                    tenant,
                    reason,
                    status,
                    limit: Some(500),
                    ..Default::default()
                })?,
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
