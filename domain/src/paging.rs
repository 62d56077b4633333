//! Page sizes of listings (`views::paging`), with the domain's refusal.

use crate::error::{DomainError, DomainResult};

use views::paging::Page;

/// The page size for a requested `limit`; outside 1..=max, `invalid_query`
/// naming the parameter.
pub fn limit(page: Page, requested: Option<u64>) -> DomainResult<u64> {
    page.size(requested).ok_or_else(|| {
        DomainError::invalid(
            "invalid_query",
            format!("query parameter `limit` must be 1–{}, got {}", page.max, requested.unwrap_or_default()),
        )
    })
}

#[cfg(test)]
mod tests {
    use views::paging::{DRILL_RUNS, LIST};

    use super::*;

    #[test]
    fn sizes_outside_the_range_are_refused() {
        assert_eq!(limit(LIST, None).unwrap(), 100);
        assert_eq!(limit(LIST, Some(1)).unwrap(), 1);
        assert_eq!(limit(LIST, Some(500)).unwrap(), 500);
        for bad in [0, 501, u64::MAX] {
            let e = limit(LIST, Some(bad)).unwrap_err();
            assert_eq!(e.code(), "invalid_query", "{bad}");
        }
        assert!(limit(DRILL_RUNS, Some(201)).is_err());
    }
}
