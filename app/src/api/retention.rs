//! Retention decisions and redelivery horizons.

use leptos::prelude::*;
use server_fn::codec::GetUrl;

use super::AppError;
use crate::dto::RetentionOverviewDto;

#[server(prefix = "/fn", endpoint = "retention_overview", input = GetUrl)]
pub async fn retention_overview() -> Result<RetentionOverviewDto, AppError> {
    use crate::ssr;
    let st = ssr::state()?;
    let p = ssr::principal().await?;
    domain::ops::retention::overview(&st.db, &p).await.map(ssr::convert::retention).map_err(ssr::to_app_error)
}

/// `target` is `tenant/endpoint`; `dedup` and `body` are durations such as
/// `30d` or `36h` (empty keeps the current value).
#[server(prefix = "/fn", endpoint = "set_retention")]
pub async fn set_retention(target: String, dedup: String, body: String, reason: String) -> Result<(), AppError> {
    use domain::ops::retention::{self, RetentionChange, parse_duration};

    use crate::ssr;
    let st = ssr::state()?;
    let p = ssr::principal().await?;
    let (tenant, endpoint) =
        target.split_once('/').ok_or_else(|| AppError::new("invalid_endpoint", "choose an endpoint"))?;
    let duration = |text: &str| match text.trim() {
        "" => Ok(None),
        t => parse_duration(t).map(Some).map_err(ssr::to_app_error),
    };
    let change = RetentionChange { dedup_secs: duration(&dedup)?, body_secs: duration(&body)?, reason };
    retention::set(&st.db, &p, tenant, endpoint, &change).await.map_err(ssr::to_app_error)?;
    leptos_axum::redirect(&crate::components::format::with_query("/retention", &[("changed", &target)]));
    Ok(())
}

#[server(prefix = "/fn", endpoint = "set_horizon")]
pub async fn set_horizon(scheme: String, horizon: String, reason: String) -> Result<(), AppError> {
    use domain::ops::retention::{self, parse_duration};

    use crate::ssr;
    let st = ssr::state()?;
    let p = ssr::principal().await?;
    let secs = parse_duration(&horizon).map_err(ssr::to_app_error)?;
    retention::set_horizon(&st.db, &p, &scheme, secs, &reason).await.map_err(ssr::to_app_error)?;
    leptos_axum::redirect(&crate::components::format::with_query("/retention", &[("horizon", &scheme)]));
    Ok(())
}
