//! `/quarantine/:id`: one quarantined event. Metadata for everyone who may
//! see the tenant; the decrypted (redacted) body only for on-call or an
//! admin, on an explicit click that posts a form (Origin-checked, audited).
//! The post redirects here with `?view=<handle>`, and the page shows the
//! body it decrypted, once; rendering the page never decrypts.

use leptos::prelude::*;
use leptos_router::hooks::{use_params_map, use_query_map};
use views::ids::KeyId;
use views::quarantine::QuarantineReason;
use views::quarantine::QuarantineStatus;
use views::quarantine::QuarantineView;
use views::quarantine::RevealedBody;

use crate::{
    api::{
        AppError,
        operations::{
            DiscardQuarantine, ReleaseQuarantine, RevealQuarantineBody, quarantine_detail, shown_quarantine_body,
        },
    },
    components::{
        ActionError, Awaited, FormError, Layout, Loaded, Notice, ReasonField, Refresh, ReturnedError, Submit,
        format::when, quarantine_labels::reason_label,
    },
    dto::Me,
};

/// The body a reveal left for this page, if the URL names one.
type Shown = Resource<Result<Option<RevealedBody>, AppError>>;

#[component]
pub fn QuarantineEventPage() -> impl IntoView {
    let params = use_params_map();
    let query = use_query_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let handle = move || query.read().get("view").unwrap_or_default();
    let refresh = Refresh::provide();
    let entry = Resource::new(move || (id(), refresh.get()), |(id, _)| quarantine_detail(id));
    // Created here, not inside the `Loaded` below: a view is taken once, and a
    // Suspense may render its children more than once on the server.
    let shown: Shown = Resource::new(
        move || (id(), handle()),
        |(id, handle)| async move {
            if handle.is_empty() {
                return Ok(None);
            }
            shown_quarantine_body(id, handle).await
        },
    );
    view! {
        <Layout
            title=""
            render=move |me| view! {
                <Loaded resource=entry what="quarantined event" name=id heading="Quarantined event" render={
                    let me = me.clone();
                    move |q| {
                        let done = query.read().get("done");
                        view! { <Detail q me=me.clone() done shown/> }
                    }
                }/>
            }
        />
    }
}

#[component]
fn Detail(q: QuarantineView, me: Me, done: Option<String>, shown: Shown) -> impl IntoView {
    let open = q.status == QuarantineStatus::Open;
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
    } else {
        view! { <Body id=q.id.clone() shown hide=self_href.clone()/> }.into_any()
    };
    view! {
        <p class="crumbs"><a href="/quarantine">"Quarantine"</a> " / " <code>{q.event_id.clone()}</code></p>
        <div class="page-head">
            <div>
                <h1>
                    "Quarantined event " <span class=format!("badge badge-q-{}", q.status)>{q.status.as_str()}</span>
                </h1>
                <p class="muted">
                    <code>{q.tenant.clone()}</code> " / " <code>{q.endpoint.to_string()}</code>
                    " · " {when(&q.quarantined_at)}
                </p>
            </div>
        </div>
        {done_notice}
        <ReturnedError/>
        {q.last_release_error.clone().filter(|_| open).map(|e| {
            let next = if e == QuarantineReason::AmbiguousOrder.as_str() {
                ". Releasing again applies it as the newest transition."
            } else {
                ". Fix the cause, then release again."
            };
            view! {
                <p class="warning" role="alert">
                    "The last release attempt failed: " <strong>{reason_label(&e)}</strong> {next}
                </p>
            }
        })}
        {(open && (q.reason == QuarantineReason::AmbiguousOrder
            || q.last_release_error.as_deref() == Some(QuarantineReason::AmbiguousOrder.as_str()))).then(|| {
            view! {
                <p class="hint">
                    "This reminder transition carries no " <code>"occurred_at"</code>
                    " and contradicts a state applied since, so which is newer is unknown. "
                    "Releasing it applies it as the newest (unless the reminder was canceled); "
                    "discard it if the current state is the newer one."
                </p>
            }
        })}
        <div class="two-col">
            <section class="card">
                <h2>"Event"</h2>
                <dl class="facts">
                    <dt>"Reason"</dt><dd><span class="badge badge-reason">{reason_label(q.reason.as_str())}</span></dd>
                    <dt>"Event id"</dt><dd><code class="wrap">{q.event_id.clone()}</code></dd>
                    <dt>"Type"</dt>
                    <dd>{q.event_type.clone().unwrap_or_else(|| "— (body is not a valid envelope)".to_owned())}</dd>
                    <dt>"Verified with key"</dt>
                    <dd><code class="wrap">{q.key_id.as_ref().map(KeyId::to_string).unwrap_or_default()}</code></dd>
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

/// The body card for someone who may see bodies: the body a reveal just
/// decrypted, or the form that reveals it.
#[component]
fn Body(id: String, shown: Shown, hide: String) -> impl IntoView {
    let reveal = ServerAction::<RevealQuarantineBody>::new();
    let query = use_query_map();
    view! {
        <Awaited resource=shown loading="Loading…" render=move |r| match r {
            Ok(Some(b)) => view! { <BodyShown b hide=hide.clone()/> }.into_any(),
            Ok(None) => {
                // The URL names a view this session can no longer take.
                let gone = query.with_untracked(|q| q.get("view").is_some_and(|v| !v.is_empty()));
                view! { <ShowBody id=id.clone() reveal gone/> }.into_any()
            }
            Err(error) => view! { <FormError error/> <ShowBody id=id.clone() reveal gone=false/> }.into_any(),
        }/>
    }
}

/// "Show body": a form, so the decryption is a POST (Origin-checked and
/// audited) with or without JavaScript.
#[component]
fn ShowBody(id: String, reveal: ServerAction<RevealQuarantineBody>, gone: bool) -> impl IntoView {
    view! {
        {gone.then(|| view! {
            <p class="hint">"That view of the body has been shown already or has expired. Show it again if needed."</p>
        })}
        <p>
            "The body may contain patient data. Viewing it is recorded in the audit log under your name; \
            configured fields are redacted."
        </p>
        <ActionError action=reveal/>
        <ActionForm action=reveal>
            <input type="hidden" name="id" value=id/>
            <Submit action=reveal label="Show body" kind="secondary"/>
        </ActionForm>
    }
}

#[component]
fn BodyShown(b: RevealedBody, hide: String) -> impl IntoView {
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
        <a class="button secondary" href=hide>"Hide body"</a>
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
