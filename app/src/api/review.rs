//! The reviewer's approval queue.

use leptos::prelude::*;
use server_fn::codec::GetUrl;

use super::AppError;
use crate::dto::{ApprovalDto, ReviewItemDto};

#[server(prefix = "/fn", endpoint = "review_queue", input = GetUrl)]
pub async fn review_queue() -> Result<Vec<ReviewItemDto>, AppError> {
    use crate::ssr;
    let st = ssr::state()?;
    let p = ssr::principal().await?;
    let items = domain::registry::keys::review_queue(&st.db, &p).await.map_err(ssr::to_app_error)?;
    Ok(items
        .into_iter()
        .map(|i| ReviewItemDto {
            key: ssr::convert::key(i.key),
            replaces: i.replaces.map(ssr::convert::key),
            history: i.history.into_iter().map(ssr::convert::approval).collect(),
        })
        .collect())
}

#[server(prefix = "/fn", endpoint = "approval_history", input = GetUrl)]
pub async fn approval_history() -> Result<Vec<ApprovalDto>, AppError> {
    use crate::ssr;
    let st = ssr::state()?;
    let p = ssr::principal().await?;
    let items = domain::registry::keys::approval_history(&st.db, &p, None, 100).await.map_err(ssr::to_app_error)?;
    Ok(items.into_iter().map(ssr::convert::approval).collect())
}

#[server(prefix = "/fn", endpoint = "approve_key")]
pub async fn approve_key(key_id: String, comment: Option<String>) -> Result<(), AppError> {
    use crate::ssr;
    let st = ssr::state()?;
    let p = ssr::principal().await?;
    domain::registry::keys::approve(&st.db, &p, &key_id, None, comment.as_deref().unwrap_or(""))
        .await
        .map_err(ssr::to_app_error)?;
    leptos_axum::redirect(&format!("/approvals?approved={key_id}"));
    Ok(())
}

#[server(prefix = "/fn", endpoint = "reject_key")]
pub async fn reject_key(key_id: String, comment: String) -> Result<(), AppError> {
    use crate::ssr;
    let st = ssr::state()?;
    let p = ssr::principal().await?;
    domain::registry::keys::reject(&st.db, &p, &key_id, None, &comment).await.map_err(ssr::to_app_error)?;
    leptos_axum::redirect(&format!("/approvals?rejected={key_id}"));
    Ok(())
}
