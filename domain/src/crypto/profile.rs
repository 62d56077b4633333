//! Signatures under an HMAC profile (scheme `hmac`): reading the profile's
//! headers, the signed content its template describes, constant-time
//! verification over the exact received bytes, and signing ([`sign_for`],
//! for `signet send`, tests and test deliveries).
//!
//! The key is the UTF-8 bytes of the whole secret, as Shopify, Slack and the
//! dvir sender (docs/architecture.md#the-dvir-sender) use theirs. A digest of
//! the wrong length or encoding is a signature that cannot verify (401
//! `signature_mismatch`), never an error. Nothing here reads the body as
//! anything but bytes: an id at a JSON pointer is read by the receiver only
//! after the signature verified.

use base64::{Engine, engine::general_purpose::STANDARD};
use hmac::{Hmac, Mac};
use sha2::{Sha256, Sha512};
use subtle::ConstantTimeEq;
use views::{
    hmac::{HmacAlgorithm, HmacProfile, SignatureEncoding, SignatureFormat},
    scheme::Scheme,
};

use super::{
    SigningSecret,
    signature::{HeaderError, HeaderSource, ParsedSignature},
};
use crate::registry::hmac_profile::{Compiled, Part};

/// Longest header value read (a few signatures).
const MAX_HEADER_LEN: usize = 8 * 1024;
/// Most signatures tried per request.
const MAX_SIGNATURES: usize = 16;
/// Longest event id taken from a header.
const MAX_ID_LEN: usize = 255;

fn text<H: HeaderSource + ?Sized>(headers: &H, name: &str) -> Result<Option<String>, HeaderError> {
    let Some(raw) = headers.header(name) else { return Ok(None) };
    if raw.len() > MAX_HEADER_LEN {
        return Err(HeaderError::Malformed);
    }
    let s = std::str::from_utf8(raw).map_err(|_| HeaderError::Malformed)?.trim();
    Ok(Some(s.to_owned()))
}

fn timestamp(s: &str) -> Result<i64, HeaderError> {
    if s.is_empty() || s.len() > 12 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(HeaderError::Malformed);
    }
    s.parse().map_err(|_| HeaderError::Malformed)
}

/// A digest as sent, or `None` when it cannot be one (wrong encoding or
/// length): then it matches nothing.
fn decode(profile: &HmacProfile, value: &str) -> Option<Vec<u8>> {
    let digest = value.strip_prefix(profile.prefix.as_str())?;
    let bytes = match profile.encoding {
        SignatureEncoding::Hex => hex::decode(digest).ok()?,
        SignatureEncoding::Base64 => STANDARD.decode(digest).ok()?,
    };
    (bytes.len() == profile.algorithm.mac_len()).then_some(bytes)
}

/// The event id a request's headers name under the profile, read without
/// verifying anything: only for logging a refusal under it.
pub fn claimed_message_id<H: HeaderSource + ?Sized>(c: &Compiled, headers: &H) -> Option<String> {
    let id = text(headers, c.profile.id_header()?).ok()??;
    (!id.is_empty() && id.len() <= MAX_ID_LEN && !id.chars().any(char::is_control)).then_some(id)
}

/// Reads the profile's signature, timestamp and id headers.
pub fn parse_headers<H: HeaderSource + ?Sized>(c: &Compiled, headers: &H) -> Result<ParsedSignature, HeaderError> {
    let p = &c.profile;
    let sig = text(headers, &p.signature_header)?.ok_or(HeaderError::Missing)?;
    let (ts, values): (Option<i64>, Vec<&str>) = match p.signature_format {
        SignatureFormat::Digest => {
            let ts = match &p.timestamp_header {
                Some(h) => Some(timestamp(&text(headers, h)?.ok_or(HeaderError::Missing)?)?),
                None => None,
            };
            (ts, vec![sig.as_str()])
        }
        SignatureFormat::Pairs => {
            let mut ts = None;
            let mut values = Vec::new();
            for item in sig.split(',') {
                let (k, v) = item.trim().split_once('=').ok_or(HeaderError::Malformed)?;
                match k {
                    "t" if ts.is_none() => ts = Some(timestamp(v)?),
                    "t" => return Err(HeaderError::Malformed),
                    "v1" => values.push(v),
                    _ => {}
                }
            }
            (Some(ts.ok_or(HeaderError::Malformed)?), values)
        }
    };
    if values.is_empty() || values.len() > MAX_SIGNATURES {
        return Err(HeaderError::Malformed);
    }
    let message_id = match p.id_header() {
        Some(h) => {
            let id = text(headers, h)?.ok_or(HeaderError::Missing)?;
            if id.is_empty() || id.len() > MAX_ID_LEN || id.chars().any(char::is_control) {
                return Err(HeaderError::Malformed);
            }
            Some(id)
        }
        None => None,
    };
    Ok(ParsedSignature {
        scheme: Scheme::Hmac,
        timestamp: ts,
        message_id,
        event_header: None,
        macs: values.into_iter().filter_map(|v| decode(p, v)).collect(),
        ed25519: Vec::new(),
    })
}

/// The exact bytes the profile signs: its template with the body, the
/// signed timestamp and the id filled in.
pub fn signed_content(c: &Compiled, p: &ParsedSignature, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + c.profile.signed_content.len() + 32);
    for part in &c.parts {
        match part {
            Part::Literal(s) => out.extend_from_slice(s.as_bytes()),
            Part::Body => out.extend_from_slice(body),
            Part::Timestamp => out.extend_from_slice(p.timestamp.unwrap_or_default().to_string().as_bytes()),
            Part::Id => out.extend_from_slice(p.message_id.as_deref().unwrap_or_default().as_bytes()),
        }
    }
    out
}

fn mac(algorithm: HmacAlgorithm, key: &[u8], data: &[u8]) -> Option<Vec<u8>> {
    Some(match algorithm {
        HmacAlgorithm::Sha256 => {
            let mut m = Hmac::<Sha256>::new_from_slice(key).ok()?;
            m.update(data);
            m.finalize().into_bytes().to_vec()
        }
        HmacAlgorithm::Sha512 => {
            let mut m = Hmac::<Sha512>::new_from_slice(key).ok()?;
            m.update(data);
            m.finalize().into_bytes().to_vec()
        }
    })
}

/// Whether any parsed signature is the MAC of the signed content under
/// `key`. Every candidate is compared in constant time.
pub fn verify(c: &Compiled, p: &ParsedSignature, body: &[u8], key: &[u8]) -> bool {
    if p.scheme != Scheme::Hmac || p.macs.is_empty() {
        return false;
    }
    let Some(expected) = mac(c.profile.algorithm, key, &signed_content(c, p, body)) else { return false };
    let mut ok = subtle::Choice::from(0u8);
    for candidate in &p.macs {
        ok |= candidate.as_slice().ct_eq(&expected);
    }
    ok.into()
}

/// The headers a sender following `profile` sends with `body`: the
/// signature, and the timestamp and id headers the profile names. `id` is
/// used only where the profile takes it from a header; `timestamp` (unix s)
/// only where it signs one. `None` when the profile is not valid.
pub fn sign_for(
    profile: &HmacProfile,
    secret: &SigningSecret,
    id: &str,
    timestamp: i64,
    body: &[u8],
) -> Option<Vec<(String, String)>> {
    let c = Compiled::new(profile.clone())?;
    let parsed = ParsedSignature {
        scheme: Scheme::Hmac,
        timestamp: profile.has_timestamp().then_some(timestamp),
        message_id: profile.id_header().map(|_| id.to_owned()),
        event_header: None,
        macs: Vec::new(),
        ed25519: Vec::new(),
    };
    let m = mac(profile.algorithm, secret.expose().as_bytes(), &signed_content(&c, &parsed, body))?;
    let digest = match profile.encoding {
        SignatureEncoding::Hex => hex::encode(m),
        SignatureEncoding::Base64 => STANDARD.encode(m),
    };
    let value = match profile.signature_format {
        SignatureFormat::Digest => format!("{}{digest}", profile.prefix),
        SignatureFormat::Pairs => format!("t={timestamp},v1={}{digest}", profile.prefix),
    };
    let mut headers = vec![(profile.signature_header.clone(), value)];
    if let Some(h) = &profile.timestamp_header {
        headers.push((h.clone(), timestamp.to_string()));
    }
    if let Some(h) = profile.id_header() {
        headers.push((h.to_owned(), id.to_owned()));
    }
    Some(headers)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use views::hmac::HmacPreset;

    use super::*;
    use crate::registry::hmac_profile::{preset, resolve};

    fn pairs(v: &[(String, String)]) -> Vec<(&str, &str)> {
        v.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
    }

    fn compiled(p: HmacPreset) -> Compiled {
        Compiled::new(preset(p)).unwrap()
    }

    fn secret(s: &str) -> SigningSecret {
        SigningSecret::parse(s).unwrap()
    }

    /// Slack's published example ("Verifying requests from Slack",
    /// api.slack.com/authentication/verifying-requests-from-slack, now
    /// docs.slack.dev/authentication/verifying-requests-from-slack): signing
    /// secret, timestamp, slash-command body and the signature it documents.
    #[test]
    fn slack_published_example() {
        const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
        const BODY: &str = concat!(
            "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V",
            "&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=",
            "&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554",
            "%2F96rGlfmibIGlgcZRskXaIFfN",
            "&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
        );
        const SIG: &str = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
        let c = compiled(HmacPreset::Slack);
        let h = [("X-Slack-Request-Timestamp", "1531420618"), ("X-Slack-Signature", SIG)];
        let p = parse_headers(&c, &h[..]).unwrap();
        assert_eq!(p.timestamp, Some(1531420618));
        assert!(verify(&c, &p, BODY.as_bytes(), SECRET.as_bytes()));
        assert!(!verify(&c, &p, format!("{BODY}x").as_bytes(), SECRET.as_bytes()));
        let signed = sign_for(&c.profile, &secret(SECRET), "", 1531420618, BODY.as_bytes()).unwrap();
        assert_eq!(signed[0], ("X-Slack-Signature".to_owned(), SIG.to_owned()));
        assert_eq!(signed[1], ("X-Slack-Request-Timestamp".to_owned(), "1531420618".to_owned()));
    }

    /// The dvir sender's own test values (docs/architecture.md#the-dvir-sender;
    /// `SECRET = b"test-endpoint-secret"`, body
    /// `{"event_id":"e1","severity_score":82}`), signed at t=1700000000 by
    /// its `_sig` routine, run in Python 3 (`hmac.new(SECRET,
    /// f"{ts}.".encode() + body, hashlib.sha256).hexdigest()`).
    #[test]
    fn dvir_seed_004_vector() {
        const BODY: &[u8] = br#"{"event_id":"e1","severity_score":82}"#;
        let c = compiled(HmacPreset::Dvir);
        let header = format!("t=1700000000,v1={DVIR_VECTOR}");
        let p = parse_headers(&c, &[("X-DVIR-Signature", header.as_str())][..]).unwrap();
        assert_eq!(p.timestamp, Some(1700000000));
        assert!(verify(&c, &p, BODY, b"test-endpoint-secret"));
        let tampered = br#"{"event_id":"e1","severity_score":10}"#;
        assert!(!verify(&c, &p, tampered, b"test-endpoint-secret"), "the dvir sender's tampered body");
        let signed = sign_for(&c.profile, &secret("test-endpoint-secret"), "ignored", 1700000000, BODY).unwrap();
        assert_eq!(signed, vec![("X-DVIR-Signature".to_owned(), header)], "no id header: the id is in the body");
    }
    const DVIR_VECTOR: &str = "3d5e07ba1177ae4f539ccc8b0d427efdd31f48dc4a42061e51d0ceecac00fc0f";

    /// Shopify publishes no test vector; this one was computed with Python 3
    /// (`base64.b64encode(hmac.new(b"shopify-secret", body,
    /// hashlib.sha256).digest())`) over a body shaped like Shopify's
    /// documentation's `orders/create` example.
    #[test]
    fn shopify_vector() {
        const BODY: &[u8] = br#"{"id":820982911946154508,"email":"jon@example.com"}"#;
        let c = compiled(HmacPreset::Shopify);
        let h = [("X-Shopify-Hmac-Sha256", SHOPIFY_VECTOR), ("X-Shopify-Webhook-Id", "b54557e4-bdd9-4b37-8a5f")];
        let p = parse_headers(&c, &h[..]).unwrap();
        assert_eq!(p.timestamp, None);
        assert_eq!(p.message_id.as_deref(), Some("b54557e4-bdd9-4b37-8a5f"));
        assert!(verify(&c, &p, BODY, b"shopify-secret"));
        assert!(!verify(&c, &p, BODY, b"shopify-secreT"));
        let signed = sign_for(&c.profile, &secret("shopify-secret"), "b54557e4-bdd9-4b37-8a5f", 0, BODY).unwrap();
        assert_eq!(pairs(&signed), h.to_vec());
        // Without the id header nothing is verified: the id is its replay protection.
        assert_eq!(parse_headers(&c, &h[..1]), Err(HeaderError::Missing));
    }
    const SHOPIFY_VECTOR: &str = "idSMsYHcTIfqStNmryJ9KCy8bgY0Czx3Mfnr/diquzc=";

    /// A custom SHA-512 profile with `{id}` signed, base64 and a prefix;
    /// recomputed with Python 3's hmac.
    #[test]
    fn custom_sha512_profile() {
        let body = crate::registry::hmac_profile::example_custom();
        let c = Compiled::new(resolve(&body).unwrap().0).unwrap();
        let signed = sign_for(&c.profile, &secret("acme-secret"), "evt_9", 1700000000, b"{}").unwrap();
        assert_eq!(signed[0].1, format!("sha512={CUSTOM_VECTOR}"));
        let p = parse_headers(&c, &pairs(&signed)[..]).unwrap();
        assert_eq!(p.macs[0].len(), 64);
        assert!(verify(&c, &p, b"{}", b"acme-secret"));
        let mut other_id = signed.clone();
        other_id[2].1 = "evt_8".into();
        let p = parse_headers(&c, &pairs(&other_id)[..]).unwrap();
        assert!(!verify(&c, &p, b"{}", b"acme-secret"), "the id is signed");
    }
    const CUSTOM_VECTOR: &str =
        "xolglolTYLtimW9RPgzGU8jdCIZSUnwxhLOcfZiqThF+Sbr65++46AHvzuWI4DMejUz6xYcUpRRL0+NVYU0HPQ==";

    /// Digests of the wrong length or encoding parse but never match; bad
    /// headers are missing or malformed, never a panic.
    #[test]
    fn bad_signatures_match_nothing() {
        let c = compiled(HmacPreset::Slack);
        let key = b"k";
        let good = sign_for(&c.profile, &secret("k"), "", 1700000000, b"{}").unwrap();
        let digest = good[0].1.trim_start_matches("v0=").to_owned();
        for bad in [
            "v0=".to_owned(),
            "v0=zz".to_owned(),
            format!("v0={}", &digest[..62]),
            format!("v0={digest}00"),
            format!("v1={digest}"),
            digest.clone(),
            format!("v0={}", STANDARD.encode(hex::decode(&digest).unwrap())),
        ] {
            let h = [("X-Slack-Signature", bad.as_str()), ("X-Slack-Request-Timestamp", "1700000000")];
            let p = parse_headers(&c, &h[..]).unwrap();
            assert!(p.macs.is_empty(), "{bad}");
            assert!(!verify(&c, &p, b"{}", key), "{bad}");
        }
        assert_eq!(parse_headers(&c, &[("X-Slack-Signature", "v0=00")][..]), Err(HeaderError::Missing));
        let h = [("X-Slack-Signature", "v0=00"), ("X-Slack-Request-Timestamp", "12a")];
        assert_eq!(parse_headers(&c, &h[..]), Err(HeaderError::Malformed));
        let d = compiled(HmacPreset::Dvir);
        for bad in ["v1=00", "t=1,t=2,v1=00", "t=1", "garbage", "t=x,v1=00"] {
            assert_eq!(parse_headers(&d, &[("X-DVIR-Signature", bad)][..]), Err(HeaderError::Malformed), "{bad}");
        }
    }
}
