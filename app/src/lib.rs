//! Signet's web console.
//!
//! Pages render on the server and hydrate in the browser; every form is an
//! `ActionForm` over a server function, so the core flows work with
//! JavaScript off as well.

#![recursion_limit = "256"]

pub mod api;
pub mod components;
pub mod dto;
pub mod pages;
#[cfg(feature = "ssr")]
pub mod ssr;

use leptos::prelude::*;
use leptos_meta::{MetaTags, Stylesheet, Title, provide_meta_context};
use leptos_router::{
    SsrMode,
    components::{Route, Router, Routes},
    path,
};

use crate::pages::*;

/// The HTML document around the app (server side).
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <meta name="referrer" content="same-origin"/>
                <link rel="icon" type="image/svg+xml" href="/favicon.svg"/>
                <HydrationScripts options/>
                <MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

/// Every route renders with `SsrMode::Async`: the page is sent once its
/// data has loaded. The default out-of-order streaming sends `<Suspense>`
/// fallbacks first and swaps the content in with inline scripts, which would
/// leave a browser without JavaScript on "Loading…" forever, and it would
/// send a page's headers before a `<Redirect>` inside a `<Suspense>` could
/// set them.
#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    // Marks the document once the wasm bundle has taken over (effects never
    // run on the server). The browser tests use it to prove that the
    // "hydrated" journeys really ran hydrated, not on the SSR fallback.
    Effect::new(|_| {
        if let Some(body) = document().body() {
            let _ = body.set_attribute("data-hydrated", "true");
        }
    });
    view! {
        <Stylesheet id="leptos" href="/pkg/signet.css"/>
        <Title text="Signet"/>
        <Router>
            <Routes fallback=|| view! { <NotFound/> }>
                <Route path=path!("/login") view=LoginPage ssr=SsrMode::Async/>
                <Route path=path!("/setup") view=SetupPage ssr=SsrMode::Async/>
                <Route path=path!("/") view=HomePage ssr=SsrMode::Async/>
                <Route path=path!("/tenants") view=TenantsPage ssr=SsrMode::Async/>
                <Route path=path!("/tenants/:slug") view=TenantPage ssr=SsrMode::Async/>
                <Route path=path!("/tenants/:slug/endpoints/:endpoint") view=EndpointPage ssr=SsrMode::Async/>
                <Route path=path!("/keys/:id/secret") view=SecretPage ssr=SsrMode::Async/>
                <Route path=path!("/keys/:id/rotate") view=RotatePage ssr=SsrMode::Async/>
                <Route path=path!("/keys/:id/revoke") view=RevokePage ssr=SsrMode::Async/>
                <Route path=path!("/approvals") view=ApprovalsPage ssr=SsrMode::Async/>
                <Route path=path!("/users") view=UsersPage ssr=SsrMode::Async/>
                <Route path=path!("/audit") view=AuditPage ssr=SsrMode::Async/>
                <Route path=path!("/quarantine") view=QuarantinePage ssr=SsrMode::Async/>
                <Route path=path!("/quarantine/bulk/:id") view=BulkReleasePage ssr=SsrMode::Async/>
                <Route path=path!("/quarantine/:id") view=QuarantineEventPage ssr=SsrMode::Async/>
                <Route path=path!("/outbox") view=OutboxPage ssr=SsrMode::Async/>
                <Route path=path!("/events") view=EventFinderPage ssr=SsrMode::Async/>
                <Route path=path!("/events/:tenant/:endpoint/:event_id") view=EventStoryPage ssr=SsrMode::Async/>
                <Route path=path!("/retention") view=RetentionPage ssr=SsrMode::Async/>
                <Route path=path!("/dashboard") view=DashboardPage ssr=SsrMode::Async/>
                <Route path=path!("/evidence") view=EvidencePage ssr=SsrMode::Async/>
                <Route path=path!("/kek") view=KekPage ssr=SsrMode::Async/>
            </Routes>
        </Router>
    }
}
