//! Page sizes of listings: one rule per kind of listing, read by the
//! validator and by the OpenAPI document alike.

use crate::error::{DomainError, DomainResult};

/// How many rows a listing returns: `default` when not asked, otherwise
/// 1..=`max`. A size outside the range is refused, never clamped, so a
/// caller never reads a short page as the end of the data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Page {
    pub default: u64,
    pub max: u64,
}

/// Events, audit entries, quarantine entries, outbox intents.
pub const LIST: Page = Page { default: 100, max: 500 };
/// Drill runs (each carries every drill's observations).
pub const DRILL_RUNS: Page = Page { default: 20, max: 200 };

impl Page {
    /// The page size for a requested `limit`; outside 1..=max,
    /// `invalid_query` naming the parameter.
    pub fn limit(self, requested: Option<u64>) -> DomainResult<u64> {
        match requested {
            None => Ok(self.default),
            Some(n) if (1..=self.max).contains(&n) => Ok(n),
            Some(n) => Err(DomainError::invalid(
                "invalid_query",
                format!("query parameter `limit` must be 1–{}, got {n}", self.max),
            )),
        }
    }

    /// The `limit` parameter's schema: an integer in 1..=max.
    #[cfg(feature = "openapi")]
    pub fn schema(self) -> utoipa::openapi::Object {
        crate::schema::integer(1, self.max as i64)
    }
}

/// `limit` of a [`LIST`] listing, as a JSON field (null: the default).
#[cfg(feature = "openapi")]
pub fn optional_list_schema() -> utoipa::openapi::Object {
    crate::schema::nullable(LIST.schema())
}

/// `limit` of a [`LIST`] listing.
#[cfg(feature = "openapi")]
pub fn list_schema() -> utoipa::openapi::Object {
    LIST.schema()
}

/// `limit` of the [`DRILL_RUNS`] listing.
#[cfg(feature = "openapi")]
pub fn drill_runs_schema() -> utoipa::openapi::Object {
    DRILL_RUNS.schema()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_outside_the_range_are_refused() {
        assert_eq!(LIST.limit(None).unwrap(), 100);
        assert_eq!(LIST.limit(Some(1)).unwrap(), 1);
        assert_eq!(LIST.limit(Some(500)).unwrap(), 500);
        for bad in [0, 501, u64::MAX] {
            let e = LIST.limit(Some(bad)).unwrap_err();
            assert_eq!(e.code(), "invalid_query", "{bad}");
        }
        assert!(DRILL_RUNS.limit(Some(201)).is_err());
    }
}
