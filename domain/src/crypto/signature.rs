//! Per-scheme webhook signatures (docs/contract.md §3): parsing the signature
//! headers, signing (for `signet send` and tests) and constant-time
//! verification over the exact received bytes.
//!
//! | scheme | signed bytes | signature | key |
//! |---|---|---|---|
//! | standard-webhooks | `{id}.{timestamp}.{body}` | `v1,<base64>`, space-separated | base64 after `whsec_` |
//! | standard-webhooks `v1a` | `{id}.{timestamp}.{body}` | `v1a,<base64 of 64 bytes>` (Ed25519) | `whpk_…` public key |
//! | stripe | `{t}.{body}` | `t=…,v1=<hex>[,v1=…]` (`v0` etc. ignored) | UTF-8 bytes of the whole secret |
//! | github | `{body}` | `sha256=<hex>` | UTF-8 bytes of the secret |
//!
//! Nothing here requires the body to be UTF-8, and nothing here panics on
//! hostile input. `v1` and `v1a` signatures may share one header (the
//! spec's migration path); any one that verifies under an accepted key of
//! its kind passes. A `v1a` entry of the wrong length or encoding is a
//! signature that cannot verify, not a malformed header: it never matches.

use base64::{Engine, engine::general_purpose::STANDARD};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

use super::SigningSecret;
use super::asymmetric::{PRIVATE_PREFIX, PrivateKey, PublicKey, SIGNATURE_LEN};
use views::scheme::Scheme;

type HmacSha256 = Hmac<Sha256>;

/// Headers that carry a signature. Lookups are case-insensitive.
pub trait HeaderSource {
    fn header(&self, name: &str) -> Option<&[u8]>;
}

impl HeaderSource for [(&str, &str)] {
    fn header(&self, name: &str) -> Option<&[u8]> {
        self.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_bytes())
    }
}

/// Why the signature headers could not be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderError {
    /// A required header is absent.
    Missing,
    /// Present but not in the scheme's format.
    Malformed,
}

/// Signature material parsed from headers, before any key is tried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedSignature {
    pub scheme: Scheme,
    /// The signed timestamp (unix seconds), for schemes that sign one.
    pub timestamp: Option<i64>,
    /// The provider's message id from headers (standard-webhooks, github).
    pub message_id: Option<String>,
    /// The GitHub event name (`X-GitHub-Event`), informational.
    pub event_header: Option<String>,
    /// Candidate MACs (decoded); any match passes.
    pub macs: Vec<Vec<u8>>,
    /// Candidate Ed25519 signatures (standard-webhooks `v1a`, decoded).
    pub ed25519: Vec<[u8; SIGNATURE_LEN]>,
}

/// Longest header value we parse (a few signatures); longer is malformed.
const MAX_HEADER_LEN: usize = 8 * 1024;
/// Most signatures tried per request (bounds the work a request can cause).
const MAX_SIGNATURES: usize = 16;

fn text(h: &[u8]) -> Result<&str, HeaderError> {
    if h.len() > MAX_HEADER_LEN {
        return Err(HeaderError::Malformed);
    }
    std::str::from_utf8(h).map(str::trim).map_err(|_| HeaderError::Malformed)
}

fn timestamp(s: &str) -> Result<i64, HeaderError> {
    if s.is_empty() || s.len() > 12 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(HeaderError::Malformed);
    }
    s.parse().map_err(|_| HeaderError::Malformed)
}

fn hex_mac(s: &str) -> Result<Vec<u8>, HeaderError> {
    if s.len() != 64 {
        return Err(HeaderError::Malformed);
    }
    hex::decode(s).map_err(|_| HeaderError::Malformed)
}

/// Parses the scheme's signature headers.
pub fn parse_headers<H: HeaderSource + ?Sized>(scheme: Scheme, headers: &H) -> Result<ParsedSignature, HeaderError> {
    match scheme {
        Scheme::StandardWebhooks => {
            let id = text(headers.header("webhook-id").ok_or(HeaderError::Missing)?)?;
            let ts = text(headers.header("webhook-timestamp").ok_or(HeaderError::Missing)?)?;
            let sig = text(headers.header("webhook-signature").ok_or(HeaderError::Missing)?)?;
            if id.is_empty() || id.len() > 255 {
                return Err(HeaderError::Malformed);
            }
            let mut macs = Vec::new();
            let mut ed25519 = Vec::new();
            let mut entries = 0usize;
            for entry in sig.split(' ').filter(|e| !e.is_empty()) {
                let (version, value) = entry.split_once(',').ok_or(HeaderError::Malformed)?;
                match version {
                    "v1" => {
                        let mac = STANDARD.decode(value).map_err(|_| HeaderError::Malformed)?;
                        if mac.len() != 32 {
                            return Err(HeaderError::Malformed);
                        }
                        macs.push(mac);
                    }
                    // Counted, and kept only when it can be a signature: one
                    // of the wrong length or encoding matches nothing.
                    "v1a" => {
                        entries += 1;
                        let decoded = STANDARD.decode(value).ok().and_then(|v| <[u8; SIGNATURE_LEN]>::try_from(v).ok());
                        ed25519.extend(decoded);
                    }
                    _ => {}
                }
            }
            let entries = entries + macs.len();
            if entries == 0 || entries > MAX_SIGNATURES {
                return Err(HeaderError::Malformed);
            }
            Ok(ParsedSignature {
                scheme,
                timestamp: Some(timestamp(ts)?),
                message_id: Some(id.to_owned()),
                event_header: None,
                macs,
                ed25519,
            })
        }
        Scheme::Stripe => {
            let sig = text(headers.header("stripe-signature").ok_or(HeaderError::Missing)?)?;
            let mut ts = None;
            let mut macs = Vec::new();
            for item in sig.split(',') {
                let (k, v) = item.trim().split_once('=').ok_or(HeaderError::Malformed)?;
                match k {
                    "t" if ts.is_none() => ts = Some(timestamp(v)?),
                    "t" => return Err(HeaderError::Malformed),
                    "v1" => macs.push(hex_mac(v)?),
                    _ => {} // v0 and future schemes are ignored
                }
            }
            finish(scheme, Some(ts.ok_or(HeaderError::Malformed)?), None, None, macs)
        }
        Scheme::Github => {
            let sig = text(headers.header("x-hub-signature-256").ok_or(HeaderError::Missing)?)?;
            let delivery = text(headers.header("x-github-delivery").ok_or(HeaderError::Missing)?)?;
            let event = headers.header("x-github-event").map(text).transpose()?.map(str::to_owned);
            if delivery.is_empty() || delivery.len() > 255 {
                return Err(HeaderError::Malformed);
            }
            let mac = hex_mac(sig.strip_prefix("sha256=").ok_or(HeaderError::Malformed)?)?;
            finish(scheme, None, Some(delivery.to_owned()), event, vec![mac])
        }
        // Read under the endpoint's profile (`crypto::profile`), never here.
        Scheme::Hmac => Err(HeaderError::Malformed),
    }
}

/// The message id a request's headers claim (standard-webhooks `webhook-id`,
/// GitHub `X-GitHub-Delivery`), read without verifying anything: only for
/// recording a refusal under the event it names. Stripe carries its id in
/// the body, which is never read before it verified.
pub fn claimed_message_id<H: HeaderSource + ?Sized>(scheme: Scheme, headers: &H) -> Option<String> {
    let name = match scheme {
        Scheme::StandardWebhooks => "webhook-id",
        Scheme::Github => "x-github-delivery",
        Scheme::Stripe | Scheme::Hmac => return None,
    };
    let id = text(headers.header(name)?).ok()?;
    (!id.is_empty() && id.len() <= 255 && !id.chars().any(char::is_control)).then(|| id.to_owned())
}

fn finish(
    scheme: Scheme,
    timestamp: Option<i64>,
    message_id: Option<String>,
    event_header: Option<String>,
    macs: Vec<Vec<u8>>,
) -> Result<ParsedSignature, HeaderError> {
    if macs.is_empty() || macs.len() > MAX_SIGNATURES {
        return Err(HeaderError::Malformed);
    }
    Ok(ParsedSignature { scheme, timestamp, message_id, event_header, macs, ed25519: Vec::new() })
}

/// The HMAC key a scheme derives from a secret. `None` when the secret
/// cannot be used with the scheme (a Standard Webhooks secret that is not
/// `whsec_<base64>`).
pub fn hmac_key(scheme: Scheme, secret: &SigningSecret) -> Option<Zeroizing<Vec<u8>>> {
    match scheme {
        Scheme::StandardWebhooks => secret.decoded_whsec(),
        Scheme::Stripe | Scheme::Github | Scheme::Hmac => Some(Zeroizing::new(secret.expose().as_bytes().to_vec())),
    }
}

/// The exact bytes the scheme signs.
fn signed_bytes(p: &ParsedSignature, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 64);
    match p.scheme {
        Scheme::StandardWebhooks => {
            out.extend_from_slice(p.message_id.as_deref().unwrap_or_default().as_bytes());
            out.push(b'.');
            out.extend_from_slice(p.timestamp.unwrap_or_default().to_string().as_bytes());
            out.push(b'.');
        }
        Scheme::Stripe => {
            out.extend_from_slice(p.timestamp.unwrap_or_default().to_string().as_bytes());
            out.push(b'.');
        }
        Scheme::Github | Scheme::Hmac => {}
    }
    out.extend_from_slice(body);
    out
}

fn mac(key: &[u8], data: &[u8]) -> Option<[u8; 32]> {
    let mut m = HmacSha256::new_from_slice(key).ok()?;
    m.update(data);
    Some(m.finalize().into_bytes().into())
}

/// Whether any of the parsed signatures is a valid MAC of `body` under
/// `key`. Every candidate is compared in constant time.
pub fn verify_with_key(p: &ParsedSignature, body: &[u8], key: &[u8]) -> bool {
    // An `hmac` signature verifies only under its profile (`crypto::profile`).
    if p.scheme == Scheme::Hmac {
        return false;
    }
    let Some(expected) = mac(key, &signed_bytes(p, body)) else { return false };
    let mut ok = subtle::Choice::from(0u8);
    for candidate in &p.macs {
        ok |= candidate.as_slice().ct_eq(&expected);
    }
    ok.into()
}

/// Whether any of the parsed `v1a` signatures is `key`'s over the signed
/// bytes. Public keys and signatures are public: no constant time needed.
pub fn verify_with_public_key(p: &ParsedSignature, body: &[u8], key: &PublicKey) -> bool {
    if p.ed25519.is_empty() {
        return false;
    }
    let message = signed_bytes(p, body);
    p.ed25519.iter().any(|sig| key.verify(&message, sig))
}

/// Signature headers for a request, as a provider sends them. `timestamp`
/// is unix seconds (ignored by GitHub); `message_id` is the webhook id or
/// GitHub delivery id. A standard-webhooks secret `whsk_…` (an Ed25519
/// private key) signs `v1a`; `whsec_…` signs `v1`.
pub fn sign(
    scheme: Scheme,
    secret: &SigningSecret,
    body: &[u8],
    timestamp: i64,
    message_id: &str,
) -> Option<Vec<(String, String)>> {
    let parsed = ParsedSignature {
        scheme,
        timestamp: Some(timestamp),
        message_id: Some(message_id.to_owned()),
        event_header: None,
        macs: Vec::new(),
        ed25519: Vec::new(),
    };
    if scheme == Scheme::StandardWebhooks && secret.expose().starts_with(PRIVATE_PREFIX) {
        let key = PrivateKey::parse(secret.expose())?;
        let sig = key.sign(&signed_bytes(&parsed, body));
        return Some(vec![
            ("webhook-id".into(), message_id.into()),
            ("webhook-timestamp".into(), timestamp.to_string()),
            ("webhook-signature".into(), format!("v1a,{}", STANDARD.encode(sig))),
        ]);
    }
    if scheme == Scheme::Hmac {
        return None; // `crypto::profile::sign_for` signs under a profile
    }
    let key = hmac_key(scheme, secret)?;
    let m = mac(&key, &signed_bytes(&parsed, body))?;
    Some(match scheme {
        Scheme::StandardWebhooks => vec![
            ("webhook-id".into(), message_id.into()),
            ("webhook-timestamp".into(), timestamp.to_string()),
            ("webhook-signature".into(), format!("v1,{}", STANDARD.encode(m))),
        ],
        Scheme::Stripe => vec![("Stripe-Signature".into(), format!("t={timestamp},v1={}", hex::encode(m)))],
        Scheme::Github => vec![
            ("X-Hub-Signature-256".into(), format!("sha256={}", hex::encode(m))),
            ("X-GitHub-Delivery".into(), message_id.into()),
        ],
        Scheme::Hmac => return None,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn secret(s: &str) -> SigningSecret {
        SigningSecret::parse(s).unwrap()
    }

    fn pairs(v: &[(String, String)]) -> Vec<(&str, &str)> {
        v.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
    }

    /// GitHub's documented example ("Validating webhook deliveries").
    #[test]
    fn github_documented_vector() {
        let s = secret("It's a Secret to Everybody");
        let h = [
            ("X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"),
            ("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"),
            ("X-GitHub-Event", "issues"),
        ];
        let p = parse_headers(Scheme::Github, &h[..]).unwrap();
        assert_eq!(p.event_header.as_deref(), Some("issues"));
        let key = hmac_key(Scheme::Github, &s).unwrap();
        assert!(verify_with_key(&p, b"Hello, World!", &key));
        assert!(!verify_with_key(&p, b"Hello, World?", &key));
        let signed = sign(Scheme::Github, &s, b"Hello, World!", 0, "d").unwrap();
        assert_eq!(signed[0].1, "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17");
    }

    /// The Standard Webhooks reference test vector (also recomputed with
    /// Python's hmac: `g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=`).
    #[test]
    fn standard_webhooks_reference_vector() {
        let s = secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
        let body = br#"{"test": 2432232314}"#;
        let h = [
            ("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek"),
            ("webhook-timestamp", "1614265330"),
            (
                "webhook-signature",
                concat!(
                    "v1a,ignored v1,bm90IHRoZSByaWdodCBzaWduYXR1cmUgYXQgYWxsISE= ",
                    "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
                ),
            ),
        ];
        let p = parse_headers(Scheme::StandardWebhooks, &h[..]).unwrap();
        assert_eq!(p.macs.len(), 2, "v1a entries are ignored");
        assert_eq!(p.timestamp, Some(1614265330));
        assert!(verify_with_key(&p, body, &hmac_key(Scheme::StandardWebhooks, &s).unwrap()));
        let signed = sign(Scheme::StandardWebhooks, &s, body, 1614265330, "msg_p5jXN8AQM9LWM0D4loKWxJek").unwrap();
        assert_eq!(signed[2].1, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    /// Stripe: `t=…,v1=…` with a `v0` entry present; the key is the whole
    /// `whsec_…` string as UTF-8 (computed with Python's hmac).
    #[test]
    fn stripe_format_with_v0_entries() {
        let s = secret("whsec_test_secret");
        let body = br#"{"id":"evt_1","type":"reminder.created"}"#;
        let signed = sign(Scheme::Stripe, &s, body, 1700000000, "").unwrap();
        let v1 = signed[0].1.split("v1=").nth(1).unwrap().to_owned();
        let header =
            format!("t=1700000000,v0=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a39,v1={v1}");
        let h = [("Stripe-Signature", header.as_str())];
        let p = parse_headers(Scheme::Stripe, &h[..]).unwrap();
        assert_eq!(p.macs.len(), 1);
        assert!(verify_with_key(&p, body, &hmac_key(Scheme::Stripe, &s).unwrap()));
        assert_eq!(v1, STRIPE_VECTOR);
    }
    /// `hmac.new(b"whsec_test_secret", b"1700000000." + body, sha256)` in Python.
    const STRIPE_VECTOR: &str = "52a2b595be46c1abeafe9ee67fbf1a1ba28da004db4625a6e8747650a4d5ea2f";

    /// A `v1a` vector made once by an independent Ed25519 implementation,
    /// Python's `cryptography` 51.0.1 (OpenSSL): `Ed25519PrivateKey.generate()`,
    /// the raw seed and public key base64-encoded after `whsk_`/`whpk_`, and
    /// `sign(b"{id}.{ts}.{body}")` over the spec's reference message. Ed25519
    /// is deterministic, so Signet must also produce the same signature.
    const PY_PRIVATE: &str = "whsk_sBt4MUVkEEvdvrqfHsfbUm1fykj2KtcN8p/v50RJ1ZU=";
    const PY_PUBLIC: &str = "whpk_BXQTWuobKgvQhbcdjfbyHQ2+sNPTDN+JI6A0xBQ/sDg=";
    const PY_SIGNATURE: &str =
        "v1a,kAE0la7Vj3FHf7LHjdqu6RkXV+f9v+YmH9T6a6HU13q5h45WCebxhN5045ivHHlNz51toB2w7QR+x15mui7QDA==";
    const REF_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const REF_BODY: &[u8] = br#"{"test": 2432232314}"#;

    fn sw_headers(sig: &str) -> [(&'static str, String); 3] {
        [
            ("webhook-id", REF_ID.to_owned()),
            ("webhook-timestamp", "1614265330".to_owned()),
            ("webhook-signature", sig.to_owned()),
        ]
    }

    fn parse_sw(sig: &str) -> Result<ParsedSignature, HeaderError> {
        let h = sw_headers(sig);
        let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
        parse_headers(Scheme::StandardWebhooks, &h[..])
    }

    #[test]
    fn v1a_interop_vector_from_python_cryptography() {
        let public = PublicKey::parse(PY_PUBLIC).unwrap();
        let p = parse_sw(PY_SIGNATURE).unwrap();
        assert!(p.macs.is_empty());
        assert!(verify_with_public_key(&p, REF_BODY, &public));
        assert!(!verify_with_public_key(&p, br#"{"test": 2432232315}"#, &public));
        assert!(!verify_with_public_key(&p, REF_BODY, &PrivateKey::generate().public_key()));
        let private = PrivateKey::parse(PY_PRIVATE).unwrap();
        assert_eq!(private.public_key(), public);
        let signed = sign(Scheme::StandardWebhooks, &secret(PY_PRIVATE), REF_BODY, 1614265330, REF_ID).unwrap();
        assert_eq!(signed[2].1, PY_SIGNATURE, "Signet signs exactly what Python signed");
    }

    /// RFC 8032 §7.1 TEST 1 (empty message), also recomputed with Python's
    /// `cryptography` 51.0.1: the primitive under the `v1a` format.
    #[test]
    fn rfc8032_test_1() {
        let seed = hex::decode("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60").unwrap();
        let private = PrivateKey::parse(&format!("whsk_{}", STANDARD.encode(&seed))).unwrap();
        let public = hex::decode("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a").unwrap();
        assert_eq!(private.public_key(), PublicKey::parse(&format!("whpk_{}", STANDARD.encode(&public))).unwrap());
        assert_eq!(
            hex::encode(private.sign(b"")),
            concat!(
                "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555",
                "fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
            )
        );
    }

    /// `v1` and `v1a` side by side in one header, in either order, and bad
    /// `v1a` entries next to good ones: each kind of key finds its own.
    #[test]
    fn v1_and_v1a_side_by_side() {
        let hmac = secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
        let v1 = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
        let public = PublicKey::parse(PY_PUBLIC).unwrap();
        let key = hmac_key(Scheme::StandardWebhooks, &hmac).unwrap();
        for header in [
            format!("{v1} {PY_SIGNATURE}"),
            format!("{PY_SIGNATURE} {v1}"),
            format!("v1a,AAAA v1a,@@@ {PY_SIGNATURE} {v1} v2,whatever"),
        ] {
            let p = parse_sw(&header).unwrap();
            assert!(verify_with_key(&p, REF_BODY, &key), "{header}");
            assert!(verify_with_public_key(&p, REF_BODY, &public), "{header}");
        }
        let only_v1 = parse_sw(v1).unwrap();
        assert!(!verify_with_public_key(&only_v1, REF_BODY, &public), "an HMAC signature never passes a public key");
        let only_v1a = parse_sw(PY_SIGNATURE).unwrap();
        assert!(!verify_with_key(&only_v1a, REF_BODY, &key), "a v1a signature never passes an HMAC key");
    }

    /// `v1a` entries of the wrong length or encoding parse (so the request
    /// is answered `signature_mismatch`) but can never verify.
    #[test]
    fn bad_v1a_entries_match_nothing() {
        let public = PublicKey::parse(PY_PUBLIC).unwrap();
        let sig = PY_SIGNATURE.trim_start_matches("v1a,");
        let raw = STANDARD.decode(sig).unwrap();
        for bad in [
            "v1a,".to_owned(),
            "v1a,@@@not-base64".to_owned(),
            format!("v1a,{}", STANDARD.encode(&raw[..63])),
            format!("v1a,{}", STANDARD.encode([raw.as_slice(), &[0]].concat())),
            format!("v1a,{}", &sig[..sig.len() - 2]),
            format!("v1a,{}", hex::encode(&raw)),
        ] {
            let p = parse_sw(&bad).unwrap_or_else(|e| panic!("{bad}: {e:?}"));
            assert!(p.ed25519.is_empty(), "{bad}");
            assert!(!verify_with_public_key(&p, REF_BODY, &public), "{bad}");
        }
        let many = vec![PY_SIGNATURE; MAX_SIGNATURES + 1].join(" ");
        assert_eq!(parse_sw(&many).map(|_| ()), Err(HeaderError::Malformed), "bounded work per request");
    }

    #[test]
    fn missing_and_malformed_headers() {
        use HeaderError::*;
        let sw = |id: &str, ts: &str, sig: &str| {
            let h = [("webhook-id", id), ("webhook-timestamp", ts), ("webhook-signature", sig)];
            parse_headers(Scheme::StandardWebhooks, &h[..]).map(|_| ())
        };
        assert_eq!(parse_headers(Scheme::StandardWebhooks, &[][..]), Err(Missing));
        assert_eq!(sw("m", "12x", "v1,AAAA"), Err(Malformed));
        assert_eq!(sw("m", "1", "v1,not base64!"), Err(Malformed));
        assert_eq!(sw("m", "1", "v1"), Err(Malformed));
        assert_eq!(sw("m", "1", "v2,abc"), Err(Malformed), "no v1 signature at all");
        assert_eq!(sw("", "1", "v1,AAAA"), Err(Malformed));
        let stripe = |v: &str| parse_headers(Scheme::Stripe, &[("Stripe-Signature", v)][..]).map(|_| ());
        assert_eq!(stripe("v1=00"), Err(Malformed), "no timestamp");
        assert_eq!(stripe("t=1,t=2,v1=00"), Err(Malformed));
        assert_eq!(stripe("t=1,v0=abc"), Err(Malformed), "only v0");
        assert_eq!(stripe("t=1,v1=zz"), Err(Malformed));
        assert_eq!(stripe("garbage"), Err(Malformed));
        let gh = |sig: &str| {
            parse_headers(Scheme::Github, &[("X-Hub-Signature-256", sig), ("X-GitHub-Delivery", "d")][..]).map(|_| ())
        };
        assert_eq!(gh("sha1=abc"), Err(Malformed));
        assert_eq!(gh(&format!("sha256={}", "0".repeat(63))), Err(Malformed));
        assert_eq!(parse_headers(Scheme::Github, &[("X-Hub-Signature-256", "sha256=00")][..]), Err(Missing));
    }

    #[test]
    fn verification_is_over_exact_bytes_and_needs_no_utf8() {
        let s = SigningSecret::generate();
        let body: Vec<u8> = vec![0xff, 0x00, 0xfe, b'{', b'}'];
        for scheme in Scheme::FIXED {
            let signed = sign(scheme, &s, &body, 1_700_000_000, "msg_1").unwrap();
            let p = parse_headers(scheme, &pairs(&signed)[..]).unwrap();
            let key = hmac_key(scheme, &s).unwrap();
            assert!(verify_with_key(&p, &body, &key), "{scheme}");
            let mut tampered = body.clone();
            tampered[0] ^= 1;
            assert!(!verify_with_key(&p, &tampered, &key), "{scheme}");
            let other = hmac_key(scheme, &SigningSecret::generate()).unwrap();
            assert!(!verify_with_key(&p, &body, &other), "{scheme}");
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Hostile header values never panic, and anything accepted is bounded.
        #[test]
        fn parsers_never_panic(
            id in ".{0,300}",
            ts in ".{0,20}",
            sig in ".{0,400}",
            raw in proptest::collection::vec(any::<u8>(), 0..300)
        ) {
            for scheme in Scheme::FIXED {
                let h = [
                    ("webhook-id", id.as_str()),
                    ("webhook-timestamp", ts.as_str()),
                    ("webhook-signature", sig.as_str()),
                    ("Stripe-Signature", sig.as_str()),
                    ("X-Hub-Signature-256", sig.as_str()),
                    ("X-GitHub-Delivery", id.as_str()),
                ];
                if let Ok(p) = parse_headers(scheme, &h[..]) {
                    prop_assert!(p.macs.len() + p.ed25519.len() <= MAX_SIGNATURES);
                    prop_assert!(scheme == Scheme::StandardWebhooks || !p.macs.is_empty());
                    prop_assert!(p.macs.iter().all(|m| m.len() == 32));
                }
                struct Raw<'a>(&'a [u8]);
                impl HeaderSource for Raw<'_> {
                    fn header(&self, _: &str) -> Option<&[u8]> { Some(self.0) }
                }
                let _ = parse_headers(scheme, &Raw(&raw));
            }
        }

        /// Whatever a provider signs, Signet verifies; any change to the
        /// body, timestamp or id breaks it.
        #[test]
        fn sign_then_verify_round_trips(
            body in proptest::collection::vec(any::<u8>(), 0..512),
            ts in 0i64..4_000_000_000,
            id in "[A-Za-z0-9_-]{1,40}"
        ) {
            let s = SigningSecret::generate();
            for scheme in Scheme::FIXED {
                let signed = sign(scheme, &s, &body, ts, &id).unwrap();
                let h: Vec<(&str, &str)> = signed.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                let p = parse_headers(scheme, &h[..]).unwrap();
                let key = hmac_key(scheme, &s).unwrap();
                prop_assert!(verify_with_key(&p, &body, &key));
                let mut longer = body.clone();
                longer.push(b' ');
                prop_assert!(!verify_with_key(&p, &longer, &key));
                if scheme != Scheme::Github {
                    let mut shifted = p.clone();
                    shifted.timestamp = Some(ts + 1);
                    prop_assert!(!verify_with_key(&shifted, &body, &key));
                }
            }
            let private = PrivateKey::generate();
            let s = SigningSecret::parse(&private.encode()).unwrap();
            let signed = sign(Scheme::StandardWebhooks, &s, &body, ts, &id).unwrap();
            let h: Vec<(&str, &str)> = signed.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let p = parse_headers(Scheme::StandardWebhooks, &h[..]).unwrap();
            prop_assert!(verify_with_public_key(&p, &body, &private.public_key()));
            let mut shifted = p.clone();
            shifted.timestamp = Some(ts + 1);
            prop_assert!(!verify_with_public_key(&shifted, &body, &private.public_key()));
        }
    }
}
