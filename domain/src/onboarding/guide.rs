//! What an endpoint expects a provider to send: its URL, scheme, headers
//! and signed content, a ready `curl` and `signet send` example signed
//! with a placeholder secret (never the endpoint's own), the `v1a` public
//! keys the provider registered, and whether Signet can send a test
//! delivery itself.

use base64::{Engine, engine::general_purpose::STANDARD};
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder};
use views::{
    hmac::HmacProfile,
    keys::KeyStatus,
    onboarding::{HeaderGuide, OnboardingView},
    roles::Permission,
    scheme::{EventTypes, Scheme},
};

use super::{signing, signing::stored_profile, test_delivery};
use crate::{
    auth::{Principal, Scope},
    clock,
    crypto::SigningSecret,
    entity::signing_key,
    error::DomainResult,
    registry::{self, endpoints, keys},
};
use views::ids::{EndpointSlug, TenantSlug};

/// The placeholder secret the examples are signed with: a well-formed
/// `whsec_` string that no key ever has, so the example shows real header
/// values and the provider swaps in its own secret.
const PLACEHOLDER: &[u8; 32] = b"placeholder--use-your-own-secret";
const PLACEHOLDER_ID: &str = "msg_example_1";

/// The onboarding guide of an endpoint, with `base_url` (the server's
/// public URL) before its `/hooks` path. Anyone who may read the endpoint.
pub async fn guide(
    db: &DatabaseConnection,
    principal: &Principal,
    tenant_slug: &TenantSlug,
    endpoint_slug: &EndpointSlug,
    base_url: &str,
) -> DomainResult<OnboardingView> {
    let (t, e) = endpoints::find(db, principal, tenant_slug, endpoint_slug).await?;
    principal.authorize(Permission::ReadRegistry, Scope::Tenant(&t.id))?;
    let scheme = registry::parse_scheme(&e.scheme)?;
    let hmac = stored_profile(&e);
    let accepted = keys::accepted_key_rows(db, &e.id, clock::now_ms()).await?;
    let public_keys = signing_key::Entity::find()
        .filter(signing_key::Column::EndpointId.eq(&e.id))
        .filter(signing_key::Column::Status.is_in([KeyStatus::PendingApproval, KeyStatus::Active, KeyStatus::Retiring]))
        .filter(signing_key::Column::CredentialKind.eq(views::keys::CredentialKind::Ed25519.as_str()))
        .order_by_asc(signing_key::Column::CreatedAt)
        .all(db)
        .await?
        .into_iter()
        .filter_map(|k| Some((k.id, k.public_key?)))
        .collect();
    let url = format!("{}/hooks/{}/{}", base_url.trim_end_matches('/'), t.slug, e.slug);
    let types = EventTypes::from_json(&e.event_types);
    let event_type = if types.permits(test_delivery::DEFAULT_EVENT_TYPE) {
        test_delivery::DEFAULT_EVENT_TYPE.to_owned()
    } else {
        types.as_slice().first().cloned().unwrap_or_default()
    };
    let id_in_body = if scheme == Scheme::Stripe { "evt_example_1" } else { PLACEHOLDER_ID };
    let body = test_delivery::envelope_for(hmac.as_ref(), id_in_body, &event_type, "r-example-1").to_string();
    let placeholder = SigningSecret::parse(&format!("whsec_{}", STANDARD.encode(PLACEHOLDER)));
    let headers: Vec<HeaderGuide> = placeholder
        .and_then(|s| {
            signing::sign_for(
                scheme,
                hmac.as_ref(),
                &s,
                id_in_body,
                clock::now_ms() / 1000,
                &event_type,
                body.as_bytes(),
            )
        })
        .unwrap_or_default()
        .into_iter()
        .map(|(name, value)| HeaderGuide { name, value })
        .collect();
    let (signed_content, signature, event_id_source) = signing::describe(scheme, hmac.as_ref());
    let last_test = test_delivery::last_test(db, &t.id, &format!("{}/{}", t.slug, e.slug)).await?;
    Ok(OnboardingView {
        last_test,
        curl: curl(&url, &headers, &body),
        send_command: send_command(&url, scheme, hmac.as_ref(), id_in_body, &body),
        tolerance_secs: e.tolerance_secs,
        tenant: tenant_slug.clone(),
        endpoint: endpoint_slug.clone(),
        url,
        scheme,
        hmac_profile: hmac,
        headers,
        signed_content: signed_content.to_owned(),
        signature: signature.to_owned(),
        event_id_source: event_id_source.to_owned(),
        sample_body: body,
        public_keys,
        test: test_delivery::ability(&accepted),
    })
}

/// A single-quoted shell word.
fn sh(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

fn curl(url: &str, headers: &[HeaderGuide], body: &str) -> String {
    let mut out = format!("curl -sS -X POST {} \\\n  -H 'content-type: application/json'", sh(url));
    for h in headers {
        out.push_str(&format!(" \\\n  -H {}", sh(&format!("{}: {}", h.name, h.value))));
    }
    out.push_str(&format!(" \\\n  --data-binary {}", sh(body)));
    out
}

fn send_command(url: &str, scheme: Scheme, hmac: Option<&HmacProfile>, id: &str, body: &str) -> String {
    // An `hmac` endpoint's sender signs as its profile says: a preset by
    // name, any other profile from the file it was created with.
    let profile = match (scheme, hmac.and_then(|p| p.preset)) {
        (Scheme::Hmac, Some(preset)) => format!(" --preset {}", preset.as_str()),
        (Scheme::Hmac, None) => " --profile profile.json".to_owned(),
        _ => String::new(),
    };
    format!(
        "echo {} > body.json\nSIGNET_SEND_SECRET=whsec_… signet send {} \\\n  \
         --scheme {}{profile} --file body.json --event-id {}",
        sh(body),
        sh(url),
        scheme.as_str(),
        id
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_cannot_break_out() {
        assert_eq!(sh("a'b"), r"'a'\''b'");
        let c = curl("http://x/hooks/a/b", &[HeaderGuide { name: "h".into(), value: "v'; rm -rf /".into() }], "{}");
        assert!(c.contains(r"-H 'h: v'\''; rm -rf /'"), "{c}");
    }
}
