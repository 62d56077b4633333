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
    view! {
        <div class="table-wrap">
            <table class=class>
                <thead>
                    <tr>{heads.iter().map(|head| view! { <th>{*head}</th> }).collect_view()}</tr>
                </thead>
                <tbody>{children()}</tbody>
            </table>
        </div>
    }
}
