//! One event's whole story, and finding it from a quarantine entry or an
//! outbox intent.

use leptos::prelude::*;
use server_fn::codec::GetUrl;
use views::events::EventRef;
use views::events::EventStory;

use super::AppError;

#[server(prefix = "/fn", endpoint = "event_story", input = GetUrl)]
pub async fn story_of_event(tenant: String, endpoint: String, event_id: String) -> Result<EventStory, AppError> {
    use crate::ssr;
    let (st, p) = ssr::request().await?;
    let event_id = views::ids::EventId::parse(event_id).map_err(domain::DomainError::from)?;
    let (tenant, endpoint) = (domain::ids::named(&tenant)?, domain::ids::named(&endpoint)?);
    Ok(domain::events::story::story(&st.db, &st.vault, &p, &tenant, &endpoint, &event_id).await?)
}

#[server(prefix = "/fn", endpoint = "locate_event", input = GetUrl)]
pub async fn locate_event(quarantine: Option<String>, intent: Option<String>) -> Result<EventRef, AppError> {
    use crate::ssr;
    let (st, p) = ssr::request().await?;
    Ok(domain::events::story::locate(&st.db, &p, quarantine.as_deref(), intent.as_deref()).await?)
}
