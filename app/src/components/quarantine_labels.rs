//! Words for quarantine values, shared by the quarantine list, one entry's
//! page and the bulk release pages.

use views::jobs::RunStatus;

use views::quarantine::BulkReleaseView;

/// "reminder_not_found" → "reminder not found".
pub fn reason_label(reason: &str) -> String {
    reason.replace('_', " ")
}

/// A run's status → the heading's badge text.
pub fn status_label(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Failed => "stopped by an error",
        other => other.as_str(),
    }
}

/// The filter in words: "clinic-a / hooks, reason reminder not found, last 24 hours".
pub fn filter_text(j: &BulkReleaseView) -> String {
    let f = &j.filter;
    let mut parts = vec![match (&f.tenant, &f.endpoint) {
        (Some(t), Some(e)) if !e.is_empty() => format!("{t} / {e}"),
        (Some(t), _) if !t.is_empty() => t.clone(),
        _ => "all tenants".to_owned(),
    }];
    if let Some(r) = f.reason.as_deref().filter(|r| !r.is_empty()) {
        parts.push(format!("reason {}", reason_label(r)));
    }
    if let Some(a) = f.age.as_deref().filter(|a| !a.is_empty()) {
        parts.push(format!("quarantined in the last {a}"));
    }
    parts.join(", ")
}
