//! HMAC profiles (scheme `hmac`): the presets, validation at creation, the
//! parsed template the receiver signs over, and the OpenAPI schema that
//! states the same rules (each pattern here is the validator's own).
//!
//! Rules, all checked when the endpoint is created (422
//! `invalid_hmac_profile`, the message naming the field):
//! - `signed_content` is at most 256 characters, contains `{body}` exactly
//!   once, and otherwise only the placeholders `{timestamp}` and `{id}`;
//!   no other brace may appear.
//! - A profile signs a timestamp (format `pairs`, or a `timestamp_header`)
//!   exactly when its template has `{timestamp}`: an unsigned timestamp
//!   would make the window meaningless.
//! - A profile without a timestamp needs an `event_id` source: its only
//!   replay protection is deduplication by event id (and the replay record
//!   of its signed content) for the endpoint's dedup retention.
//! - `{id}` in the template needs the id from a header: the body is never
//!   read before the signature verified.
//!
//! A profile is immutable, as an endpoint's scheme is: the keys' four-eyes
//! approvals were given for this endpoint, and so for this profile.

use views::hmac::{HmacAlgorithm, HmacPreset, HmacProfile, HmacProfileBody, SignatureEncoding, SignatureFormat};

use crate::error::{DomainError, DomainResult};

/// The longest `signed_content` template, in characters.
pub const MAX_TEMPLATE_CHARS: usize = 256;
/// The longest header name a profile may name.
pub const MAX_HEADER_NAME: usize = 64;
/// The longest signature prefix.
pub const MAX_PREFIX: usize = 32;
/// The longest `event_id` source (`json:` and its pointer).
pub const MAX_EVENT_ID_SOURCE: usize = 256;

/// A header name: an HTTP token's letters, digits and hyphens.
pub fn header_pattern() -> String {
    format!("^[A-Za-z0-9][A-Za-z0-9-]{{0,{}}}$", MAX_HEADER_NAME - 1)
}

/// A prefix: visible ASCII except `,` (which separates `pairs`).
pub fn prefix_pattern() -> String {
    format!("^[\\x21-\\x2b\\x2d-\\x7e]{{0,{MAX_PREFIX}}}$")
}

/// `header:<name>` or `json:<RFC 6901 pointer>` (visible ASCII; `~` only as
/// `~0` or `~1`).
pub fn event_id_pattern() -> String {
    "^(header:[A-Za-z0-9][A-Za-z0-9-]{0,63}|json:(/([\\x20-\\x7d]|~[01])*)+)$".to_owned()
}

const LIT: &str = "[^{}]*";

fn any_of(names: &str) -> String {
    format!("(\\{{({names})\\}}{LIT})*")
}

/// A template: `{body}` once, any `{timestamp}` and `{id}`, no other brace.
pub fn template_pattern() -> String {
    let p = any_of("timestamp|id");
    format!("^{LIT}{p}\\{{body\\}}{LIT}{p}$")
}

/// A template with at least one `{timestamp}`.
pub fn timestamped_template_pattern() -> String {
    let p = any_of("timestamp|id");
    let (ts, body) = ("\\{timestamp\\}", "\\{body\\}");
    format!("^({LIT}{p}{ts}{LIT}{p}{body}{LIT}{p}|{LIT}{p}{body}{LIT}{p}{ts}{LIT}{p})$")
}

/// A template without `{timestamp}`.
pub fn untimed_template_pattern() -> String {
    let p = any_of("id");
    format!("^{LIT}{p}\\{{body\\}}{LIT}{p}$")
}

/// A piece of the signed content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Literal(String),
    Body,
    Timestamp,
    Id,
}

fn invalid(field: &str, why: impl std::fmt::Display) -> DomainError {
    DomainError::invalid("invalid_hmac_profile", format!("hmac_profile.{field}: {why}"))
}

/// Parses a template into its parts; the error says what is wrong with it.
pub fn parse_template(template: &str) -> Result<Vec<Part>, String> {
    if template.chars().count() > MAX_TEMPLATE_CHARS {
        return Err(format!("the template is longer than {MAX_TEMPLATE_CHARS} characters"));
    }
    let mut parts = Vec::new();
    let mut rest = template;
    let mut bodies = 0;
    while !rest.is_empty() {
        let next = rest.find(['{', '}']).unwrap_or(rest.len());
        let (lit, tail) = rest.split_at(next);
        if !lit.is_empty() {
            parts.push(Part::Literal(lit.to_owned()));
        }
        if tail.is_empty() {
            break;
        }
        if tail.starts_with('}') {
            return Err("a '}' closes no placeholder".to_owned());
        }
        let close = tail.find('}').ok_or("a '{' is never closed")?;
        let name = tail.get(1..close).unwrap_or_default();
        parts.push(match name {
            "body" => {
                bodies += 1;
                Part::Body
            }
            "timestamp" => Part::Timestamp,
            "id" => Part::Id,
            other => {
                return Err(format!("unknown placeholder {{{other}}}; use {{body}}, {{timestamp}} or {{id}}"));
            }
        });
        rest = tail.get(close + 1..).unwrap_or_default();
    }
    match bodies {
        1 => Ok(parts),
        0 => Err("the template must contain {body}: the body would be unsigned".to_owned()),
        _ => Err("{body} may appear only once".to_owned()),
    }
}

/// The preset's profile.
pub fn preset(p: HmacPreset) -> HmacProfile {
    let profile =
        |header: &str, format, prefix: &str, encoding, content: &str, ts: Option<&str>, id: Option<&str>| HmacProfile {
            preset: Some(p),
            signature_header: header.to_owned(),
            signature_format: format,
            prefix: prefix.to_owned(),
            encoding,
            algorithm: HmacAlgorithm::Sha256,
            signed_content: content.to_owned(),
            timestamp_header: ts.map(str::to_owned),
            event_id: id.map(str::to_owned),
        };
    match p {
        HmacPreset::Dvir => profile(
            "X-DVIR-Signature",
            SignatureFormat::Pairs,
            "",
            SignatureEncoding::Hex,
            "{timestamp}.{body}",
            None,
            Some("json:/event_id"),
        ),
        HmacPreset::Shopify => profile(
            "X-Shopify-Hmac-Sha256",
            SignatureFormat::Digest,
            "",
            SignatureEncoding::Base64,
            "{body}",
            None,
            Some("header:X-Shopify-Webhook-Id"),
        ),
        HmacPreset::Slack => profile(
            "X-Slack-Signature",
            SignatureFormat::Digest,
            "v0=",
            SignatureEncoding::Hex,
            "v0:{timestamp}:{body}",
            Some("X-Slack-Request-Timestamp"),
            None,
        ),
    }
}

fn header_name(field: &str, name: &str) -> DomainResult<()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_HEADER_NAME
        && name.as_bytes().first().is_some_and(u8::is_ascii_alphanumeric)
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(invalid(field, format!("a header name is 1–{MAX_HEADER_NAME} letters, digits and hyphens")))
    }
}

fn event_id_source(source: &str) -> DomainResult<()> {
    if source.len() > MAX_EVENT_ID_SOURCE {
        return Err(invalid("event_id", format!("at most {MAX_EVENT_ID_SOURCE} characters")));
    }
    if let Some(h) = source.strip_prefix("header:") {
        return header_name("event_id", h);
    }
    let Some(pointer) = source.strip_prefix("json:") else {
        return Err(invalid("event_id", "use header:<name> or json:<JSON pointer such as /id>"));
    };
    let bytes = pointer.as_bytes();
    let escapes_ok = bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'~')
        .all(|(i, _)| matches!(bytes.get(i + 1), Some(b'0' | b'1')));
    if pointer.is_empty()
        || !pointer.starts_with('/')
        || !escapes_ok
        || !pointer.bytes().all(|b| (0x20..=0x7e).contains(&b))
    {
        return Err(invalid("event_id", "a JSON pointer starts with '/', in visible ASCII, '~' only as ~0 or ~1"));
    }
    Ok(())
}

/// A profile written as JSON (the CLI's `--profile FILE`, the console's
/// custom profile), read strictly: a field this version does not know is
/// refused by name rather than ignored, so a typo cannot drop a rule.
pub fn parse_json(text: &[u8]) -> DomainResult<HmacProfileBody> {
    let mut unknown = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(text);
    let body: HmacProfileBody = serde_ignored::deserialize(&mut de, |p| unknown.push(p.to_string()))
        .and_then(|b| de.end().map(|()| b))
        .map_err(|e| DomainError::invalid("invalid_hmac_profile", format!("hmac_profile: not a profile: {e}")))?;
    match unknown.first() {
        Some(field) => Err(invalid(field, "unknown field")),
        None => Ok(body),
    }
}

/// Validates a request's profile; returns it resolved (a preset expanded)
/// and the tolerance it asks for, if any.
pub fn resolve(body: &HmacProfileBody) -> DomainResult<(HmacProfile, Option<i64>)> {
    if let Some(p) = body.preset {
        let only = HmacProfileBody { tolerance_secs: body.tolerance_secs, ..HmacProfileBody::preset(p) };
        if *body != only {
            return Err(invalid("preset", "a preset takes no other field but tolerance_secs"));
        }
        return Ok((preset(p), body.tolerance_secs));
    }
    let need = |field: &'static str| invalid(field, "required (or name a preset: dvir, shopify, slack)");
    let signature_header = body.signature_header.clone().ok_or_else(|| need("signature_header"))?;
    header_name("signature_header", &signature_header)?;
    let signature_format = body.signature_format.ok_or_else(|| need("signature_format"))?;
    let encoding = body.encoding.ok_or_else(|| need("encoding"))?;
    let algorithm = body.algorithm.ok_or_else(|| need("algorithm"))?;
    let signed_content = body.signed_content.clone().ok_or_else(|| need("signed_content"))?;
    let prefix = body.prefix.clone().unwrap_or_default();
    if prefix.len() > MAX_PREFIX || !prefix.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b',') {
        return Err(invalid("prefix", format!("at most {MAX_PREFIX} visible ASCII characters, no ','")));
    }
    if let Some(h) = &body.timestamp_header {
        header_name("timestamp_header", h)?;
        if signature_format == SignatureFormat::Pairs {
            return Err(invalid("timestamp_header", "the pairs format carries its timestamp in t="));
        }
    }
    if let Some(source) = &body.event_id {
        event_id_source(source)?;
    }
    let parts = parse_template(&signed_content).map_err(|why| invalid("signed_content", why))?;
    let profile = HmacProfile {
        preset: None,
        signature_header,
        signature_format,
        prefix,
        encoding,
        algorithm,
        signed_content,
        timestamp_header: body.timestamp_header.clone(),
        event_id: body.event_id.clone(),
    };
    let signs_timestamp = parts.contains(&Part::Timestamp);
    if profile.has_timestamp() && !signs_timestamp {
        return Err(invalid("signed_content", "the profile reads a timestamp, so the template must sign {timestamp}"));
    }
    if !profile.has_timestamp() && signs_timestamp {
        return Err(invalid(
            "timestamp_header",
            "the template signs {timestamp}: name the header it comes from (or use the pairs format)",
        ));
    }
    if !profile.has_timestamp() && profile.event_id.is_none() {
        return Err(invalid(
            "event_id",
            "a profile without a timestamp needs an event id source: dedup by id is its only replay protection",
        ));
    }
    if parts.contains(&Part::Id) && profile.id_header().is_none() {
        return Err(invalid("event_id", "the template signs {id}: the id must come from a header (header:<name>)"));
    }
    Ok((profile, body.tolerance_secs))
}

/// A stored profile as the receiver uses it: the template already parsed.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub profile: HmacProfile,
    pub parts: Vec<Part>,
}

impl Compiled {
    /// A stored profile (validated when it was created); `None` when the
    /// stored text is corrupt, so the endpoint verifies nothing.
    pub fn from_stored(text: &str) -> Option<Compiled> {
        let profile: HmacProfile = serde_json::from_str(text).ok()?;
        let parts = parse_template(&profile.signed_content).ok()?;
        Some(Compiled { profile, parts })
    }

    pub fn new(profile: HmacProfile) -> Option<Compiled> {
        let parts = parse_template(&profile.signed_content).ok()?;
        Some(Compiled { profile, parts })
    }

    /// Whether the signed content includes the event id.
    pub fn signs_id(&self) -> bool {
        self.parts.contains(&Part::Id)
    }
}

/// A resolved profile as the endpoint row stores it (JSON).
pub fn to_stored(profile: &HmacProfile) -> DomainResult<String> {
    serde_json::to_string(profile)
        .map_err(|e| DomainError::invalid("invalid_hmac_profile", format!("hmac_profile: {e}")))
}

/// The OpenAPI schema of `hmac_profile` (`HmacProfileBody`): a preset, or a
/// custom profile whose rules across fields are stated with `if`/`then`/
/// `else`, each pattern the validator's own.
pub fn openapi_schema() -> serde_json::Value {
    use serde_json::json;
    let header = json!({"type": "string", "pattern": header_pattern(), "maxLength": MAX_HEADER_NAME});
    let nullable_header =
        json!({"type": ["string", "null"], "pattern": header_pattern(), "maxLength": MAX_HEADER_NAME});
    let tolerance = json!({"type": ["integer", "null"], "minimum": 1,
        "maximum": super::MAX_TOLERANCE_SECS});
    let pairs = json!({"required": ["signature_format"], "properties": {"signature_format": {"const": "pairs"}}});
    let given = |f: &str| json!({"required": [f], "properties": {f: {"type": "string"}}});
    // A field absent and a field `null` read the same (serde's `Option`):
    // the branch that does not take a field admits it as `null`.
    const CUSTOM: [&str; 8] = [
        "signature_header",
        "signature_format",
        "prefix",
        "encoding",
        "algorithm",
        "signed_content",
        "timestamp_header",
        "event_id",
    ];
    let mut preset_props = serde_json::Map::new();
    preset_props.insert("preset".into(), json!({"type": "string", "enum": HmacPreset::ALL.map(HmacPreset::as_str)}));
    preset_props.insert("tolerance_secs".into(), tolerance.clone());
    for f in CUSTOM {
        preset_props.insert(f.into(), json!({"type": "null"}));
    }
    json!({
        "description": "A preset ({\"preset\": \"dvir\"}), or a custom profile. The signed content is a template \
            over {body}, {timestamp} and {id}. Format `pairs` is `t=<unix>,v1=<digest>`; `digest` is the prefix \
            and the digest. event_id is `header:<name>` or `json:<JSON pointer>`.",
        "oneOf": [
            {
                "type": "object",
                "title": "HmacPresetProfile",
                "additionalProperties": false,
                "required": ["preset"],
                "properties": preset_props,
            },
            {
                "type": "object",
                "title": "HmacCustomProfile",
                "additionalProperties": false,
                "required": ["signature_header", "signature_format", "encoding", "algorithm", "signed_content"],
                "properties": {
                    "preset": {"type": "null"},
                    "signature_header": header,
                    "signature_format": {"type": "string", "enum": ["digest", "pairs"]},
                    "prefix": {"type": ["string", "null"], "pattern": prefix_pattern(), "maxLength": MAX_PREFIX},
                    "encoding": {"type": "string", "enum": ["hex", "base64"]},
                    "algorithm": {"type": "string", "enum": ["sha256", "sha512"]},
                    "signed_content": {"type": "string", "pattern": template_pattern(),
                        "maxLength": MAX_TEMPLATE_CHARS},
                    "timestamp_header": nullable_header,
                    "tolerance_secs": tolerance,
                    "event_id": {"type": ["string", "null"], "pattern": event_id_pattern(),
                        "maxLength": MAX_EVENT_ID_SOURCE},
                },
                "allOf": [
                    {"if": pairs, "then": {"properties": {"timestamp_header": {"type": "null"}}}},
                    {
                        "if": {"anyOf": [pairs, given("timestamp_header")]},
                        "then": {"properties": {"signed_content": {"pattern": timestamped_template_pattern()}}},
                        "else": {
                            "required": ["event_id"],
                            "properties": {
                                "signed_content": {"pattern": untimed_template_pattern()},
                                "event_id": {"type": "string"},
                            },
                        },
                    },
                    {
                        "if": {"required": ["signed_content"],
                            "properties": {"signed_content": {"type": "string", "pattern": "\\{id\\}"}}},
                        "then": {"required": ["event_id"],
                            "properties": {"event_id": {"type": "string", "pattern": "^header:"}}},
                    },
                ],
            },
        ],
    })
}

/// A custom profile unlike every preset: SHA-512, base64 behind a prefix,
/// `{id}` signed and read from a header, a separate timestamp header. The
/// drills sign as it (`evidence::hmac_drill`); the tests use it too.
pub fn example_custom() -> HmacProfileBody {
    HmacProfileBody {
        signature_header: Some("X-Acme-Signature".into()),
        signature_format: Some(SignatureFormat::Digest),
        prefix: Some("sha512=".into()),
        encoding: Some(SignatureEncoding::Base64),
        algorithm: Some(HmacAlgorithm::Sha512),
        signed_content: Some("{id}|{timestamp}|{body}".into()),
        timestamp_header: Some("X-Acme-Timestamp".into()),
        event_id: Some("header:X-Acme-Id".into()),
        ..Default::default()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn json_profiles_are_read_strictly() {
        assert_eq!(parse_json(br#"{"preset": "dvir"}"#).unwrap(), HmacProfileBody::preset(HmacPreset::Dvir));
        let typo = parse_json(br#"{"preset": "dvir", "signature_headr": "X-A"}"#).unwrap_err().to_string();
        assert!(typo.contains("hmac_profile.signature_headr: unknown field"), "{typo}");
        let trailing = parse_json(br#"{"preset": "dvir"} {}"#).unwrap_err().to_string();
        assert!(trailing.contains("hmac_profile: not a profile"), "{trailing}");
        let wrong = parse_json(br#"{"algorithm": "md5"}"#).unwrap_err().to_string();
        assert!(wrong.contains("hmac_profile: not a profile") && wrong.contains("md5"), "{wrong}");
    }

    fn refused(body: HmacProfileBody) -> String {
        let e = resolve(&body).unwrap_err();
        assert_eq!(e.code(), "invalid_hmac_profile");
        e.to_string()
    }

    #[test]
    fn presets_resolve_and_are_valid_custom_profiles() {
        for p in HmacPreset::ALL {
            let (profile, tol) = resolve(&HmacProfileBody::preset(p)).unwrap();
            assert_eq!(tol, None, "the endpoint's tolerance applies");
            let as_custom = HmacProfileBody {
                signature_header: Some(profile.signature_header.clone()),
                signature_format: Some(profile.signature_format),
                prefix: Some(profile.prefix.clone()),
                encoding: Some(profile.encoding),
                algorithm: Some(profile.algorithm),
                signed_content: Some(profile.signed_content.clone()),
                timestamp_header: profile.timestamp_header.clone(),
                event_id: profile.event_id.clone(),
                ..Default::default()
            };
            let (again, _) = resolve(&as_custom).unwrap();
            assert_eq!(HmacProfile { preset: Some(p), ..again }, profile, "{p:?}");
        }
        let with_extra = HmacProfileBody { prefix: Some("x".into()), ..HmacProfileBody::preset(HmacPreset::Dvir) };
        assert!(refused(with_extra).contains("hmac_profile.preset"));
    }

    #[test]
    fn bad_profiles_name_their_field() {
        assert!(resolve(&example_custom()).is_ok());
        let cases: Vec<(HmacProfileBody, &str)> = vec![
            (HmacProfileBody { signed_content: Some("{body}{nonce}".into()), ..example_custom() }, "signed_content"),
            (HmacProfileBody { signed_content: Some("{timestamp}.{bod".into()), ..example_custom() }, "signed_content"),
            (
                HmacProfileBody { signed_content: Some("{timestamp}}{body}".into()), ..example_custom() },
                "signed_content",
            ),
            (HmacProfileBody { signed_content: Some("{timestamp}".into()), ..example_custom() }, "signed_content"),
            (
                HmacProfileBody { signed_content: Some("{timestamp}{body}{body}".into()), ..example_custom() },
                "signed_content",
            ),
            (
                HmacProfileBody {
                    signed_content: Some(format!("{{timestamp}}{{body}}{}", "x".repeat(250))),
                    ..example_custom()
                },
                "signed_content",
            ),
            (HmacProfileBody { signed_content: Some("{id}{body}".into()), ..example_custom() }, "signed_content"),
            (HmacProfileBody { timestamp_header: None, ..example_custom() }, "timestamp_header"),
            (
                HmacProfileBody {
                    timestamp_header: None,
                    signed_content: Some("{body}".into()),
                    event_id: None,
                    ..example_custom()
                },
                "event_id",
            ),
            (HmacProfileBody { event_id: Some("json:/id".into()), ..example_custom() }, "event_id"),
            (HmacProfileBody { event_id: Some("body:id".into()), ..example_custom() }, "event_id"),
            (HmacProfileBody { event_id: Some("json:id".into()), ..example_custom() }, "event_id"),
            (HmacProfileBody { signature_header: Some("X Sig".into()), ..example_custom() }, "signature_header"),
            (HmacProfileBody { signature_header: None, ..example_custom() }, "signature_header"),
            (HmacProfileBody { prefix: Some("a,b".into()), ..example_custom() }, "prefix"),
            (
                HmacProfileBody { signature_format: Some(SignatureFormat::Pairs), ..example_custom() },
                "timestamp_header",
            ),
        ];
        for (body, field) in cases {
            let msg = refused(body.clone());
            assert!(msg.starts_with(&format!("hmac_profile.{field}:")), "{body:?}: {msg}");
        }
        let exactly = format!("{{timestamp}}{{body}}{}", "é".repeat(MAX_TEMPLATE_CHARS - 17));
        assert_eq!(exactly.chars().count(), MAX_TEMPLATE_CHARS);
        assert!(resolve(&HmacProfileBody { signed_content: Some(exactly), ..example_custom() }).is_ok());
    }

    /// The document's patterns are the validator: every sample the template
    /// validator accepts the pattern matches, and the other way round.
    #[test]
    fn the_patterns_are_the_validator() {
        let general = regex::Regex::new(&template_pattern()).unwrap();
        let timed = regex::Regex::new(&timestamped_template_pattern()).unwrap();
        let untimed = regex::Regex::new(&untimed_template_pattern()).unwrap();
        for t in [
            "{body}",
            "v0:{timestamp}:{body}",
            "{timestamp}.{body}",
            "{id}.{timestamp}.{body}",
            "{body}|{timestamp}",
            "{body}{id}",
            "",
            "{}",
            "{body",
            "body}",
            "{body}{body}",
            "{timestamp}",
            "{x}{body}",
            "a{b}c{body}",
            "{{body}}",
            "{ body}",
        ] {
            let parts = parse_template(t);
            assert_eq!(general.is_match(t), parts.is_ok(), "{t:?}");
            let has_ts = parts.as_ref().is_ok_and(|p| p.contains(&Part::Timestamp));
            assert_eq!(timed.is_match(t), parts.is_ok() && has_ts, "{t:?}");
            assert_eq!(untimed.is_match(t), parts.is_ok() && !has_ts, "{t:?}");
        }
        let header = regex::Regex::new(&header_pattern()).unwrap();
        for h in ["X-Sig", "a", "-a", "X Sig", "", &"a".repeat(64), &"a".repeat(65), "X_Sig"] {
            assert_eq!(header.is_match(h), header_name("f", h).is_ok(), "{h:?}");
        }
        let prefix = regex::Regex::new(&prefix_pattern()).unwrap();
        for p in ["", "sha256=", "v0=", "a,b", "a b", &"x".repeat(32), &"x".repeat(33)] {
            let ok = p.len() <= MAX_PREFIX && p.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b',');
            assert_eq!(prefix.is_match(p), ok, "{p:?}");
        }
        let source = regex::Regex::new(&event_id_pattern()).unwrap();
        for s in
            ["header:X-Id", "json:/id", "json:/a/0/b~1c", "json:/", "json:", "json:id", "json:/a~2", "header:", "x"]
        {
            assert_eq!(source.is_match(s), event_id_source(s).is_ok(), "{s:?}");
        }
    }
}
