//! The retry-policy panel of a tenant page and the administrators' cohort
//! switch on the tenants page (docs/architecture.md#rollout-order-and-sign-off:
//! roll the boundary out first, then enable retries for a small cohort, with a
//! rollback switch).

use leptos::prelude::*;
use views::retry_policy::OverrideStatus;
use views::retry_policy::RetryPolicy;
use views::retry_policy::RetryPolicyView;
use views::retry_policy::RolloutOverrideView;

use crate::{
    api::{
        AppError,
        operations::{
            DecideOverride, RollbackRetryPolicy, SetRetryPolicy, SetRetryPolicyCohort, cohort_context, retry_overrides,
            retry_policy,
        },
    },
    components::{ActionError, FormError, Loaded, ReasonField, Refresh, Submit, format::when},
    dto::CohortContextDto,
};

/// The panel's data: the policy and the tenant's break-glass requests.
pub type PanelData = (RetryPolicyView, Vec<RolloutOverrideView>);

/// Loads the panel's data (the tenant page loads it with the rest).
pub async fn load_panel(tenant: String) -> Result<PanelData, AppError> {
    Ok((retry_policy(tenant.clone()).await?, retry_overrides(tenant).await?))
}

fn meaning(policy: RetryPolicy) -> &'static str {
    if policy == RetryPolicy::Disabled {
        "A transient database failure that outlasts Signet's own retries quarantines the event (202): \
         the provider is not asked to retry."
    } else {
        "A transient database failure that outlasts Signet's own retries answers 503 with Retry-After: \
         the provider retries later."
    }
}

/// The panel; its data is loaded by the tenant page together with the
/// rest (one resource per page keeps hydration in step with the server).
#[component]
pub fn RetryPolicyCard(policy: Result<PanelData, AppError>, is_admin: bool) -> impl IntoView {
    view! {
        <section class="card" id="retry-policy">
            <h2>"Retry policy"</h2>
            {match policy {
                Ok((p, overrides)) => view! {
                    <PolicyPanel p is_admin/>
                    <Overrides overrides is_admin/>
                }
                .into_any(),
                Err(error) => view! { <FormError error/> }.into_any(),
            }}
        </section>
    }
}

#[component]
fn PolicyPanel(p: RetryPolicyView, is_admin: bool) -> impl IntoView {
    let set = ServerAction::<SetRetryPolicy>::new();
    let rollback = ServerAction::<RollbackRetryPolicy>::new();
    Refresh::after(set);
    Refresh::after(rollback);
    let (other, set_label) = match p.policy {
        RetryPolicy::Enabled => (RetryPolicy::Disabled, "Disable retries"),
        RetryPolicy::Disabled => (RetryPolicy::Enabled, "Enable retries"),
    };
    let previous = p.history.get(1).map(|v| (v.version, v.policy.clone()));
    let tenant = p.tenant.to_string();
    let forms = is_admin.then(|| {
        let rollback_form = previous.clone().map(|(version, policy)| {
            let tenant = tenant.clone();
            view! {
                <ActionForm action=rollback attr:class="inline-form">
                    <input type="hidden" name="tenant" value=tenant/>
                    <input type="text" name="reason" required placeholder="why roll back" aria-label="Rollback reason"/>
                    <Submit action=rollback label="Roll back" kind="secondary"/>
                    <small class="hint">"Restores v" {version} " (" {policy} ")."</small>
                </ActionForm>
            }
        });
        view! {
            <ActionError action=set/>
            <ActionError action=rollback/>
            <ActionForm action=set attr:class="inline-form">
                <input type="hidden" name="tenant" value=tenant.clone()/>
                <input type="hidden" name="policy" value=other.as_str()/>
                <input type="text" name="reason" required placeholder="why" aria-label="Reason for the change"/>
                {(other == RetryPolicy::Enabled).then(|| view! {
                    <input
                        type="text"
                        name="override_reason"
                        placeholder="break-glass reason (optional)"
                        aria-label="Break-glass override reason"
                    />
                })}
                <Submit action=set label=set_label kind="primary"/>
            </ActionForm>
            {(other == RetryPolicy::Enabled).then(|| view! {
                <small class="hint">
                    "Enabling waits for a passing drill run on this build and an approved bundle. Break-glass: \
                    with an override reason, a refused enabling becomes a request that a second administrator \
                    approves below; it stays a critical finding until drills and a sign-off catch up."
                </small>
            })}
            {rollback_form}
        }
    });
    let versions = p.history.len();
    view! {
        <p>
            <span class=format!("badge badge-{}", p.policy)>"retries " {p.policy.as_str()}</span>
            " " <span class="muted">"version " {p.version}</span>
        </p>
        <p class="hint">{meaning(p.policy)}</p>
        {forms}
        <details open=versions <= 5>
            <summary>"History (" {versions} " versions)"</summary>
            <table class="compact">
                <thead>
                    <tr><th class="num">"v"</th><th>"Policy"</th><th>"When"</th><th>"Who"</th><th>"Why"</th></tr>
                </thead>
                <tbody>
                    {p.history.into_iter().map(|v| view! {
                        <tr>
                            <td class="num">{v.version}</td>
                            <td>{v.policy}</td>
                            <td class="nowrap">{when(&v.created_at)}</td>
                            <td>{v.actor}</td>
                            <td>{v.reason}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        </details>
    }
}

/// Break-glass requests (newest first); a pending one has approve and
/// reject forms for a second administrator (the server refuses the
/// requester, 403 `self_approval`).
#[component]
fn Overrides(overrides: Vec<RolloutOverrideView>, is_admin: bool) -> impl IntoView {
    let decide = ServerAction::<DecideOverride>::new();
    Refresh::after(decide);
    (!overrides.is_empty()).then(|| {
        view! {
            <h3>"Break-glass overrides"</h3>
            <ActionError action=decide/>
            <table class="compact" data-testid="overrides">
                <thead>
                    <tr><th>"Status"</th><th>"Asked"</th><th>"By"</th><th>"Why"</th><th>"Missing"</th><th></th></tr>
                </thead>
                <tbody>
                    {overrides.into_iter().map(|o| {
                        let pending = is_admin && o.status == OverrideStatus::PendingApproval.as_str();
                        let decided = o.decided_by.clone().map(|by| format!("{} by {by}", o.status));
                        let (t1, i1, t2, i2) = (o.tenant.clone(), o.id.clone(), o.tenant.clone(), o.id.clone());
                        let forms = pending.then(move || view! {
                            <ActionForm action=decide attr:class="inline-form">
                                <input type="hidden" name="tenant" value=t1/>
                                <input type="hidden" name="id" value=i1/>
                                <input type="hidden" name="decision" value="approve"/>
                                <input type="text" name="comment" placeholder="comment" aria-label="Approval comment"/>
                                <Submit action=decide label="Approve (second person)" kind="primary"/>
                            </ActionForm>
                            <ActionForm action=decide attr:class="inline-form">
                                <input type="hidden" name="tenant" value=t2/>
                                <input type="hidden" name="id" value=i2/>
                                <input type="hidden" name="decision" value="reject"/>
                                <input type="text" name="comment" required placeholder="why not"
                                    aria-label="Rejection comment"/>
                                <Submit action=decide label="Reject" kind="secondary"/>
                            </ActionForm>
                        });
                        view! {
                            <tr>
                                <td><span class="badge">{decided.unwrap_or(o.status.clone())}</span></td>
                                <td class="nowrap">{when(&o.created_at)}</td>
                                <td>{o.requested_by}</td>
                                <td>{o.override_reason}</td>
                                <td>{o.missing.join("; ")}</td>
                                <td>{forms}</td>
                            </tr>
                        }
                    }).collect_view()}
                </tbody>
            </table>
        }
    })
}

/// Moves several tenants at once, in one transaction. Beside it: the latest
/// drill run (docs/architecture.md#rollout-order-and-sign-off: the drills pass
/// before retries are enabled) and every tenant with its policy now, so the
/// cohort is chosen by looking.
#[component]
pub fn CohortForm() -> impl IntoView {
    let action = ServerAction::<SetRetryPolicyCohort>::new();
    // Re-read after the change (a hydrated post stays on the page).
    Refresh::after(action);
    let refresh = use_context::<Refresh>();
    let context = Resource::new(move || refresh.map(Refresh::get), |_| cohort_context());
    view! {
        <section class="card" id="cohort">
            <h2>"Retry policy for a cohort"</h2>
            <p class="hint">
                "New tenants start with retries disabled. \
                The rollout order: run the drills, then enable retries for a small cohort, then the rest. \
                Enabling is refused until a drill run passed on this build and a reviewer approved a bundle \
                holding the tenants' current keys. "
                "The tenants move together (all or none); each gets a new version you can roll back on its page."
            </p>
            <ActionError action/>
            <Loaded resource=context render=move |c| view! { <CohortBody c action/> }/>
        </section>
    }
}

#[component]
fn CohortBody(c: CohortContextDto, action: ServerAction<SetRetryPolicyCohort>) -> impl IntoView {
    let drills = match &c.latest_drills {
        None => view! {
            <p class="warning" data-testid="cohort-drills">
                "No drill run yet. " <a href="/evidence">"Run the drills"</a> " before enabling retries for anyone."
            </p>
        }
        .into_any(),
        Some(d) => {
            let when_text = d.finished_at.as_deref().map(when).unwrap_or_default();
            match d.passed {
                Some(true) => view! {
                    <p class="notice" data-testid="cohort-drills">
                        "Latest drill run: all drills passed (" {when_text} "); signature schemes verified: "
                        {views::evidence::schemes_text(&d.schemes)} ". " <a href="/evidence">"Evidence"</a>
                    </p>
                }
                .into_any(),
                Some(false) => view! {
                    <p class="warning" data-testid="cohort-drills">
                        "Latest drill run FAILED (" {when_text} "): " {d.failed.join(", ")}
                        ". Fix that before enabling retries. " <a href="/evidence">"Evidence"</a>
                    </p>
                }
                .into_any(),
                None => view! {
                    <p class="hint" data-testid="cohort-drills">
                        "A drill run is " {d.status.clone()} " (" {when_text} "). " <a href="/evidence">"Follow it"</a>
                    </p>
                }
                .into_any(),
            }
        }
    };
    view! {
        {drills}
        <ActionForm action>
            <fieldset class="field cohort-tenants">
                <legend>"Tenants in the cohort"</legend>
                {c.tenants.into_iter().enumerate().map(|(i, t)| view! {
                    <label class="check">
                        <input type="checkbox" name=format!("tenants[{i}]") value=t.slug.clone()/>
                        " " <code>{t.slug.clone()}</code> " "
                        <span class=if t.retries_enabled { "badge badge-enabled" } else { "badge badge-disabled" }>
                            {if t.retries_enabled { "retries enabled" } else { "retries disabled" }}
                        </span>
                    </label>
                }).collect_view()}
            </fieldset>
            <label class="field">
                <span>"Policy"</span>
                <select name="policy">
                    <option value="enabled">"enabled (transient failure → 503, provider retries)"</option>
                    <option value="disabled">"disabled (transient failure → quarantine)"</option>
                </select>
            </label>
            <ReasonField placeholder="e.g. cohort 1 of the retries rollout"/>
            <div class="actions"><Submit action label="Apply to cohort"/></div>
        </ActionForm>
    }
}
