//! `/`: sends each role where its work is.

use leptos::prelude::*;
use leptos_router::components::Redirect;
use views::roles::Role;

use crate::{
    api::session::whoami,
    components::{Awaited, FormError},
    dto::Me,
};

/// Where a signed-in user starts.
fn start_page(me: &Me) -> String {
    match (me.role, &me.tenant) {
        (Role::ClinicAdmin, Some(slug)) => format!("/tenants/{slug}"),
        (Role::Reviewer, _) => "/approvals".to_owned(),
        (Role::Oncall, _) => "/dashboard".to_owned(),
        _ => "/tenants".to_owned(),
    }
}

#[component]
pub fn HomePage() -> impl IntoView {
    let me = Resource::new(|| (), |_| whoami());
    view! {
        <Awaited resource=me loading="Loading…" render=|result| match result {
            Ok(Some(me)) => view! { <Redirect path=start_page(&me)/> }.into_any(),
            Ok(None) => view! { <Redirect path="/login"/> }.into_any(),
            // No frame around this page: the error stands in one of its own.
            Err(error) => view! { <main class="content"><FormError error/></main> }.into_any(),
        }/>
    }
}
