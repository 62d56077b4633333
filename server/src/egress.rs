//! Where the outbox relay may connect.
//!
//! A tenant's `notify_url` is chosen by whoever manages the tenant, and the
//! relay POSTs one-time codes to it from inside the deployment. Unchecked, it
//! would reach whatever the server can reach: services on loopback, the
//! private network, the cloud metadata endpoint. So every connection the relay
//! opens goes through [`GuardedResolver`], reqwest's resolver for the relay
//! client: it resolves the name, drops every forbidden address, and the client
//! connects only to the addresses it returns. The addresses checked are the
//! addresses connected to; there is no second lookup for DNS to answer
//! differently. IP literals never reach a resolver (hyper connects to them
//! directly), so [`check_url`] refuses forbidden literals, and the metadata
//! names, before the request is made. An operator who runs the relay on an
//! internal address allows its range with `SIGNET_RELAY_ALLOW`.

use std::{
    fmt,
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    str::FromStr,
    sync::Arc,
};

use ipnet::IpNet;
use reqwest::{
    Url,
    dns::{Addrs, Name, Resolve, Resolving},
};

/// Why an address is not a relay's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forbidden {
    Loopback,
    /// RFC 1918, deprecated IPv6 site-local, local-use NAT64.
    Private,
    /// 100.64.0.0/10 (carrier-grade NAT, RFC 6598).
    SharedAddressSpace,
    LinkLocal,
    /// fc00::/7.
    UniqueLocal,
    /// A cloud instance-metadata address or name.
    Metadata,
    /// 0.0.0.0/8 and `::` (Linux connects them to the host itself).
    Unspecified,
    Broadcast,
    Multicast,
    /// Other special-purpose ranges no relay lives in (240.0.0.0/4,
    /// 192.0.0.0/24, IPv4-compatible IPv6).
    Reserved,
}

impl Forbidden {
    pub fn as_str(self) -> &'static str {
        match self {
            Forbidden::Loopback => "loopback",
            Forbidden::Private => "private",
            Forbidden::SharedAddressSpace => "shared address space (CGNAT)",
            Forbidden::LinkLocal => "link-local",
            Forbidden::UniqueLocal => "unique-local",
            Forbidden::Metadata => "cloud metadata",
            Forbidden::Unspecified => "unspecified",
            Forbidden::Broadcast => "broadcast",
            Forbidden::Multicast => "multicast",
            Forbidden::Reserved => "reserved",
        }
    }
}

/// Instance-metadata addresses that are not already obvious from their
/// range's class (AWS's IPv6 one, Alibaba's).
const METADATA_V4: [Ipv4Addr; 2] = [Ipv4Addr::new(169, 254, 169, 254), Ipv4Addr::new(100, 100, 100, 200)];
const METADATA_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254);
/// Names the clouds give their metadata service. Refused whatever
/// `SIGNET_RELAY_ALLOW` says: no relay is a metadata service.
const METADATA_NAMES: [&str; 5] =
    ["metadata", "metadata.google.internal", "metadata.goog", "instance-data", "instance-data.ec2.internal"];

/// The class of a forbidden address, or `None` for an address a relay may
/// have (a public one).
pub fn classify(ip: IpAddr) -> Option<Forbidden> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<Forbidden> {
    let [a, b, c, _] = ip.octets();
    Some(if METADATA_V4.contains(&ip) {
        Forbidden::Metadata
    } else if a == 0 {
        Forbidden::Unspecified
    } else if a == 127 {
        Forbidden::Loopback
    } else if a == 10 || (a == 172 && (16..32).contains(&b)) || (a == 192 && b == 168) {
        Forbidden::Private
    } else if a == 100 && (64..128).contains(&b) {
        Forbidden::SharedAddressSpace
    } else if a == 169 && b == 254 {
        Forbidden::LinkLocal
    } else if ip == Ipv4Addr::BROADCAST {
        Forbidden::Broadcast
    } else if (224..240).contains(&a) {
        Forbidden::Multicast
    } else if a >= 240 || (a == 192 && b == 0 && c == 0) {
        Forbidden::Reserved
    } else {
        return None;
    })
}

fn classify_v6(ip: Ipv6Addr) -> Option<Forbidden> {
    let s = ip.segments();
    // The last 32 bits as IPv4 (mapped, compatible, NAT64).
    let low_v4 = || Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    Some(if ip == METADATA_V6 {
        Forbidden::Metadata
    } else if ip.is_unspecified() {
        Forbidden::Unspecified
    } else if ip.is_loopback() {
        Forbidden::Loopback
    } else if let Some(v4) = ip.to_ipv4_mapped() {
        return classify_v4(v4);
    } else if s[..6] == [0; 6] {
        // IPv4-compatible (deprecated): never a relay's address.
        Forbidden::Reserved
    } else if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        // Well-known NAT64 prefix: the gateway connects to the embedded IPv4.
        return classify_v4(low_v4());
    } else if s[0] == 0x2002 {
        // 6to4: the embedded IPv4 is in segments 1 and 2.
        return classify_v4(Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8));
    } else if s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1 {
        Forbidden::Private
    } else if s[0] & 0xfe00 == 0xfc00 {
        Forbidden::UniqueLocal
    } else if s[0] & 0xffc0 == 0xfe80 {
        Forbidden::LinkLocal
    } else if s[0] & 0xffc0 == 0xfec0 {
        Forbidden::Private
    } else if s[0] & 0xff00 == 0xff00 {
        Forbidden::Multicast
    } else {
        return None;
    })
}

/// The ranges an operator allows despite their class
/// (`SIGNET_RELAY_ALLOW`, comma-separated CIDRs or single addresses).
#[derive(Debug, Clone, Default)]
pub struct RelayAllow(Vec<IpNet>);

impl FromStr for RelayAllow {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let mut nets = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let net = match (part.parse::<IpNet>(), part.parse::<IpAddr>()) {
                (Ok(net), _) => net.trunc(),
                (_, Ok(ip)) => IpNet::from(ip),
                _ => return Err(format!("{part:?} is not a CIDR (such as 10.1.2.0/24) or an IP address")),
            };
            nets.push(net);
        }
        Ok(RelayAllow(nets))
    }
}

/// The ranges, comma-separated, as `signet config check` prints them.
impl fmt::Display for RelayAllow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&parts.join(","))
    }
}

impl RelayAllow {
    fn permits(&self, ip: IpAddr) -> bool {
        let canonical = ip.to_canonical();
        self.0.iter().any(|n| n.contains(&ip) || n.contains(&canonical))
    }

    /// Whether the relay may connect to `ip`; why not otherwise.
    pub fn check(&self, ip: IpAddr) -> Result<(), Forbidden> {
        match classify(ip) {
            Some(why) if !self.permits(ip) => Err(why),
            _ => Ok(()),
        }
    }
}

/// A relay target refused: the host, and the first forbidden address it
/// named. The message names neither the URL (it may hold credentials) nor
/// anything of the payload.
#[derive(Debug, Clone)]
pub struct Refused {
    pub host: String,
    pub why: Forbidden,
    pub addr: Option<IpAddr>,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.addr {
            Some(addr) if addr.to_string() == self.host => {
                write!(f, "relay address {addr} is {} and not allowed (SIGNET_RELAY_ALLOW)", self.why.as_str())
            }
            Some(addr) => write!(
                f,
                "relay host {} resolves only to forbidden addresses ({addr} is {}); \
                 allow its range with SIGNET_RELAY_ALLOW",
                self.host,
                self.why.as_str()
            ),
            None => write!(f, "relay host {} is a {} name, never a relay", self.host, self.why.as_str()),
        }
    }
}

impl std::error::Error for Refused {}

/// What can be refused before connecting: metadata names and IP literals
/// (which no resolver sees).
pub fn check_url(url: &Url, allow: &RelayAllow) -> Result<(), Refused> {
    // Not an http(s) URL without a host: reqwest refuses it without connecting.
    let Some(host) = url.host_str() else { return Ok(()) };
    // The parser's normal form: IPv6 in brackets, IPv4 in any spelling
    // (`0x7f.1`, `2130706433`) as dotted decimal, names in lower case.
    let literal = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    if let Ok(ip) = literal.parse::<IpAddr>() {
        return allow.check(ip).map_err(|why| Refused { host: ip.to_string(), why, addr: Some(ip) });
    }
    let name = host.trim_end_matches('.');
    if METADATA_NAMES.contains(&name) {
        return Err(Refused { host: name.to_owned(), why: Forbidden::Metadata, addr: None });
    }
    Ok(())
}

/// Whether a send failed because its target was refused here (the refusal
/// travels through reqwest and hyper as the resolver's error).
pub fn refusal<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a Refused> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(r) = err.downcast_ref::<Refused>() {
            return Some(r);
        }
        cur = err.source();
    }
    None
}

/// reqwest's resolver for the relay client: the system resolver
/// (`getaddrinfo`, through tokio), minus the addresses [`RelayAllow::check`]
/// refuses. A name left with none is refused.
pub struct GuardedResolver {
    allow: Arc<RelayAllow>,
}

impl GuardedResolver {
    pub fn new(allow: Arc<RelayAllow>) -> Self {
        GuardedResolver { allow }
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow = self.allow.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut first_refused = None;
            let permitted: Vec<SocketAddr> = found
                .into_iter()
                .filter(|a| match allow.check(a.ip()) {
                    Ok(()) => true,
                    Err(why) => {
                        first_refused.get_or_insert((why, a.ip()));
                        false
                    }
                })
                .collect();
            match first_refused {
                Some((why, addr)) if permitted.is_empty() => {
                    Err(Box::new(Refused { host, why, addr: Some(addr) }) as Box<dyn std::error::Error + Send + Sync>)
                }
                _ => Ok(Box::new(permitted.into_iter()) as Addrs),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(s: &str) -> Option<Forbidden> {
        classify(s.parse().unwrap())
    }

    #[test]
    fn forbidden_ranges_are_classified() {
        use Forbidden::*;
        for (ip, want) in [
            ("127.0.0.1", Loopback),
            ("127.255.255.254", Loopback),
            ("::1", Loopback),
            ("10.0.0.1", Private),
            ("172.16.0.1", Private),
            ("172.31.255.255", Private),
            ("192.168.1.1", Private),
            ("fec0::1", Private),
            ("64:ff9b:1::1", Private),
            ("100.64.0.1", SharedAddressSpace),
            ("100.127.255.255", SharedAddressSpace),
            ("169.254.0.1", LinkLocal),
            ("fe80::1", LinkLocal),
            ("febf::1", LinkLocal),
            ("fc00::1", UniqueLocal),
            ("fdff::1", UniqueLocal),
            ("169.254.169.254", Metadata),
            ("100.100.100.200", Metadata),
            ("fd00:ec2::254", Metadata),
            ("0.0.0.0", Unspecified),
            ("0.1.2.3", Unspecified),
            ("::", Unspecified),
            ("255.255.255.255", Broadcast),
            ("224.0.0.1", Multicast),
            ("239.255.255.250", Multicast),
            ("ff02::1", Multicast),
            ("240.0.0.1", Reserved),
            ("192.0.0.8", Reserved),
            ("::7f00:1", Reserved),
            // IPv4 inside IPv6 is judged as the IPv4 it reaches.
            ("::ffff:127.0.0.1", Loopback),
            ("::ffff:10.1.2.3", Private),
            ("::ffff:169.254.169.254", Metadata),
            ("64:ff9b::a00:1", Private),
            ("64:ff9b::7f00:1", Loopback),
            ("2002:7f00:1::1", Loopback),
            ("2002:a9fe:a9fe::1", Metadata),
        ] {
            assert_eq!(class(ip), Some(want), "{ip}");
        }
    }

    #[test]
    fn public_addresses_pass() {
        for ip in [
            "1.1.1.1",
            "8.8.8.8",
            "172.15.255.255",
            "172.32.0.1",
            "100.63.255.255",
            "100.128.0.1",
            "169.253.0.1",
            "192.0.1.1",
            "223.255.255.255",
            "2606:4700::1111",
            "2001:4860:4860::8888",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ] {
            assert_eq!(class(ip), None, "{ip}");
        }
    }

    #[test]
    fn the_allow_list_lets_chosen_ranges_through() {
        let allow: RelayAllow = " 127.0.0.0/8, 10.1.2.3 ,fd12::/16".parse().unwrap();
        for ok in ["127.0.0.1", "127.9.9.9", "::ffff:127.0.0.1", "10.1.2.3", "fd12::5", "8.8.8.8"] {
            assert_eq!(allow.check(ok.parse().unwrap()), Ok(()), "{ok}");
        }
        for refused in ["::1", "10.1.2.4", "fd13::5", "169.254.169.254"] {
            assert!(allow.check(refused.parse().unwrap()).is_err(), "{refused}");
        }
        // Host bits are dropped: 10.9.9.9/8 is 10.0.0.0/8.
        let wide: RelayAllow = "10.9.9.9/8".parse().unwrap();
        assert_eq!(wide.check("10.200.0.1".parse().unwrap()), Ok(()));
        assert!(RelayAllow::from_str("").unwrap().check("127.0.0.1".parse().unwrap()).is_err());
        for bad in ["10.0.0.0/33", "localhost", "10.0.0/8", "::1/129"] {
            assert!(RelayAllow::from_str(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn literals_and_metadata_names_are_refused_before_any_connection() {
        let none = RelayAllow::default();
        let check = |u: &str, allow: &RelayAllow| check_url(&Url::parse(u).unwrap(), allow).map_err(|r| r.why);
        assert_eq!(check("http://127.0.0.1:9/x", &none), Err(Forbidden::Loopback));
        assert_eq!(check("http://[::1]:9/x", &none), Err(Forbidden::Loopback));
        assert_eq!(check("https://[::ffff:a9fe:a9fe]/", &none), Err(Forbidden::Metadata));
        assert_eq!(check("https://169.254.169.254/latest/meta-data", &none), Err(Forbidden::Metadata));
        // The URL parser's normal form is what is checked (and connected to).
        assert_eq!(check("https://0x7f.1/", &none), Err(Forbidden::Loopback));
        assert_eq!(check("https://2130706433/", &none), Err(Forbidden::Loopback));
        assert_eq!(check("https://Metadata.Google.Internal./x", &none), Err(Forbidden::Metadata));
        assert_eq!(check("https://relay.example/", &none), Ok(()));
        assert_eq!(check("https://8.8.8.8/", &none), Ok(()));
        let loopback: RelayAllow = "127.0.0.0/8".parse().unwrap();
        assert_eq!(check("http://127.0.0.1:9/x", &loopback), Ok(()));
        assert_eq!(check("http://metadata/x", &"0.0.0.0/0".parse().unwrap()), Err(Forbidden::Metadata));
    }

    #[tokio::test]
    async fn the_resolver_returns_only_permitted_addresses() {
        let name = |s: &str| s.parse::<Name>().unwrap();
        let strict = GuardedResolver::new(Arc::default());
        let err = match strict.resolve(name("localhost")).await {
            Ok(addrs) => panic!("localhost resolved to {:?}", addrs.collect::<Vec<_>>()),
            Err(e) => e,
        };
        let refused = refusal(err.as_ref()).expect("a refusal");
        assert_eq!((refused.host.as_str(), refused.why), ("localhost", Forbidden::Loopback));
        let v4 = GuardedResolver::new(Arc::new("127.0.0.0/8".parse().unwrap()));
        let addrs: Vec<SocketAddr> = v4.resolve(name("localhost")).await.unwrap().collect();
        assert!(!addrs.is_empty() && addrs.iter().all(|a| a.ip().is_ipv4() && a.ip().is_loopback()), "{addrs:?}");
    }
}
