//! The one way a page shows a resource it loads.

use leptos::prelude::*;

use super::FormError;
use crate::api::AppError;

/// "Loading…" until the resource first arrives (on a reload the last value
/// stays up), then `render` with the value, or the error in its place.
#[component]
pub fn Loaded<T, V, F>(resource: Resource<Result<T, AppError>>, render: F) -> impl IntoView
where
    T: Clone + Send + Sync + 'static,
    F: Fn(T) -> V + Clone + Send + Sync + 'static,
    V: IntoView + 'static,
{
    view! {
        <Transition fallback=|| view! { <p class="loading">"Loading…"</p> }>
            {move || {
                let render = render.clone();
                Suspend::new(async move {
                    match resource.await {
                        Ok(value) => render(value).into_any(),
                        Err(error) => view! { <FormError error/> }.into_any(),
                    }
                })
            }}
        </Transition>
    }
}
