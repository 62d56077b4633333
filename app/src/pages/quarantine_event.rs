//! `/quarantine/:id`: one quarantined event. Metadata for everyone who may
//! see the tenant; the decrypted (redacted) body only on an explicit click
//! by on-call or an admin, and every such view is audited.

use leptos::prelude::*;
use leptos_router::hooks::{use_params_map, use_query_map};

use crate::{
    api::operations::{DiscardQuarantine, ReleaseQuarantine, quarantine_detail, reveal_quarantine_body},
    components::{
        ActionError, Layout, Loaded, Notice, ReasonField, Refresh, ReturnedError, Submit, format::when,
        quarantine_labels::reason_label,
    },
    dto::{Me, QuarantineView},
};

#[component]
pub fn QuarantineEventPage() -> impl IntoView {
    let params = use_params_map();
    let query = use_query_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let refresh = Refresh::provide();
    let entry = Resource::new(move || (id(), refresh.get()), |(id, _)| quarantine_detail(id));
    view! {
        <Layout
            title=""
            render=move |me| view! {
                <Loaded resource=entry what="quarantined event" name=id heading="Quarantined event" render={
                    let me = me.clone();
                    move |q| {
                        let done = query.read().get("done");
                        let show_body = query.read().get("body").is_some_and(|b| b == "show");
                        view! { <Detail q me=me.clone() done show_body/> }
                    }
                }/>
            }
        />
    }
}

#[component]
fn Detail(q: QuarantineView, me: Me, done: Option<String>, show_body: bool) -> impl IntoView {
    let open = q.status == "open";
    let can_triage = me.can_triage();
    let self_href = format!("/quarantine/{}", q.id);
    let done_notice = done.map(|d| {
        let text = if d == "released" {
            "Released: the event applied and is now recorded as applied."
        } else {
            "Discarded: the event stays claimed (provider retries remain duplicates) and will not apply."
        };
        view! { <Notice>{text}</Notice> }
    });
    let resolution = (!open).then(|| {
        view! {
            <dt>"Resolved"</dt>
            <dd>
                {q.resolved_at.as_deref().map(when).unwrap_or_default()}
                " by " <strong>{q.resolved_by.clone().unwrap_or_default()}</strong>
            </dd>
            <dt>"Why"</dt><dd>{q.resolution_note.clone().unwrap_or_default()}</dd>
        }
    });
    let body = if !q.body_stored {
        view! { <p class="hint">"The body is no longer stored (body retention)."</p> }.into_any()
    } else if !can_triage {
        view! { <p class="hint">"Only on-call engineers and administrators can view event bodies."</p> }.into_any()
    } else if show_body {
        view! { <RevealedBody id=q.id.clone() hide=self_href.clone()/> }.into_any()
    } else {
        view! {
            <p>
                "The body may contain patient data. Viewing it is recorded in the audit log under your name; \
                configured fields are redacted."
            </p>
            <a class="button secondary" href=format!("{self_href}?body=show")>"Show body"</a>
        }
        .into_any()
    };
    view! {
        <p class="crumbs"><a href="/quarantine">"Quarantine"</a> " / " <code>{q.event_id.clone()}</code></p>
        <div class="page-head">
            <div>
                <h1>
                    "Quarantined event " <span class=format!("badge badge-q-{}", q.status)>{q.status.clone()}</span>
                </h1>
                <p class="muted">
                    <code>{q.tenant.clone()}</code> " / " <code>{q.endpoint.clone()}</code>
                    " · " {when(&q.quarantined_at)}
                </p>
            </div>
        </div>
        {done_notice}
        <ReturnedError/>
        {q.last_release_error.clone().filter(|_| open).map(|e| view! {
            <p class="warning" role="alert">
                "The last release attempt failed: " <strong>{reason_label(&e)}</strong>
                ". Fix the cause, then release again."
            </p>
        })}
        <div class="two-col">
            <section class="card">
                <h2>"Event"</h2>
                <dl class="facts">
                    <dt>"Reason"</dt><dd><span class="badge badge-reason">{reason_label(&q.reason)}</span></dd>
                    <dt>"Event id"</dt><dd><code class="wrap">{q.event_id.clone()}</code></dd>
                    <dt>"Type"</dt>
                    <dd>{q.event_type.clone().unwrap_or_else(|| "— (body is not a valid envelope)".to_owned())}</dd>
                    <dt>"Verified with key"</dt>
                    <dd><code class="wrap">{q.key_id.clone().unwrap_or_default()}</code></dd>
                    <dt>"Body SHA-256"</dt>
                    <dd><code class="wrap">{q.body_sha256.clone().unwrap_or_default()}</code></dd>
                    {resolution}
                </dl>
            </section>
            <section class="card">
                <h2>"Body"</h2>
                {body}
            </section>
        </div>
        {(open && can_triage).then(|| view! { <Triage id=q.id.clone()/> })}
    }
}

#[component]
fn RevealedBody(id: String, hide: String) -> impl IntoView {
    let body = Resource::new(move || id.clone(), reveal_quarantine_body);
    view! {
        <Loaded resource=body loading="Decrypting…" render=move |b| {
            let shown = if b.json {
                view! {
                    <p class="hint">"Redacted fields: " {b.redacted_fields.join(", ")}</p>
                    <pre class="body" data-testid="event-body">{b.text}</pre>
                }
                .into_any()
            } else {
                let withheld = format!(
                    "The body is not JSON ({} bytes). Nothing in it could be redacted, so it is not shown.",
                    b.size_bytes
                );
                view! { <p class="warning" data-testid="event-body-withheld">{withheld}</p> }.into_any()
            };
            view! {
                {shown}
                <a class="button secondary" href=hide.clone()>"Hide body"</a>
            }
        }/>
    }
}

#[component]
fn Triage(id: String) -> impl IntoView {
    let release = ServerAction::<ReleaseQuarantine>::new();
    let discard = ServerAction::<DiscardQuarantine>::new();
    Refresh::after(release);
    Refresh::after(discard);
    let discard_id = id.clone();
    view! {
        <div class="two-col">
            <section class="card">
                <h2>"Release"</h2>
                <p>
                    "Re-runs the handler against the current state, in one transaction. \
                    If it applies, the event becomes applied; if not, it stays here with the new error."
                </p>
                <ActionError action=release/>
                <ActionForm action=release>
                    <input type="hidden" name="id" value=id.clone()/>
                    <ReasonField placeholder="e.g. reminder now exists"/>
                    <div class="actions"><Submit action=release label="Release event"/></div>
                </ActionForm>
            </section>
            <section class="card">
                <h2>"Discard"</h2>
                <p>
                    "Gives up on the event. It stays claimed, \
                    so provider retries are still acknowledged as duplicates and never apply."
                </p>
                <ActionError action=discard/>
                <ActionForm action=discard>
                    <input type="hidden" name="id" value=discard_id/>
                    <ReasonField placeholder="e.g. test event from the provider's dashboard"/>
                    <div class="actions"><Submit action=discard label="Discard event" kind="danger"/></div>
                </ActionForm>
            </section>
        </div>
    }
}
