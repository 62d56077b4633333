//! `scheme_verification`: the receiver's verification for each signature
//! scheme Signet receives (docs/contract.md §3), on the drill tenant's endpoint for
//! that scheme. A delivery signed as that scheme's providers sign applies
//! once; the provider's retry (re-signed where the scheme signs a
//! timestamp, resent byte for byte for GitHub) is a duplicate; one signed
//! with a key the endpoint never issued is refused and leaves no row.
//!
//! The other drills exercise claim, dedup, replay and ack on the
//! standard-webhooks endpoint: after verification those paths are the same
//! for every scheme, but how the event id and the signed message are found
//! is not, and this drill covers that. `hmac` endpoints, one per profile,
//! are drilled through every gate a profile decides ([`super::hmac_drill`]).
//! A run records the schemes whose checks all passed ([`covered`]); the
//! rollout order reads them.

use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter};
use serde_json::json;

use super::{
    drill_fixture::{DRILL_TENANT, Fixture, SchemeTarget},
    drills::{Checks, DrillRequest, Transport, rows_anywhere, send_at, short_id},
};
use crate::{
    clock,
    crypto::{SigningSecret, signature},
    entity::inbox_claim,
    error::DomainResult,
};
use views::{evidence::DrillResult, scheme::Scheme};

/// The drill's name in [`views::evidence::DRILL_NAMES`].
pub const NAME: &str = "scheme_verification";

/// A `reminder.created` for `reminder_id` as event `event_id` (the body
/// carries the id too: Stripe's event id is the envelope's).
fn body(event_id: &str, reminder_id: &str) -> Vec<u8> {
    let envelope = json!({
        "id": event_id,
        "type": "reminder.created",
        "data": {"reminder_id": reminder_id, "send_at": send_at(1).0},
    });
    envelope.to_string().into_bytes()
}

/// `body` signed at `ts` with `secret` the way `target`'s scheme signs.
fn request(target: &SchemeTarget, secret: &SigningSecret, event_id: &str, body: &[u8], ts: i64) -> DrillRequest {
    let headers = signature::sign(target.scheme, secret, body, ts, event_id).unwrap_or_default();
    DrillRequest { tenant: DRILL_TENANT.to_owned(), endpoint: target.endpoint.clone(), headers, body: body.to_vec() }
}

pub(super) async fn scheme_verification<T: Transport>(
    db: &DatabaseConnection,
    fx: &Fixture,
    t: &T,
    c: &mut Checks,
) -> DomainResult<()> {
    for target in &fx.schemes {
        if target.scheme == Scheme::Hmac {
            super::hmac_drill::verify(db, fx, t, c, target).await?;
            continue;
        }
        let s = target.label.as_str();
        let (r, event) = (short_id("drill-r"), short_id("drill-evt"));
        let now = clock::now_ms() / 1000;
        // The retry carries the same bytes (a body built again could name a
        // later second, which is another event under the same id).
        let bytes = body(&event, &r);
        let signed = request(target, &target.secret, &event, &bytes, now);
        c.answer(&format!("{s}.answer"), "applied", &t.deliver(&signed).await);
        // The provider's retry: GitHub signs no timestamp, so it resends
        // the same bytes; the others sign a fresh timestamp.
        let retry = match target.scheme {
            Scheme::Github => signed.clone(),
            _ => request(target, &target.secret, &event, &bytes, now - 1),
        };
        c.answer(&format!("{s}.retry.answer"), "duplicate", &t.deliver(&retry).await);
        let claims = inbox_claim::Entity::find()
            .filter(inbox_claim::Column::TenantId.eq(&fx.tenant_id))
            .filter(inbox_claim::Column::EndpointId.eq(&target.endpoint_id))
            .filter(inbox_claim::Column::EventId.eq(&event))
            .count(db)
            .await?;
        c.want(&format!("{s}.claims"), 1, claims);

        let (r, event) = (short_id("drill-r"), short_id("drill-evt"));
        let forged = t.deliver(&request(target, &SigningSecret::generate(), &event, &body(&event, &r), now)).await;
        c.want(&format!("{s}.wrong_key.http_status"), 401, forged.as_ref().map(|a| a.status).unwrap_or(0));
        c.answer(&format!("{s}.wrong_key.answer"), "signature_mismatch", &forged);
        c.want(&format!("{s}.wrong_key.rows_anywhere"), 0, rows_anywhere(db, &event, &r).await?);
    }
    Ok(())
}

/// The schemes a run's `scheme_verification` result shows verified: each
/// scheme with checks in it and no failure of its own (for `hmac`, of any of
/// its profiles). A failure that names no scheme (the database could not be
/// read) covers none.
pub fn covered(results: &[DrillResult]) -> Vec<String> {
    let Some(r) = results.iter().find(|r| r.name == NAME) else { return Vec::new() };
    let prefixes: Vec<String> = Scheme::ALL.iter().map(|s| format!("{s}.")).collect();
    if r.failures.iter().any(|f| !prefixes.iter().any(|p| f.starts_with(p.as_str()))) {
        return Vec::new();
    }
    Scheme::ALL
        .iter()
        .zip(&prefixes)
        .filter(|(_, p)| r.expected.keys().any(|k| k.starts_with(p.as_str())))
        .filter(|(_, p)| !r.failures.iter().any(|f| f.starts_with(p.as_str())))
        .map(|(s, _)| s.as_str().to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, Value};

    use super::*;

    fn result(checks: &[&str], failures: &[&str]) -> DrillResult {
        let expected: Map<String, Value> = checks.iter().map(|k| ((*k).to_owned(), Value::from(1))).collect();
        DrillResult {
            name: NAME.into(),
            passed: failures.is_empty(),
            observed: expected.clone(),
            expected,
            failures: failures.iter().map(|f| (*f).to_owned()).collect(),
            duration_ms: 0,
        }
    }

    #[test]
    fn a_scheme_is_covered_only_when_its_checks_ran_and_passed() {
        let all = ["standard-webhooks.answer", "stripe.answer", "github.answer"];
        assert_eq!(covered(&[result(&all, &[])]), ["standard-webhooks", "stripe", "github"]);
        let stripe_failed = result(&all, &["stripe.answer: expected \"applied\", observed \"none\""]);
        assert_eq!(covered(&[stripe_failed]), ["standard-webhooks", "github"]);
        assert_eq!(covered(&[result(&all[..1], &[])]), ["standard-webhooks"]);
        let with_hmac = ["stripe.answer", "hmac.dvir.answer", "hmac.shopify.answer"];
        assert_eq!(covered(&[result(&with_hmac, &[])]), ["stripe", "hmac"]);
        let one_profile_failed = result(&with_hmac, &["hmac.shopify.answer: expected \"applied\", observed \"none\""]);
        assert_eq!(covered(&[one_profile_failed]), ["stripe"], "hmac counts only when every profile passed");
        assert!(covered(&[result(&all, &["reading the database failed: x"])]).is_empty());
        assert!(covered(&[]).is_empty());
    }
}
