//! The role matrix over HTTP: every server function and every `/api/v1`
//! route, called as every role, including a clinic admin of another tenant
//! and an anonymous caller. The test also proves its own coverage: it fails
//! when a server function or API route exists that the matrix does not list.

mod api;
mod case;
mod fixtures;
mod server_fns;

use std::{collections::BTreeSet, sync::atomic::Ordering};

use reqwest::{Method, StatusCode};
use serde_json::Value;

use api::api_cases;
use case::{Body, Case, EVERYONE, PASSWORD, SIGNED_IN, Who, get};
use fixtures::{World, fresh, serve, setup, world};
use server_fns::{PUBLIC_SERVER_FNS, server_fn_cases};

use crate::{
    both_engines,
    support::{Install, Server},
};

fn expected(case: &Case, who: Who) -> Result<(), StatusCode> {
    if case.allowed.contains(&who) {
        Ok(())
    } else if who == Who::Anonymous {
        Err(StatusCode::UNAUTHORIZED)
    } else if who == Who::ClinicOther && case.tenant_scoped {
        Err(StatusCode::NOT_FOUND)
    } else {
        Err(StatusCode::FORBIDDEN)
    }
}

async fn call(s: &Server, w: &World, who: Who, api: bool, req: (Method, String, Body)) -> (StatusCode, String) {
    let (method, path, body) = req;
    let client = if api { &w.anonymous } else { w.sessions.get(&who).unwrap_or(&w.anonymous) };
    let mut r = client.request(method.clone(), s.url(&path));
    if api {
        if let Some(t) = w.tokens.get(&who) {
            r = r.bearer_auth(t);
        }
    } else if method != Method::GET {
        r = r.header("Origin", &s.base);
    }
    r = match body {
        Body::None => r,
        Body::Form(f) => r.form(&f),
        Body::Json(v) => r.json(&v),
    };
    let res = r.send().await.unwrap();
    let status = res.status();
    (status, res.text().await.unwrap_or_default())
}

async fn run_matrix(i: &Install, s: &Server, w: &World, cases: Vec<Case>, api: bool) {
    let mut failures = Vec::new();
    for case in &cases {
        for who in EVERYONE {
            let id = fresh(i, s, w, case.fresh).await;
            let n = w.counter.fetch_add(1, Ordering::SeqCst);
            let (status, body) = call(s, w, who, api, (case.build)(&id, n)).await;
            let ok = match expected(case, who) {
                // A change that repeats the stored values (the same call made
                // for each allowed role) is refused only after authorization.
                Ok(()) => {
                    status.is_success()
                        || (status == StatusCode::UNPROCESSABLE_ENTITY && body.contains("nothing_to_change"))
                }
                Err(want) => status == want,
            };
            if !ok {
                failures.push(format!(
                    "{} as {who:?}: got {status}, expected {:?}: {body}",
                    case.name,
                    expected(case, who)
                ));
            }
        }
    }
    assert!(failures.is_empty(), "role matrix violations:\n{}", failures.join("\n"));
}

both_engines!(server_functions_authorize_every_role, async |i: &Install| {
    setup(i);
    let s = serve(i);
    let w = world(i, &s).await;
    let cases = server_fn_cases();
    // Coverage: every server function in the app is either in the matrix or public.
    let mut declared = BTreeSet::new();
    for entry in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../app/src/api")).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for part in text.split("#[server(").skip(1) {
            let name = part
                .split("endpoint = \"")
                .nth(1)
                .and_then(|r| r.split('"').next())
                .expect("every server fn names its endpoint");
            declared.insert(name.to_owned());
        }
    }
    let covered: BTreeSet<String> =
        cases.iter().map(|c| c.name.to_owned()).chain(PUBLIC_SERVER_FNS.map(str::to_owned)).collect();
    assert_eq!(declared, covered, "the matrix must list every server function");
    run_matrix(i, &s, &w, cases, false).await;

    // Listings never leak another tenant to a clinic admin.
    let (_, tenants) = call(&s, &w, Who::ClinicOther, false, get("/fn/list_tenants".into())).await;
    assert!(!mentions_clinic_a(&tenants), "{tenants}");
    let (_, audit) = call(&s, &w, Who::ClinicOther, false, get("/fn/audit_log".into())).await;
    assert!(!mentions_clinic_a(&audit), "{audit}");
    let (_, queue) = call(&s, &w, Who::ClinicOther, false, get("/fn/review_queue".into())).await;
    assert!(!mentions_clinic_a(&queue), "{queue}");
    let (_, retention) = call(&s, &w, Who::ClinicOther, false, get("/fn/retention_overview".into())).await;
    assert!(!mentions_clinic_a(&retention), "{retention}");
});

/// `clinic-a` as a whole JSON string (plain or escaped), not as the prefix
/// of `clinic-admin`.
fn mentions_clinic_a(text: &str) -> bool {
    text.contains("clinic-a\"") || text.contains("clinic-a\\")
}

both_engines!(public_server_functions_and_csrf, async |i: &Install| {
    setup(i);
    let s = serve(i);
    let c = s.client();
    let who = c.get(s.url("/fn/whoami")).send().await.unwrap();
    assert_eq!(who.status(), 200);
    assert_eq!(who.text().await.unwrap(), "null");
    assert_eq!(c.get(s.url("/fn/setup_open")).send().await.unwrap().text().await.unwrap(), "false");
    // Bad setup token.
    let bad = c
        .post(s.url("/fn/setup_admin"))
        .header("Origin", &s.base)
        .form(&[("token", "setup_wrong"), ("username", "x"), ("password", PASSWORD), ("confirm", PASSWORD)])
        .send()
        .await
        .unwrap();
    assert!(bad.text().await.unwrap().contains("invalid_setup_token"));
    // Wrong password: no cookie.
    let wrong = c
        .post(s.url("/fn/login"))
        .header("Origin", &s.base)
        .form(&[("username", "root"), ("password", "nope nope nope")])
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 422);
    assert!(wrong.headers().get("set-cookie").is_none());
    // A mutating call without a matching Origin is refused before it runs.
    for origin in [None, Some("http://evil.test")] {
        let mut r = c.post(s.url("/fn/login")).form(&[("username", "root"), ("password", PASSWORD)]);
        if let Some(o) = origin {
            r = r.header("Origin", o);
        }
        let res = r.send().await.unwrap();
        assert_eq!(res.status(), 403, "{origin:?}");
        assert!(res.headers().get("set-cookie").is_none());
    }
    // Login, then logout invalidates the session server-side.
    let ok = c
        .post(s.url("/fn/login"))
        .header("Origin", &s.base)
        .form(&[("username", "root"), ("password", PASSWORD)])
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    let cookie = ok.headers().get("set-cookie").unwrap().to_str().unwrap().split(';').next().unwrap().to_owned();
    let me = c.get(s.url("/fn/whoami")).send().await.unwrap().json::<Value>().await.unwrap();
    assert_eq!(me["username"], "root");
    assert_eq!(c.post(s.url("/fn/logout")).header("Origin", &s.base).send().await.unwrap().status(), 200);
    // Replaying the old cookie value no longer works.
    let replay = reqwest::Client::new().get(s.url("/fn/list_tenants")).header("Cookie", &cookie).send().await.unwrap();
    assert_eq!(replay.status(), 401);
});

both_engines!(api_routes_authorize_every_role, async |i: &Install| {
    setup(i);
    let s = serve(i);
    let w = world(i, &s).await;
    // A reminder in clinic-a, delivered the way a provider would.
    let key = i.cli_json(&["key", "provision", "clinic-a", "hooks", "--approve-as", "rita"]);
    let body = i.data_dir().join("reminder.json");
    std::fs::write(
        &body,
        r#"{"type":"reminder.created","data":{"reminder_id":"r-matrix","send_at":"2027-01-05T09:00:00Z"}}"#,
    )
    .unwrap();
    let sent = i.cli(
        &[
            "send",
            &s.url("/hooks/clinic-a/hooks"),
            "--scheme",
            "standard-webhooks",
            "--secret",
            key["secret"].as_str().unwrap(),
            "--file",
            body.to_str().unwrap(),
            "--event-id",
            "evt-matrix",
        ],
        "",
    );
    assert!(sent.status.success(), "{}", String::from_utf8_lossy(&sent.stderr));
    let cases = api_cases();
    let doc: Value = reqwest::get(s.url("/api/v1/openapi.json")).await.unwrap().json().await.unwrap();
    let mut documented = BTreeSet::new();
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for method in ops.as_object().unwrap().keys() {
            documented.insert(format!("{} {path}", method.to_uppercase()));
        }
    }
    let covered: BTreeSet<String> = cases.iter().map(|c| c.name.to_owned()).collect();
    assert_eq!(documented, covered, "the matrix must list every documented API route");
    // The document's refusals are the matrix's: every operation lists 401,
    // and lists 403 exactly when the matrix refuses it to some signed-in role.
    let refused: BTreeSet<&str> = cases
        .iter()
        .filter(|c| SIGNED_IN.iter().any(|who| expected(c, *who) == Err(StatusCode::FORBIDDEN)))
        .map(|c| c.name)
        .collect();
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for (method, op) in ops.as_object().unwrap() {
            let name = format!("{} {path}", method.to_uppercase());
            let responses = &op["responses"];
            assert!(responses.get("401").is_some(), "{name} does not document 401");
            assert_eq!(
                responses.get("403").is_some(),
                refused.contains(name.as_str()),
                "{name}: the document's 403 disagrees with the role matrix"
            );
        }
    }
    run_matrix(i, &s, &w, cases, true).await;
    // Errors have the contract's shape.
    let res = w.anonymous.get(s.url("/api/v1/tenants")).send().await.unwrap();
    assert_eq!(res.status(), 401);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"], "unauthenticated");
    assert!(body["message"].is_string());
    let res = w.anonymous.get(s.url("/api/v1/tenants")).bearer_auth(&w.tokens[&Who::ClinicOther]).send().await.unwrap();
    let listed: Value = res.json().await.unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1, "a clinic admin lists only its own tenant");
    let res =
        w.anonymous.get(s.url("/api/v1/retention")).bearer_auth(&w.tokens[&Who::ClinicOther]).send().await.unwrap();
    let text = res.text().await.unwrap();
    assert!(!mentions_clinic_a(&text), "retention overview leaks another tenant: {text}");
});
