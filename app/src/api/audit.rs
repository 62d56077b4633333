//! The audit log, filtered.

use leptos::prelude::*;
use server_fn::codec::GetUrl;

use super::AppError;
use crate::dto::AuditPage;

/// `since`: `1h`, `24h`, `7d` or empty. `tenant`: slug.
#[server(prefix = "/fn", endpoint = "audit_log", input = GetUrl)]
pub async fn audit_log(
    actor: Option<String>,
    action: Option<String>,
    tenant: Option<String>,
    since: Option<String>,
    before_seq: Option<i64>,
) -> Result<AuditPage, AppError> {
    use crate::ssr;
    use domain::{audit, registry::tenants};
    const PAGE: u64 = 50;
    let (st, p) = ssr::request().await?;
    let visible = tenants::list(&st.db, &p).await?;
    // A name outside the slug rule is no visible tenant either.
    let no_such = || AppError::new("not_found", "no such tenant");
    let tenant_id = match tenant.as_deref().filter(|t| !t.is_empty()) {
        Some(text) => {
            let slug: views::ids::TenantSlug = text.parse().map_err(|_| no_such())?;
            Some(visible.iter().find(|t| t.slug == slug.as_str()).map(|t| t.id.clone()).ok_or_else(no_such)?)
        }
        None => None,
    };
    let since_ms = match since.as_deref().unwrap_or("") {
        "1h" => Some(3_600_000),
        "24h" => Some(86_400_000),
        "7d" => Some(7 * 86_400_000),
        "" => None,
        _ => return Err(AppError::new("invalid_since", "since must be 1h, 24h or 7d")),
    }
    .map(|d: i64| domain::clock::now_ms() - d);
    let filter = audit::AuditFilter { actor, action, tenant_id, since: since_ms, before_seq, limit: Some(PAGE) };
    let entries = audit::list(&st.db, &p, &filter).await?;
    let next_before = (entries.len() as u64 == PAGE).then(|| entries.last().map(|e| e.seq)).flatten();
    let entries = entries
        .into_iter()
        .map(|e| {
            let tenant =
                e.tenant_id.as_ref().and_then(|id| visible.iter().find(|t| &t.id == id)).map(|t| t.slug.to_string());
            crate::dto::AuditRow { entry: e, tenant }
        })
        .collect();
    // Only on the unfiltered first page, for callers who see the whole log;
    // from the verification mark (what was appended since), never moving it:
    // a page view writes nothing.
    let unfiltered = filter.actor.as_deref().unwrap_or("").is_empty()
        && filter.action.as_deref().unwrap_or("").is_empty()
        && filter.tenant_id.is_none()
        && filter.since.is_none();
    let chain_ok = if p.tenant_id.is_none() && before_seq.is_none() && unfiltered {
        Some(audit::verify_new(&st.db, false).await?.ok)
    } else {
        None
    };
    Ok(AuditPage { entries, next_before, chain_ok })
}
