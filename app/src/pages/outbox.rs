//! `/outbox`: notifications waiting, sent, or dead; on-call retries dead
//! ones by hand (same idempotency key, so the receiving side deduplicates).

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;
use views::outbox::OutboxStatus;
use views::outbox::OutboxView;

use crate::{
    api::operations::{RetryOutbox, list_outbox},
    components::{
        ActionError, Layout, Loaded, Notice, Refresh, ReturnedError, Submit,
        format::{query_value, when},
    },
};

/// The status filter's values and labels.
const STATUSES: [(&str, &str); 5] = [
    ("", "All"),
    (OutboxStatus::Pending.as_str(), "Pending"),
    (OutboxStatus::Sending.as_str(), "Sending"),
    (OutboxStatus::Sent.as_str(), "Sent"),
    (OutboxStatus::Dead.as_str(), "Dead"),
];

#[component]
pub fn OutboxPage() -> impl IntoView {
    let query = use_query_map();
    let refresh = Refresh::provide();
    let status = Memo::new(move |_| query.with(|q| q.get("status").unwrap_or_default()));
    let items = Resource::new(
        move || (status.get(), refresh.get()),
        |(s, _)| list_outbox(None, Some(s).filter(|s| !s.is_empty())),
    );
    view! {
        <Layout
            title="Outbox"
            render=move |me| {
                let can_retry = me.can_triage();
                view! {
                    <p class="lede">
                        "Notifications the effects asked for. \
                        Each is sent with its intent id as the Idempotency-Key, retried with backoff, \
                        and marked dead after its last attempt."
                    </p>
                    {move || query.read().get("retried").map(|id| view! {
                        <Notice>"Intent " <code>{id}</code> " is queued again with the same idempotency key."</Notice>
                    })}
                    <ReturnedError/>
                    <nav class="reason-counts" aria-label="By status">
                        {STATUSES.into_iter().map(|(v, label)| {
                            let href = if v.is_empty() { "/outbox".to_owned() } else { format!("/outbox?status={v}") };
                            view! { <a href=href class:current=move || status.get() == v>{label}</a> }
                        }).collect_view()}
                    </nav>
                    <Loaded resource=items render=move |list| view! { <Intents list can_retry/> }/>
                }
            }
        />
    }
}

#[component]
fn Intents(list: Vec<OutboxView>, can_retry: bool) -> impl IntoView {
    if list.is_empty() {
        return view! {
            <div class="empty">
                <p class="empty-title">"No notifications"</p>
                <p>"Nothing matches this status."</p>
            </div>
        }
        .into_any();
    }
    let retry = ServerAction::<RetryOutbox>::new();
    Refresh::after(retry);
    view! {
        <ActionError action=retry/>
        <div class="table-wrap">
            <table>
                <thead>
                    <tr>
                        <th>"Created"</th>
                        <th>"Tenant"</th>
                        <th>"Kind / idempotency key"</th>
                        <th>"Status"</th>
                        <th class="num">"Attempts"</th>
                        <th>"Delivered / next attempt"</th>
                        <th></th>
                    </tr>
                </thead>
                <tbody>
                    {list.into_iter().map(|o| {
                        let dead = o.status == OutboxStatus::Dead;
                        let next = match (&o.delivered_at, o.status) {
                            (Some(at), _) => when(at),
                            (None, OutboxStatus::Pending) => format!("next {}", when(&o.next_attempt_at)),
                            _ => "—".to_owned(),
                        };
                        view! {
                            <tr>
                                <td class="nowrap">{when(&o.created_at)}</td>
                                <td><code>{o.tenant.into_string()}</code></td>
                                <td>
                                    {o.kind.clone()} <br/><code class="wrap">{o.idempotency_key}</code>
                                    {(o.kind == "reminder_notice").then(|| {
                                        let href = format!("/events?intent={}", query_value(&o.id));
                                        view! { <br/><a href=href class="small">"event story"</a> }
                                    })}
                                </td>
                                <td>
                                    <span class=format!("badge badge-outbox-{}", o.status)>{o.status.as_str()}</span>
                                    {o.last_error.map(|e| view! { <br/><small class="muted">{e}</small> })}
                                </td>
                                <td class="num">{o.attempts}</td>
                                <td class="nowrap">{next}</td>
                                <td>
                                    {(dead && can_retry).then(|| view! {
                                        <ActionForm action=retry>
                                            <input type="hidden" name="id" value=o.id.clone()/>
                                            <Submit action=retry label="Retry" kind="secondary small"/>
                                        </ActionForm>
                                    })}
                                </td>
                            </tr>
                        }
                    }).collect_view()}
                </tbody>
            </table>
        </div>
    }
    .into_any()
}
