//! `scheme_verification` on the `hmac` drill endpoints: one per preset and
//! one with a custom profile ([`profiles`](super::drill_fixture::profiles)). Each delivery is signed as the
//! endpoint's stored profile says ([`crate::onboarding::signing::sign_for`]),
//! and the drill checks the gates a profile decides: a tampered body and a
//! key the endpoint never issued are refused (401) and leave no row; a
//! timestamp outside the window is refused (only when the profile signs
//! one); the delivery applies once; the same request again is a replay and
//! the sender's retry a duplicate. A sender that signs no timestamp (Shopify)
//! retries the very same request, a duplicate by its id; the same signed
//! body under another id is the replay.
//!
//! Checks are named `hmac.<profile>.…`, so `scheme_drill::covered` counts
//! `hmac` verified only when every profile's checks passed.

use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter};
use serde_json::json;

use super::{
    drill_fixture::{DRILL_TENANT, Fixture, SchemeTarget},
    drills::{Answer, Checks, DrillRequest, Transport, TransportError, rows_anywhere, send_at, short_id},
};
use crate::{clock, crypto::SigningSecret, entity::inbox_claim, error::DomainResult, onboarding::signing::sign_for};

/// How far outside the endpoint's tolerance the late and early deliveries
/// are signed.
const OUTSIDE_BY_SECS: i64 = 10;

/// A `reminder.created` as event `event_id`, the id where every profile
/// looks for it: the envelope's `id` and the `dvir` preset's `/event_id`.
fn body(event_id: &str, reminder_id: &str) -> Vec<u8> {
    let data = json!({"reminder_id": reminder_id, "send_at": send_at(1).0});
    json!({"id": event_id, "event_id": event_id, "type": "reminder.created", "data": data}).to_string().into_bytes()
}

/// `body` signed as `target`'s profile says, at `ts`, with `secret`. An
/// endpoint whose profile cannot be read gets no signature (and the checks
/// fail, naming it).
fn request(target: &SchemeTarget, secret: &SigningSecret, id: &str, ts: i64, body: &[u8]) -> DrillRequest {
    let headers =
        sign_for(target.scheme, target.hmac.as_ref(), secret, id, ts, "reminder.created", body).unwrap_or_default();
    DrillRequest { tenant: DRILL_TENANT.to_owned(), endpoint: target.endpoint.clone(), headers, body: body.to_vec() }
}

fn status(got: &Result<Answer, TransportError>) -> u16 {
    got.as_ref().map(|a| a.status).unwrap_or(0)
}

async fn claims(db: &DatabaseConnection, fx: &Fixture, target: &SchemeTarget, event: &str) -> DomainResult<u64> {
    Ok(inbox_claim::Entity::find()
        .filter(inbox_claim::Column::TenantId.eq(&fx.tenant_id))
        .filter(inbox_claim::Column::EndpointId.eq(&target.endpoint_id))
        .filter(inbox_claim::Column::EventId.eq(event))
        .count(db)
        .await?)
}

/// The gates of one `hmac` drill endpoint, checks named `<label>.…`.
pub(super) async fn verify<T: Transport>(
    db: &DatabaseConnection,
    fx: &Fixture,
    t: &T,
    c: &mut Checks,
    target: &SchemeTarget,
) -> DomainResult<()> {
    let l = &target.label;
    c.want(&format!("{l}.profile_readable"), true, target.hmac.is_some());
    let timed = target.hmac.as_ref().is_some_and(|p| p.has_timestamp());
    let (r, event) = (short_id("drill-r"), short_id("drill-evt"));
    let now = clock::now_ms() / 1000;
    let bytes = body(&event, &r);
    let good = request(target, &target.secret, &event, now, &bytes);

    // Refusals first: none may leave a row, which the accepted delivery
    // below would otherwise hide.
    let tampered = DrillRequest { body: body(&event, &short_id("drill-r")), ..good.clone() };
    let got = t.deliver(&tampered).await;
    c.want(&format!("{l}.tampered.http_status"), 401, status(&got));
    c.answer(&format!("{l}.tampered.answer"), "signature_mismatch", &got);
    let got = t.deliver(&request(target, &SigningSecret::generate(), &event, now, &bytes)).await;
    c.want(&format!("{l}.wrong_key.http_status"), 401, status(&got));
    c.answer(&format!("{l}.wrong_key.answer"), "signature_mismatch", &got);
    if timed {
        let off = target.tolerance_secs + OUTSIDE_BY_SECS;
        for (when, ts) in [("late", now - off), ("early", now + off)] {
            let got = t.deliver(&request(target, &target.secret, &event, ts, &bytes)).await;
            c.want(&format!("{l}.outside_window.{when}.http_status"), 401, status(&got));
            c.answer(&format!("{l}.outside_window.{when}.answer"), "timestamp_outside_window", &got);
        }
    }
    c.want(&format!("{l}.refused.rows_anywhere"), 0, rows_anywhere(db, &event, &r).await?);

    c.answer(&format!("{l}.answer"), "applied", &t.deliver(&good).await);
    let again = t.deliver(&good).await;
    if timed {
        c.want(&format!("{l}.replay.http_status"), 409, status(&again));
        c.answer(&format!("{l}.replay.answer"), "replay", &again);
        let retry = request(target, &target.secret, &event, now - 1, &bytes);
        c.answer(&format!("{l}.retry.answer"), "duplicate", &t.deliver(&retry).await);
    } else {
        c.answer(&format!("{l}.retry.answer"), "duplicate", &again);
        let other = short_id("drill-evt");
        let moved = t.deliver(&request(target, &target.secret, &other, now, &bytes)).await;
        c.want(&format!("{l}.replay.http_status"), 409, status(&moved));
        c.answer(&format!("{l}.replay.answer"), "replay", &moved);
        c.want(&format!("{l}.replay.claims"), 0, claims(db, fx, target, &other).await?);
    }
    c.want(&format!("{l}.claims"), 1, claims(db, fx, target, &event).await?);
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::{evidence::drill_fixture::profiles, registry::hmac_profile::resolve};

    #[test]
    fn every_profile_is_valid_and_the_presets_are_all_there() {
        let all = profiles();
        for (name, body) in &all {
            assert!(resolve(body).is_ok(), "{name}");
        }
        let names: Vec<&str> = all.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["dvir", "shopify", "slack", "custom"]);
        // One profile signs no timestamp, so the untimed path is drilled too.
        assert!(all.iter().any(|(_, b)| !resolve(b).unwrap().0.has_timestamp()));
    }
}
