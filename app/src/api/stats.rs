//! The dashboard's figures.

use leptos::prelude::*;
use server_fn::codec::GetUrl;

use super::AppError;
use views::stats::StatsView;

/// `tenant`: a slug or empty for every visible tenant; `window`: 1h, 24h,
/// 7d; `auto`: the page's own refresh, which never keeps a session alive.
#[server(prefix = "/fn", endpoint = "dashboard_stats", input = GetUrl)]
pub async fn dashboard_stats(
    tenant: Option<String>,
    window: Option<String>,
    auto: Option<bool>,
) -> Result<StatsView, AppError> {
    use domain::stats::{self, Window};

    use crate::ssr;
    let (st, p) = ssr::polled_request(auto).await?;
    let window = Window::parse(window.as_deref())?;
    let tenant = domain::ids::named_filter(tenant.as_deref())?;
    Ok(stats::stats(&st.db, &p, tenant.as_ref(), window).await?)
}
