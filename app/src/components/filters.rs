//! Controls of the plain GET filter forms (audit log, quarantine): their
//! values live in the URL, so a filtered view is a link that can be shared.

use leptos::prelude::*;

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
                {options.iter().map(|(v, text)| view! { <option value=*v selected=*v == selected>{*text}</option> }).collect_view()}
            </select>
        </label>
    }
}

/// Submit, and a link back to the unfiltered page.
#[component]
pub fn FilterActions(clear: &'static str) -> impl IntoView {
    view! {
        <div class="filter-actions">
            <button type="submit" class="button primary">"Filter"</button>
            <a class="button secondary" href=clear>"Clear"</a>
        </div>
    }
}
