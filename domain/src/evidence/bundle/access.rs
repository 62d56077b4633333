//! The access section: each role's permissions and who holds it.

use std::collections::BTreeMap;

use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder};
use views::{
    evidence::{Holder, RoleAccess},
    roles::{Permission, Role, role_allows},
};

use crate::{
    entity::{api_token, tenant, user},
    error::DomainResult,
};

fn permissions_of(role: Role) -> Vec<String> {
    Permission::ALL.iter().filter(|p| role_allows(role, **p)).map(|p| p.as_str().to_owned()).collect()
}

/// Each role's permissions and holders. In a tenant's bundle only that
/// tenant's clinic admins are named; holders of deployment-wide roles (users
/// and tokens with no tenant) are counted, so a clinic admin never learns
/// the names of the deployment's staff or tokens.
pub(super) async fn access(db: &DatabaseConnection, scope: Option<&tenant::Model>) -> DomainResult<Vec<RoleAccess>> {
    let slugs: BTreeMap<String, String> =
        tenant::Entity::find().all(db).await?.into_iter().map(|t| (t.id, t.slug)).collect();
    #[derive(PartialEq)]
    enum Shown {
        Named,
        Counted,
        Hidden,
    }
    let shown = |tenant_id: &Option<String>| match (scope, tenant_id) {
        (None, _) => Shown::Named,
        (Some(_), None) => Shown::Counted,
        (Some(s), Some(t)) if &s.id == t => Shown::Named,
        (Some(_), Some(_)) => Shown::Hidden,
    };
    let mut roles: BTreeMap<String, RoleAccess> = Role::ALL
        .iter()
        .map(|r| {
            let a = RoleAccess {
                role: r.as_str().into(),
                permissions: permissions_of(*r),
                holders: Vec::new(),
                user_count: 0,
                token_count: 0,
            };
            (r.as_str().to_owned(), a)
        })
        .collect();
    for u in user::Entity::find()
        .filter(user::Column::Disabled.eq(false))
        .order_by_asc(user::Column::Username)
        .all(db)
        .await?
    {
        let (show, Some(a)) = (shown(&u.tenant_id), roles.get_mut(&u.role)) else { continue };
        if show == Shown::Hidden {
            continue;
        }
        a.user_count += 1;
        if show == Shown::Named {
            let tenant = u.tenant_id.as_ref().and_then(|t| slugs.get(t).cloned());
            a.holders.push(Holder { kind: "user".into(), name: u.username, tenant });
        }
    }
    for t in api_token::Entity::find()
        .filter(api_token::Column::RevokedAt.is_null())
        .order_by_asc(api_token::Column::Name)
        .all(db)
        .await?
    {
        let (show, Some(a)) = (shown(&t.tenant_id), roles.get_mut(&t.role)) else { continue };
        if show == Shown::Hidden {
            continue;
        }
        a.token_count += 1;
        if show == Shown::Named {
            let tenant = t.tenant_id.as_ref().and_then(|id| slugs.get(id).cloned());
            a.holders.push(Holder { kind: "token".into(), name: t.name, tenant });
        }
    }
    Ok(Role::ALL.iter().filter_map(|r| roles.remove(r.as_str())).collect())
}
