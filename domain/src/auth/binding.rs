//! Binding a user or an API token to a tenant: only a real tenant may be
//! named.

use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};

use crate::{
    entity::tenant,
    error::{DomainError, DomainResult},
};

/// The id of the tenant `slug` names, for binding a user or a token to it.
/// The drills' synthetic tenant is refused: a principal bound to it would
/// see (and could change) the drills' fixture, and nobody works for it.
pub(crate) async fn bindable_id<C: ConnectionTrait>(conn: &C, slug: &str) -> DomainResult<String> {
    let t = tenant::Entity::find()
        .filter(tenant::Column::Slug.eq(slug))
        .one(conn)
        .await?
        .ok_or_else(|| DomainError::invalid("unknown_tenant", format!("no tenant {slug:?}")))?;
    if t.synthetic {
        return Err(DomainError::invalid(
            "synthetic_tenant",
            format!("{slug:?} is the drills' synthetic tenant; no user or token can be bound to it"),
        ));
    }
    Ok(t.id)
}
