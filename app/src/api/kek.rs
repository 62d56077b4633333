//! KEK versions: the overview, rotation, the rewrap of every sealed column
//! (run in the background; the page polls its progress) and retirement.
//! Administrators only (`Permission::ManageKeks`, checked by the domain).

use leptos::prelude::*;
use server_fn::codec::GetUrl;

use super::AppError;

/// `auto`: the page's own poll (never keeps a session alive, and counts no
/// rows while a rewrap runs: the job's progress says how far it is).
#[server(prefix = "/fn", endpoint = "kek_overview", input = GetUrl)]
pub async fn kek_overview(auto: Option<bool>) -> Result<views::kek::KekOverview, AppError> {
    use crate::ssr;
    use domain::kek::Counting;
    let (st, p) = ssr::polled_request(auto).await?;
    let counting = if auto == Some(true) { Counting::NotWhileRewrapping } else { Counting::Always };
    Ok(domain::kek::overview(&st.db, &p, counting, st.kek_stale_ms).await?)
}

/// Adds a version (or resumes resealing under the newest) and starts the
/// rewrap in the background.
#[server(prefix = "/fn", endpoint = "rotate_kek")]
pub async fn rotate_kek() -> Result<(), AppError> {
    use crate::ssr;
    let (st, p) = ssr::request().await?;
    let rotation = domain::kek::rotate(&st.db, &st.vault, &p, st.kek_stale_ms).await?;
    domain::kek::spawn(st.db.clone(), st.vault.clone(), rotation.rewrap.id, &st.faults);
    leptos_axum::redirect("/kek");
    Ok(())
}

/// Reseals everything under the newest version, or resumes the rewrap that
/// stopped.
#[server(prefix = "/fn", endpoint = "start_rewrap")]
pub async fn start_rewrap() -> Result<(), AppError> {
    use crate::ssr;
    let (st, p) = ssr::request().await?;
    let job = domain::kek::start_rewrap(&st.db, &st.vault, &p, st.kek_stale_ms).await?;
    domain::kek::spawn(st.db.clone(), st.vault.clone(), job.id, &st.faults);
    leptos_axum::redirect("/kek");
    Ok(())
}

#[server(prefix = "/fn", endpoint = "resume_rewrap")]
pub async fn resume_rewrap(id: String) -> Result<(), AppError> {
    use crate::ssr;
    let (st, p) = ssr::request().await?;
    let job = domain::kek::resume(&st.db, &p, &id, st.kek_stale_ms).await?;
    domain::kek::spawn(st.db.clone(), st.vault.clone(), job.id, &st.faults);
    leptos_axum::redirect("/kek");
    Ok(())
}

/// Stops the rewrap the page showed for good: the rows it resealed stay
/// resealed, and the next rewrap starts anew.
#[server(prefix = "/fn", endpoint = "cancel_rewrap")]
pub async fn cancel_rewrap(id: String) -> Result<(), AppError> {
    use crate::ssr;
    let (st, p) = ssr::request().await?;
    domain::kek::cancel_by_id(&st.db, &p, &id, st.kek_stale_ms).await?;
    leptos_axum::redirect("/kek");
    Ok(())
}

#[server(prefix = "/fn", endpoint = "retire_kek")]
pub async fn retire_kek(version: u32) -> Result<(), AppError> {
    use crate::ssr;
    let (st, p) = ssr::request().await?;
    domain::kek::retire(&st.db, &st.vault, &p, version).await?;
    leptos_axum::redirect(&format!("/kek?retired={version}"));
    Ok(())
}
