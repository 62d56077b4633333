//! Form fields that several forms share.

use leptos::prelude::*;

/// Why a change is made: required, and recorded with it in the audit log.
/// `children` add a hint below the input.
#[component]
pub fn ReasonField(placeholder: &'static str, #[prop(optional)] children: Option<Children>) -> impl IntoView {
    view! {
        <label class="field">
            <span>"Reason"</span>
            <input type="text" name="reason" required placeholder=placeholder/>
            {children.map(|hint| hint())}
        </label>
    }
}

/// Username and password; `new` for a password being chosen (at least 12
/// characters).
#[component]
pub fn Credentials(#[prop(optional)] new: bool) -> impl IntoView {
    let (autocomplete, minlength) = if new { ("new-password", Some("12")) } else { ("current-password", None) };
    view! {
        <label class="field">
            <span>"Username"</span>
            <input type="text" name="username" autocomplete="username" required autofocus/>
        </label>
        <label class="field">
            <span>"Password"</span>
            <input type="password" name="password" autocomplete=autocomplete minlength=minlength required/>
        </label>
    }
}

/// For administrators creating a key: another reviewer's name, to activate
/// it at once as approved by them (four eyes: never the administrator).
#[component]
pub fn ApproveAsField(hint: &'static str) -> impl IntoView {
    view! {
        <label class="field wide">
            <span>"Approved by " <em class="optional">"(optional)"</em></span>
            <input type="text" name="approve_as" placeholder="another reviewer's name" autocomplete="off"/>
            <small class="hint">{hint}</small>
        </label>
    }
}
