//! The one view of every background job: who holds each lease, the latest
//! KEK rewrap and the latest bulk releases, as seen now.

use sea_orm::DatabaseConnection;
use views::{
    jobs_overview::{JobsView, LeaseView},
    roles::Permission,
};

use crate::{
    auth::{Principal, Scope},
    clock,
    error::DomainResult,
    job_lease, kek,
    quarantine::bulk_release,
};

/// Bulk releases listed.
const BULK_SHOWN: u64 = 20;

/// How long each kind of run may be silent before it reads as interrupted.
#[derive(Clone, Copy, Debug)]
pub struct StaleAfter {
    pub kek_ms: i64,
    pub bulk_ms: i64,
}

/// Every background job, for a caller who may read operations across the
/// deployment (a clinic admin, bound to one tenant, may not: the leases and
/// runs span tenants). `leased` names the leased jobs of `signet serve`, so
/// one never taken is listed too; a stored lease of another name follows.
/// The rewrap is shown only to whoever may manage KEKs.
pub async fn overview(
    db: &DatabaseConnection,
    principal: &Principal,
    leased: &[&str],
    stale: StaleAfter,
) -> DomainResult<JobsView> {
    principal.authorize(Permission::ReadEvents, Scope::Global)?;
    let mut stored = job_lease::all(db).await?;
    let mut leases: Vec<LeaseView> = leased
        .iter()
        .map(|name| match stored.iter().position(|h| h.job == *name) {
            Some(i) => view(stored.remove(i)),
            None => LeaseView { job: (*name).to_owned(), holder: None, epoch: 0, expires_at: None, held: false },
        })
        .collect();
    leases.extend(stored.into_iter().map(view));
    let kek_rewrap = match principal.authorize(Permission::ManageKeks, Scope::Global) {
        Ok(_) => kek::latest(db, principal, stale.kek_ms).await?,
        Err(_) => None,
    };
    let bulk_releases = bulk_release::recent(db, principal, BULK_SHOWN, stale.bulk_ms).await?;
    Ok(JobsView { leases, kek_rewrap, bulk_releases })
}

fn view(h: job_lease::Held) -> LeaseView {
    LeaseView {
        job: h.job,
        holder: Some(h.lease.holder),
        epoch: u64::try_from(h.lease.epoch).unwrap_or(0),
        expires_at: Some(clock::rfc3339(h.lease.expires_at)),
        held: h.held,
    }
}
