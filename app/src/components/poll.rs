//! Live pages (a bulk release, a drill run, a KEK rewrap) re-read their data
//! every second while something runs, once hydrated, and show its progress
//! and the buttons that resume or cancel it.

use std::time::Duration;

use leptos::{prelude::*, web_sys::FormData};
use serde::de::DeserializeOwned;
use server_fn::{
    Http, ServerFn,
    client::Client,
    codec::{Json, PostUrl},
    request::ClientReq,
};

use super::{ActionError, Refresh, Submit};
use crate::api::AppError;

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

/// A background run's Resume (while its runner is stopped) and Cancel
/// (until it ends) buttons, side by side, each with its error; the page's
/// data reloads after either. Both server functions take the run's `id`.
#[component]
pub fn RunActions<R, C>(
    resume: ServerAction<R>,
    cancel: ServerAction<C>,
    #[prop(into)] id: String,
    /// Whether the runner stopped (interrupted or failed): only then Resume.
    stopped: bool,
) -> impl IntoView
where
    R: DeserializeOwned
        + ServerFn<Protocol = Http<PostUrl, Json>, Output = (), Error = AppError>
        + Clone
        + Send
        + Sync
        + 'static,
    <<R::Client as Client<AppError>>::Request as ClientReq<AppError>>::FormData: From<FormData>,
    R::Client: Client<AppError>,
    C: DeserializeOwned
        + ServerFn<Protocol = Http<PostUrl, Json>, Output = (), Error = AppError>
        + Clone
        + Send
        + Sync
        + 'static,
    <<C::Client as Client<AppError>>::Request as ClientReq<AppError>>::FormData: From<FormData>,
    C::Client: Client<AppError>,
{
    Refresh::after(resume);
    Refresh::after(cancel);
    let resume_id = id.clone();
    view! {
        <ActionError action=resume/>
        <ActionError action=cancel/>
        <div class="actions">
            {stopped.then(move || view! {
                <ActionForm action=resume>
                    <input type="hidden" name="id" value=resume_id/>
                    <Submit action=resume label="Resume"/>
                </ActionForm>
            })}
            <ActionForm action=cancel>
                <input type="hidden" name="id" value=id/>
                <Submit action=cancel label="Cancel" kind="danger"/>
            </ActionForm>
        </div>
    }
}
