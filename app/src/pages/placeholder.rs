use leptos::prelude::*;

use crate::components::Layout;

macro_rules! page {
    ($name:ident, $title:literal) => {
        #[component]
        pub fn $name() -> impl IntoView {
            view! { <Layout title=$title render=|_me| view! { <p>"Not built yet."</p> }/> }
        }
    };
}

page!(LoginPage, "Sign in");
page!(SetupPage, "Set up Signet");
page!(HomePage, "Signet");
page!(TenantsPage, "Tenants");
page!(TenantPage, "Tenant");
page!(SecretPage, "New signing secret");
page!(RotatePage, "Rotate key");
page!(RevokePage, "Revoke key");
page!(ApprovalsPage, "Approvals");
page!(UsersPage, "Users");
page!(AuditPage, "Audit log");
page!(NotFound, "Not found");
