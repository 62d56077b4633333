//! The quarantine filter as the domain takes it: the wire's
//! [`QuarantineFilter`] with its tenant parsed by the edge ([`Filter::named`]).

use sea_orm::{ColumnTrait, Condition, DatabaseConnection, EntityTrait, QueryFilter};
use views::{
    ids::TenantSlug,
    quarantine::{QuarantineFilter, QuarantineStatus},
    roles::Permission,
};

use crate::{
    auth::{Principal, Scope},
    clock,
    entity::{endpoint, quarantine_entry as entry},
    error::{DomainError, DomainResult},
    registry::tenants,
};

/// A listing's or a bulk release's filter. The tenant is parsed once, at
/// the edge; the rest is as given (a bulk release records the filter as
/// given and shows it back).
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// The tenant `given.tenant` names (`None`: absent or blank).
    pub tenant: Option<TenantSlug>,
    pub given: QuarantineFilter,
}

impl Filter {
    /// `given` with its tenant parsed: absent or blank (after trimming)
    /// filters nothing; a name outside the slug rule names no tenant
    /// (`NotFound`, a 404 at the API), as an unknown one does.
    pub fn named(given: QuarantineFilter) -> DomainResult<Filter> {
        let tenant = crate::ids::named_filter(given.tenant.as_deref().map(str::trim))?;
        Ok(Filter { tenant, given })
    }
}

fn age_ms(age: &str) -> DomainResult<i64> {
    match age {
        "1h" => Ok(3_600_000),
        "24h" => Ok(86_400_000),
        "7d" => Ok(7 * 86_400_000),
        other => Err(DomainError::invalid("invalid_age", format!("age must be 1h, 24h or 7d, got {other:?}"))),
    }
}

pub(super) fn nonempty(v: &Option<String>) -> Option<&str> {
    v.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

/// The filter except its reason, as a condition, after authorizing the
/// caller to read what it covers (the counts by reason ignore the reason).
pub(super) async fn scope_condition(
    db: &DatabaseConnection,
    principal: &Principal,
    filter: &Filter,
) -> DomainResult<Condition> {
    let f = &filter.given;
    let mut c = Condition::all();
    match &filter.tenant {
        Some(slug) => {
            let t = tenants::find(db, principal, slug).await?;
            principal.authorize(Permission::ReadEvents, Scope::Tenant(&t.id))?;
            c = c.add(entry::Column::TenantId.eq(&t.id));
            if let Some(ep) = nonempty(&f.endpoint) {
                let e = endpoint::Entity::find()
                    .filter(endpoint::Column::TenantId.eq(&t.id))
                    .filter(endpoint::Column::Slug.eq(ep))
                    .one(db)
                    .await?
                    .ok_or(DomainError::NotFound)?;
                c = c.add(entry::Column::EndpointId.eq(e.id));
            }
        }
        None if nonempty(&f.endpoint).is_some() => {
            return Err(DomainError::invalid("tenant_required", "filtering by endpoint needs a tenant"));
        }
        None => match principal.tenant_filter() {
            Some(own) => {
                principal.authorize(Permission::ReadEvents, Scope::Tenant(own))?;
                c = c.add(entry::Column::TenantId.eq(own));
            }
            None => {
                principal.authorize(Permission::ReadEvents, Scope::Global)?;
                c = c.add(crate::registry::tenants::not_synthetic_tenant(entry::Column::TenantId));
            }
        },
    }
    match nonempty(&f.status).map(|s| (s, QuarantineStatus::parse(s))) {
        Some(("all", _)) => {}
        None => c = c.add(entry::Column::Status.eq(QuarantineStatus::Open)),
        Some((_, Some(s))) => c = c.add(entry::Column::Status.eq(s)),
        Some((other, None)) => {
            return Err(DomainError::invalid(
                "invalid_status",
                format!("status must be open, released, discarded or all, got {other:?}"),
            ));
        }
    }
    if let Some(age) = nonempty(&f.age) {
        c = c.add(entry::Column::CreatedAt.gte(clock::now_ms() - age_ms(age)?));
    }
    Ok(c)
}

/// `scope` narrowed to the filter's reason, if any.
pub(super) fn with_reason(scope: Condition, f: &QuarantineFilter) -> Condition {
    match nonempty(&f.reason) {
        Some(r) => scope.add(entry::Column::Reason.eq(r)),
        None => scope,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(tenant: Option<&str>) -> DomainResult<Filter> {
        let given = QuarantineFilter { tenant: tenant.map(str::to_owned), ..Default::default() };
        Filter::named(given)
    }

    #[test]
    fn the_tenant_is_parsed_once_trimmed_and_kept_as_given() {
        for blank in [None, Some(""), Some("  ")] {
            assert_eq!(named(blank).unwrap().tenant, None, "{blank:?}");
        }
        let f = named(Some(" clinic-a ")).unwrap();
        assert_eq!(f.tenant, Some(TenantSlug::parse("clinic-a").unwrap()));
        assert_eq!(f.given.tenant.as_deref(), Some(" clinic-a "), "a bulk release records the filter as given");
        for bad in ["Clinic-A", "_drill", "a b"] {
            assert!(matches!(named(Some(bad)), Err(DomainError::NotFound)), "{bad:?}");
        }
    }
}
