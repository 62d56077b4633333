//! Users and roles (administrators only).

use leptos::prelude::*;
use server_fn::codec::GetUrl;

use super::AppError;
use views::users::UserView;

#[server(prefix = "/fn", endpoint = "list_users", input = GetUrl)]
pub async fn list_users() -> Result<Vec<UserView>, AppError> {
    use crate::ssr;
    let (st, p) = ssr::request().await?;
    Ok(domain::auth::users::list(&st.db, &p).await?)
}

#[server(prefix = "/fn", endpoint = "create_user")]
pub async fn create_user(
    username: String,
    role: String,
    tenant: Option<String>,
    password: String,
) -> Result<(), AppError> {
    use crate::ssr;
    use domain::{
        auth::users::{self, NewUser},
        crypto::Password,
    };
    use views::roles::Role;
    let (st, p) = ssr::request().await?;
    let role = Role::parse(&role).ok_or_else(|| AppError::new("invalid_role", "choose a role"))?;
    users::create(
        &st.db,
        &p,
        NewUser {
            username: username.trim().to_owned(),
            role,
            tenant: domain::auth::TenantName::given(tenant.as_deref().map(str::trim)),
            password: Password::new(password),
        },
    )
    .await?;
    leptos_axum::redirect(&format!("/users?created={}", username.trim()));
    Ok(())
}

/// Changes a user's role/tenant (`role` empty: unchanged) or enables and
/// disables the account (`disabled`: "true"/"false").
#[server(prefix = "/fn", endpoint = "update_user")]
pub async fn update_user(
    username: String,
    role: Option<String>,
    tenant: Option<String>,
    disabled: Option<String>,
) -> Result<(), AppError> {
    use crate::ssr;
    use domain::auth::{
        TenantName,
        users::{self, UserChange},
    };
    use views::roles::Role;
    let (st, p) = ssr::request().await?;
    let role = match role.as_deref().map(str::trim).filter(|r| !r.is_empty()) {
        Some(r) => Some(Role::parse(r).ok_or_else(|| AppError::new("invalid_role", "unknown role"))?),
        None => None,
    };
    let patch = UserChange {
        role,
        tenant: TenantName::given(tenant.as_deref().map(str::trim)).map(Some),
        disabled: disabled.as_deref().map(|d| d == "true"),
    };
    users::update(&st.db, &p, &username, patch).await?;
    leptos_axum::redirect(&format!("/users?updated={username}"));
    Ok(())
}
