//! Live pages (a bulk release, a drill run, a KEK rewrap) re-read their data
//! every second while something runs, once hydrated, and show its progress.

use std::time::Duration;

use leptos::prelude::*;

/// A counter that moves every second while `live` is true (hydrated only:
/// the interval never runs on the server). Put it in a resource's source.
pub fn every_second_while(live: RwSignal<bool>) -> RwSignal<u64> {
    let tick = RwSignal::new(0u64);
    Effect::new(move |_| {
        let poll = move || {
            if live.get_untracked() {
                tick.update(|n| *n += 1);
            }
        };
        if let Ok(handle) = set_interval_with_handle(poll, Duration::from_secs(1)) {
            on_cleanup(move || handle.clear());
        }
    });
    tick
}

/// How far a background job has come. `state` picks the fill's colour
/// (`progress-running`, `progress-failed`, …).
#[component]
pub fn ProgressBar(label: &'static str, percent: u64, #[prop(into)] state: String) -> impl IntoView {
    view! {
        <div
            class="progress"
            role="progressbar"
            aria-label=label
            aria-valuemin="0"
            aria-valuemax="100"
            aria-valuenow=percent.to_string()
        >
            <div class=format!("progress-fill progress-{state}") style=format!("width: {percent}%")></div>
        </div>
    }
}

/// Without JavaScript, reloads the page while its job runs: `content` is
/// the meta refresh's (`2`, `2;url=?auto=1`). As markup, not an element: a
/// browser with scripting parses a noscript's inner HTML as text, so a page
/// rendered or updated on the client never gets a live meta refresh (which
/// would reload it).
#[component]
pub fn MetaRefresh(content: &'static str) -> impl IntoView {
    view! { <noscript inner_html=format!(r#"<meta http-equiv="refresh" content="{content}">"#)></noscript> }
}
