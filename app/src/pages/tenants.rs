//! `/tenants`: every tenant the user may see; administrators create them here.

use leptos::prelude::*;

use crate::{
    api::registry::{CreateTenant, list_tenants},
    components::{ActionError, Layout, Loaded, Refresh, ReturnedError, Submit},
    dto::TenantSummary,
};

#[component]
pub fn TenantsPage() -> impl IntoView {
    let refresh = Refresh::provide();
    let tenants = Resource::new(move || refresh.get(), |_| list_tenants());
    view! {
        <Layout
            title="Tenants"
            render=move |me| {
                let is_admin = me.is_admin();
                view! {
                    <ReturnedError/>
                    <Loaded resource=tenants render=move |list| view! { <TenantTable tenants=list is_admin/> }/>
                    {is_admin.then(|| view! { <NewTenantForm/> <super::retry_policy::CohortForm/> })}
                }
            }
        />
    }
}

#[component]
fn TenantTable(tenants: Vec<TenantSummary>, is_admin: bool) -> impl IntoView {
    if tenants.is_empty() {
        let hint = if is_admin { "Create the first one below." } else { "An administrator creates tenants." };
        return view! {
            <div class="empty">
                <p class="empty-title">"No tenants yet"</p>
                <p>{hint}</p>
            </div>
        }
        .into_any();
    }
    view! {
        <div class="table-wrap">
            <table>
                <thead>
                    <tr>
                        <th>"Tenant"</th>
                        <th>"Name"</th>
                        <th class="num">"Endpoints"</th>
                        <th class="num">"Active keys"</th>
                        <th class="num">"Awaiting approval"</th>
                    </tr>
                </thead>
                <tbody>
                    {tenants.into_iter().map(|row| view! { <TenantRow row/> }).collect_view()}
                </tbody>
            </table>
        </div>
    }
    .into_any()
}

#[component]
fn TenantRow(row: TenantSummary) -> impl IntoView {
    let TenantSummary { tenant: t, endpoint_count, active_keys, pending_keys } = row;
    let pending = if pending_keys > 0 {
        view! { <span class="badge badge-pending_approval">{pending_keys}</span> }.into_any()
    } else {
        view! { <span class="muted">"0"</span> }.into_any()
    };
    view! {
        <tr>
            <td><a href=format!("/tenants/{}", t.slug)><code>{t.slug.to_string()}</code></a></td>
            <td>{t.name}</td>
            <td class="num">{endpoint_count}</td>
            <td class="num">{active_keys}</td>
            <td class="num">{pending}</td>
        </tr>
    }
}

#[component]
fn NewTenantForm() -> impl IntoView {
    let action = ServerAction::<CreateTenant>::new();
    Refresh::after(action);
    view! {
        <section class="card">
            <h2>"New tenant"</h2>
            <ActionError action/>
            <ActionForm action>
                <div class="form-grid">
                    <label class="field">
                        <span>"Slug"</span>
                        <input type="text" name="slug" required pattern="[a-z0-9][a-z0-9\\-]*" placeholder="clinic-a"/>
                        <small class="hint">"Lower-case letters, digits and hyphens; part of every webhook URL."</small>
                    </label>
                    <label class="field">
                        <span>"Display name"</span>
                        <input type="text" name="name" placeholder="Clinic A"/>
                    </label>
                    <label class="field">
                        <span>"Notify URL " <em class="optional">"(optional)"</em></span>
                        <input type="url" name="notify_url" placeholder="https://clinic-a.example/signet"/>
                        <small class="hint">"Where Signet relays verified events for this tenant."</small>
                    </label>
                </div>
                <div class="actions">
                    <Submit action label="Create tenant"/>
                </div>
            </ActionForm>
        </section>
    }
}
