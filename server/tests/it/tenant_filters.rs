//! A tenant filter is parsed once, at the edge: a name outside the slug
//! rule names no tenant and is answered exactly as an unknown slug is (404
//! on a listing, 422 `unknown_tenant` when binding a user or a token), after
//! the checks that answered first before; empty filters nothing.

use serde_json::{Value, json};

use crate::support::{Engine, Install};

/// The status and body of `method path [body]` as the admin.
async fn answer(
    s: &crate::support::Server,
    token: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let c = reqwest::Client::new();
    let mut req = c.request(method.parse().unwrap(), s.url(path)).bearer_auth(token);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

fn new_user(name: &str, role: &str, tenant: &str) -> Value {
    json!({"username": name, "role": role, "tenant": tenant, "password": "a long enough password"})
}

#[tokio::test]
async fn a_malformed_tenant_filter_is_answered_as_an_unknown_tenant() {
    let i = Install::new(Engine::Sqlite).expect("sqlite");
    i.cli_json(&["tenant", "create", "clinic-a"]);
    let token =
        i.cli_json(&["token", "create", "--name", "root", "--role", "admin"])["token"].as_str().unwrap().to_owned();
    let s = i.serve();
    let get = |path: String| {
        let (s, token) = (&s, &token);
        async move { answer(s, token, "GET", &path, None).await }
    };
    let listings = ["keys", "quarantine", "stats", "outbox", "evidence", "evidence/exports", "evidence/signoffs"];
    for listing in listings {
        let unknown = get(format!("/api/v1/{listing}?tenant=clinic-zz")).await;
        assert_eq!(unknown.0, 404, "{listing}: {unknown:?}");
        // Outside the slug rule, and the drills' synthetic tenant, which no
        // listing names.
        for bad in ["Clinic-A", "a_b", "_drill", "%20clinic-a"] {
            let malformed = get(format!("/api/v1/{listing}?tenant={bad}")).await;
            let expected = if listing == "quarantine" && bad == "%20clinic-a" { 200 } else { 404 };
            assert_eq!(malformed.0, expected, "{listing}?tenant={bad}: {malformed:?}");
            if expected == 404 {
                assert_eq!(malformed, unknown, "{listing}?tenant={bad}");
            }
        }
    }
    for listing in ["keys", "quarantine", "stats", "outbox", "evidence/exports", "evidence/signoffs"] {
        assert_eq!(get(format!("/api/v1/{listing}?tenant=")).await.0, 200, "{listing}: empty filters nothing");
    }
    // What answered before the tenant still does.
    for (path, status) in [
        ("/api/v1/quarantine?tenant=Bad&limit=0", 422),
        ("/api/v1/outbox?tenant=Bad&limit=0", 422),
        ("/api/v1/keys?tenant=Bad&status=bogus", 422),
        ("/api/v1/stats?tenant=Bad&window=bogus", 422),
    ] {
        assert_eq!(get(path.to_owned()).await.0, status, "{path}");
    }
    let post = |path: &'static str, body: Value| {
        let (s, token) = (&s, &token);
        async move { answer(s, token, "POST", path, Some(body)).await }
    };
    let bulk = |tenant: &str, reason: &str| json!({"filter": {"tenant": tenant}, "reason": reason});
    let unknown = post("/api/v1/quarantine/bulk-releases", bulk("clinic-zz", "r")).await;
    assert_eq!(unknown.0, 404, "{unknown:?}");
    assert_eq!(post("/api/v1/quarantine/bulk-releases", bulk("Bad", "r")).await, unknown);
    let blank = post("/api/v1/quarantine/bulk-releases", bulk("Bad", " ")).await;
    assert_eq!((blank.0, &blank.1["error"]), (422, &json!("reason_required")), "the reason answers first");
    let unknown = post("/api/v1/evidence/exports", json!({"tenant": "clinic-zz"})).await;
    assert_eq!(unknown.0, 404, "{unknown:?}");
    assert_eq!(post("/api/v1/evidence/exports", json!({"tenant": "Bad"})).await, unknown);

    // A user's tenant: the role's rule answers first, then the tenant is
    // named back as given.
    for tenant in ["Clinic A", "_drill-x", "clinic-zz"] {
        let (status, body) = post("/api/v1/users", new_user("carla", "clinic-admin", tenant)).await;
        assert_eq!((status, &body["error"]), (422, &json!("unknown_tenant")), "{tenant:?}: {body}");
        assert_eq!(body["message"], format!("no tenant {tenant:?}"));
        let (status, body) = post("/api/v1/users", new_user("otto", "oncall", tenant)).await;
        assert_eq!((status, &body["error"]), (422, &json!("tenant_not_allowed")), "{tenant:?}: {body}");
    }
    let (status, body) = post("/api/v1/users", new_user("carla", "clinic-admin", "clinic-a")).await;
    assert_eq!((status, body["user"]["tenant"].as_str()), (201, Some("clinic-a")), "{body}");
    let patch = |tenant: &str| {
        let (s, token) = (&s, &token);
        let body = json!({"tenant": tenant});
        async move { answer(s, token, "PATCH", "/api/v1/users/carla", Some(body)).await }
    };
    let (status, body) = patch("Clinic A").await;
    assert_eq!((status, &body["message"]), (422, &json!("no tenant \"Clinic A\"")), "{body}");
    let (status, body) = patch("").await;
    assert_eq!((status, &body["error"]), (422, &json!("tenant_required")), "empty unbinds a clinic admin: {body}");

    // The CLI parses its filter the same way.
    let cli = |tenant: &str| {
        let out = i.cli(&["--json", "key", "list", "--tenant", tenant], "");
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    let unknown = cli("clinic-zz");
    assert_ne!(unknown.0, Some(0), "{unknown:?}");
    assert_eq!(cli("Clinic-A"), unknown);
    let out = i.cli(&["--json", "token", "create", "--name", "ci", "--role", "clinic-admin", "--tenant", "Bad"], "");
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success() && said.contains("unknown_tenant"), "{said}");
}
