use serde::{Deserialize, Serialize};

use crate::{ids::TenantSlug, roles::Role};

/// A user as shown to admins: never the password hash.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UserView {
    pub id: String,
    pub username: String,
    pub role: Role,
    /// Tenant slug for clinic admins.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub tenant: Option<TenantSlug>,
    pub disabled: bool,
    pub created_at: String,
    pub last_login_at: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TokenView {
    pub id: String,
    pub name: String,
    pub role: Role,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub tenant: Option<TenantSlug>,
    pub created_by: String,
    pub created_at: String,
    pub revoked_at: Option<String>,
    pub last_used_at: Option<String>,
}
