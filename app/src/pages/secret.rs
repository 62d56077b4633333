//! `/keys/:id/secret?reveal=…`: the one and only time a new key's secret is
//! shown. The reveal consumes it on the server; reloading shows it no more.

use leptos::prelude::*;
use leptos_router::hooks::{use_params_map, use_query_map};
use views::keys::KeyStatus;
use views::keys::KeyView;

use crate::{
    api::{
        AppError,
        keys::{get_key, reveal_secret},
    },
    components::{IfLoaded, KeySummary, Layout, Loaded, StatusBadge},
    dto::RevealDto,
};

#[component]
pub fn SecretPage() -> impl IntoView {
    let params = use_params_map();
    let query = use_query_map();
    let key_id = move || params.read().get("id").unwrap_or_default();
    let reveal = move || query.read().get("reveal").unwrap_or_default();
    // A Resource runs once on the server and travels to the browser with the
    // page, so hydration does not ask (and fail) a second time.
    let revealed = Resource::new(move || (key_id(), reveal()), |(id, reveal)| reveal_secret(id, reveal));
    // For the way back when the secret is gone. Created here, not inside the
    // `Loaded` below: resources must be created in the same order on the
    // server and in the browser, and a Suspense may render its children more
    // than once on the server.
    let key = Resource::new(key_id, get_key);
    view! {
        <Layout
            title="New signing secret"
            render=move |_me| view! {
                <Loaded resource=revealed what="key" name=key_id render=move |r| match r {
                    Some(r) => view! { <Revealed r/> }.into_any(),
                    None => view! { <AlreadyShown key/> }.into_any(),
                }/>
            }
        />
    }
}

#[component]
fn Revealed(r: RevealDto) -> impl IntoView {
    let RevealDto { key, secret } = r;
    let pending = key.status == KeyStatus::PendingApproval;
    let tenant_href = format!("/tenants/{}#endpoint-{}", key.tenant, key.endpoint);
    view! {
        <div class="warning" role="alert">
            <strong>"Copy it now: you will not see this secret again."</strong>
            " Store it in the sender's secret store. Signet keeps it only encrypted and never shows it twice."
        </div>
        <section class="card secret-card">
            <h2>"Secret for key " <code>{key.key_id.to_string()}</code></h2>
            <SecretBox secret/>
            <p class="status-line">
                "Status: " <StatusBadge status=key.status.as_str()/>
                {pending.then(|| view! {
                    <span class="pending-note">
                        " A security reviewer must approve this key's scope before it verifies webhooks."
                    </span>
                })}
            </p>
        </section>
        <section class="card">
            <h2>"Key details"</h2>
            <KeySummary key/>
        </section>
        <p><a class="button secondary" href=tenant_href>"I have stored it — back to the tenant"</a></p>
    }
}

/// The secret, selectable as text; with JavaScript, also a Copy button.
#[component]
fn SecretBox(secret: String) -> impl IntoView {
    let hydrated = RwSignal::new(false);
    Effect::new(move |_| hydrated.set(true));
    let copied = RwSignal::new(None::<bool>);
    let for_copy = secret.clone();
    view! {
        <div class="secret-row">
            <pre class="secret" data-testid="secret">{secret}</pre>
            <Show when=move || hydrated.get()>
                {
                    let for_copy = for_copy.clone();
                    view! {
                        <button
                            type="button"
                            class="button primary"
                            on:click=move |_| copied.set(Some(clipboard::copy(&for_copy)))
                        >
                            "Copy"
                        </button>
                    }
                }
            </Show>
        </div>
        <p class="hint" aria-live="polite">
            {move || match copied.get() {
                Some(true) => "Copied to the clipboard.",
                Some(false) => "The browser refused the clipboard: select the text above and copy it.",
                None if hydrated.get() => "",
                None => "Select the text above and copy it.",
            }}
        </p>
    }
}

mod clipboard {
    //! `navigator.clipboard` without pulling more of web-sys into the build.

    #[cfg(feature = "hydrate")]
    mod js {
        use leptos::wasm_bindgen::{JsValue, prelude::wasm_bindgen};

        #[wasm_bindgen(wasm_bindgen = leptos::wasm_bindgen)]
        extern "C" {
            #[wasm_bindgen(catch, js_namespace = ["navigator", "clipboard"], js_name = writeText)]
            pub fn write_text(text: &str) -> Result<JsValue, JsValue>;
        }
    }

    /// Starts copying; `false` when the browser has no clipboard for us
    /// (plain http on a non-local address, or permission refused).
    pub fn copy(text: &str) -> bool {
        #[cfg(feature = "hydrate")]
        {
            js::write_text(text).is_ok()
        }
        #[cfg(not(feature = "hydrate"))]
        {
            let _ = text;
            false
        }
    }
}

/// Reloads, a second tab, a link opened later: the secret is gone.
#[component]
fn AlreadyShown(key: Resource<Result<KeyView, AppError>>) -> impl IntoView {
    view! {
        <div class="empty">
            <p class="empty-title">"This secret has already been shown (or the link expired)."</p>
            <p>"Signet never shows a secret twice. If it was lost, rotate the key."</p>
            <IfLoaded resource=key render=|k| {
                let rotate = (k.status == KeyStatus::Active).then(|| view! {
                    <a class="button secondary" href=format!("/keys/{}/rotate", k.key_id)>"Rotate this key"</a>
                });
                view! {
                    <p class="actions">
                        {rotate}
                        <a class="button secondary" href=format!("/tenants/{}", k.tenant)>
                            "Back to " {k.tenant.to_string()}
                        </a>
                    </p>
                }
            }/>
        </div>
    }
}
