//! Scheme `hmac` (issue 26 item 2) against the real binary, on both
//! engines: each preset's deliveries accepted, tampered, under the wrong
//! key, outside the window, replayed and duplicated; bad digests answering
//! 401 `signature_mismatch` (never 500); a custom profile; profiles refused
//! at creation with 422 naming the field; `signet send` signing as a
//! preset; the profile in the endpoint's view and the evidence.

use domain::{
    crypto::{SigningSecret, profile::sign_for},
    registry::hmac_profile::preset,
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use views::hmac::{HmacPreset, HmacProfile, SignatureFormat};

use crate::{
    both_engines,
    support::{Install, now, post},
};

/// A reminder envelope; the id is both the envelope's `id` and the `dvir`
/// preset's `event_id`, so every preset finds it where it looks.
fn created(id: &str) -> Vec<u8> {
    let data = json!({"reminder_id": id, "send_at": "2027-01-05T09:00:00Z"});
    json!({"id": id, "event_id": id, "type": "reminder.created", "data": data}).to_string().into_bytes()
}

fn sign(p: &HmacProfile, secret: &str, id: &str, ts: i64, body: &[u8]) -> Vec<(String, String)> {
    sign_for(p, &SigningSecret::parse(secret).unwrap(), id, ts, body).unwrap()
}

#[track_caller]
fn expect(got: (StatusCode, Value), status: u16, field: &str, value: &str, what: &str) {
    assert_eq!(got.0.as_u16(), status, "{what}: {got:?}");
    assert_eq!(got.1[field], value, "{what}: {got:?}");
}

fn with_signature(mut headers: Vec<(String, String)>, value: &str) -> Vec<(String, String)> {
    headers[0].1 = value.to_owned();
    headers
}

/// Creates `clinic-a/<preset>` with the preset and an approved key; the key's secret.
fn preset_endpoint(i: &Install, name: &str) -> String {
    let e = i.cli_json(&[
        "endpoint",
        "create",
        "clinic-a",
        name,
        "--scheme",
        "hmac",
        "--preset",
        name,
        "--event-types",
        "reminder.created",
    ]);
    assert_eq!(e["scheme"], "hmac", "{e}");
    assert_eq!(e["hmac_profile"]["preset"], name, "{e}");
    let k = i.cli_json(&["key", "provision", "clinic-a", name, "--approve-as", "rita"]);
    assert_eq!(k["status"], "active", "{k}");
    k["secret"].as_str().unwrap().to_owned()
}

both_engines!(hmac_presets_verify_and_refuse, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    let presets: Vec<(HmacPreset, String)> =
        HmacPreset::ALL.into_iter().map(|p| (p, preset_endpoint(i, p.as_str()))).collect();
    let s = i.serve();
    let c = reqwest::Client::new();
    let stranger = SigningSecret::generate();
    for (p, secret) in &presets {
        let name = p.as_str();
        let profile = preset(*p);
        let url = s.url(&format!("/hooks/clinic-a/{name}"));
        let body = created(&format!("{name}-1"));
        let id = format!("{name}-1");
        let ts = now();
        let good = sign(&profile, secret, &id, ts, &body);

        // Tampered body, wrong key: refused.
        let tampered = created(&format!("{name}-2"));
        expect(post(&c, &url, &good, tampered).await, 401, "error", "signature_mismatch", name);
        let wrong = sign(&profile, stranger.expose(), &id, ts, &body);
        expect(post(&c, &url, &wrong, body.clone()).await, 401, "error", "signature_mismatch", name);
        // Digests of the wrong length or encoding: 401, never 500.
        let cut = profile.prefix.len()
            + match profile.signature_format {
                SignatureFormat::Pairs => good[0].1.find("v1=").unwrap() + 3,
                SignatureFormat::Digest => 0,
            };
        let (prefix, digest) = good[0].1.split_at(cut);
        for bad in ["".to_owned(), "@@@".to_owned(), format!("{digest}00"), digest[..digest.len() / 2].to_owned()] {
            let h = with_signature(good.clone(), &format!("{prefix}{bad}"));
            expect(post(&c, &url, &h, body.clone()).await, 401, "error", "signature_mismatch", name);
        }
        // Outside the window, both ways (a preset that signs a timestamp).
        if profile.has_timestamp() {
            for off in [-310, 310] {
                let h = sign(&profile, secret, &id, ts + off, &body);
                expect(post(&c, &url, &h, body.clone()).await, 401, "error", "timestamp_outside_window", name);
            }
        } else {
            // Shopify signs no timestamp: no window applies, so a delivery
            // signed long ago is not refused for its age; dedup by its
            // webhook id is what keeps it from applying twice (below).
            assert_eq!(*p, HmacPreset::Shopify);
        }

        expect(post(&c, &url, &good, body.clone()).await, 200, "status", "applied", name);
        if profile.has_timestamp() {
            // The same signed message again is a replay; the sender's retry,
            // re-signed a second later, a duplicate.
            expect(post(&c, &url, &good, body.clone()).await, 409, "error", "replay", name);
            let retry = sign(&profile, secret, &id, ts + 1, &body);
            expect(post(&c, &url, &retry, body.clone()).await, 200, "status", "duplicate", name);
        } else {
            // Shopify retries the very same request: a duplicate. The same
            // signed body under another webhook id is a replay.
            expect(post(&c, &url, &good, body.clone()).await, 200, "status", "duplicate", name);
            let other = sign(&profile, secret, "another-webhook-id", ts, &body);
            expect(post(&c, &url, &other, body.clone()).await, 409, "error", "replay", name);
        }
    }

    // A DVIR body with no `event_id` verifies, then waits in quarantine as
    // `missing_event_id`: the id is read only after the signature matched.
    let (_, dvir_secret) = &presets[0];
    let body = json!({"type": "reminder.created", "data": {"reminder_id": "x"}}).to_string().into_bytes();
    let h = sign(&preset(HmacPreset::Dvir), dvir_secret, "", now(), &body);
    let got = post(&c, &s.url("/hooks/clinic-a/dvir"), &h, body).await;
    assert_eq!(got.0.as_u16(), 202, "{got:?}");
    assert_eq!(got.1["reason"], "missing_event_id", "{got:?}");
});

both_engines!(hmac_custom_profile_and_send, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    // SHA-512, base64, a prefix, the id signed from a header.
    let custom = json!({
        "signature_header": "X-Acme-Signature",
        "signature_format": "digest",
        "prefix": "sha512=",
        "encoding": "base64",
        "algorithm": "sha512",
        "signed_content": "{id}|{timestamp}|{body}",
        "timestamp_header": "X-Acme-Timestamp",
        "tolerance_secs": 120,
        "event_id": "header:X-Acme-Id",
    });
    let file = i.data_dir().join("profile.json");
    std::fs::write(&file, custom.to_string()).unwrap();
    let f = file.to_str().unwrap();
    let e = i.cli_json(&["endpoint", "create", "clinic-a", "acme", "--scheme", "hmac", "--profile", f]);
    assert_eq!(e["tolerance_secs"], 120, "the profile's tolerance is the endpoint's: {e}");
    assert_eq!(e["hmac_profile"]["algorithm"], "sha512", "{e}");
    assert_eq!(e["hmac_profile"]["preset"], Value::Null, "{e}");
    let k = i.cli_json(&["key", "provision", "clinic-a", "acme", "--approve-as", "rita"]);
    let secret = k["secret"].as_str().unwrap().to_owned();
    let profile: HmacProfile = serde_json::from_value(e["hmac_profile"].clone()).unwrap();

    let s = i.serve();
    let c = reqwest::Client::new();
    let url = s.url("/hooks/clinic-a/acme");
    let body = created("acme-1");
    let good = sign(&profile, &secret, "acme-1", now(), &body);
    assert!(good[0].1.starts_with("sha512="), "{good:?}");
    // The id is signed: another id under the same signature is refused.
    let mut moved = good.clone();
    moved[2].1 = "acme-2".to_owned();
    expect(post(&c, &url, &moved, body.clone()).await, 401, "error", "signature_mismatch", "id moved");
    let stale = sign(&profile, &secret, "acme-1", now() - 130, &body);
    expect(post(&c, &url, &stale, body.clone()).await, 401, "error", "timestamp_outside_window", "120 s");
    expect(post(&c, &url, &good, body.clone()).await, 200, "status", "applied", "custom");
    expect(post(&c, &url, &good, body.clone()).await, 409, "error", "replay", "custom");

    // `signet send` signs as a preset (and as the profile file).
    let secret_dvir = preset_endpoint(i, "dvir");
    let body_file = i.data_dir().join("body.json");
    for (endpoint, args, id, secret) in [
        ("dvir", vec!["--preset", "dvir"], "sent-dvir", &secret_dvir),
        ("acme", vec!["--profile", f], "sent-acme", &secret),
    ] {
        std::fs::write(&body_file, created(id)).unwrap();
        let url = s.url(&format!("/hooks/clinic-a/{endpoint}"));
        let mut all = vec!["--json", "send", &url, "--scheme", "hmac", "--secret", secret];
        all.extend(args);
        all.extend(["--file", body_file.to_str().unwrap(), "--event-id", id]);
        let out = i.cli(&all, "");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["delivered"], true, "{report}");
        assert!(report["attempts"][0]["response"].as_str().unwrap().contains("applied"), "{report}");
    }

    // The evidence's credentials name the profile beside the scheme.
    let out = i.data_dir().join("bundle");
    i.cli_json(&["evidence", "export", "--out", out.to_str().unwrap()]);
    let bundle: Value = serde_json::from_slice(&std::fs::read(out.join("evidence.json")).unwrap()).unwrap();
    let schemes: Vec<&str> =
        bundle["credentials"].as_array().unwrap().iter().filter_map(|k| k["scheme"].as_str()).collect();
    assert!(schemes.contains(&"hmac preset dvir"), "{schemes:?}");
    assert!(schemes.iter().any(|s| s.starts_with("hmac x-acme-signature")), "{schemes:?}");
});

both_engines!(hmac_profiles_are_validated_at_creation, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    let token =
        i.cli_json(&["token", "create", "--name", "root", "--role", "admin"])["token"].as_str().unwrap().to_owned();
    let s = i.serve();
    let api = reqwest::Client::new();
    let create =
        |body: Value| api.post(s.url("/api/v1/tenants/clinic-a/endpoints")).bearer_auth(&token).json(&body).send();
    let full = json!({
        "signature_header": "X-Sig",
        "signature_format": "digest",
        "encoding": "hex",
        "algorithm": "sha256",
        "signed_content": "{timestamp}.{body}",
        "timestamp_header": "X-Ts",
    });
    let with = |patch: Value| {
        let mut p = full.clone();
        for (k, v) in patch.as_object().unwrap() {
            p[k] = v.clone();
        }
        p
    };
    let cases = [
        (json!({"slug": "a1", "scheme": "hmac"}), "hmac_profile"),
        (json!({"slug": "a2", "scheme": "stripe", "hmac_profile": {"preset": "dvir"}}), "hmac_profile"),
        (
            json!({"slug": "a3", "scheme": "hmac", "hmac_profile": with(json!({"signed_content": "{ts}.{body}"}))}),
            "hmac_profile.signed_content",
        ),
        (
            json!({"slug": "a4", "scheme": "hmac",
                "hmac_profile": with(json!({"signed_content": "{timestamp}.{body"}))}),
            "hmac_profile.signed_content",
        ),
        (
            json!({"slug": "a5", "scheme": "hmac",
                "hmac_profile": with(json!({"signed_content": format!("{{timestamp}}{{body}}{}", "x".repeat(250))}))}),
            "hmac_profile.signed_content",
        ),
        (
            json!({"slug": "a6", "scheme": "hmac",
            "hmac_profile": with(json!({"timestamp_header": null, "signed_content": "{body}"}))}),
            "hmac_profile.event_id",
        ),
        (
            json!({"slug": "a7", "scheme": "hmac",
            "hmac_profile": with(json!({"signed_content": "{id}{timestamp}{body}", "event_id": "json:/id"}))}),
            "hmac_profile.event_id",
        ),
        (
            json!({"slug": "a8", "scheme": "hmac", "hmac_profile": with(json!({"signature_header": "X Sig"}))}),
            "hmac_profile.signature_header",
        ),
        (
            json!({"slug": "a9", "scheme": "hmac", "hmac_profile": {"preset": "dvir", "prefix": "x"}}),
            "hmac_profile.preset",
        ),
    ];
    for (body, field) in cases {
        let res = create(body.clone()).await.unwrap();
        assert_eq!(res.status(), 422, "{body}");
        let err: Value = res.json().await.unwrap();
        assert_eq!(err["error"], "invalid_hmac_profile", "{body}: {err}");
        assert!(err["message"].as_str().unwrap().starts_with(&format!("{field}:")), "{body}: {err}");
    }
    // Fields serde refuses are refused as the body's, also 422.
    for body in [
        json!({"slug": "b1", "scheme": "hmac", "hmac_profile": {"preset": "github"}}),
        json!({"slug": "b2", "scheme": "hmac", "hmac_profile": with(json!({"encoding": "base32"}))}),
        json!({"slug": "b3", "scheme": "hmac", "hmac_profile": with(json!({"nonce": "x"}))}),
    ] {
        let res = create(body.clone()).await.unwrap();
        assert_eq!(res.status(), 422, "{body}");
    }
    let ok = create(json!({"slug": "ok", "scheme": "hmac", "hmac_profile": full})).await.unwrap();
    assert_eq!(ok.status(), 201);
    let view: Value = ok.json().await.unwrap();
    assert_eq!(view["hmac_profile"]["signed_content"], "{timestamp}.{body}", "{view}");
    let preset = create(json!({"slug": "shop", "scheme": "hmac", "hmac_profile": {"preset": "shopify"}})).await;
    let view: Value = preset.unwrap().json().await.unwrap();
    assert_eq!(view["hmac_profile"]["event_id"], "header:X-Shopify-Webhook-Id", "{view}");
    // The profile's tolerance is the endpoint's; a whole number written as
    // a float is an integer, as JSON Schema counts them.
    let body = json!({"slug": "slack", "scheme": "hmac", "hmac_profile": {"preset": "slack", "tolerance_secs": 60.0}});
    let view: Value = create(body).await.unwrap().json().await.unwrap();
    assert_eq!(view["tolerance_secs"], 60, "{view}");

    // The document states the profile: a preset or a custom profile, the
    // template's pattern the validator's, and required for scheme hmac.
    let doc: Value = reqwest::get(s.url("/api/v1/openapi.json")).await.unwrap().json().await.unwrap();
    let schema = &doc["components"]["schemas"]["HmacProfileBody"];
    assert_eq!(schema["oneOf"][0]["properties"]["preset"]["enum"], json!(["dvir", "shopify", "slack"]));
    let custom = &schema["oneOf"][1];
    assert_eq!(custom["properties"]["signed_content"]["maxLength"], 256);
    assert_eq!(custom["properties"]["signed_content"]["pattern"], domain::registry::hmac_profile::template_pattern());
    let endpoint = &doc["components"]["schemas"]["NewEndpoint"];
    assert_eq!(endpoint["then"]["required"], json!(["hmac_profile"]));
    assert_eq!(endpoint["else"]["properties"]["hmac_profile"]["type"], "null");
});

// The console's new-endpoint form (`/fn/create_endpoint`, as a browser
// without JavaScript posts it): a preset, or a custom profile as JSON read
// as strictly as the API reads it; both at once, an unknown preset, a
// mistyped field, or a profile for another scheme are refused by name and
// create nothing.
both_engines!(hmac_endpoints_from_the_console_form, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    let password = "a long enough password";
    i.cli_json_stdin(&["user", "create", "alice", "--role", "clinic-admin", "--tenant", "clinic-a"], password);
    let s = i.serve();
    let c = s.logged_in("alice", password).await;
    let create = |fields: Vec<(&'static str, &'static str)>| {
        let mut all = vec![("tenant", "clinic-a")];
        all.extend(fields);
        let req = c.post(s.url("/fn/create_endpoint")).header("Origin", &s.base).form(&all);
        async move {
            let res = req.send().await.unwrap();
            (res.status().as_u16(), res.text().await.unwrap())
        }
    };
    let custom = r#"{"signature_header": "X-Acme-Signature", "signature_format": "digest", "prefix": "sha256=",
        "encoding": "hex", "algorithm": "sha256", "signed_content": "{timestamp}.{body}",
        "timestamp_header": "X-Acme-Timestamp", "event_id": "header:X-Acme-Id"}"#;
    let refused = [
        (vec![("slug", "r1"), ("scheme", "hmac"), ("hmac_preset", "dvir"), ("hmac_profile", custom)], "not both"),
        (vec![("slug", "r2"), ("scheme", "hmac"), ("hmac_preset", "paypal")], "hmac_profile.preset: unknown"),
        (
            vec![("slug", "r3"), ("scheme", "hmac"), ("hmac_profile", r#"{"preset": "dvir", "prefx": "v1="}"#)],
            "hmac_profile.prefx: unknown field",
        ),
        (vec![("slug", "r4"), ("scheme", "hmac"), ("hmac_profile", "{not json")], "hmac_profile: not a profile"),
        (vec![("slug", "r5"), ("scheme", "hmac")], "hmac_profile: required"),
        (vec![("slug", "r6"), ("scheme", "stripe"), ("hmac_preset", "dvir")], "only scheme hmac"),
    ];
    for (fields, says) in refused {
        let (status, body) = create(fields.clone()).await;
        assert_eq!(status, 422, "{fields:?}: {body}");
        assert!(body.contains("invalid_hmac_profile") && body.contains(says), "{fields:?}: {body}");
    }
    // Blank profile fields, as the form sends them for another scheme, are absent.
    let (status, body) =
        create(vec![("slug", "gh"), ("scheme", "github"), ("hmac_preset", ""), ("hmac_profile", " ")]).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = create(vec![("slug", "dvir"), ("scheme", "hmac"), ("hmac_preset", "dvir")]).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = create(vec![("slug", "acme"), ("scheme", "hmac"), ("hmac_profile", custom)]).await;
    assert_eq!(status, 200, "{body}");

    let list = i.cli_json(&["endpoint", "list", "clinic-a"]);
    let slugs: Vec<&str> = list.as_array().unwrap().iter().map(|e| e["slug"].as_str().unwrap()).collect();
    assert_eq!(slugs.len(), 3, "only the accepted forms created endpoints: {list}");
    let by = |slug: &str| list.as_array().unwrap().iter().find(|e| e["slug"] == slug).unwrap().clone();
    assert_eq!(by("dvir")["hmac_profile"]["preset"], "dvir");
    assert_eq!(by("dvir")["hmac_profile"]["signature_header"], "X-DVIR-Signature");
    assert_eq!(by("acme")["hmac_profile"]["prefix"], "sha256=");
    assert_eq!(by("acme")["hmac_profile"]["event_id"], "header:X-Acme-Id");
    assert_eq!(by("gh")["hmac_profile"], Value::Null);

    // The endpoint page shows the profile in full.
    let page = c.get(s.url("/tenants/clinic-a/endpoints/acme")).send().await.unwrap().text().await.unwrap();
    for shown in ["hmac-profile", "X-Acme-Signature", "X-Acme-Timestamp", "sha256=", "{timestamp}.{body}"] {
        assert!(page.contains(shown), "{shown} on the endpoint page");
    }
});
