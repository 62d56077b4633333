//! Text formatting shared by the pages: times, durations, sizes, scopes.

/// `2026-12-02T11:47:40Z` → `2026-12-02 11:47 UTC`. Anything else is shown as
/// it came, so an unexpected format is still readable.
pub fn when(ts: &str) -> String {
    match ts.strip_suffix('Z').and_then(|t| t.split_once('T')) {
        Some((date, time)) if time.len() >= 5 => format!("{date} {} UTC", &time[..5]),
        _ => ts.to_owned(),
    }
}

/// Like [`when`], with a word for "no time".
pub fn when_or(ts: Option<&str>, none: &str) -> String {
    ts.map(when).unwrap_or_else(|| none.to_owned())
}

/// A span of milliseconds in the two largest units: `2 d 3 h`, `5 h 12 min`,
/// `12 min 5 s`, `45 s`.
pub fn duration(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    let (d, h, m, sec) = (s / 86_400, s % 86_400 / 3600, s % 3600 / 60, s % 60);
    if d > 0 {
        format!("{d} d {h} h")
    } else if h > 0 {
        format!("{h} h {m} min")
    } else if m > 0 {
        format!("{m} min {sec} s")
    } else {
        format!("{sec} s")
    }
}

/// Seconds for people: `300 s (5 min)`.
pub fn seconds(secs: i64) -> String {
    if secs >= 3600 && secs % 3600 == 0 {
        format!("{secs} s ({} h)", secs / 3600)
    } else if secs >= 60 && secs % 60 == 0 {
        format!("{secs} s ({} min)", secs / 60)
    } else {
        format!("{secs} s")
    }
}

/// Bytes in binary units where they divide evenly: `1 MiB`, `512 KiB`.
pub fn bytes(n: i64) -> String {
    const KIB: i64 = 1024;
    const MIB: i64 = 1024 * 1024;
    if n >= MIB && n % MIB == 0 {
        format!("{} MiB", n / MIB)
    } else if n >= KIB && n % KIB == 0 {
        format!("{} KiB", n / KIB)
    } else {
        format!("{n} bytes")
    }
}

/// `["*"]` is how the registry spells "every type".
pub fn is_any_type(types: &[String]) -> bool {
    types.len() == 1 && types[0] == "*"
}

/// Error messages from the server start lower-case (they read well after a
/// label); standing alone they start with a capital.
pub fn sentence(msg: &str) -> String {
    let mut chars = msg.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The console page of one event's story (each segment percent-encoded).
pub fn event_href(tenant: &str, endpoint: &str, event_id: &str) -> String {
    format!("/events/{}/{}/{}", query_value(tenant), query_value(endpoint), query_value(event_id))
}

/// Percent-encodes a query value (everything but RFC 3986 unreserved bytes).
pub fn query_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A trimmed form value, `None` when blank.
pub fn nonempty(text: &str) -> Option<String> {
    Some(text.trim().to_owned()).filter(|s| !s.is_empty())
}

/// `path?k=v&…` with the values encoded; pairs with an empty value are left
/// out (and so is the `?` when none remain).
pub fn with_query(path: &str, pairs: &[(&str, &str)]) -> String {
    let parts: Vec<String> =
        pairs.iter().filter(|(_, v)| !v.is_empty()).map(|(k, v)| format!("{k}={}", query_value(v))).collect();
    if parts.is_empty() { path.to_owned() } else { format!("{path}?{}", parts.join("&")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(when("2026-12-02T11:47:40Z"), "2026-12-02 11:47 UTC");
        assert_eq!(when("yesterday"), "yesterday");
        assert_eq!(duration(90_061_000), "1 d 1 h");
        assert_eq!(duration(3_720_000), "1 h 2 min");
        assert_eq!(duration(65_000), "1 min 5 s");
        assert_eq!(duration(-5), "0 s");
        assert_eq!(seconds(300), "300 s (5 min)");
        assert_eq!(seconds(45), "45 s");
        assert_eq!(seconds(3600), "3600 s (1 h)");
        assert_eq!(bytes(1_048_576), "1 MiB");
        assert_eq!(bytes(1000), "1000 bytes");
        assert_eq!(sentence("not found"), "Not found");
        assert_eq!(query_value("/tenants/a b?x=1"), "%2Ftenants%2Fa%20b%3Fx%3D1");
        assert_eq!(
            with_query("/audit", &[("actor", ""), ("since", "1h"), ("tenant", "a b")]),
            "/audit?since=1h&tenant=a%20b"
        );
        assert_eq!(with_query("/audit", &[("actor", "")]), "/audit");
        assert_eq!(nonempty("  "), None);
    }
}
