use std::sync::Arc;

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::{components::Redirect, hooks::use_location};
use views::roles::Role;

use super::{
    Awaited,
    feedback::{FormError, Submit},
    format::query_value,
};
use crate::{
    api::session::{Logout, whoami},
    dto::Me,
};

/// The signed-in frame: navigation for the user's role and the page body.
/// Redirects to the login page (and back here afterwards) when nobody is
/// signed in. An empty `title` leaves the heading to the page.
#[component]
pub fn Layout<F, V>(#[prop(into)] title: String, render: F) -> impl IntoView
where
    F: Fn(Me) -> V + Send + Sync + 'static,
    V: IntoView + 'static,
{
    let me = Resource::new(|| (), |_| whoami());
    let render = Arc::new(render);
    let location = use_location();
    let doc_title = if title.is_empty() { "Signet".to_owned() } else { format!("{title} · Signet") };
    view! {
        <Title text=doc_title/>
        <Awaited resource=me loading="Loading…" render=move |result| match result {
            Ok(Some(me)) => view! {
                <TopBar me=me.clone()/>
                <main class="content">
                    {(!title.is_empty()).then(|| view! { <h1>{title.clone()}</h1> })}
                    {render(me)}
                </main>
            }
            .into_any(),
            Ok(None) => {
                let here = location.pathname.get_untracked();
                let search = location.search.get_untracked();
                let next = if search.is_empty() { here } else { format!("{here}?{search}") };
                view! { <Redirect path=format!("/login?next={}", query_value(&next))/> }.into_any()
            }
            Err(error) => view! { <main class="content"><FormError error/></main> }.into_any(),
        }/>
    }
}

/// The frame of the pages seen before anyone signs in (sign-in, setup): the
/// brand and a heading, no navigation.
#[component]
pub fn AuthCard(title: &'static str, heading: &'static str, children: Children) -> impl IntoView {
    view! {
        <Title text=format!("{title} · Signet")/>
        <main class="auth">
            <div class="auth-card">
                <p class="auth-brand">"Signet"</p>
                <h1>{heading}</h1>
                {children()}
            </div>
        </main>
    }
}

/// The bar across the top: where to go, who is signed in, sign out.
#[component]
fn TopBar(me: Me) -> impl IntoView {
    let path = use_location().pathname.get_untracked();
    let current = move |prefix: &str| {
        let here = if prefix == "/tenants" {
            path.starts_with("/tenants") || path.starts_with("/keys")
        } else {
            path.starts_with(prefix)
        };
        here.then_some("page")
    };
    let tenants = match (me.role, &me.tenant) {
        (Role::ClinicAdmin, Some(slug)) => view! {
            <a href=format!("/tenants/{slug}") aria-current=current("/tenants")>"My clinic"</a>
        }
        .into_any(),
        _ => view! { <a href="/tenants" aria-current=current("/tenants")>"Tenants"</a> }.into_any(),
    };
    let logout = ServerAction::<Logout>::new();
    view! {
        <header class="topbar">
            <div class="topbar-inner">
                <a class="brand" href="/">"Signet"</a>
                <nav aria-label="Main">
                    <a href="/dashboard" aria-current=current("/dashboard")>"Dashboard"</a>
                    {tenants}
                    {me.can_review().then(|| view! {
                        <a href="/approvals" aria-current=current("/approvals")>"Approvals"</a>
                    })}
                    <a href="/quarantine" aria-current=current("/quarantine")>"Quarantine"</a>
                    <a href="/outbox" aria-current=current("/outbox")>"Outbox"</a>
                    <a href="/retention" aria-current=current("/retention")>"Retention"</a>
                    {me.can_read_evidence().then(|| view! {
                        <a href="/evidence" aria-current=current("/evidence")>"Evidence"</a>
                    })}
                    {me.is_admin().then(|| view! { <a href="/users" aria-current=current("/users")>"Users"</a> })}
                    {me.is_admin().then(|| view! { <a href="/kek" aria-current=current("/kek")>"KEKs"</a> })}
                    <a href="/audit" aria-current=current("/audit")>"Audit log"</a>
                </nav>
                <div class="whoami">
                    <span>
                        <strong>{me.username.clone()}</strong>
                        " · "
                        {me.role.label()}
                    </span>
                    <ActionForm action=logout>
                        <Submit action=logout label="Sign out" kind="secondary small"/>
                    </ActionForm>
                </div>
            </div>
        </header>
    }
}
