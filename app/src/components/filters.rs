//! Controls of the plain GET filter forms (audit log, quarantine): their
//! values live in the URL, so a filtered view is a link that can be shared.

use leptos::prelude::*;

use super::Awaited;
use crate::{api::AppError, dto::TenantSummary};

/// The GET form that filters the page at `path`, shown once the tenants it
/// offers have loaded (if they cannot be read, it offers "All tenants"
/// alone). `fields` lays out its controls, given the tenants' slugs.
#[component]
pub fn FilterForm<V, F>(
    path: &'static str,
    tenants: Resource<Result<Vec<TenantSummary>, AppError>>,
    fields: F,
) -> impl IntoView
where
    F: Fn(Vec<String>) -> V + Clone + Send + Sync + 'static,
    V: IntoView + 'static,
{
    let render = move |result: Result<Vec<TenantSummary>, AppError>| {
        let slugs = result.map(|ts| ts.into_iter().map(|t| t.tenant.slug.into_string()).collect()).unwrap_or_default();
        view! {
            <form method="get" action=path class="filters card">
                {fields(slugs)}
                <FilterActions clear=path/>
            </form>
        }
    };
    view! { <Awaited resource=tenants render/> }
}

/// "All tenants" or one of `tenants` (slugs), as the `tenant` parameter.
#[component]
pub fn TenantSelect(tenants: Vec<String>, selected: String) -> impl IntoView {
    view! {
        <label class="field">
            <span>"Tenant"</span>
            <select name="tenant">
                <option value="">"All tenants"</option>
                {tenants.into_iter().map(|t| {
                    let is_selected = t == selected;
                    let label = t.clone();
                    view! { <option value=t selected=is_selected>{label}</option> }
                }).collect_view()}
            </select>
        </label>
    }
}

/// A select of fixed `(value, label)` options.
#[component]
pub fn Choice(
    label: &'static str,
    name: &'static str,
    options: &'static [(&'static str, &'static str)],
    selected: String,
) -> impl IntoView {
    view! {
        <label class="field">
            <span>{label}</span>
            <select name=name>
                {options
                    .iter()
                    .map(|(v, text)| view! { <option value=*v selected=*v == selected>{*text}</option> })
                    .collect_view()}
            </select>
        </label>
    }
}

/// Submit, and a link back to the unfiltered page.
#[component]
fn FilterActions(clear: &'static str) -> impl IntoView {
    view! {
        <div class="filter-actions">
            <button type="submit" class="button primary">"Filter"</button>
            <a class="button secondary" href=clear>"Clear"</a>
        </div>
    }
}
