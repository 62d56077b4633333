//! Standard Webhooks `v1a` (Ed25519) credentials against the real binary:
//! the receiver's gates for a public key, `v1` and `v1a` side by side, bad
//! signatures answering 401 (never 500), provisioning that refuses a bad
//! key with 422, a generated pair whose private key is printed once and
//! stored only sealed (Signet signs test deliveries with it), rotation,
//! revocation, and the evidence's "cannot sign" for an uploaded public key.

use base64::{Engine as _, engine::general_purpose::STANDARD};
use domain::crypto::{SigningSecret, asymmetric::PrivateKey, signature};
use sea_orm::{ConnectionTrait, Statement};
use serde_json::{Value, json};
use views::scheme::Scheme;

use crate::{
    both_engines,
    support::{Engine, Install, created, expect, now, post},
};

/// An independent implementation's key (Python's `cryptography` 51.0.1,
/// `Ed25519PrivateKey.generate()`; see `crypto::signature`'s interop test).
const PY_PUBLIC: &str = "whpk_BXQTWuobKgvQhbcdjfbyHQ2+sNPTDN+JI6A0xBQ/sDg=";

fn sign(secret: &str, body: &[u8], ts: i64, id: &str) -> Vec<(String, String)> {
    signature::sign(Scheme::StandardWebhooks, &SigningSecret::parse(secret).unwrap(), body, ts, id).unwrap()
}

fn with_signature(mut headers: Vec<(String, String)>, value: &str) -> Vec<(String, String)> {
    headers[2].1 = value.to_owned();
    headers
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn holds(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

both_engines!(v1a_keys_verify_and_refuse_per_the_spec, async |i: &Install| {
    i.clinic_a_hooks("standard-webhooks", "reminder.created,reminder.canceled", &[]);
    // A generated pair: the private key is printed once and stored only
    // sealed; the public key is stored in clear.
    let k = i.cli_json(&["key", "provision", "clinic-a", "hooks", "--generate-ed25519", "--approve-as", "rita"]);
    assert_eq!(k["status"], "active");
    assert_eq!(k["credential"], "ed25519");
    assert!(k.get("secret").is_none(), "{k}");
    let private = k["private_key"].as_str().unwrap().to_owned();
    let public = k["public_key"].as_str().unwrap().to_owned();
    assert!(private.starts_with("whsk_") && public.starts_with("whpk_"), "{k}");
    assert_eq!(PrivateKey::parse(&private).unwrap().public_key().encode(), public);
    let key_id = k["key_id"].as_str().unwrap().to_owned();
    let shown = i.cli_json(&["key", "list", "--tenant", "clinic-a"]);
    assert_eq!(shown[0]["public_key"], public.as_str());
    assert!(!shown.to_string().contains(&private), "the private key is shown once");

    let db = domain::db::connect(&i.database_url).await.unwrap();
    let row = db
        .query_one_raw(Statement::from_sql_and_values(
            db.get_database_backend(),
            match i.engine {
                Engine::Sqlite => {
                    "SELECT credential_kind, public_key, kek_version, length(secret_ciphertext) AS n \
                                   FROM signing_keys WHERE id = ?"
                }
                Engine::Postgres => {
                    "SELECT credential_kind, public_key, kek_version, \
                                     octet_length(secret_ciphertext)::bigint AS n FROM signing_keys WHERE id = $1"
                }
            },
            [key_id.clone().into()],
        ))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.try_get::<String>("", "credential_kind").unwrap(), "ed25519");
    assert_eq!(row.try_get::<String>("", "public_key").unwrap(), public);
    assert!(row.try_get::<i32>("", "kek_version").unwrap() >= 1, "the private key is sealed");
    assert!(row.try_get::<i64>("", "n").unwrap() > 0, "the private key is sealed");

    let s = i.serve();
    let url = s.url("/hooks/clinic-a/hooks");
    let c = reqwest::Client::new();
    let body = created("r-1");
    let good = sign(&private, &body, now(), "msg_1");
    assert!(good[2].1.starts_with("v1a,"), "{good:?}");

    // Tampered body, wrong key, outside the window: refused.
    expect(post(&c, &url, &good, created("r-2")).await, 401, "error", "signature_mismatch");
    let stranger = PrivateKey::generate().encode();
    expect(
        post(&c, &url, &sign(&stranger, &body, now(), "msg_1"), body.clone()).await,
        401,
        "error",
        "signature_mismatch",
    );
    for ts in [now() - 310, now() + 310] {
        expect(
            post(&c, &url, &sign(&private, &body, ts, "msg_1"), body.clone()).await,
            401,
            "error",
            "timestamp_outside_window",
        );
    }
    // Wrong length or encoding: 401 signature_mismatch, never 500.
    let raw = STANDARD.decode(good[2].1.trim_start_matches("v1a,")).unwrap();
    for bad in [
        "v1a,".to_owned(),
        "v1a,@@@not-base64".to_owned(),
        format!("v1a,{}", STANDARD.encode(&raw[..63])),
        format!("v1a,{}", STANDARD.encode([raw.as_slice(), &[0u8]].concat())),
        format!("v1a,{}", hex(&raw)),
        format!("v1a,{}", STANDARD.encode([0u8; 64])),
    ] {
        expect(
            post(&c, &url, &with_signature(good.clone(), &bad), body.clone()).await,
            401,
            "error",
            "signature_mismatch",
        );
    }
    // Accepted; the same signed message again is a replay, a re-signed
    // retry a duplicate.
    expect(post(&c, &url, &good, body.clone()).await, 200, "status", "applied");
    expect(post(&c, &url, &good, body.clone()).await, 409, "error", "replay");
    let retry = post(&c, &url, &sign(&private, &body, now() + 1, "msg_1"), body.clone()).await;
    expect(retry, 200, "status", "duplicate");

    // An HMAC key beside it: `v1` and `v1a` in one header, each key finds
    // its own signature, whichever of the pair is broken.
    let h = i.cli_json(&["key", "provision", "clinic-a", "hooks", "--approve-as", "rita"]);
    let hmac = h["secret"].as_str().unwrap().to_owned();
    let junk_v1 = format!("v1,{}", STANDARD.encode([7u8; 32]));
    let junk_v1a = format!("v1a,{}", STANDARD.encode([7u8; 64]));
    for (n, pick) in [(2, "both"), (3, "v1 only"), (4, "v1a only")] {
        let body = created(&format!("r-{n}"));
        let id = format!("msg_{n}");
        let ts = now();
        let v1 = sign(&hmac, &body, ts, &id)[2].1.clone();
        let v1a = sign(&private, &body, ts, &id)[2].1.clone();
        let header = match pick {
            "both" => format!("{v1} {v1a}"),
            "v1 only" => format!("{junk_v1a} {v1}"),
            _ => format!("{junk_v1} {v1a}"),
        };
        let headers = with_signature(sign(&hmac, &body, ts, &id), &header);
        // The running server sees the new HMAC key once its cache reloads
        // (a mismatch forces a reload at most once a second); a refusal
        // stores nothing, so the same request may be sent again.
        let mut got = post(&c, &url, &headers, body.clone()).await;
        for _ in 0..20 {
            if got.0 != 401 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            got = post(&c, &url, &headers, body.clone()).await;
        }
        expect(got, 200, "status", "applied");
    }
    let both_bad = with_signature(sign(&hmac, &body, now(), "msg_9"), &format!("{junk_v1} {junk_v1a}"));
    expect(post(&c, &url, &both_bad, created("r-9")).await, 401, "error", "signature_mismatch");

    // `signet send` signs v1a with the private key.
    i.send_event(&url, &private, "msg_send", &String::from_utf8(created("r-send")).unwrap());
    drop(s);

    // Nowhere in the database in clear: not the whsk_ text, the seed's
    // base64 or its raw bytes (it is sealed).
    let seed = STANDARD.decode(private.trim_start_matches("whsk_")).unwrap();
    let stored = crate::secrecy::raw_database(i);
    assert!(holds(&stored, public.as_bytes()), "the public key is stored in clear");
    for needle in [private.as_bytes(), STANDARD.encode(&seed).as_bytes(), hex(&seed).as_bytes(), &seed] {
        assert!(!holds(&stored, needle), "the private key is stored");
    }
});

both_engines!(v1a_provisioning_rotation_and_evidence, async |i: &Install| {
    i.clinic_a_hooks("standard-webhooks", "reminder.created,reminder.canceled", &[]);
    i.cli_json(&["endpoint", "create", "clinic-a", "stripe-hooks", "--scheme", "stripe"]);
    let admin =
        i.cli_json(&["token", "create", "--name", "ada", "--role", "admin"])["token"].as_str().unwrap().to_owned();
    let s = i.serve();
    let c = reqwest::Client::new();
    let keys_url = |e: &str| s.url(&format!("/api/v1/tenants/clinic-a/endpoints/{e}/keys"));
    let provision = |e: &'static str, body: Value| {
        let req = c.post(keys_url(e)).bearer_auth(&admin).json(&body);
        async move {
            let res = req.send().await.unwrap();
            (res.status(), res.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    // Not an Ed25519 public key: 422 naming the field.
    let mut off_curve = [0u8; 32];
    off_curve[0] = 2;
    let mut identity = [0u8; 32];
    identity[0] = 1;
    for bad in [
        format!("whpk_{}", STANDARD.encode(off_curve)),
        format!("whpk_{}", STANDARD.encode(identity)),
        format!("whpk_{}", STANDARD.encode([9u8; 31])),
        "whpk_not-base64".to_owned(),
        PY_PUBLIC.replace("whpk_", "whsec_"),
    ] {
        let got = provision("hooks", json!({"public_key": bad})).await;
        assert_eq!(got.0, 422, "{bad}: {got:?}");
        assert!(got.1["message"].as_str().unwrap().contains("public_key"), "{got:?}");
        if bad.starts_with("whpk_") && bad.len() == 49 {
            assert_eq!(got.1["error"], "invalid_public_key", "{got:?}");
        }
    }
    let got = provision("stripe-hooks", json!({"public_key": PY_PUBLIC})).await;
    expect(got, 422, "error", "public_key_scheme");
    let bad_cli = i.cli(&["key", "provision", "clinic-a", "hooks", "--public-key", "whpk_AAAA"], "");
    assert!(!bad_cli.status.success());
    assert!(String::from_utf8_lossy(&bad_cli.stderr).contains("public_key"));

    // The provider's public key: nothing secret comes back.
    let (status, k) = provision("hooks", json!({"public_key": PY_PUBLIC, "owner": "ops"})).await;
    assert_eq!(status, 201, "{k}");
    assert_eq!(k["credential"], "ed25519");
    assert_eq!(k["public_key"], PY_PUBLIC);
    assert_eq!(k["status"], "pending_approval", "four eyes as for any key");
    assert!(k.get("secret").is_none() && k.get("private_key").is_none(), "{k}");
    let first = k["key_id"].as_str().unwrap().to_owned();
    let approved = i.cli_json(&["key", "approve", &first, "--reviewer", "rita"]);
    assert_eq!(approved["status"], "active");

    // Rotation with overlap: a public key needs its replacement's key.
    let refused = i.cli(&["key", "rotate", &first, "--approve-as", "rita"], "");
    assert!(!refused.status.success());
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(why.contains("needs the provider's new public key"), "{why}");
    let next = PrivateKey::generate().public_key().encode();
    let rotated =
        i.cli_json(&["key", "rotate", &first, "--public-key", &next, "--overlap-secs", "3600", "--approve-as", "rita"]);
    assert_eq!(rotated["status"], "active");
    assert_eq!(rotated["public_key"], next.as_str());
    assert_eq!(rotated["replaces_key_id"], first.as_str());
    let list = i.cli_json(&["key", "list", "--tenant", "clinic-a"]);
    let old = list.as_array().unwrap().iter().find(|k| k["key_id"] == first.as_str()).unwrap().clone();
    assert_eq!(old["status"], "retiring");
    let hmac = i.cli_json(&["key", "provision", "clinic-a", "hooks", "--approve-as", "rita"]);
    assert_eq!(hmac["credential"], "hmac");
    let revoked = i.cli_json(&["key", "revoke", &first, "--reason", "provider rotated"]);
    assert_eq!(revoked["status"], "revoked");
    drop(s);

    // The evidence's credential map: an uploaded public key cannot sign.
    let out = i.data_dir().join("bundle");
    i.cli_json(&["evidence", "export", "--out", out.to_str().unwrap()]);
    let evidence: Value = serde_json::from_str(&std::fs::read_to_string(out.join("evidence.json")).unwrap()).unwrap();
    let creds = evidence["credentials"].as_array().unwrap();
    let row = |id: &str| creds.iter().find(|c| c["key_id"] == id).unwrap_or_else(|| panic!("{id} missing"));
    let rotated_id = rotated["key_id"].as_str().unwrap();
    assert_eq!(row(rotated_id)["credential"], "ed25519");
    assert_eq!(row(rotated_id)["can_sign"], false);
    assert_eq!(row(hmac["key_id"].as_str().unwrap())["can_sign"], true);
    let html = std::fs::read_to_string(out.join("evidence.html")).unwrap();
    assert!(html.contains("cannot sign"), "evidence.html marks the public key");
});
