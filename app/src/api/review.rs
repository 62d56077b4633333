//! The reviewer's approval queue.

use leptos::prelude::*;
use server_fn::codec::GetUrl;
use views::keys::ApprovalView;
use views::keys::ReviewItem;

use super::AppError;

#[server(prefix = "/fn", endpoint = "review_queue", input = GetUrl)]
pub async fn review_queue() -> Result<Vec<ReviewItem>, AppError> {
    use crate::ssr;
    let (st, p) = ssr::request().await?;
    Ok(domain::registry::keys::review_queue(&st.db, &p).await?)
}

#[server(prefix = "/fn", endpoint = "approval_history", input = GetUrl)]
pub async fn approval_history() -> Result<Vec<ApprovalView>, AppError> {
    use crate::ssr;
    let (st, p) = ssr::request().await?;
    Ok(domain::registry::keys::approval_history(&st.db, &p, None, 100).await?)
}

#[server(prefix = "/fn", endpoint = "approve_key")]
pub async fn approve_key(key_id: String, comment: Option<String>) -> Result<(), AppError> {
    use crate::ssr;
    let (st, p) = ssr::request().await?;
    domain::registry::keys::approve(&st.db, &p, &domain::ids::named(&key_id)?, None, comment.as_deref().unwrap_or(""))
        .await?;
    leptos_axum::redirect(&format!("/approvals?approved={key_id}"));
    Ok(())
}

#[server(prefix = "/fn", endpoint = "reject_key")]
pub async fn reject_key(key_id: String, comment: String) -> Result<(), AppError> {
    use crate::ssr;
    let (st, p) = ssr::request().await?;
    domain::registry::keys::reject(&st.db, &p, &domain::ids::named(&key_id)?, None, &comment).await?;
    leptos_axum::redirect(&format!("/approvals?rejected={key_id}"));
    Ok(())
}
