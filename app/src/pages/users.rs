//! `/users`: console accounts and their roles (administrators only).

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;
use views::roles::Role;
use views::users::UserView;

use crate::{
    api::users::{CreateUser, UpdateUser, list_users},
    components::{ActionError, Layout, Loaded, Notice, Refresh, ReturnedError, Submit, format::when, format::when_or},
};

#[component]
pub fn UsersPage() -> impl IntoView {
    let query = use_query_map();
    let refresh = Refresh::provide();
    let users = Resource::new(move || refresh.get(), |_| list_users());
    let created = move || query.read().get("created");
    let updated = move || query.read().get("updated");
    view! {
        <Layout
            title="Users"
            render=move |me| {
                let is_admin = me.is_admin();
                let me_name = me.username;
                if !is_admin {
                    return view! {
                        <p class="error" role="alert">"Only administrators can see and manage users."</p>
                    }
                    .into_any();
                }
                view! {
                {move || created().map(|u| view! {
                    <Notice>"User " <strong>{u}</strong> " created. They can sign in now."</Notice>
                })}
                {move || updated().map(|u| view! { <Notice>"User " <strong>{u}</strong> " updated."</Notice> })}
                <ReturnedError/>
                <NewUserForm/>
                <h2>"Accounts"</h2>
                <Loaded resource=users render={
                    let me_name = me_name.clone();
                    move |list| view! { <UserTable users=list me_name=me_name.clone()/> }
                }/>
                }
                .into_any()
            }
        />
    }
}

#[component]
fn UserTable(users: Vec<UserView>, me_name: String) -> impl IntoView {
    if users.is_empty() {
        return view! { <div class="empty"><p class="empty-title">"No users"</p></div> }.into_any();
    }
    view! {
        <div class="table-wrap">
            <table>
                <thead>
                    <tr>
                        <th>"Username"</th>
                        <th>"Role"</th>
                        <th>"Tenant"</th>
                        <th>"Status"</th>
                        <th>"Created"</th>
                        <th>"Last sign-in"</th>
                        <th><span class="visually-hidden">"Actions"</span></th>
                    </tr>
                </thead>
                <tbody>
                    {users.into_iter().map(|u| {
                        let is_me = u.username == me_name;
                        view! { <UserRow u is_me/> }
                    }).collect_view()}
                </tbody>
            </table>
        </div>
    }
    .into_any()
}

#[component]
fn UserRow(u: UserView, is_me: bool) -> impl IntoView {
    let status = if u.disabled { "disabled" } else { "enabled" };
    let disabled = u.disabled;
    view! {
        <tr class:row-disabled=disabled>
            <td>
                <strong>{u.username.clone()}</strong>
                {is_me.then(|| view! { <span class="muted">" (you)"</span> })}
            </td>
            <td>{u.role.label()}</td>
            <td>
                {match u.tenant.clone() {
                    Some(t) => view! { <a href=format!("/tenants/{t}")>{t.to_string()}</a> }.into_any(),
                    None => view! { <span class="muted">"—"</span> }.into_any(),
                }}
            </td>
            <td><span class=format!("badge badge-{status}")>{status}</span></td>
            <td class="nowrap">{when(&u.created_at)}</td>
            <td class="nowrap">{when_or(u.last_login_at.as_deref(), "never")}</td>
            <td class="row-actions">
                // Disabling yourself would end your own session mid-task.
                {(!is_me).then(|| view! { <ToggleUser username=u.username.clone() disabled=u.disabled/> })}
                <ChangeRole u/>
            </td>
        </tr>
    }
}

#[component]
fn ToggleUser(username: String, disabled: bool) -> impl IntoView {
    let action = ServerAction::<UpdateUser>::new();
    Refresh::after(action);
    let (label, kind) = if disabled { ("Enable", "secondary small") } else { ("Disable", "danger-outline small") };
    view! {
        <ActionForm action>
            <input type="hidden" name="username" value=username/>
            <input type="hidden" name="disabled" value=(!disabled).to_string()/>
            <Submit action label kind/>
        </ActionForm>
        <ActionError action/>
    }
}

#[component]
fn ChangeRole(u: UserView) -> impl IntoView {
    let action = ServerAction::<UpdateUser>::new();
    Refresh::after(action);
    let tenant = u.tenant.map(String::from).unwrap_or_default();
    view! {
        <details class="inline-form">
            <summary>"Change role"</summary>
            <ActionForm action>
                <input type="hidden" name="username" value=u.username/>
                <label class="field">
                    <span>"Role"</span>
                    <RoleSelect selected=u.role/>
                </label>
                <label class="field">
                    <span>"Tenant " <em class="optional">"(clinic admins)"</em></span>
                    <input type="text" name="tenant" value=tenant placeholder="clinic-a"/>
                </label>
                <Submit action label="Save role" kind="secondary small"/>
            </ActionForm>
            <ActionError action/>
        </details>
    }
}

#[component]
fn RoleSelect(selected: Role) -> impl IntoView {
    view! {
        <select name="role" required>
            {Role::ALL
                .into_iter()
                .map(|r| view! { <option value=r.as_str() selected=r == selected>{r.label()}</option> })
                .collect_view()}
        </select>
    }
}

#[component]
fn NewUserForm() -> impl IntoView {
    let action = ServerAction::<CreateUser>::new();
    Refresh::after(action);
    view! {
        <section class="card">
            <h2>"New user"</h2>
            <ActionError action/>
            <ActionForm action>
                <div class="form-grid">
                    <label class="field">
                        <span>"Username"</span>
                        <input type="text" name="username" required autocomplete="off"/>
                    </label>
                    <label class="field">
                        <span>"Role"</span>
                        <RoleSelect selected=Role::Oncall/>
                    </label>
                    <label class="field">
                        <span>"Tenant " <em class="optional">"(clinic admins only)"</em></span>
                        <input type="text" name="tenant" placeholder="clinic-a"/>
                        <small class="hint">
                            "The tenant slug a clinic admin manages; leave empty for other roles."
                        </small>
                    </label>
                    <label class="field">
                        <span>"Initial password"</span>
                        <input type="password" name="password" required minlength="12" autocomplete="new-password"/>
                        <small class="hint">"At least 12 characters. Share it over a safe channel."</small>
                    </label>
                </div>
                <div class="actions">
                    <Submit action label="Create user"/>
                </div>
            </ActionForm>
        </section>
    }
}
