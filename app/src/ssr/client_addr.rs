//! The client's address for sign-in throttling, behind trusted reverse
//! proxies (`SIGNET_TRUSTED_PROXIES`).
//!
//! Threat model notes:
//! - Forwarding headers are read only when the socket peer is a trusted
//!   proxy; from anyone else they are ignored and the peer is the client.
//! - Each proxy appends the address it received the request from, so only
//!   the right end of the list is trustworthy. Hops are walked from the
//!   right, past trusted proxies; the first untrusted one is the client.
//!   What lies left of it was written by the client and is never taken as
//!   an address (a `Forwarded` field line is still split whole, so a
//!   client's unterminated quote in the proxy's line refuses the request).
//!   When every hop is trusted, the leftmost is the client.
//! - `Forwarded` (RFC 7239, `for=`) and `X-Forwarded-For` are parsed
//!   strictly, field line by field line from the last: a hop that is read
//!   and is not an address (`unknown`, an obfuscated name, a bare IPv6
//!   without brackets, garbage, a `Forwarded` element without `for=`, an
//!   unterminated quote) is an error, and so is a request carrying both
//!   headers that name different clients. The caller refuses such a sign-in
//!   rather than charging the proxy's own address, which every browser
//!   behind it shares: a client cannot turn its own bad header into a lock
//!   on everyone else.

use std::net::IpAddr;

use http::{HeaderMap, HeaderName, header::FORWARDED};
use ipnet::IpNet;

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// The proxies whose forwarding headers are believed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    /// Parses a comma-separated list of CIDR blocks (`10.0.0.0/8`,
    /// `fd00::/8`) or single addresses; an empty setting trusts nobody. The
    /// error is one line naming the bad entry (a block with host bits set,
    /// such as `10.0.0.1/8`, is refused as a likely typo).
    pub fn parse(setting: &str) -> Result<TrustedProxies, String> {
        if setting.trim().is_empty() {
            return Ok(TrustedProxies::default());
        }
        let nets = setting.split(',').map(str::trim).map(parse_net).collect::<Result<Vec<_>, _>>()?;
        Ok(TrustedProxies(nets))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn trusts(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|net| net.contains(&ip))
    }
}

fn parse_net(entry: &str) -> Result<IpNet, String> {
    let bad = |why: &str| format!("`{entry}` {why}");
    if entry.is_empty() {
        return Err(bad("is empty (a stray comma?); give CIDR blocks such as 10.0.0.0/8 or fd00::/8"));
    }
    if !entry.contains('/') {
        let ip: IpAddr = entry.parse().map_err(|_| bad("is not an address or a CIDR block such as 10.0.0.0/8"))?;
        return Ok(IpNet::from(ip.to_canonical()));
    }
    let net: IpNet = entry.parse().map_err(|_| bad("is not a CIDR block such as 10.0.0.0/8 or fd00::/8"))?;
    if net.addr() != net.network() {
        return Err(bad(&format!("has host bits set; the block is {}", net.trunc())));
    }
    Ok(net)
}

/// Why no client address could be taken from a trusted proxy's headers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ForwardingError {
    #[error("malformed {header} header: {why}")]
    Malformed { header: &'static str, why: &'static str },
    #[error("Forwarded and X-Forwarded-For name different clients")]
    Disagree,
}

/// The client's address: the peer, unless the peer is a trusted proxy and
/// sent `Forwarded` or `X-Forwarded-For` (see the module documentation).
pub fn client_addr(peer: IpAddr, headers: &HeaderMap, trusted: &TrustedProxies) -> Result<IpAddr, ForwardingError> {
    let peer = peer.to_canonical();
    if !trusted.trusts(peer) {
        return Ok(peer);
    }
    let lines = |name: &HeaderName| headers.get_all(name).iter().map(|v| v.as_bytes()).collect::<Vec<_>>();
    let (forwarded, xff) = (lines(&FORWARDED), lines(&X_FORWARDED_FOR));
    let from_forwarded = (!forwarded.is_empty())
        .then(|| walk(&forwarded, trusted, "Forwarded", forwarded_elements, |pairs| node(for_value(pairs)?)))
        .transpose()?;
    let from_xff = (!xff.is_empty())
        .then(|| walk(&xff, trusted, "X-Forwarded-For", xff_elements, |e| e.parse().map_err(|_| NOT_AN_ADDRESS)))
        .transpose()?;
    match (from_forwarded, from_xff) {
        (Some(a), Some(b)) if a != b => Err(ForwardingError::Disagree),
        (Some(a), _) | (None, Some(a)) => Ok(a),
        (None, None) => Ok(peer),
    }
}

const NOT_AN_ADDRESS: &str = "an element is not an IP address";

/// Walks the hops from the last field line's right end: a line is split
/// into elements only if the client was not found in a later line, and an
/// element is read as an address only if the client was not found to its
/// right.
fn walk<'l, E>(
    lines: &[&'l [u8]],
    trusted: &TrustedProxies,
    header: &'static str,
    split: fn(&'l str) -> Result<Vec<E>, &'static str>,
    hop: fn(&E) -> Result<IpAddr, &'static str>,
) -> Result<IpAddr, ForwardingError> {
    let malformed = |why| ForwardingError::Malformed { header, why };
    let mut leftmost = None;
    for line in lines.iter().rev() {
        let text = std::str::from_utf8(line).map_err(|_| malformed("not text"))?;
        for element in split(text).map_err(malformed)?.iter().rev() {
            let ip = hop(element).map_err(malformed)?.to_canonical();
            if !trusted.trusts(ip) {
                return Ok(ip);
            }
            leftmost = Some(ip);
        }
    }
    leftmost.ok_or(malformed("names no address"))
}

/// `X-Forwarded-For: <ip>, <ip>, …`: bare addresses only (no ports, no
/// brackets); empty list elements are ignored.
fn xff_elements(line: &str) -> Result<Vec<&str>, &'static str> {
    Ok(line.split(',').map(|e| e.trim_matches([' ', '\t'])).filter(|e| !e.is_empty()).collect())
}

/// The `for` parameter of one element (names are case-insensitive; each at
/// most once).
fn for_value(pairs: &[(String, String)]) -> Result<&str, &'static str> {
    for (i, (name, _)) in pairs.iter().enumerate() {
        if pairs[..i].iter().any(|(earlier, _)| earlier.eq_ignore_ascii_case(name)) {
            return Err("a parameter occurs twice in one element");
        }
    }
    pairs
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("for"))
        .map(|(_, value)| value.as_str())
        .ok_or("an element has no for= parameter")
}

/// A `node`: an IPv4 address or a bracketed IPv6 address, each with an
/// optional numeric port. `unknown` and obfuscated names are no address.
fn node(value: &str) -> Result<IpAddr, &'static str> {
    let (host, port) = if let Some(rest) = value.strip_prefix('[') {
        let (v6, after) = rest.split_once(']').ok_or("an IPv6 node lacks its closing bracket")?;
        let ip: std::net::Ipv6Addr = v6.parse().map_err(|_| "a bracketed node is not an IPv6 address")?;
        let port = match after {
            "" => None,
            after => Some(after.strip_prefix(':').ok_or("an IPv6 node has text after its closing bracket")?),
        };
        (IpAddr::V6(ip), port)
    } else {
        let (host, port) = value.split_once(':').map_or((value, None), |(h, p)| (h, Some(p)));
        let ip: std::net::Ipv4Addr =
            host.parse().map_err(|_| "a node is not an IPv4 address or a bracketed IPv6 address")?;
        (IpAddr::V4(ip), port)
    };
    match port {
        None => Ok(host),
        Some(p) if !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()) => Ok(host),
        Some(_) => Err("a node's port is not a number"),
    }
}

/// Splits one field line into elements of `name=value` pairs, unquoting
/// quoted strings. Whitespace is allowed around `,` and `;`; empty list
/// elements are ignored.
fn forwarded_elements(line: &str) -> Result<Vec<Vec<(String, String)>>, &'static str> {
    let mut elements = Vec::new();
    let mut pairs = Vec::new();
    let mut chars = line.chars().peekable();
    let skip_ws = |chars: &mut std::iter::Peekable<std::str::Chars>| {
        while chars.next_if(|c| matches!(c, ' ' | '\t')).is_some() {}
    };
    loop {
        skip_ws(&mut chars);
        match chars.peek() {
            None => break,
            Some(',') => {
                chars.next();
                if !pairs.is_empty() {
                    elements.push(std::mem::take(&mut pairs));
                }
                continue;
            }
            Some(';') => {
                chars.next();
                continue;
            }
            Some(_) => {}
        }
        let name = token(&mut chars);
        if name.is_empty() || chars.next() != Some('=') {
            return Err("a parameter is not name=value");
        }
        let value = if chars.next_if_eq(&'"').is_some() {
            let mut v = String::new();
            loop {
                match chars.next() {
                    None => return Err("a quoted value is not terminated"),
                    Some('"') => break,
                    Some('\\') => v.push(chars.next().ok_or("a quoted value is not terminated")?),
                    Some(c) if c == '\t' || (' '..='~').contains(&c) => v.push(c),
                    Some(_) => return Err("a quoted value holds a control character"),
                }
            }
            v
        } else {
            let v = token(&mut chars);
            if v.is_empty() {
                return Err("a parameter has no value");
            }
            v
        };
        pairs.push((name, value));
        skip_ws(&mut chars);
        match chars.peek() {
            None | Some(',') | Some(';') => {}
            Some(_) => return Err("parameters are not separated by ';' or ','"),
        }
    }
    if !pairs.is_empty() {
        elements.push(pairs);
    }
    Ok(elements)
}

/// RFC 9110 `token` characters.
fn token(chars: &mut std::iter::Peekable<std::str::Chars>) -> String {
    let mut t = String::new();
    while let Some(c) = chars.next_if(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(*c)) {
        t.push(c);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.append(*name, value.parse().unwrap());
        }
        h
    }

    fn proxies() -> TrustedProxies {
        TrustedProxies::parse("10.0.0.0/8, fd00::/8, 192.0.2.1").unwrap()
    }

    fn from(peer: &str, pairs: &[(&'static str, &str)]) -> Result<IpAddr, ForwardingError> {
        client_addr(ip(peer), &headers(pairs), &proxies())
    }

    #[test]
    fn the_setting_is_a_list_of_cidr_blocks_and_refuses_anything_else() {
        assert!(TrustedProxies::parse("").unwrap().is_empty());
        assert!(TrustedProxies::parse("  ").unwrap().is_empty());
        assert_eq!(proxies().0.len(), 3);
        assert!(proxies().trusts(ip("10.1.2.3")) && proxies().trusts(ip("192.0.2.1")));
        assert!(!proxies().trusts(ip("192.0.2.2")) && !proxies().trusts(ip("11.0.0.1")));
        for (bad, says) in [
            ("10.0.0.0/33", "is not a CIDR block"),
            ("10.0.0.1/8", "has host bits set; the block is 10.0.0.0/8"),
            ("10.0.0.0/8,", "is empty"),
            ("localhost", "is not an address"),
            ("10.0.0.0/8 fd00::/8", "is not a CIDR block"),
            ("fd00::/129", "is not a CIDR block"),
        ] {
            let err = TrustedProxies::parse(bad).unwrap_err();
            assert!(err.starts_with('`') && err.contains(says), "{bad}: {err}");
            assert!(!err.contains('\n'), "{err}");
        }
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_claims() {
        for pairs in [
            &[("x-forwarded-for", "203.0.113.9")][..],
            &[("forwarded", "for=203.0.113.9")],
            &[("forwarded", "for=\"not even parsed")],
        ] {
            assert_eq!(from("198.51.100.7", pairs), Ok(ip("198.51.100.7")), "{pairs:?}");
        }
        // No headers from a trusted proxy: the proxy itself.
        assert_eq!(from("10.0.0.2", &[]), Ok(ip("10.0.0.2")));
    }

    #[test]
    fn the_rightmost_untrusted_hop_is_the_client() {
        let xff = |v| from("10.0.0.2", &[("x-forwarded-for", v)]);
        assert_eq!(xff("203.0.113.9"), Ok(ip("203.0.113.9")));
        // The client prepended a spoofed hop; the proxy appended the truth.
        assert_eq!(xff("198.51.100.1, 203.0.113.9"), Ok(ip("203.0.113.9")));
        // Trusted hops on the right are skipped, a trusted-looking spoof on
        // the left is never reached.
        assert_eq!(xff("10.9.9.9, 203.0.113.9, 10.0.0.3"), Ok(ip("203.0.113.9")));
        // Garbage left of the client is never read.
        assert_eq!(xff("garbage, 203.0.113.9"), Ok(ip("203.0.113.9")));
        // All hops trusted: the leftmost.
        assert_eq!(xff("10.1.1.1, 10.0.0.3"), Ok(ip("10.1.1.1")));
        // IPv4-mapped IPv6 peers and hops count as IPv4.
        assert_eq!(from("::ffff:10.0.0.2", &[("x-forwarded-for", "::ffff:203.0.113.9")]), Ok(ip("203.0.113.9")));
        // Several field lines read as one list, the last line rightmost.
        let two = from("10.0.0.2", &[("x-forwarded-for", "198.51.100.1"), ("x-forwarded-for", "203.0.113.9")]);
        assert_eq!(two, Ok(ip("203.0.113.9")));
        let two = from("10.0.0.2", &[("x-forwarded-for", "198.51.100.1"), ("x-forwarded-for", "10.0.0.3")]);
        assert_eq!(two, Ok(ip("198.51.100.1")));
    }

    #[test]
    fn forwarded_for_nodes_are_parsed_per_rfc_7239() {
        let fwd = |v| from("10.0.0.2", &[("forwarded", v)]);
        assert_eq!(fwd("for=192.0.2.60;proto=http;by=203.0.113.43"), Ok(ip("192.0.2.60")));
        assert_eq!(fwd("For=\"[2001:db8:cafe::17]:4711\""), Ok(ip("2001:db8:cafe::17")));
        assert_eq!(fwd("for=\"[2001:db8:cafe::17]\""), Ok(ip("2001:db8:cafe::17")));
        assert_eq!(fwd("for=\"192.0.2.43:47011\""), Ok(ip("192.0.2.43")));
        assert_eq!(fwd("for=198.51.100.1, for=192.0.2.43 ; proto=https"), Ok(ip("192.0.2.43")));
        assert_eq!(fwd("for=192.0.2.43, for=\"[fd00::1]\""), Ok(ip("192.0.2.43")));
        assert_eq!(fwd("proto=https;for=\"192.0.2.43\", ,"), Ok(ip("192.0.2.43")));
        assert_eq!(fwd("for=\"\\1\\92.0.2.43\""), Ok(ip("192.0.2.43")), "quoted pairs are unescaped");
        assert_eq!(fwd("for=unknown;x=1, for=192.0.2.43"), Ok(ip("192.0.2.43")), "left of the client: never read");
    }

    #[test]
    fn a_malformed_hop_from_a_trusted_proxy_is_an_error() {
        let fwd = |v| from("10.0.0.2", &[("forwarded", v)]);
        for bad in [
            "for=unknown",
            "for=_hidden",
            "for=\"2001:db8::1\"",
            "for=[2001:db8::1]",
            "for=\"[2001:db8::1\"",
            "for=\"192.0.2.43:port\"",
            "for=\"192.0.2.43:\"",
            "for=192.0.2.43;for=192.0.2.44",
            "proto=https",
            "for=",
            "for=\"192.0.2.43",
            "for=192.0.2.43 by=10.0.0.1",
            "=192.0.2.43",
            "",
        ] {
            assert!(matches!(fwd(bad), Err(ForwardingError::Malformed { header: "Forwarded", .. })), "{bad}");
        }
        let xff = |v| from("10.0.0.2", &[("x-forwarded-for", v)]);
        for bad in ["203.0.113.9:1234", "[2001:db8::1]", "unknown", "203.0.113.9 10.0.0.3", " , "] {
            assert!(matches!(xff(bad), Err(ForwardingError::Malformed { header: "X-Forwarded-For", .. })), "{bad}");
        }
        // A client's unterminated quote spills over the proxy's element on
        // the same line: refused, never read as some other address.
        assert!(fwd("for=\"198.51.100.1, for=203.0.113.9").is_err());
        assert!(fwd("for=\"198.51.100.1, for=\"[2001:db8::9]\"").is_err());
    }

    #[test]
    fn both_headers_must_name_the_same_client() {
        let both = |f, x| from("10.0.0.2", &[("forwarded", f), ("x-forwarded-for", x)]);
        assert_eq!(both("for=203.0.113.9", "203.0.113.9"), Ok(ip("203.0.113.9")));
        assert_eq!(both("for=198.51.100.1", "203.0.113.9"), Err(ForwardingError::Disagree));
        assert!(both("for=unknown", "203.0.113.9").is_err());
    }
}
