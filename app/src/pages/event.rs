//! `/events/:tenant/:endpoint/:event_id`: one event's whole story (never its
//! body; a quarantined one links to its audited reveal). `/events` finds
//! one: from the dashboard's search form (a plain GET, so it works without
//! JavaScript), or from a quarantine entry or outbox intent (`?quarantine=`,
//! `?intent=`), and redirects to its page.

use leptos::prelude::*;
use leptos_router::{
    components::Redirect,
    hooks::{use_params_map, use_query_map},
};
use views::audit::AuditView;
use views::events::EventStory;
use views::events::StoryDelivery;
use views::ids::KeyId;
use views::outbox::OutboxView;

use crate::{
    api::events::{locate_event, story_of_event},
    components::{
        Awaited, FormError, Layout, Loaded,
        format::{event_href, when},
    },
};

/// The search form (dashboard and `/events`): tenant, endpoint and event id.
#[component]
pub fn EventSearch() -> impl IntoView {
    view! {
        <form method="get" action="/events" class="event-search" role="search" aria-label="Find an event">
            <label>"Tenant " <input name="tenant" required placeholder="clinic-a"/></label>
            <label>"Endpoint " <input name="endpoint" required placeholder="reminders"/></label>
            <label>"Event id " <input name="event_id" required maxlength="255" placeholder="msg_…"/></label>
            <button type="submit" class="secondary">"Show its story"</button>
        </form>
    }
}

#[component]
pub fn EventFinderPage() -> impl IntoView {
    let query = use_query_map();
    let get = move |k: &str| query.with(|q| q.get(k).unwrap_or_default().trim().to_owned());
    let direct = move || {
        let (t, e, id) = (get("tenant"), get("endpoint"), get("event_id"));
        (!t.is_empty() && !e.is_empty() && !id.is_empty()).then(|| event_href(&t, &e, &id))
    };
    let by = move || (get("quarantine"), get("intent"));
    let located = Resource::new(by, |(quarantine, intent)| async move {
        if quarantine.is_empty() && intent.is_empty() {
            return Ok(None);
        }
        let q = Some(quarantine).filter(|s| !s.is_empty());
        let i = Some(intent).filter(|s| !s.is_empty());
        locate_event(q, i).await.map(Some)
    });
    view! {
        <Layout title="Find an event" render=move |_| match direct() {
            Some(path) => view! { <Redirect path/> }.into_any(),
            None => view! {
                <Awaited resource=located loading="Loading…" render=|r| match r {
                    Ok(Some(at)) => {
                        let path = event_href(&at.tenant, at.endpoint.as_str(), &at.event_id);
                        view! { <Redirect path/> }.into_any()
                    }
                    Ok(None) => view! { <EventSearch/> }.into_any(),
                    Err(error) => view! { <FormError error/> <EventSearch/> }.into_any(),
                }/>
            }
            .into_any(),
        }/>
    }
}

#[component]
pub fn EventStoryPage() -> impl IntoView {
    let params = use_params_map();
    let part = move |k: &str| params.read().get(k).unwrap_or_default();
    let key = move || (part("tenant"), part("endpoint"), part("event_id"));
    let story = Resource::new(key, |(t, e, id)| story_of_event(t, e, id));
    view! {
        <Layout title="" render=move |_| view! {
            <p class="crumbs"><a href="/dashboard">"Dashboard"</a> " / " <code>{part("event_id")}</code></p>
            <h1>"Event " <code class="wrap">{part("event_id")}</code></h1>
            <p class="muted"><code>{part("tenant")}</code> " / " <code>{part("endpoint")}</code></p>
            <Loaded resource=story what="event" name=Signal::derive(move || part("event_id")) render=|s| {
                view! { <Story s/> }
            }/>
        }/>
    }
}

#[component]
fn Story(s: EventStory) -> impl IntoView {
    let claim = match s.claim {
        Some(c) => view! {
            <dl class="facts" data-testid="event-claim">
                <dt>"Outcome"</dt><dd><span class="badge">{c.outcome.as_str()}</span></dd>
                <dt>"Type"</dt><dd>{c.event_type.unwrap_or_else(|| "—".to_owned())}</dd>
                <dt>"Key"</dt><dd><code class="wrap">{c.key_id.into_string()}</code></dd>
                <dt>"Claimed"</dt><dd>{when(&c.received_at)}</dd>
                <dt>"Body SHA-256"</dt><dd><code class="wrap">{c.body_sha256}</code></dd>
                <dt>"Body"</dt><dd>{if c.body_stored { "stored (sealed)" } else { "purged by body retention" }}</dd>
            </dl>
        }
        .into_any(),
        None => view! { <p class="hint">"Not claimed (refused before a claim), or purged by dedup retention."</p> }
            .into_any(),
    };
    let quarantine = s.quarantine.map(|q| {
        let href = format!("/quarantine/{}", q.entry.id);
        view! {
            <section class="card">
                <h2>"Quarantine"</h2>
                <p>
                    <span class=format!("badge badge-q-{}", q.entry.status)>{q.entry.status.as_str()}</span>
                    " " {q.entry.reason.as_str()} " · " {when(&q.entry.quarantined_at)}
                </p>
                <p><a href=href>"Open the entry"</a> " (its body is shown there on request, audited)"</p>
                <AuditRows rows=q.triage empty="No triage yet."/>
            </section>
        }
    });
    let reminder = s.reminder.map(|r| {
        let now =
            r.current.map_or_else(|| "gone".to_owned(), |c| format!("{} (send at {})", c.status, when(&c.send_at)));
        view! {
            <section class="card">
                <h2>"Reminder"</h2>
                <p>
                    <code>{r.reminder_id}</code> ": " {r.transition} " → " <strong>{r.outcome.as_str()}</strong>
                    "; now " {now}
                </p>
            </section>
        }
    });
    view! {
        <div class="two-col">
            <section class="card"><h2>"Claim"</h2>{claim}</section>
            <section class="card">
                <h2>"Replay records"</h2>
                {if s.replay.is_empty() {
                    view! { <p class="hint">"None (refused before verifying, or expired)."</p> }.into_any()
                } else {
                    view! { <ul>{s.replay.into_iter().map(|r| view! {
                        <li>
                            <code class="wrap">{r.message_sha256}</code> " guards until " {when(&r.expires_at)}
                            {(r.kept_until > r.expires_at).then(|| view! {
                                ", kept until " {when(&r.kept_until)} " (its day's partition)"
                            })}
                        </li>
                    }).collect_view()}</ul> }.into_any()
                }}
            </section>
        </div>
        <section class="card">
            <h2>"Deliveries"</h2>
            <Deliveries rows=s.deliveries/>
        </section>
        {quarantine}
        {reminder}
        <section class="card">
            <h2>"Outbox"</h2>
            <Intents rows=s.outbox/>
        </section>
        <section class="card">
            <h2>"Audit"</h2>
            <AuditRows rows=s.audit empty="No audit entries name this event."/>
        </section>
    }
}

#[component]
fn Deliveries(rows: Vec<StoryDelivery>) -> impl IntoView {
    if rows.is_empty() {
        return view! { <p class="hint">"No answers recorded (the log keeps them for the dedup retention)."</p> }
            .into_any();
    }
    view! {
        <div class="table-wrap">
            <table data-testid="event-deliveries">
                <thead>
                    <tr>
                        <th>"Answered"</th>
                        <th class="num">"Status"</th>
                        <th>"Answer"</th>
                        <th>"Key"</th>
                        <th>"Scheme"</th>
                    </tr>
                </thead>
                <tbody>
                    {rows.into_iter().map(|d| view! {
                        <tr>
                            <td class="nowrap">{when(&d.answered_at)}</td>
                            <td class="num">{d.status}</td>
                            <td>{d.answer}</td>
                            <td><code>{d.key_id.map_or_else(|| "—".to_owned(), KeyId::into_string)}</code></td>
                            <td>{d.scheme}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        </div>
    }
    .into_any()
}

#[component]
fn Intents(rows: Vec<OutboxView>) -> impl IntoView {
    if rows.is_empty() {
        return view! { <p class="hint">"No outbox intents."</p> }.into_any();
    }
    view! {
        <ul>
            {rows.into_iter().map(|o| view! {
                <li>
                    {o.kind} " " <code>{o.id}</code> " · "
                    <span class=format!("badge badge-outbox-{}", o.status)>{o.status.as_str()}</span>
                    " after " {o.attempts} " attempt(s)"
                    {o.last_error.map(|e| view! { "; last error: " <small class="muted">{e}</small> })}
                </li>
            }).collect_view()}
        </ul>
    }
    .into_any()
}

#[component]
fn AuditRows(rows: Vec<AuditView>, empty: &'static str) -> impl IntoView {
    if rows.is_empty() {
        return view! { <p class="hint">{empty}</p> }.into_any();
    }
    view! {
        <ul>
            {rows.into_iter().map(|a| view! {
                <li>{when(&a.at)} " · " <strong>{a.actor}</strong> " · " <code>{a.action}</code> " #" {a.seq}</li>
            }).collect_view()}
        </ul>
    }
    .into_any()
}
