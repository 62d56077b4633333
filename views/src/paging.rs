//! Page sizes of listings: one rule per kind of listing, read by the
//! domain's validator and by the OpenAPI document alike.

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
    /// The page size for a requested `limit`; `None` outside 1..=max.
    pub fn size(self, requested: Option<u64>) -> Option<u64> {
        match requested {
            None => Some(self.default),
            Some(n) if (1..=self.max).contains(&n) => Some(n),
            Some(_) => None,
        }
    }

    /// The `limit` parameter's schema: an integer in 1..=max.
    #[cfg(feature = "openapi")]
    pub fn schema(self) -> utoipa::openapi::Object {
        crate::openapi::integer(1, self.max as i64)
    }
}

/// `limit` of a [`LIST`] listing, as a JSON field (null: the default).
#[cfg(feature = "openapi")]
pub fn optional_list_schema() -> utoipa::openapi::Object {
    crate::openapi::nullable(LIST.schema())
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
