//! A test delivery: an event signed with the endpoint's own active,
//! approved key, sent through the real receiver (`receiver::rehearse`, the
//! same gates as `/hooks`), whose claim transaction is rolled back. It
//! keeps nothing (no replay record, claim, effect, outbox intent or
//! delivery-log row), is counted apart from real traffic, and is audited.
//! The body and the key never leave this module: the audit entry and the
//! answer name the key id, the event id and the outcome only.

use bytes::Bytes;
use sea_orm::DatabaseConnection;
use serde::Deserialize;
use serde_json::{Value, json};
use views::{
    hmac::HmacProfile,
    keys::KeyStatus,
    onboarding::{GateResult, GateView, TestAbility, TestDeliveryView},
    quarantine::QuarantineReason,
    roles::Permission,
    scheme::EventTypes,
};

use super::signing::sign_for;
use crate::{
    audit::{self, Change},
    auth::{Principal, Scope},
    clock,
    crypto::SigningSecret,
    db,
    entity::signing_key,
    error::{DomainError, DomainResult},
    receiver::{self, Buffered, Outcome, Receipt, Receiver, Refusal},
    registry::{self, endpoints, keys},
    vault::Vault,
};
use views::ids::{EndpointSlug, EventId, TenantSlug};

/// The event type a test delivery uses when none is asked for and the key
/// permits it: its effect (a new reminder) applies without any prior state.
pub const DEFAULT_EVENT_TYPE: &str = "reminder.created";

/// What the caller may choose about a test delivery (the API refuses any
/// other field with 422 `unknown_field`).
#[derive(Debug, Clone, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TestRequest {
    /// The event type to send (one name, not `*`). Omitted:
    /// `reminder.created` where the key permits it, else the key's first
    /// type. A type the key does not permit is sent as asked, and gate 8
    /// refuses it.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(schema_with = event_type_schema))]
    pub event_type: Option<String>,
}

#[cfg(feature = "openapi")]
fn event_type_schema() -> utoipa::openapi::Object {
    views::openapi::nullable(views::openapi::string(
        &registry::event_type_pattern(),
        Some(registry::MAX_EVENT_TYPE_LEN),
    ))
}

/// The gates of docs/contract.md §3, in order, by what each checks.
pub const GATES: [&str; 9] =
    ["endpoint", "body_size", "signature_headers", "signature", "timestamp", "replay", "envelope", "scope", "claim"];

/// Sends a test delivery to `tenant`/`endpoint` and reports each gate's
/// outcome. Clinic admins of the tenant and admins only
/// (`Permission::ManageEndpoints`).
pub async fn send_test(
    db: &DatabaseConnection,
    vault: &Vault,
    receiver: &Receiver,
    principal: &Principal,
    tenant_slug: &TenantSlug,
    endpoint_slug: &EndpointSlug,
    req: TestRequest,
) -> DomainResult<TestDeliveryView> {
    let (t, e) = endpoints::find(db, principal, tenant_slug, endpoint_slug).await?;
    let auth = principal.authorize(Permission::ManageEndpoints, Scope::Tenant(&t.id))?;
    let asked = req.event_type.map(|ty| validate_event_type(&ty).map(|()| ty)).transpose()?;
    let scheme = registry::parse_scheme(&e.scheme)?;
    let rows = keys::accepted_key_rows(db, &e.id, clock::now_ms()).await?;
    let key = signer(&rows)?.clone();
    let secret = keys::open_secret(db, vault, &key).await?;
    let event_type = asked.unwrap_or_else(|| default_type(&EventTypes::from_json(&key.event_types)));
    let event_id = format!("test_{}", uuid::Uuid::new_v4().simple());
    let subject = format!("test-{}", uuid::Uuid::new_v4().simple());
    let hmac = super::signing::stored_profile(&e);
    let body = Bytes::from(envelope_for(hmac.as_ref(), &event_id, &event_type, &subject).to_string());
    let headers = signed(scheme, hmac.as_ref(), &secret, &key.id, &event_id, &event_type, &body)?;
    drop(secret);
    let pairs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let receipt =
        receiver::rehearse(receiver, tenant_slug, endpoint_slug, Buffered { headers: pairs.as_slice(), body }).await;
    let view = TestDeliveryView {
        test: true,
        tenant: tenant_slug.clone(),
        endpoint: endpoint_slug.clone(),
        scheme,
        key_id: crate::ids::stored(&key.id)?,
        // `test_` and 32 hex digits: always an event id.
        event_id: EventId::parse(event_id)?,
        event_type,
        gates: gates(&receipt),
        status: receipt.outcome.status(),
        outcome: receipt.outcome.answer().to_owned(),
        answer: receipt.outcome.body(),
        kept: false,
    };
    let txn = db::begin_write(db).await?;
    audit::record(
        &txn,
        auth.actor(),
        Change {
            action: AUDIT_ACTION,
            target_kind: "endpoint",
            target_id: &format!("{}/{}", t.slug, e.slug),
            tenant_id: Some(&t.id),
            before: None,
            // The whole report (ids, codes, the answer): never the body or the key.
            after: Some(serde_json::to_value(&view).map_err(|e| DomainError::Db(sea_orm::DbErr::Json(e.to_string())))?),
        },
    )
    .await?;
    txn.commit().await?;
    Ok(view)
}

/// The audit action of a test delivery.
pub const AUDIT_ACTION: &str = "endpoint.test_delivery";

/// The newest test delivery to an endpoint, read back from its audit entry.
pub async fn last_test(
    db: &DatabaseConnection,
    tenant_id: &str,
    target: &str,
) -> DomainResult<Option<views::onboarding::LastTestDelivery>> {
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};

    use crate::entity::audit_entry;
    let Some(row) = audit_entry::Entity::find()
        .filter(audit_entry::Column::TenantId.eq(tenant_id))
        .filter(audit_entry::Column::Action.eq(AUDIT_ACTION))
        .filter(audit_entry::Column::TargetId.eq(target))
        .order_by_desc(audit_entry::Column::Seq)
        .one(db)
        .await?
    else {
        return Ok(None);
    };
    let delivery = row.after.as_deref().and_then(|a| serde_json::from_str::<TestDeliveryView>(a).ok());
    Ok(delivery.map(|delivery| views::onboarding::LastTestDelivery {
        at: clock::rfc3339(row.at),
        actor: row.actor,
        delivery,
    }))
}

/// Whether a test delivery can be signed for an endpoint with these
/// accepted keys, and why not.
pub fn ability(accepted: &[signing_key::Model]) -> TestAbility {
    match signer(accepted) {
        Ok(_) => TestAbility { possible: true, code: None, reason: None },
        Err(e) => TestAbility { possible: false, code: Some(e.code().to_owned()), reason: Some(e.to_string()) },
    }
}

/// The accepted key a test delivery signs with: an active key before a
/// retiring one, an HMAC key or a `v1a` key whose private key Signet holds
/// sealed. A `v1a` public key a provider uploaded cannot sign.
fn signer(accepted: &[signing_key::Model]) -> DomainResult<&signing_key::Model> {
    if accepted.is_empty() {
        return Err(DomainError::conflict(
            "no_active_key",
            "This endpoint has no active key with an approved scope: provision a key and have a reviewer approve it \
             before sending a test delivery",
        ));
    }
    let can_sign = |k: &&signing_key::Model| {
        k.credential_kind == views::keys::CredentialKind::Hmac.as_str() || !k.secret_ciphertext.is_empty()
    };
    let active = accepted.iter().filter(|k| k.status == KeyStatus::Active).find(can_sign);
    active.or_else(|| accepted.iter().find(can_sign)).ok_or_else(|| {
        DomainError::conflict(
            "key_cannot_sign",
            "This endpoint's keys are v1a public keys its provider uploaded: Signet holds no private key, so only \
             the provider can sign a delivery. Ask the provider to send one (see the example), or provision a key \
             Signet generates.",
        )
    })
}

fn validate_event_type(t: &str) -> DomainResult<()> {
    let types = registry::validate_event_types(&[t])?;
    if types.is_any() {
        return Err(DomainError::invalid(
            "invalid_event_type",
            "event_type: a test delivery sends one event type, not '*'",
        ));
    }
    Ok(())
}

fn default_type(scope: &EventTypes) -> String {
    if scope.permits(DEFAULT_EVENT_TYPE) {
        return DEFAULT_EVENT_TYPE.to_owned();
    }
    scope.as_slice().first().cloned().unwrap_or_else(|| DEFAULT_EVENT_TYPE.to_owned())
}

/// A test or example event: opaque ids (`subject` names the reminder or
/// OTP request), no patient data, and data its built-in handler takes (a
/// reminder a day ahead, an OTP by SMS).
/// [`envelope`], with the event id also where an `hmac` profile reads it
/// (its JSON pointer, e.g. the `dvir` preset's `/event_id`).
pub fn envelope_for(hmac: Option<&HmacProfile>, event_id: &str, event_type: &str, subject: &str) -> Value {
    let mut body = envelope(event_id, event_type, subject);
    if let Some(pointer) = hmac.and_then(HmacProfile::id_pointer) {
        place(&mut body, pointer, event_id);
    }
    body
}

/// Sets the string at a JSON pointer (RFC 6901), making the objects on the
/// way; a step through a non-object leaves the body as it was.
fn place(body: &mut Value, pointer: &str, id: &str) {
    let tokens: Vec<String> = pointer.split('/').skip(1).map(|t| t.replace("~1", "/").replace("~0", "~")).collect();
    let Some((last, path)) = tokens.split_last() else { return };
    let mut at = body;
    for token in path {
        let Some(obj) = at.as_object_mut() else { return };
        at = obj.entry(token.clone()).or_insert_with(|| json!({}));
    }
    if let Some(obj) = at.as_object_mut() {
        obj.insert(last.clone(), Value::from(id));
    }
}

pub fn envelope(event_id: &str, event_type: &str, subject: &str) -> Value {
    let send_at = clock::rfc3339((clock::now_ms() / 1000 + 86_400) * 1000);
    let data = match event_type {
        "reminder.created" | "reminder.scheduled" => json!({"reminder_id": subject, "send_at": send_at}),
        "reminder.canceled" => json!({"reminder_id": subject}),
        "otp.requested" => json!({"otp_request_id": subject, "channel": "sms"}),
        _ => json!({}),
    };
    json!({"id": event_id, "type": event_type, "data": data})
}

/// The scheme's headers for this delivery, naming the signing key
/// (`signet-key-id`), so gate 4 tries that key alone.
fn signed(
    scheme: views::scheme::Scheme,
    hmac: Option<&HmacProfile>,
    secret: &SigningSecret,
    key_id: &str,
    event_id: &str,
    event_type: &str,
    body: &[u8],
) -> DomainResult<Vec<(String, String)>> {
    let mut headers =
        sign_for(scheme, hmac, secret, event_id, clock::now_ms() / 1000, event_type, body).ok_or_else(|| {
            tracing::error!(key_id, "a stored credential does not fit its endpoint's scheme");
            DomainError::conflict("key_cannot_sign", "the endpoint's key does not fit its scheme; rotate it")
        })?;
    headers.push(("signet-key-id".into(), key_id.to_owned()));
    headers.push(("content-type".into(), "application/json".into()));
    Ok(headers)
}

/// Each gate's outcome, read from the receiver's answer: the gate that
/// decided a refusal failed, those before it passed, those after it were
/// not reached.
pub fn gates(receipt: &Receipt) -> Vec<GateView> {
    let outcome = &receipt.outcome;
    let (decided, passed, code) = match outcome {
        _ if receipt.endpoint.is_none() => (1, false, outcome.answer().to_owned()),
        Outcome::Refused(r) => (refused_at(*r), false, r.code().to_owned()),
        Outcome::Quarantined { reason: QuarantineReason::MalformedEnvelope, .. } => {
            (7, false, QuarantineReason::MalformedEnvelope.as_str().to_owned())
        }
        Outcome::Quarantined { reason, .. } => (9, false, reason.as_str().to_owned()),
        Outcome::Applied { .. } | Outcome::StaleTransition { .. } | Outcome::Duplicate { .. } => {
            (9, true, outcome.answer().to_owned())
        }
        Outcome::IdentityConflict { .. } | Outcome::Unavailable => (9, false, outcome.answer().to_owned()),
    };
    GATES
        .iter()
        .zip(1u8..)
        .map(|(name, gate)| {
            let result = match gate.cmp(&decided) {
                std::cmp::Ordering::Less => GateResult::Passed,
                std::cmp::Ordering::Equal if passed => GateResult::Passed,
                std::cmp::Ordering::Equal => GateResult::Failed,
                std::cmp::Ordering::Greater => GateResult::NotReached,
            };
            let code = (gate == decided).then(|| code.clone());
            GateView { gate, name: (*name).to_owned(), result, code }
        })
        .collect()
}

fn refused_at(r: Refusal) -> u8 {
    match r {
        Refusal::UnknownEndpoint => 1,
        Refusal::BodyTooLarge | Refusal::BodyIncomplete | Refusal::Overloaded => 2,
        Refusal::SignatureMissing | Refusal::SignatureMalformed => 3,
        Refusal::SignatureMismatch | Refusal::UnknownKey => 4,
        Refusal::TimestampStale | Refusal::TimestampFuture => 5,
        Refusal::Replay => 6,
        Refusal::EventTypeNotPermitted | Refusal::TenantMismatch => 8,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn the_id_goes_where_a_profile_reads_it() {
        let mut body = json!({"id": "e1", "data": {"x": 1}});
        place(&mut body, "/event_id", "e1");
        place(&mut body, "/meta/a~1b", "e1");
        place(&mut body, "/data/x/deeper", "e1");
        assert_eq!(body, json!({"id": "e1", "event_id": "e1", "meta": {"a/b": "e1"}, "data": {"x": 1}}));
    }

    fn results(outcome: Outcome, found: bool) -> Vec<(GateResult, Option<String>)> {
        let ep = std::sync::Arc::new(crate::receiver::cache::EndpointCtx {
            tenant_id: "t".into(),
            tenant_slug: TenantSlug::parse("clinic-a").unwrap(),
            endpoint_id: "e".into(),
            endpoint_slug: EndpointSlug::parse("hooks").unwrap(),
            scheme: views::scheme::Scheme::StandardWebhooks,
            hmac: None,
            tolerance_secs: 300,
            timestamp_floor: None,
            replay_partitioned_from: None,
            replay_keep_ms: 600_000,
            event_key: None,
            max_body_bytes: 1024,
            retries_enabled: false,
            synthetic: false,
            keys: Vec::new(),
        });
        let receipt = Receipt { outcome, endpoint: found.then_some(ep), key_id: None };
        gates(&receipt).into_iter().map(|g| (g.result, g.code)).collect()
    }

    #[test]
    fn a_refusal_fails_its_own_gate_and_reaches_no_later_one() {
        use views::onboarding::GateResult::{Failed, NotReached, Passed};
        let mismatch = results(Outcome::Refused(Refusal::SignatureMismatch), true);
        let shape: Vec<GateResult> = mismatch.iter().map(|g| g.0).collect();
        assert_eq!(shape, [Passed, Passed, Passed, Failed, NotReached, NotReached, NotReached, NotReached, NotReached]);
        assert_eq!(mismatch[3].1.as_deref(), Some("signature_mismatch"));
        assert_eq!(mismatch.iter().filter(|g| g.1.is_some()).count(), 1);
        let scope = results(Outcome::Refused(Refusal::EventTypeNotPermitted), true);
        assert_eq!(scope[7], (Failed, Some("event_type_not_permitted".into())));
        assert_eq!(scope[6].0, Passed);
        let applied = results(Outcome::Applied { event_id: "x".into() }, true);
        assert!(applied.iter().all(|g| g.0 == Passed), "{applied:?}");
        assert_eq!(applied[8].1.as_deref(), Some("applied"));
        let malformed =
            results(Outcome::Quarantined { event_id: "x".into(), reason: QuarantineReason::MalformedEnvelope }, true);
        assert_eq!(malformed[6].0, Failed);
        let missing = results(Outcome::Unavailable, false);
        assert_eq!(missing[0], (Failed, Some("unavailable".into())));
        assert_eq!(missing[1].0, NotReached);
    }

    #[test]
    fn the_default_type_is_one_the_key_permits() {
        assert_eq!(default_type(&EventTypes::any()), DEFAULT_EVENT_TYPE);
        let otp = EventTypes::from_validated(vec!["otp.requested".into()]);
        assert_eq!(default_type(&otp), "otp.requested");
        assert!(validate_event_type("*").is_err());
        assert!(validate_event_type("Bad Type").is_err());
        assert!(validate_event_type("reminder.created").is_ok());
    }
}
