//! What a form tells its user: errors, notices, a submit button that knows
//! when it is busy, and the page refresh after a change.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;
use server_fn::{ServerFn, error::ServerFnUrlError};

use super::format::sentence;
use crate::api::AppError;

/// An error next to a form or at the top of a page.
#[component]
pub fn FormError(error: AppError) -> impl IntoView {
    view! { <p class="error" role="alert">{sentence(&error.message)}</p> }
}

/// Why a page's data did not load. "Not found" also covers what exists but
/// lies outside the user's tenant: the server does not tell them apart, and
/// neither does the page.
#[component]
pub fn LoadError(
    error: AppError,
    /// What was asked for, e.g. "key" or "tenant".
    what: &'static str,
    /// The name or id that was asked for.
    #[prop(into)]
    name: String,
) -> impl IntoView {
    match error.code.as_str() {
        "not_found" => view! {
            <div class="empty">
                <p class="empty-title">"Not found: no " {what} " " <code>{name}</code> " that you can see"</p>
                <p>"It does not exist, or your account has no access to it."</p>
                <p><a href="/">"Back to your start page"</a></p>
            </div>
        }
        .into_any(),
        "forbidden" => view! {
            <div class="empty">
                <p class="empty-title">"Your role cannot see this " {what}</p>
                <p><a href="/">"Back to your start page"</a></p>
            </div>
        }
        .into_any(),
        _ => view! { <FormError error/> }.into_any(),
    }
}

/// A success message (after a redirect that carries `?created=…` and the like).
#[component]
pub fn Notice(children: Children) -> impl IntoView {
    view! { <p class="notice" role="status">{children()}</p> }
}

/// The error of a form submitted from the hydrated page, shown next to that
/// form. Errors of plain (JavaScript off) posts come back in the URL and are
/// shown once, at the top, by [`ReturnedError`]: every action of the same
/// server function on the page would otherwise show it.
#[component]
pub fn ActionError<S>(action: ServerAction<S>) -> impl IntoView
where
    S: ServerFn<Output = (), Error = AppError> + Clone + Send + Sync + 'static,
{
    move || {
        if action.version().get() == 0 {
            return None;
        }
        match action.value().get() {
            Some(Err(error)) => Some(view! { <FormError error/> }),
            _ => None,
        }
    }
}

/// What a form was trying to do, for an error that comes back without its form.
fn failed_action(path: &str) -> &'static str {
    match path.rsplit('/').next().unwrap_or_default() {
        "login" => "Sign-in failed",
        "logout" => "Sign-out failed",
        "setup_admin" => "Could not create the administrator",
        "create_tenant" => "Could not create the tenant",
        "create_endpoint" => "Could not create the endpoint",
        "set_endpoint_enabled" => "Could not change the endpoint",
        "provision_key" => "Could not provision the key",
        "rotate_key" => "Could not rotate the key",
        "revoke_key" => "Could not revoke the key",
        "approve_key" => "Could not approve the key",
        "reject_key" => "Could not reject the key",
        "create_user" => "Could not create the user",
        "update_user" => "Could not change the user",
        "release_quarantine" => "Could not release",
        "start_bulk_release" => "Could not start the bulk release",
        "resume_bulk_release" => "Could not resume the bulk release",
        "discard_quarantine" => "Could not discard",
        "retry_outbox" => "Could not retry the notification",
        "set_retry_policy" | "set_retry_policy_cohort" => "Could not change the retry policy",
        "rollback_retry_policy" => "Could not roll back the retry policy",
        "set_retention" => "Could not change the retention",
        "set_horizon" => "Could not change the redelivery horizon",
        _ => "That did not work",
    }
}

/// The error of a plain form post: the server redirects back here with the
/// error in `__path`/`__err`.
///
/// The query string is anyone's to write, so a page that strangers are sent
/// to (the sign-in page) passes `fixed`: the error's code then picks one of
/// the page's own sentences and the URL's text is never shown.
#[component]
pub fn ReturnedError(#[prop(optional)] fixed: Option<fn(&str) -> &'static str>) -> impl IntoView {
    let query = use_query_map();
    move || {
        query.with(|q| {
            let path = q.get_str("__path")?;
            let error = ServerFnUrlError::<AppError>::decode_err(q.get_str("__err")?);
            let message = match fixed {
                Some(fixed) => fixed(&error.code).to_owned(),
                None => error.message,
            };
            Some(view! {
                <p class="error" role="alert">
                    <strong>{failed_action(path)}</strong>
                    ": "
                    {message}
                </p>
            })
        })
    }
}

/// A submit button that is disabled while its action runs.
#[component]
pub fn Submit<S>(
    action: ServerAction<S>,
    label: &'static str,
    /// `primary`, `secondary` or `danger`.
    #[prop(default = "primary")]
    kind: &'static str,
) -> impl IntoView
where
    S: ServerFn<Output = (), Error = AppError> + Clone + Send + Sync + 'static,
{
    view! {
        <button type="submit" class=format!("button {kind}") disabled=move || action.pending().get()>
            {label}
        </button>
    }
}

/// Bumped after a successful change made from the hydrated page, so the
/// page's data reloads. A server function's redirect back to the same page
/// is a client-side navigation that would otherwise keep the stale data.
/// (Plain posts reload the whole page and need none of this.)
#[derive(Clone, Copy)]
pub struct Refresh(RwSignal<u64>);

impl Refresh {
    /// Creates the page's refresh counter and makes it available below.
    pub fn provide() -> Self {
        let r = Refresh(RwSignal::new(0));
        provide_context(r);
        r
    }

    /// Reads the counter (tracked): use it in a resource's source.
    pub fn get(self) -> u64 {
        self.0.get()
    }

    /// Reloads the page's data now.
    pub fn bump(self) {
        self.0.update(|n| *n += 1);
    }

    /// Reloads the page's data whenever `action` succeeds.
    pub fn after<S>(action: ServerAction<S>)
    where
        S: ServerFn<Output = (), Error = AppError> + Clone + Send + Sync + 'static,
    {
        let Some(r) = use_context::<Refresh>() else { return };
        Effect::new(move |_| {
            if matches!(action.value().get(), Some(Ok(()))) {
                r.0.update(|n| *n += 1);
            }
        });
    }
}
