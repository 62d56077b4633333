//! Retention decisions and redelivery horizons.

use leptos::prelude::*;
use server_fn::codec::GetUrl;

use super::AppError;

#[server(prefix = "/fn", endpoint = "retention_overview", input = GetUrl)]
pub async fn retention_overview() -> Result<views::retention::RetentionOverview, AppError> {
    use crate::ssr;
    let (st, p) = ssr::request().await?;
    Ok(domain::retention::overview(&st.db, &p).await?)
}

/// `target` is `tenant/endpoint`; `dedup` and `body` are durations such as
/// `30d` or `36h` (empty keeps the current value); `accept_risk` (a checked
/// box): record a dedup retention below the manual resend window.
#[server(prefix = "/fn", endpoint = "set_retention")]
pub async fn set_retention(
    target: String,
    dedup: String,
    body: String,
    reason: String,
    accept_risk: Option<String>,
) -> Result<(), AppError> {
    use domain::retention::{self, RetentionChange, parse_duration};

    use crate::ssr;
    let (st, p) = ssr::request().await?;
    let (tenant, endpoint) =
        target.split_once('/').ok_or_else(|| AppError::new("invalid_endpoint", "choose an endpoint"))?;
    let duration = |text: &str| match text.trim() {
        "" => Ok(None),
        t => parse_duration(t).map(Some).map_err(AppError::from),
    };
    let change = RetentionChange {
        dedup_secs: duration(&dedup)?,
        body_secs: duration(&body)?,
        reason,
        accept_risk: accept_risk.is_some_and(|v| matches!(v.as_str(), "true" | "on")),
    };
    retention::set(&st.db, &p, &domain::ids::named(tenant)?, &domain::ids::named(endpoint)?, &change).await?;
    leptos_axum::redirect(&crate::components::format::with_query("/retention", &[("changed", &target)]));
    Ok(())
}

#[server(prefix = "/fn", endpoint = "set_horizon")]
pub async fn set_horizon(scheme: String, horizon: String, reason: String) -> Result<(), AppError> {
    use domain::retention::{self, parse_duration};

    use crate::ssr;
    let (st, p) = ssr::request().await?;
    let secs = parse_duration(&horizon)?;
    retention::set_horizon(&st.db, &p, &scheme, secs, &reason).await?;
    leptos_axum::redirect(&crate::components::format::with_query("/retention", &[("horizon", &scheme)]));
    Ok(())
}
