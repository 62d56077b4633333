//! Who is acting, and proof that they were checked.

use serde::{Deserialize, Serialize};

use crate::error::DomainError;
use views::roles::{Permission, Role, role_allows};

/// The actor recorded in the audit log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Actor {
    User {
        id: String,
        username: String,
    },
    Token {
        id: String,
        name: String,
    },
    /// The operator CLI acting directly on the database.
    Cli,
    /// Signet itself (expiry sweeps, bootstrap).
    System,
}

impl Actor {
    pub fn kind(&self) -> &'static str {
        match self {
            Actor::User { .. } => "user",
            Actor::Token { .. } => "token",
            Actor::Cli => "cli",
            Actor::System => "system",
        }
    }
    /// The name shown in the audit log.
    pub fn name(&self) -> &str {
        match self {
            Actor::User { username, .. } => username,
            Actor::Token { name, .. } => name,
            Actor::Cli => "cli",
            Actor::System => "system",
        }
    }
}

/// An authenticated caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    pub actor: Actor,
    pub role: Role,
    /// Set for tenant-bound roles (clinic admins): the tenant id.
    pub tenant_id: Option<String>,
}

/// Where an action applies.
#[derive(Clone, Copy, Debug)]
pub enum Scope<'a> {
    /// Not tied to one tenant (creating tenants, managing users).
    Global,
    /// A resource of this tenant (by tenant id).
    Tenant(&'a str),
}

/// Proof that a principal was authorized for a permission in a scope.
/// Mutating domain functions take one; only [`Principal::authorize`] makes it.
#[derive(Debug)]
pub struct Authorized {
    principal: Principal,
    permission: Permission,
    tenant_id: Option<String>,
}

impl Authorized {
    pub fn actor(&self) -> &Actor {
        &self.principal.actor
    }
    /// Fails unless this proof covers `permission` on `tenant_id`. Domain
    /// functions call it on the row they are about to change.
    pub fn ensure(&self, permission: Permission, tenant_id: Option<&str>) -> Result<(), DomainError> {
        let tenant_ok = match (&self.tenant_id, tenant_id) {
            (None, None) => true,
            (Some(have), Some(want)) => have == want,
            (None, Some(_)) => false,
            (Some(_), None) => false,
        };
        if self.permission == permission && tenant_ok { Ok(()) } else { Err(DomainError::Forbidden) }
    }
}

impl Principal {
    /// A stored user's or token's principal, failing closed: an unknown role
    /// or a tenant-bound role without a tenant is refused (and logged), never
    /// read as some other role or as "every tenant".
    pub fn checked(actor: Actor, role: &str, tenant_id: Option<String>) -> Result<Principal, DomainError> {
        let Some(parsed) = Role::parse(role) else {
            tracing::error!(
                actor_kind = actor.kind(),
                actor = actor.name(),
                "refused a principal whose stored role is unknown"
            );
            return Err(DomainError::Unauthenticated);
        };
        if parsed.is_tenant_bound() && tenant_id.is_none() {
            tracing::error!(
                actor_kind = actor.kind(),
                actor = actor.name(),
                "refused a clinic-admin principal bound to no tenant"
            );
            return Err(DomainError::Unauthenticated);
        }
        Ok(Principal { actor, role: parsed, tenant_id })
    }

    /// The operator CLI: full rights, audited as `cli`.
    pub fn cli() -> Self {
        Principal { actor: Actor::Cli, role: Role::Admin, tenant_id: None }
    }

    /// Signet's own background work.
    pub fn system() -> Self {
        Principal { actor: Actor::System, role: Role::Admin, tenant_id: None }
    }

    /// Checks the role matrix and tenant binding. A tenant-bound principal
    /// asking about another tenant gets [`DomainError::NotFound`], so that the
    /// answer does not reveal that the tenant exists.
    pub fn authorize(&self, permission: Permission, scope: Scope<'_>) -> Result<Authorized, DomainError> {
        if let (Some(own), Scope::Tenant(target)) = (&self.tenant_id, scope)
            && own != target
        {
            return Err(DomainError::NotFound);
        }
        // A tenant-bound role without its tenant is refused everywhere (it
        // would otherwise pass every tenant check below).
        if self.role.is_tenant_bound() && (self.tenant_id.is_none() || matches!(scope, Scope::Global)) {
            return Err(DomainError::Forbidden);
        }
        if !role_allows(self.role, permission) {
            return Err(DomainError::Forbidden);
        }
        Ok(Authorized {
            principal: self.clone(),
            permission,
            tenant_id: match scope {
                Scope::Global => None,
                Scope::Tenant(t) => Some(t.to_owned()),
            },
        })
    }

    /// For listings: `Some(tenant)` when results must be limited to it.
    pub fn tenant_filter(&self) -> Option<&str> {
        self.tenant_id.as_deref()
    }

    /// Whether a resource of `tenant_id` is visible at all.
    pub fn can_see_tenant(&self, tenant_id: &str) -> bool {
        self.tenant_id.as_deref().is_none_or(|own| own == tenant_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clinic(t: &str) -> Principal {
        Principal {
            actor: Actor::User { id: "u".into(), username: "c".into() },
            role: Role::ClinicAdmin,
            tenant_id: Some(t.into()),
        }
    }

    #[test]
    fn other_tenant_is_not_found_and_missing_role_is_forbidden() {
        let p = clinic("a");
        assert!(p.authorize(Permission::ManageKeys, Scope::Tenant("a")).is_ok());
        assert!(matches!(p.authorize(Permission::ManageKeys, Scope::Tenant("b")), Err(DomainError::NotFound)));
        assert!(matches!(p.authorize(Permission::ReviewKeys, Scope::Tenant("a")), Err(DomainError::Forbidden)));
        assert!(matches!(p.authorize(Permission::ManageTenants, Scope::Global), Err(DomainError::Forbidden)));
    }

    #[test]
    fn proof_is_bound_to_permission_and_tenant() {
        let a = clinic("a").authorize(Permission::ManageKeys, Scope::Tenant("a")).unwrap();
        assert!(a.ensure(Permission::ManageKeys, Some("a")).is_ok());
        assert!(a.ensure(Permission::ManageKeys, Some("b")).is_err());
        assert!(a.ensure(Permission::ManageEndpoints, Some("a")).is_err());
    }

    #[test]
    fn stored_principals_fail_closed() {
        let user = || Actor::User { id: "u".into(), username: "x".into() };
        assert!(matches!(Principal::checked(user(), "superuser", None), Err(DomainError::Unauthenticated)));
        assert!(matches!(Principal::checked(user(), "", None), Err(DomainError::Unauthenticated)));
        assert!(matches!(Principal::checked(user(), "clinic-admin", None), Err(DomainError::Unauthenticated)));
        let ok = Principal::checked(user(), "clinic-admin", Some("a".into())).unwrap();
        assert_eq!((ok.role, ok.tenant_id.as_deref()), (Role::ClinicAdmin, Some("a")));
        assert_eq!(Principal::checked(user(), "oncall", None).unwrap().role, Role::Oncall);
    }

    #[test]
    fn a_clinic_admin_without_a_tenant_is_refused_everywhere() {
        let p = Principal { tenant_id: None, ..clinic("a") };
        for scope in [Scope::Tenant("a"), Scope::Tenant("b"), Scope::Global] {
            assert!(matches!(p.authorize(Permission::ManageKeys, scope), Err(DomainError::Forbidden)));
        }
    }
}
