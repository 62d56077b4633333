//! Binding a user or an API token to a tenant: only a real tenant may be
//! named.

use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};
use views::ids::TenantSlug;

use crate::{
    entity::tenant,
    error::{DomainError, DomainResult},
};

/// The tenant a user or a token is to be bound to, as the edge parsed what
/// it was given ([`TenantName::given`]). A text outside the slug rule names
/// no tenant: it is never looked up, only named back in the answer
/// (`unknown_tenant`, as a slug no tenant has), at the point where the
/// binding is checked, so every other check answers first as before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TenantName {
    Slug(TenantSlug),
    NoSuch(String),
}

impl TenantName {
    /// Parses a tenant to bind to; absent or empty: none. The drills'
    /// synthetic tenant parses too ([`TenantSlug::parse_hook`]), so that
    /// binding to it is refused as such (`synthetic_tenant`).
    pub fn given(text: Option<&str>) -> Option<TenantName> {
        text.filter(|t| !t.is_empty()).map(|t| match TenantSlug::parse_hook(t) {
            Ok(slug) => TenantName::Slug(slug),
            Err(_) => TenantName::NoSuch(t.to_owned()),
        })
    }

    /// The name as it was given.
    pub fn as_str(&self) -> &str {
        match self {
            TenantName::Slug(slug) => slug.as_str(),
            TenantName::NoSuch(text) => text,
        }
    }
}

impl From<TenantSlug> for TenantName {
    fn from(slug: TenantSlug) -> TenantName {
        TenantName::Slug(slug)
    }
}

/// The id of the tenant `name` names, for binding a user or a token to it.
/// The drills' synthetic tenant is refused: a principal bound to it would
/// see (and could change) the drills' fixture, and nobody works for it.
pub(crate) async fn bindable_id<C: ConnectionTrait>(conn: &C, name: &TenantName) -> DomainResult<String> {
    let unknown = || DomainError::invalid("unknown_tenant", format!("no tenant {:?}", name.as_str()));
    let TenantName::Slug(slug) = name else { return Err(unknown()) };
    let t =
        tenant::Entity::find().filter(tenant::Column::Slug.eq(slug.as_str())).one(conn).await?.ok_or_else(unknown)?;
    if t.synthetic {
        return Err(DomainError::invalid(
            "synthetic_tenant",
            format!("{:?} is the drills' synthetic tenant; no user or token can be bound to it", slug.as_str()),
        ));
    }
    Ok(t.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_to_bind_to_is_a_slug_the_synthetic_tenant_or_no_tenant_at_all() {
        assert_eq!(TenantName::given(None), None);
        assert_eq!(TenantName::given(Some("")), None);
        let slug = TenantName::given(Some("clinic-a"));
        assert_eq!(slug, Some(TenantName::Slug(TenantSlug::parse("clinic-a").unwrap())));
        // Refused as the drills' tenant (`synthetic_tenant`), not as unknown.
        let drill = TenantName::given(Some(views::ids::SYNTHETIC_TENANT));
        assert_eq!(drill, Some(TenantName::Slug(TenantSlug::synthetic())));
        for text in ["Clinic A", " clinic-a", "_drill-x"] {
            let name = TenantName::given(Some(text)).unwrap();
            assert_eq!(name, TenantName::NoSuch(text.to_owned()));
            assert_eq!(name.as_str(), text, "named back as given");
        }
    }
}
