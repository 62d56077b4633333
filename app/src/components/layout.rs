use leptos::prelude::*;
use leptos_router::components::Redirect;

use crate::{api::{session::whoami, AppError}, dto::Me};

/// The signed-in frame: navigation for the user's role and the page body.
/// Redirects to the login page when nobody is signed in.
#[component]
pub fn Layout<F, V>(title: &'static str, render: F) -> impl IntoView
where
    F: Fn(Me) -> V + Send + Sync + 'static,
    V: IntoView + 'static,
{
    let me = Resource::new(|| (), |_| whoami());
    let render = std::sync::Arc::new(render);
    view! {
        <Suspense fallback=|| view! { <p class="loading">"Loading…"</p> }>
            {move || {
                let render = render.clone();
                me.get().map(move |r| match r {
                    Ok(Some(me)) => view! {
                        <header class="topbar">
                            <a class="brand" href="/">"Signet"</a>
                            <nav>
                                <a href="/tenants">"Tenants"</a>
                                {me.can_review().then(|| view! { <a href="/approvals">"Approvals"</a> })}
                                {me.is_admin().then(|| view! { <a href="/users">"Users"</a> })}
                                <a href="/audit">"Audit log"</a>
                            </nav>
                            <span class="whoami">{me.username.clone()} " · " {me.role_label.clone()}</span>
                        </header>
                        <main>
                            <h1>{title}</h1>
                            {render(me)}
                        </main>
                    }.into_any(),
                    Ok(None) => view! { <Redirect path="/login"/> }.into_any(),
                    Err(e) => view! { <FormError error=e/> }.into_any(),
                })
            }}
        </Suspense>
    }
}

#[component]
pub fn FormError(error: AppError) -> impl IntoView {
    view! { <p class="error" role="alert">{error.message}</p> }
}

#[component]
pub fn StatusBadge(status: String) -> impl IntoView {
    let class = format!("badge badge-{status}");
    view! { <span class=class>{status.replace('_', " ")}</span> }
}
