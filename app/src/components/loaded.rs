//! The one way a page shows a resource it loads.

use leptos::prelude::*;

use super::{FormError, LoadError};
use crate::api::AppError;

/// "Loading…" until the resource first arrives (on a reload the last value
/// stays up), then `render` with the value, or the error in its place.
#[component]
pub fn Loaded<T, V, F>(
    resource: Resource<Result<T, AppError>>,
    render: F,
    /// For a page about one thing the URL names: what it is ("key",
    /// "tenant"). The error then says whether it is missing or out of the
    /// user's reach (see [`LoadError`]).
    #[prop(optional)]
    what: Option<&'static str>,
    /// With `what`: the name or id the URL asked for.
    #[prop(optional, into)]
    name: Option<Signal<String>>,
    /// With `what`: a heading above the error, for a page whose heading
    /// comes with its data.
    #[prop(optional)]
    heading: Option<&'static str>,
    /// What to say while it loads.
    #[prop(default = "Loading…")]
    loading: &'static str,
) -> impl IntoView
where
    T: Clone + Send + Sync + 'static,
    F: Fn(T) -> V + Clone + Send + Sync + 'static,
    V: IntoView + 'static,
{
    let failed = move |error: AppError| {
        let Some(what) = what else { return view! { <FormError error/> }.into_any() };
        let name = name.map(|n| n.get()).unwrap_or_default();
        match heading {
            Some(heading) => view! { <h1>{heading}</h1><LoadError error what name/> }.into_any(),
            None => view! { <LoadError error what name/> }.into_any(),
        }
    };
    let render = move |result| match result {
        Ok(value) => render(value).into_any(),
        Err(error) => failed(error),
    };
    view! { <Awaited resource loading render/> }
}

/// A part of the page it can do without: nothing while the resource loads
/// or if it fails, otherwise `render` with the value.
#[component]
pub fn IfLoaded<T, V, F>(resource: Resource<Result<T, AppError>>, render: F) -> impl IntoView
where
    T: Clone + Send + Sync + 'static,
    F: Fn(T) -> V + Clone + Send + Sync + 'static,
    V: IntoView + 'static,
{
    let render = move |result: Result<T, AppError>| result.ok().map(&render);
    view! { <Awaited resource render/> }
}

/// What [`Loaded`] and [`IfLoaded`] are made of, for a page that decides
/// itself what the result means (where to send the user, say): `loading`
/// (if given) until the resource first arrives, then `render` with its
/// result; on a reload the last rendering stays up.
#[component]
pub fn Awaited<T, V, F>(
    resource: Resource<Result<T, AppError>>,
    render: F,
    #[prop(optional)] loading: Option<&'static str>,
) -> impl IntoView
where
    T: Clone + Send + Sync + 'static,
    F: Fn(Result<T, AppError>) -> V + Clone + Send + Sync + 'static,
    V: IntoView + 'static,
{
    view! {
        <Transition fallback=move || loading.map(|text| view! { <p class="loading">{text}</p> })>
            {move || {
                let render = render.clone();
                Suspend::new(async move { render(resource.await) })
            }}
        </Transition>
    }
}
