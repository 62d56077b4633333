//! The OpenAPI document states each path parameter's rule: the pattern its
//! generator or validator follows, so a client (or schemathesis) can tell a
//! well-formed name from one that can name nothing.

use std::collections::BTreeMap;

use serde_json::Value;

/// Every path parameter, by name, with its schema (the same name has the
/// same schema on every route).
fn path_parameters(doc: &Value) -> BTreeMap<String, Value> {
    let mut found: BTreeMap<String, Value> = BTreeMap::new();
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for (method, op) in ops.as_object().unwrap() {
            for p in op["parameters"].as_array().into_iter().flatten().filter(|p| p["in"] == "path") {
                let name = p["name"].as_str().unwrap().to_owned();
                assert!(path.contains(&format!("{{{name}}}")), "{method} {path} documents {name}, not in its path");
                assert_eq!(p["required"], true, "{method} {path}: {name}");
                let seen = found.entry(name.clone()).or_insert_with(|| p["schema"].clone());
                assert_eq!(*seen, p["schema"], "{name} has two schemas ({method} {path})");
            }
            for name in path.split('{').skip(1).filter_map(|s| s.split_once('}')).map(|(n, _)| n) {
                let documented = op["parameters"].as_array().into_iter().flatten().any(|p| p["name"] == name);
                assert!(documented, "{method} {path} does not document {{{name}}}");
            }
        }
    }
    found
}

#[tokio::test]
async fn every_path_parameter_states_its_rule() {
    let i = crate::support::Install::new(crate::support::Engine::Sqlite).expect("sqlite");
    let s = i.serve();
    let doc: Value = reqwest::get(s.url("/api/v1/openapi.json")).await.unwrap().json().await.unwrap();
    let params = path_parameters(&doc);
    let pattern = |name: &str| params[name]["pattern"].as_str().unwrap_or_else(|| panic!("{name} has no pattern"));
    assert_eq!(pattern("tenant"), views::ids::slug_pattern());
    assert_eq!(pattern("endpoint"), views::ids::slug_pattern());
    assert_eq!(pattern("key_id"), views::ids::key_id_pattern());
    for id in ["id", "run_id"] {
        assert_eq!(pattern(id), domain::ids::id_pattern());
    }
    assert_eq!(pattern("username"), domain::auth::users::username_pattern());
    assert_eq!(params["scheme"]["$ref"], "#/components/schemas/Scheme", "the scheme is one of the enum's names");
    // The one free-text parameter: a provider's own reminder id.
    assert_eq!(params["reminder_id"]["type"], "string");
    // A new tenant or endpoint is followed by its slug, never its id.
    let links = |path: &str| doc["paths"][path]["post"]["responses"]["201"]["links"].as_object().unwrap().clone();
    let tenant_links = links("/api/v1/tenants");
    assert_eq!(tenant_links["get_tenant"]["parameters"]["tenant"], "$response.body#/slug");
    assert_eq!(tenant_links["rollback_retry_policy"]["parameters"]["tenant"], "$response.body#/slug");
    let endpoint_links = links("/api/v1/tenants/{tenant}/endpoints");
    assert_eq!(endpoint_links["get_endpoint"]["parameters"]["endpoint"], "$response.body#/slug");
    assert_eq!(endpoint_links["get_endpoint"]["parameters"]["tenant"], "$request.path.tenant");
    assert_eq!(tenant_links["get_tenant"]["operationId"], "get_tenant", "OpenAPI spells it operationId");
    assert!(!endpoint_links.contains_key("get_tenant"), "an endpoint's links fill only what it names");
    let names: Vec<&String> = params.keys().collect();
    assert_eq!(
        names,
        ["digest", "endpoint", "event_id", "id", "key_id", "reminder_id", "run_id", "scheme", "tenant", "username"]
    );
    assert_eq!(pattern("event_id"), views::ids::EVENT_ID_PATTERN);
    assert_eq!(pattern("digest"), views::ids::DIGEST_PATTERN);
}

/// Rules across two body fields are stated in the schema (JSON Schema
/// `if`/`then`/`else`), so a generated valid body satisfies them, and the
/// server refuses what the schema's `then` excludes.
#[tokio::test]
async fn rules_across_two_body_fields_are_stated_in_the_schema() {
    let i = crate::support::Install::new(crate::support::Engine::Sqlite).expect("sqlite");
    let token =
        i.cli_json(&["token", "create", "--name", "root", "--role", "admin"])["token"].as_str().unwrap().to_owned();
    let s = i.serve();
    let doc: Value = reqwest::get(s.url("/api/v1/openapi.json")).await.unwrap().json().await.unwrap();
    let user = &doc["components"]["schemas"]["NewUserBody"];
    assert_eq!(user["if"]["properties"]["role"]["const"], "clinic-admin");
    assert_eq!(user["then"]["required"], serde_json::json!(["tenant"]));
    assert_eq!(user["else"]["properties"]["tenant"]["enum"], serde_json::json!([null, ""]));
    let filter = &doc["components"]["schemas"]["QuarantineFilter"];
    assert_eq!(filter["if"]["required"], serde_json::json!(["endpoint"]));
    assert_eq!(filter["then"]["required"], serde_json::json!(["tenant"]));
    let api = reqwest::Client::new();
    let post = |path: &str, body: Value| api.post(s.url(path)).bearer_auth(&token).json(&body).send();
    let cases = [
        ("/api/v1/users", serde_json::json!({"username": "carla", "role": "clinic-admin"}), "tenant_required"),
        (
            "/api/v1/users",
            serde_json::json!({"username": "otto", "role": "oncall", "tenant": "x"}),
            "tenant_not_allowed",
        ),
        (
            "/api/v1/quarantine/bulk-releases",
            serde_json::json!({"filter": {"endpoint": "hooks"}, "reason": "r"}),
            "tenant_required",
        ),
    ];
    for (path, body, code) in cases {
        let res = post(path, body.clone()).await.unwrap();
        assert_eq!(res.status(), 422, "{path} {body}");
        assert_eq!(res.json::<Value>().await.unwrap()["error"], code, "{path} {body}");
    }
    let fine = post("/api/v1/users", serde_json::json!({"username": "otto", "role": "oncall", "tenant": ""})).await;
    assert_eq!(fine.unwrap().status(), 201, "an empty tenant is no tenant");
}

// A list of event types has at most 256 entries, in the document and in
// the answers: 257 is 422 `too_many_event_types` for a caller who may make
// the change, and a caller who may not is refused as such first.
#[tokio::test]
async fn event_type_lists_are_capped_in_the_document_and_the_api() {
    let i = crate::support::Install::new(crate::support::Engine::Sqlite).expect("sqlite");
    i.cli_json(&["tenant", "create", "clinic-a"]);
    i.cli_json(&["endpoint", "create", "clinic-a", "hooks", "--scheme", "standard-webhooks"]);
    let token = |role: &str| {
        i.cli_json(&["token", "create", "--name", role, "--role", role])["token"].as_str().unwrap().to_owned()
    };
    let (admin, oncall) = (token("admin"), token("oncall"));
    let s = i.serve();
    let doc: Value = reqwest::get(s.url("/api/v1/openapi.json")).await.unwrap().json().await.unwrap();
    // Every request body that takes a list of event types.
    for body in ["NewEndpoint", "EndpointPatch", "ProvisionBody", "ScopeBody"] {
        let list = &doc["components"]["schemas"][body]["properties"]["event_types"];
        let arrays: Vec<&Value> = list["oneOf"]
            .as_array()
            .unwrap_or_else(|| panic!("{body}: {list}"))
            .iter()
            .filter(|v| v["type"] != "null")
            .collect();
        assert_eq!(arrays.len(), 2, "{body}: {list}");
        for a in arrays {
            assert_eq!(a["maxItems"], 256, "{body}: {list}");
        }
    }
    let c = reqwest::Client::new();
    let types: Vec<String> = (0..257).map(|n| format!("t{n}")).collect();
    let body = serde_json::json!({"slug": "more", "scheme": "standard-webhooks", "event_types": types});
    let post = |token: &str| c.post(s.url("/api/v1/tenants/clinic-a/endpoints")).bearer_auth(token).json(&body).send();
    let res = post(&oncall).await.unwrap();
    assert_eq!(res.status(), 403);
    let res = post(&admin).await.unwrap();
    assert_eq!(res.status(), 422);
    assert_eq!(res.json::<Value>().await.unwrap()["error"], "too_many_event_types");
}

/// The document and the router agree, both ways: every documented
/// operation reaches its handler (anonymous, that is 401: each handler
/// authenticates before it reads anything else), every other method on a
/// documented path is 405, and a path under no documented template gets the
/// API's own 404. Routes come only from the handlers' `#[utoipa::path]`
/// (`routes!` in `server/src/http/api/mod.rs`); the one route the document
/// does not list is the document itself.
#[tokio::test]
async fn the_document_lists_every_route_the_router_serves_and_no_other() {
    let i = crate::support::Install::new(crate::support::Engine::Sqlite).expect("sqlite");
    let s = i.serve();
    let res = reqwest::get(s.url("/api/v1/openapi.json")).await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "application/json");
    let doc: Value = res.json().await.unwrap();
    let paths = doc["paths"].as_object().unwrap();
    assert!(!paths.contains_key("/api/v1/openapi.json"));
    let c = reqwest::Client::new();
    let mut served = 0;
    for (path, ops) in paths {
        let url: Vec<&str> = path.split('/').map(|seg| if seg.starts_with('{') { "x" } else { seg }).collect();
        let url = s.url(&url.join("/"));
        for method in ["get", "put", "post", "patch", "delete"] {
            let verb = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let res = c.request(verb, &url).send().await.unwrap();
            let status = res.status();
            if ops.get(method).is_some() {
                served += 1;
                let body: Value = res.json().await.unwrap_or_default();
                assert_eq!(
                    (status.as_u16(), &body["error"]),
                    (401, &Value::from("unauthenticated")),
                    "{method} {path}"
                );
            } else {
                assert_eq!(status, 405, "{method} {path} answers, yet the document does not list it");
            }
        }
    }
    assert!(served > 50, "{served} operations");
    for path in ["/api/v1/no-such-route", "/api/v1/tenants/x/no-such-route", "/api/v1/keys/x/y/z"] {
        let res = c.get(s.url(path)).send().await.unwrap();
        assert_eq!(res.status(), 404, "{path}");
        assert_eq!(res.json::<Value>().await.unwrap()["error"], "not_found", "{path}");
    }
}

/// A typed status is documented with the words the API sends and stores
/// (`views::string_enum!`), not its Rust variant names: schemathesis once
/// found `KeyStatus` listed as `PendingApproval`, … while answers said
/// `pending_approval`.
#[tokio::test]
async fn typed_statuses_list_the_words_on_the_wire() {
    let i = crate::support::Install::new(crate::support::Engine::Sqlite).expect("sqlite");
    let s = i.serve();
    let doc: Value = reqwest::get(s.url("/api/v1/openapi.json")).await.unwrap().json().await.unwrap();
    let words = |name: &str| doc["components"]["schemas"][name]["enum"].clone();
    let key: Vec<&str> = views::keys::KeyStatus::ALL.iter().map(|k| k.as_str()).collect();
    assert_eq!(words("KeyStatus"), serde_json::json!(key));
    assert_eq!(
        words("KeyStatus"),
        serde_json::json!(["pending_approval", "active", "retiring", "expired", "revoked", "rejected"])
    );
    assert_eq!(words("ReminderStatus"), serde_json::json!(["scheduled", "canceled"]));
    assert_eq!(words("ClaimOutcome"), serde_json::json!(["applied", "quarantined", "stale_transition"]));
    let runs = ["running", "finished", "failed", "canceled", "interrupted"];
    assert_eq!(words("RunStatus"), serde_json::json!(runs));
    assert_eq!(words("OutboxStatus"), serde_json::json!(["pending", "sending", "sent", "dead"]));
    let status_of = |view: &str| doc["components"]["schemas"][view]["properties"]["status"]["$ref"].clone();
    assert_eq!(status_of("OutboxView"), "#/components/schemas/OutboxStatus");
    assert_eq!(words("QuarantineStatus"), serde_json::json!(["open", "released", "discarded"]));
    assert_eq!(status_of("QuarantineView"), "#/components/schemas/QuarantineStatus");
    let reasons = serde_json::json!([
        "malformed_envelope",
        "missing_event_id",
        "unknown_event_type",
        "invalid_data",
        "reminder_exists",
        "reminder_not_found",
        "ambiguous_order",
        "transient"
    ]);
    assert_eq!(words("QuarantineReason"), reasons);
    let reason_of = |view: &str| doc["components"]["schemas"][view]["properties"]["reason"]["$ref"].clone();
    assert_eq!(reason_of("QuarantineView"), "#/components/schemas/QuarantineReason");
    // Its own name: the dashboard's `ReasonCount` (any reason, as rolled up) is another schema.
    assert_eq!(reason_of("QuarantineReasonCount"), "#/components/schemas/QuarantineReason");
    let by_reason = &doc["components"]["schemas"]["QuarantineList"]["properties"]["by_reason"]["items"]["$ref"];
    assert_eq!(by_reason, "#/components/schemas/QuarantineReasonCount");
    // A listing's status filter: empty (any) or a word (`filter_schema`).
    let filter = |path: &str| {
        let params = doc["paths"][path]["get"]["parameters"].as_array().cloned().unwrap_or_default();
        params.into_iter().find(|p| p["name"] == "status").map(|p| p["schema"]["enum"].clone())
    };
    assert_eq!(filter("/api/v1/outbox"), Some(serde_json::json!(["", "pending", "sending", "sent", "dead"])));
    let keys = serde_json::json!(["", "pending_approval", "active", "retiring", "expired", "revoked", "rejected"]);
    assert_eq!(filter("/api/v1/keys"), Some(keys));
    // The retry policy and a reviewer's decision, where a response carries them.
    assert_eq!(words("RetryPolicy"), serde_json::json!(["enabled", "disabled"]));
    let field = |view: &str, name: &str| doc["components"]["schemas"][view]["properties"][name]["$ref"].clone();
    for (view, name) in [("RetryPolicyView", "policy"), ("TenantView", "retry_policy"), ("PolicyState", "policy")] {
        assert_eq!(field(view, name), "#/components/schemas/RetryPolicy", "{view}.{name}");
    }
    assert_eq!(words("Decision"), serde_json::json!(["approved", "rejected"]));
    assert_eq!(field("SignoffView", "decision"), "#/components/schemas/Decision");
    // The evidence bundle's copy of the history stays text (its page's
    // escaping test marks every string).
    assert_eq!(doc["components"]["schemas"]["PolicyVersionView"]["properties"]["policy"]["type"], "string");
}
