//! The pages' data tables.

use leptos::prelude::*;

/// A table in the wrapper that lets it scroll sideways on a narrow screen:
/// a header row of `heads`, then `children`, its rows.
#[component]
pub fn Table(
    heads: &'static [&'static str],
    #[prop(optional)] class: Option<&'static str>,
    children: Children,
) -> impl IntoView {
    let head = view! {
        <thead>
            <tr>{heads.iter().map(|head| view! { <th>{*head}</th> }).collect_view()}</tr>
        </thead>
    };
    let body = view! { <tbody>{children()}</tbody> };
    // Two arms: `class=None` would still write an empty class attribute.
    let table = match class {
        Some(class) => view! { <table class=class>{head}{body}</table> }.into_any(),
        None => view! { <table>{head}{body}</table> }.into_any(),
    };
    view! { <div class="table-wrap">{table}</div> }
}
