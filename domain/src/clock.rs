//! Time as unix milliseconds (what the schema stores) and its RFC 3339 form
//! (what people and APIs read).

use time::{OffsetDateTime, format_description::well_known::Rfc3339};

pub const HOUR_SECS: i64 = 3_600;
pub const DAY_SECS: i64 = 86_400;

pub fn now_ms() -> i64 {
    (OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64
}

/// RFC 3339 in UTC with second precision, e.g. `2026-12-02T11:47:40Z`.
pub fn rfc3339(ms: i64) -> String {
    OffsetDateTime::from_unix_timestamp(ms.div_euclid(1000))
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| ms.to_string())
}

pub fn rfc3339_opt(ms: Option<i64>) -> Option<String> {
    ms.map(rfc3339)
}

/// Parses RFC 3339 into unix milliseconds.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    OffsetDateTime::parse(text, &Rfc3339).ok().map(|t| (t.unix_timestamp_nanos() / 1_000_000) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(parse_rfc3339("2026-12-02T11:47:40Z"), Some(1_796_212_060_000));
        assert_eq!(rfc3339(1_796_212_060_000), "2026-12-02T11:47:40Z");
        assert_eq!(parse_rfc3339("yesterday"), None);
    }
}
