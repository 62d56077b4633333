//! `/approvals`: the security reviewer's queue and the record of decisions.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;
use views::keys::ApprovalView;
use views::keys::KeyView;
use views::keys::ReviewItem;

use crate::{
    api::review::{ApproveKey, RejectKey, approval_history, review_queue},
    components::{
        ActionError, EventTypes, KeySummary, Layout, Loaded, Notice, Refresh, ReturnedError, StatusBadge, Submit,
        format::when,
    },
};

#[component]
pub fn ApprovalsPage() -> impl IntoView {
    let query = use_query_map();
    let refresh = Refresh::provide();
    let queue = Resource::new(move || refresh.get(), |_| review_queue());
    let history = Resource::new(move || refresh.get(), |_| approval_history());
    let approved = move || query.read().get("approved");
    let rejected = move || query.read().get("rejected");
    view! {
        <Layout
            title="Approvals"
            render=move |me| {
                let can_review = me.can_review();
                view! {
                {move || approved().map(|id| view! {
                    <Notice>"Key " <code>{id}</code> " approved: it verifies webhooks from now on."</Notice>
                })}
                {move || rejected().map(|id| view! {
                    <Notice>"Key " <code>{id}</code> " rejected: it will never verify anything."</Notice>
                })}
                <ReturnedError/>
                <p class="lead">
                    "A key verifies webhooks only after a reviewer approves its exact scope: \
                    tenant, endpoint, scheme and event types."
                </p>
                <Loaded resource=queue render=move |items| view! { <Queue items can_review/> }/>
                <h2>"Decisions"</h2>
                <Loaded resource=history render=move |rows| view! { <History rows/> }/>
                }
            }
        />
    }
}

#[component]
fn Queue(items: Vec<ReviewItem>, can_review: bool) -> impl IntoView {
    if items.is_empty() {
        return view! {
            <div class="empty">
                <p class="empty-title">"Nothing waits for review"</p>
                <p>"New and rotated keys appear here until someone approves or rejects their scope."</p>
            </div>
        }
        .into_any();
    }
    let count = items.len();
    view! {
        <h2>"Waiting for review " <span class="count">{count}</span></h2>
        {(!can_review).then(|| view! {
            <p class="hint">"Only security reviewers and administrators can approve or reject."</p>
        })}
        {items.into_iter().map(|item| view! { <ReviewCard item can_review/> }).collect_view()}
    }
    .into_any()
}

#[component]
fn ReviewCard(item: ReviewItem, can_review: bool) -> impl IntoView {
    let ReviewItem { key, replaces, history, scope } = item;
    let kind = if replaces.is_some() { "Rotation" } else { "New key" };
    let anchor = format!("review-{}", key.key_id);
    view! {
        <article class="card review" id=anchor>
            <header class="card-head">
                <h3><span class="muted">{kind} " "</span><code>{key.key_id.to_string()}</code></h3>
                <StatusBadge status=key.status.as_str()/>
            </header>
            <ScopeFacts key=key.clone() scope/>
            {replaces.map(|old| view! { <Replaces old/> })}
            {(!history.is_empty()).then(|| view! {
                <details>
                    <summary>"Earlier decisions on this key (" {history.len()} ")"</summary>
                    <History rows=history/>
                </details>
            })}
            {can_review.then(|| view! {
                <div class="decide">
                    <ApproveForm key_id=key.key_id.to_string()/>
                    <RejectForm key_id=key.key_id.into_string()/>
                </div>
            })}
        </article>
    }
}

/// The scope under review, exactly as it will be approved.
#[component]
fn ScopeFacts(key: KeyView, scope: serde_json::Value) -> impl IntoView {
    // An `hmac` endpoint's profile is part of the scope (by its SHA-256):
    // the reviewer can read the profile the approval will cover.
    let profile = scope.get("hmac_profile_sha256").and_then(|d| d.as_str()).map(|digest| {
        let page = format!("/tenants/{}/endpoints/{}", key.tenant, key.endpoint);
        view! {
            <dt>"HMAC profile"</dt>
            <dd data-testid="review-profile">
                <a href=page>"read the profile"</a>
                " · SHA-256 " <code class="digest">{digest.to_owned()}</code>
            </dd>
        }
    });
    view! {
        <dl class="facts">
            <dt>"Tenant"</dt>
            <dd><a href=format!("/tenants/{}", key.tenant)>{key.tenant.to_string()}</a></dd>
            <dt>"Endpoint"</dt>
            <dd><code>{key.endpoint.to_string()}</code></dd>
            <dt>"Scheme"</dt>
            <dd>{key.scheme.as_str()}</dd>
            {profile}
            <dt>"Event types"</dt>
            <dd><EventTypes types=key.event_types.clone()/></dd>
            <dt>"Owner"</dt>
            <dd>{key.owner.clone()} <span class="muted">" (rotation: " {key.rotation_owner.clone()} ")"</span></dd>
            <dt>"Created by"</dt>
            <dd>{key.created_by.clone()} <span class="muted">" · " {when(&key.created_at)}</span></dd>
        </dl>
    }
}

#[component]
fn Replaces(old: KeyView) -> impl IntoView {
    view! {
        <details class="replaces">
            <summary>
                "Replaces " <code>{old.key_id.to_string()}</code> " (" {old.status.as_str().replace('_', " ")} ")"
            </summary>
            <KeySummary key=old/>
        </details>
    }
}

#[component]
fn ApproveForm(key_id: String) -> impl IntoView {
    let action = ServerAction::<ApproveKey>::new();
    Refresh::after(action);
    view! {
        <ActionForm action>
            <input type="hidden" name="key_id" value=key_id/>
            <label class="field">
                <span>"Comment " <em class="optional">"(optional)"</em></span>
                <input type="text" name="comment" placeholder="e.g. matches change request CR-142"/>
            </label>
            <ActionError action/>
            <Submit action label="Approve scope"/>
        </ActionForm>
    }
}

#[component]
fn RejectForm(key_id: String) -> impl IntoView {
    let action = ServerAction::<RejectKey>::new();
    Refresh::after(action);
    view! {
        <ActionForm action>
            <input type="hidden" name="key_id" value=key_id/>
            <label class="field">
                <span>"Reason for rejecting"</span>
                <input type="text" name="comment" required placeholder="required: tell the requester what to fix"/>
            </label>
            <ActionError action/>
            <Submit action label="Reject" kind="danger-outline"/>
        </ActionForm>
    }
}

#[component]
fn History(rows: Vec<ApprovalView>) -> impl IntoView {
    if rows.is_empty() {
        return view! { <p class="empty-inline">"No decisions yet."</p> }.into_any();
    }
    view! {
        <div class="table-wrap">
            <table>
                <thead>
                    <tr>
                        <th>"When"</th>
                        <th>"Reviewer"</th>
                        <th>"Decision"</th>
                        <th>"Key"</th>
                        <th>"Scope"</th>
                        <th>"Comment"</th>
                    </tr>
                </thead>
                <tbody>
                    {rows.into_iter().map(|a| view! { <HistoryRow a/> }).collect_view()}
                </tbody>
            </table>
        </div>
    }
    .into_any()
}

#[component]
fn HistoryRow(a: ApprovalView) -> impl IntoView {
    let decision_class = format!("badge badge-decision-{}", a.decision);
    let (tenant, endpoint, scheme) =
        (a.scope_text("tenant").to_owned(), a.scope_text("endpoint").to_owned(), a.scope_text("scheme").to_owned());
    let types = a.scope_event_types();
    view! {
        <tr>
            <td class="nowrap">{when(&a.decided_at)}</td>
            <td>{a.reviewer}</td>
            <td><span class=decision_class>{a.decision.as_str()}</span></td>
            <td class="nowrap"><code>{a.key_id.into_string()}</code></td>
            <td>
                <a href=format!("/tenants/{tenant}")>{tenant.clone()}</a>
                " / " <code>{endpoint}</code> " · " {scheme}
                <br/>
                <EventTypes types/>
            </td>
            <td class="wrap">{a.comment}</td>
        </tr>
    }
}
