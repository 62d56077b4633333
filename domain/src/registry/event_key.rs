//! Compound event keys, for senders that give no stable event id.
//!
//! A sender with no stable event id needs a documented compound key before
//! retries are switched on, and identical bodies can be two legitimate events
//! (docs/architecture.md#one-transaction-claim-effect-outbox). So by default
//! an authenticated event without an id is quarantined (`missing_event_id`),
//! never deduplicated by its body hash. An endpoint may opt in to a compound
//! key: named envelope fields (`type`, `occurred_at`, `tenant`, `data.<field>…`) whose
//! values together identify an event. Each decision is an append-only
//! version (who, when, why), audited, like retention.

use sea_orm::{ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, Set};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::endpoints;
use crate::{
    audit::{self, Change},
    auth::{Principal, Scope},
    clock, db,
    entity::{endpoint, event_key_version as version},
    envelope::Envelope,
    error::{DomainError, DomainResult},
    text::require_reason,
};
use views::ids::{EndpointSlug, TenantSlug};
use views::{
    registry::{EventKeyVersionView, EventKeyView},
    roles::Permission,
};

/// At most this many fields in a key.
pub const MAX_FIELDS: usize = 5;
/// A compound id longer than this is replaced by its SHA-256.
const MAX_ID_CHARS: usize = 200;

/// The longest name in a `data.` path.
const MAX_NAME_LEN: usize = 64;
/// The most names after `data.`.
const MAX_DEPTH: usize = 3;

/// [`valid_path`] as a regular expression.
pub fn field_pattern() -> String {
    let name = format!("[A-Za-z0-9_-]{{1,{MAX_NAME_LEN}}}");
    format!(r"^(?:type|occurred_at|tenant|data\.{name}(?:\.{name}){{0,{}}})$", MAX_DEPTH - 1)
}

/// An optional compound key: 1–[`MAX_FIELDS`] distinct field paths. (That
/// one must be under `data.` is a `contains`, which utoipa cannot state.)
#[cfg(feature = "openapi")]
pub fn fields_schema() -> utoipa::openapi::Array {
    let mut a = views::openapi::array(views::openapi::string(&field_pattern(), None), 1);
    a.max_items = Some(MAX_FIELDS);
    a.unique_items = true;
    views::openapi::nullable_array(a)
}

/// A field path: `type`, `occurred_at`, `tenant`, or `data.` followed by
/// one to three names of `[A-Za-z0-9_-]` ([`field_pattern`]).
fn valid_path(path: &str) -> bool {
    let name = |s: &str| {
        !s.is_empty()
            && s.len() <= MAX_NAME_LEN
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    };
    match path {
        "type" | "occurred_at" | "tenant" => true,
        _ => path.strip_prefix("data.").is_some_and(|rest| {
            let parts: Vec<&str> = rest.split('.').collect();
            (1..=MAX_DEPTH).contains(&parts.len()) && parts.iter().all(|p| name(p))
        }),
    }
}

/// Validates a key: 1–5 distinct field paths, at least one under `data.`
/// (the type alone identifies no event).
pub fn validate(fields: &[String]) -> DomainResult<Vec<String>> {
    let fields = fields.to_vec();
    let distinct: std::collections::HashSet<&String> = fields.iter().collect();
    if fields.is_empty() || fields.len() > MAX_FIELDS || distinct.len() != fields.len() {
        return Err(DomainError::invalid(
            "invalid_event_key",
            format!("a compound key names 1–{MAX_FIELDS} distinct fields"),
        ));
    }
    if let Some(bad) = fields.iter().find(|f| !valid_path(f)) {
        return Err(DomainError::invalid(
            "invalid_event_key",
            format!("{bad:?} is not a field this key can use: type, occurred_at, tenant, or data.<name>[.<name>…]"),
        ));
    }
    if !fields.iter().any(|f| f.starts_with("data.")) {
        return Err(DomainError::invalid(
            "invalid_event_key",
            "a compound key needs at least one data field: the type alone identifies no event",
        ));
    }
    Ok(fields)
}

fn value_at<'a>(env: &'a Envelope, path: &str) -> Option<String> {
    let scalar = |v: &Value| match v {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    };
    match path {
        "type" => Some(env.event_type.clone()),
        "occurred_at" => env.occurred_at.clone().filter(|s| !s.is_empty()),
        "tenant" => env.tenant.clone().filter(|s| !s.is_empty()),
        _ => {
            let mut v: &'a Value = &env.data;
            for part in path.strip_prefix("data.")?.split('.') {
                v = v.get(part)?;
            }
            scalar(v)
        }
    }
}

/// The event's id under `fields`: `key:` and the values joined by `|` (or,
/// when long, their SHA-256). `None` when a field is absent, empty or not a
/// scalar: then the event has no id under the documented key either.
pub fn compound_id(fields: &[String], env: &Envelope) -> Option<String> {
    let values: Vec<String> = fields.iter().map(|f| value_at(env, f)).collect::<Option<_>>()?;
    // Length-prefixed in the digest, so `a|b` + `c` never equals `a` + `b|c`.
    let joined = values.join("|");
    if joined.chars().count() <= MAX_ID_CHARS && !values.iter().any(|v| v.contains('|')) {
        return Some(format!("key:{joined}"));
    }
    let mut h = Sha256::new();
    for v in &values {
        h.update((v.len() as u64).to_be_bytes());
        h.update(v.as_bytes());
    }
    Some(format!("key:sha256:{}", hex::encode(h.finalize())))
}

fn version_view(v: version::Model) -> EventKeyVersionView {
    EventKeyVersionView {
        version: v.version,
        fields: endpoints::parse_event_key(v.fields.as_deref()),
        actor: v.actor,
        reason: v.reason,
        created_at: clock::rfc3339(v.created_at),
    }
}

async fn history<C: ConnectionTrait>(conn: &C, endpoint_id: &str) -> DomainResult<Vec<EventKeyVersionView>> {
    Ok(version::Entity::find()
        .filter(version::Column::EndpointId.eq(endpoint_id))
        .order_by_desc(version::Column::Version)
        .all(conn)
        .await?
        .into_iter()
        .map(version_view)
        .collect())
}

/// An endpoint's compound key and its history.
pub async fn get(
    db: &DatabaseConnection,
    principal: &Principal,
    tenant_slug: &TenantSlug,
    endpoint_slug: &EndpointSlug,
) -> DomainResult<EventKeyView> {
    let (t, e) = endpoints::find(db, principal, tenant_slug, endpoint_slug).await?;
    principal.authorize(Permission::ReadRegistry, Scope::Tenant(&t.id))?;
    Ok(EventKeyView {
        tenant: tenant_slug.clone(),
        endpoint: endpoint_slug.clone(),
        fields: endpoints::parse_event_key(e.event_id_fields.as_deref()),
        history: history(db, &e.id).await?,
    })
}

/// Sets (or with `None` removes) an endpoint's compound key: a new version,
/// audited. The receiver uses it within 5 s (its endpoint cache).
pub async fn set(
    db: &DatabaseConnection,
    principal: &Principal,
    tenant_slug: &TenantSlug,
    endpoint_slug: &EndpointSlug,
    fields: Option<Vec<String>>,
    reason: &str,
) -> DomainResult<EventKeyView> {
    let reason = require_reason(reason)?;
    let fields = fields.as_deref().map(validate).transpose()?;
    let txn = db::begin_write(db).await?;
    let (t, e) = endpoints::find(&txn, principal, tenant_slug, endpoint_slug).await?;
    let auth = principal.authorize(Permission::ManageEndpoints, Scope::Tenant(&t.id))?;
    let before = endpoints::parse_event_key(e.event_id_fields.as_deref());
    if before == fields {
        return Err(DomainError::nothing_to_change());
    }
    let stored = fields.as_ref().map(|f| serde_json::to_string(f).unwrap_or_default());
    // Writing the endpoint row first locks it, so concurrent changes read
    // the next version number one after the other.
    endpoint::Entity::update_many()
        .col_expr(endpoint::Column::EventIdFields, sea_orm::sea_query::Expr::value(stored.clone()))
        .filter(endpoint::Column::Id.eq(&e.id))
        .exec(&txn)
        .await?;
    let next = version::Entity::find()
        .filter(version::Column::EndpointId.eq(&e.id))
        .order_by_desc(version::Column::Version)
        .one(&txn)
        .await?
        .map_or(1, |v| v.version + 1);
    version::Entity::insert(version::ActiveModel {
        endpoint_id: Set(e.id.clone()),
        version: Set(next),
        fields: Set(stored),
        actor: Set(auth.actor().name().to_owned()),
        reason: Set(reason.clone()),
        created_at: Set(clock::now_ms()),
    })
    .exec_without_returning(&txn)
    .await?;
    audit::record(
        &txn,
        auth.actor(),
        Change {
            action: "endpoint.event_key",
            target_kind: "endpoint",
            target_id: &format!("{}/{}", t.slug, e.slug),
            tenant_id: Some(&t.id),
            before: Some(json!({"fields": before})),
            after: Some(json!({"fields": fields, "version": next, "reason": reason})),
        },
    )
    .await?;
    txn.commit().await?;
    get(db, principal, tenant_slug, endpoint_slug).await
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_field_pattern_is_the_validator() {
        let pattern = regex::Regex::new(&super::field_pattern()).unwrap();
        let long = format!("data.{}", "a".repeat(65));
        for f in [
            "type",
            "tenant",
            "occurred_at",
            "data.a",
            "data.a.b.c",
            "data.a.b.c.d",
            "data.",
            "data",
            " type",
            "data.a b",
            &long,
        ] {
            assert_eq!(pattern.is_match(f), super::valid_path(f), "{f:?}");
        }
    }

    use super::*;

    fn env(json: &str) -> Envelope {
        crate::envelope::parse(json.as_bytes()).unwrap()
    }

    #[test]
    fn keys_name_envelope_fields_and_identify_events_by_their_values() {
        let fields = validate(&["type".into(), "data.reminder_id".into(), "occurred_at".into()]).unwrap();
        let a =
            env(r#"{"type":"reminder.scheduled","occurred_at":"2027-01-05T09:00:00Z","data":{"reminder_id":"r-1"}}"#);
        assert_eq!(compound_id(&fields, &a).as_deref(), Some("key:reminder.scheduled|r-1|2027-01-05T09:00:00Z"));
        // The same values are the same event; another value is another one.
        let b = env(concat!(
            r#"{"type":"reminder.scheduled","occurred_at":"2027-01-05T09:00:00Z","#,
            r#""data":{"reminder_id":"r-1","extra":1}}"#
        ));
        assert_eq!(compound_id(&fields, &a), compound_id(&fields, &b));
        let c =
            env(r#"{"type":"reminder.scheduled","occurred_at":"2027-01-05T10:00:00Z","data":{"reminder_id":"r-1"}}"#);
        assert_ne!(compound_id(&fields, &a), compound_id(&fields, &c));
        // A missing, empty or structured field: no id.
        for bad in [
            r#"{"type":"x","data":{"reminder_id":"r-1"}}"#,
            r#"{"type":"x","occurred_at":"t","data":{"reminder_id":""}}"#,
            r#"{"type":"x","occurred_at":"t","data":{"reminder_id":{"a":1}}}"#,
        ] {
            assert_eq!(compound_id(&fields, &env(bad)), None, "{bad}");
        }
        // Separators in values cannot make two events collide.
        let f2 = validate(&["data.a".into(), "data.b".into()]).unwrap();
        let x = compound_id(&f2, &env(r#"{"type":"t","data":{"a":"p|q","b":"r"}}"#));
        let y = compound_id(&f2, &env(r#"{"type":"t","data":{"a":"p","b":"q|r"}}"#));
        assert_ne!(x, y);
        assert!(x.unwrap().starts_with("key:sha256:"));
    }

    #[test]
    fn only_documented_field_paths_are_accepted() {
        for bad in [
            vec![],
            vec!["type".to_owned()],
            vec!["id".into(), "data.x".into()],
            vec!["data.".into()],
            vec!["data.a b".into()],
            vec!["data.x".into(), "data.x".into()],
        ] {
            assert!(validate(&bad).is_err(), "{bad:?}");
        }
        assert!(validate(&["data.a.b.c".into()]).is_ok());
        assert!(validate(&["data.a.b.c.d".into()]).is_err());
    }
}
