//! `/api/v1`: the JSON admin API (docs/contract.md §4). Bearer tokens from
//! `signet token create`; the same roles and tenant scoping as the console,
//! enforced by the domain. Errors are `{"error": code, "message": text}`.

mod admin;
mod auth;
mod break_glass;
mod events;
pub mod evidence;
mod keys;
mod operations;
mod params;
mod registry;
mod retention;
mod stats;

use crate::http::state::AppState;
use auth::Failure;
use axum::{
    Json, Router,
    routing::{get, post},
};
use utoipa::{
    Modify, OpenApi,
    openapi::{
        ContentBuilder, Ref, RefOr, ResponseBuilder, Schema,
        path::{Operation, ParameterIn},
        schema::AdditionalProperties,
        security::{HttpAuthScheme, HttpBuilder, SecurityScheme},
    },
};

pub use auth::ApiError;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/openapi.json", get(|| async { Json(document()) }))
        .route("/tenants", get(registry::list_tenants).post(registry::create_tenant))
        .route("/tenants/{tenant}", get(registry::get_tenant).patch(registry::update_tenant))
        .route("/tenants/{tenant}/endpoints", get(registry::list_endpoints).post(registry::create_endpoint))
        .route("/tenants/{tenant}/endpoints/{endpoint}", get(registry::get_endpoint).patch(registry::update_endpoint))
        .route("/tenants/{tenant}/endpoints/{endpoint}/keys", get(keys::list_endpoint_keys).post(keys::provision))
        .route("/tenants/{tenant}/endpoints/{endpoint}/test-delivery", post(registry::test_delivery))
        .route(
            "/tenants/{tenant}/endpoints/{endpoint}/event-key",
            get(registry::get_event_key).put(registry::set_event_key),
        )
        .route("/tenants/{tenant}/events", get(events::list_events))
        .route("/tenants/{tenant}/endpoints/{endpoint}/events/{event_id}", get(events::get_event_story))
        .route("/tenants/{tenant}/reminders/{reminder_id}", get(events::get_reminder))
        .route("/keys", get(keys::list_keys))
        .route("/keys/{key_id}", get(keys::get_key).patch(keys::set_scope))
        .route("/keys/{key_id}/approve", post(keys::approve))
        .route("/keys/{key_id}/reject", post(keys::reject))
        .route("/keys/{key_id}/rotate", post(keys::rotate))
        .route("/keys/{key_id}/revoke", post(keys::revoke))
        .route("/users", get(admin::list_users).post(admin::create_user))
        .route("/users/{username}", axum::routing::patch(admin::update_user))
        .route("/audit", get(admin::list_audit))
        .route("/quarantine", get(operations::list_quarantine))
        .route("/quarantine/bulk-releases", get(operations::list_bulk_releases).post(operations::start_bulk_release))
        .route("/quarantine/bulk-releases/{id}", get(operations::get_bulk_release))
        .route("/quarantine/bulk-releases/{id}/resume", post(operations::resume_bulk_release))
        .route("/quarantine/{id}", get(operations::get_quarantine))
        .route("/quarantine/{id}/release", post(operations::release))
        .route("/quarantine/{id}/discard", post(operations::discard))
        .route("/outbox", get(operations::list_outbox))
        .route("/outbox/{id}/retry", post(operations::retry_outbox))
        .route("/tenants/{tenant}/retry-policy", get(operations::get_retry_policy).put(operations::set_retry_policy))
        .route("/tenants/{tenant}/retry-policy/rollback", post(operations::rollback_retry_policy))
        .route("/tenants/{tenant}/retry-policy/overrides", get(break_glass::list_overrides))
        .route("/tenants/{tenant}/retry-policy/overrides/{id}/approve", post(break_glass::approve_override))
        .route("/tenants/{tenant}/retry-policy/overrides/{id}/reject", post(break_glass::reject_override))
        .route("/stats", get(stats::get_stats))
        .route("/retention", get(retention::overview))
        .route("/retention/horizons/{scheme}", axum::routing::put(retention::set_horizon))
        .route(
            "/tenants/{tenant}/endpoints/{endpoint}/retention",
            get(retention::get_retention).put(retention::set_retention),
        )
        .route("/drills", get(evidence::list_drills).post(evidence::start_drills))
        .route("/drills/{run_id}", get(evidence::get_drill))
        .route("/evidence", get(evidence::get_evidence))
        .route("/evidence.html", get(evidence::get_evidence_html))
        .route("/evidence/exports", get(evidence::list_exports).post(evidence::create_export))
        .route("/evidence/exports/{digest}", get(evidence::get_export))
        .route("/evidence/signoffs", get(evidence::list_signoffs).post(evidence::sign_off))
        .route("/evidence/public-key", get(evidence::public_key))
        .fallback(|| async { ApiError::not_found() })
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Signet admin API",
        description = "Tenants, endpoints, signing keys, users, the audit log, quarantine triage, retry policies, \
                       retention, drills and sign-off evidence."
    ),
    paths(
        registry::list_tenants, registry::create_tenant, registry::get_tenant, registry::update_tenant,
        registry::list_endpoints, registry::create_endpoint, registry::get_endpoint, registry::update_endpoint,
        registry::get_event_key, registry::set_event_key, registry::test_delivery,
        keys::list_endpoint_keys, keys::provision, keys::list_keys, keys::get_key, keys::set_scope,
        keys::approve, keys::reject, keys::rotate, keys::revoke,
        admin::list_users, admin::create_user, admin::update_user, admin::list_audit,
        events::list_events, events::get_reminder, events::get_event_story,
        operations::list_quarantine, operations::get_quarantine, operations::release, operations::discard,
        operations::start_bulk_release, operations::list_bulk_releases, operations::get_bulk_release,
        operations::resume_bulk_release,
        operations::get_retry_policy, operations::set_retry_policy, operations::rollback_retry_policy,
        break_glass::list_overrides, break_glass::approve_override, break_glass::reject_override,
        operations::list_outbox, operations::retry_outbox,
        retention::overview, retention::get_retention, retention::set_retention, retention::set_horizon,
        stats::get_stats,
        evidence::start_drills, evidence::list_drills, evidence::get_drill,
        evidence::get_evidence, evidence::get_evidence_html, evidence::list_exports, evidence::create_export,
        evidence::get_export,
        evidence::sign_off, evidence::list_signoffs, evidence::public_key,
    ),
    components(schemas(auth::ErrorBody)),
    modifiers(&BearerAuth, &ErrorResponses, &ClosedBodies, &PathParametersRequired),
    security(("bearer" = []))
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// Reads that check more than the caller's tenant: some signed-in role is
/// refused them (403). Every other read is open to every role (a clinic
/// admin sees only its own tenant: another's answers 404); every change is
/// refused to some role. `tests/it/rbac.rs` checks this against the role
/// matrix, both ways.
pub const READS_WITH_A_ROLE_CHECK: [&str; 10] = [
    "GET /api/v1/users",
    "GET /api/v1/quarantine/{id}",
    "GET /api/v1/drills",
    "GET /api/v1/drills/{run_id}",
    "GET /api/v1/evidence",
    "GET /api/v1/evidence.html",
    "GET /api/v1/evidence/exports",
    "GET /api/v1/evidence/exports/{digest}",
    "GET /api/v1/evidence/signoffs",
    "GET /api/v1/evidence/public-key",
];

/// Adds to every operation each [`Failure`] it can answer, with the
/// `ErrorBody` schema. A handler's own entry for a status (a 409 saying
/// when, a 422 saying why) is kept.
struct ErrorResponses;

impl ErrorResponses {
    fn answers(failure: Failure, name: &str, op: &Operation) -> bool {
        let params = op.parameters.as_deref().unwrap_or_default();
        match failure {
            // Every call authenticates, and refuses a query parameter it does
            // not take (or a body field, or a value).
            Failure::Unauthenticated | Failure::Invalid | Failure::Internal | Failure::Unavailable => true,
            Failure::Forbidden => !name.starts_with("GET ") || READS_WITH_A_ROLE_CHECK.contains(&name),
            // A named resource, or a tenant filter naming one, that is absent
            // or outside the caller's tenant.
            Failure::NotFound => params.iter().any(|p| {
                matches!(p.parameter_in, ParameterIn::Path) || (p.name == "tenant" && !name.contains("{tenant}"))
            }),
            Failure::TooLarge | Failure::UnsupportedMediaType => op.request_body.is_some(),
            // Declared by each handler that can answer it, saying when.
            Failure::Conflict | Failure::Throttled => false,
        }
    }
}

impl Modify for ErrorResponses {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for (path, item) in openapi.paths.paths.iter_mut() {
            let ops = [
                ("GET", &mut item.get),
                ("PUT", &mut item.put),
                ("POST", &mut item.post),
                ("PATCH", &mut item.patch),
                ("DELETE", &mut item.delete),
            ];
            for (method, op) in ops {
                let Some(op) = op else { continue };
                let name = format!("{method} {path}");
                let answered: Vec<Failure> =
                    Failure::ALL.into_iter().filter(|f| Self::answers(*f, &name, op)).collect();
                for failure in answered {
                    let response = ResponseBuilder::new()
                        .description(failure.description())
                        .content(
                            "application/json",
                            ContentBuilder::new().schema(Some(Ref::from_schema_name("ErrorBody"))).build(),
                        )
                        .build();
                    op.responses.responses.entry(failure.status().as_str().to_owned()).or_insert(response.into());
                }
            }
        }
    }
}

/// A path parameter is always required (OpenAPI 3.1 §4.8.12.1). utoipa
/// 5.5's `IntoParams` leaves `required` false for a field whose schema comes
/// from `schema_with`, which is how `params.rs` states the domain's patterns.
struct PathParametersRequired;

impl Modify for PathParametersRequired {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for item in openapi.paths.paths.values_mut() {
            let ops = [&mut item.get, &mut item.put, &mut item.post, &mut item.patch, &mut item.delete];
            for op in ops.into_iter().flatten() {
                for p in op.parameters.iter_mut().flatten() {
                    if matches!(p.parameter_in, ParameterIn::Path) {
                        p.required = utoipa::openapi::Required::True;
                    }
                }
            }
        }
    }
}

/// The document as served: utoipa's, plus the slug links.
pub fn document() -> &'static serde_json::Value {
    static DOC: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();
    DOC.get_or_init(|| {
        let mut doc = serde_json::to_value(ApiDoc::openapi()).expect("the OpenAPI document serializes");
        slug_links(&mut doc);
        hmac_profile_schema(&mut doc);
        cross_field_rules(&mut doc);
        // An export's body may be omitted (a body that is there must be the
        // object): utoipa states that only as a nullable body.
        if let Some(body) = doc.pointer_mut("/paths/~1api~1v1~1evidence~1exports/post/requestBody") {
            body["required"] = serde_json::Value::Bool(false);
        }
        doc
    })
}

/// Tenants and endpoints are addressed by slug, not by their `id`. The 201
/// of each create call links every operation under the new resource with
/// its slug (`$response.body#/slug`), so a client, or schemathesis's
/// stateful phase, follows the slug instead of guessing the `id`. Written
/// on the JSON: utoipa 5's `Link` serializes `operation_id` in snake case,
/// which no OpenAPI reader accepts.
fn slug_links(doc: &mut serde_json::Value) {
    use serde_json::{Value, json};
    let created = [
        ("/api/v1/tenants", "/api/v1/tenants/{tenant}", json!({"tenant": "$response.body#/slug"})),
        (
            "/api/v1/tenants/{tenant}/endpoints",
            "/api/v1/tenants/{tenant}/endpoints/{endpoint}",
            json!({"tenant": "$request.path.tenant", "endpoint": "$response.body#/slug"}),
        ),
    ];
    for (create, under, parameters) in created {
        let mut links = serde_json::Map::new();
        for (path, item) in doc["paths"].as_object().into_iter().flatten() {
            // Exactly the new resource's own parameters: nothing else to fill.
            if !path.starts_with(under) || path.matches('{').count() != under.matches('{').count() {
                continue;
            }
            for op in item.as_object().into_iter().flatten().map(|(_, op)| op) {
                if let Some(id) = op["operationId"].as_str() {
                    links.insert(id.to_owned(), json!({"operationId": id, "parameters": parameters}));
                }
            }
        }
        if let Some(Value::Object(response)) =
            doc.pointer_mut(&format!("/paths/{}/post/responses/201", pointer(create)))
        {
            response.insert("links".to_owned(), Value::Object(links));
        }
    }
}

/// Rules across two fields of a request body, stated in the body's schema
/// as JSON Schema `if`/`then`/`else` (utoipa derives one field at a time).
/// An empty string counts as absent, as the domain reads it. The same rules
/// over query parameters cannot be stated (OpenAPI has no dependencies
/// between parameters) and stay documented exceptions (docs/api.md).
fn cross_field_rules(doc: &mut serde_json::Value) {
    use serde_json::{Value, json};
    let given = |field: &str| json!({"required": [field], "properties": {field: {"type": "string", "minLength": 1}}});
    let rules = [
        // Filtering by endpoint needs a tenant (`tenant_required`).
        ("QuarantineFilter", json!({"if": given("endpoint"), "then": given("tenant")})),
        // A clinic admin needs a tenant (`tenant_required`); no other role
        // takes one (`tenant_not_allowed`).
        (
            "NewUserBody",
            json!({
                "if": {"required": ["role"], "properties": {"role": {"const": "clinic-admin"}}},
                "then": given("tenant"),
                "else": {"properties": {"tenant": {"enum": [null, ""]}}},
            }),
        ),
    ];
    for (name, rule) in rules {
        if let (Some(Value::Object(schema)), Value::Object(rule)) =
            (doc.pointer_mut(&format!("/components/schemas/{name}")), rule)
        {
            schema.extend(rule);
        }
    }
}

/// `hmac_profile` of a new endpoint: the profile's own schema (a component
/// written by the registry, whose validator's patterns it states), required
/// for scheme `hmac` and `null` for every other.
fn hmac_profile_schema(doc: &mut serde_json::Value) {
    use serde_json::{Value, json};
    if let Some(Value::Object(schemas)) = doc.pointer_mut("/components/schemas") {
        schemas.insert("HmacProfileBody".to_owned(), domain::registry::hmac_profile::openapi_schema());
    }
    let profile = json!({"$ref": "#/components/schemas/HmacProfileBody"});
    if let Some(Value::Object(schema)) = doc.pointer_mut("/components/schemas/NewEndpoint") {
        if let Some(Value::Object(props)) = schema.get_mut("properties") {
            props.insert("hmac_profile".to_owned(), json!({"oneOf": [profile, {"type": "null"}]}));
        }
        schema.insert("if".to_owned(), json!({"required": ["scheme"], "properties": {"scheme": {"const": "hmac"}}}));
        schema
            .insert("then".to_owned(), json!({"required": ["hmac_profile"], "properties": {"hmac_profile": profile}}));
        schema.insert("else".to_owned(), json!({"properties": {"hmac_profile": {"type": "null"}}}));
    }
}

/// A path as one JSON Pointer token (RFC 6901: `~` is `~0`, `/` is `~1`).
fn pointer(path: &str) -> String {
    path.replace('~', "~0").replace('/', "~1")
}

/// Request bodies are strict (`auth::strict_json` refuses a field the call
/// does not take, at any depth), so every schema a request body names is
/// closed: `additionalProperties: false`.
struct ClosedBodies;

impl Modify for ClosedBodies {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let mut names: Vec<String> = Vec::new();
        for item in openapi.paths.paths.values() {
            for op in [&item.put, &item.post, &item.patch].into_iter().flatten() {
                let bodies = op.request_body.iter().flat_map(|b| b.content.values());
                names.extend(bodies.filter_map(|c| match &c.schema {
                    Some(RefOr::Ref(r)) => r.ref_location.rsplit('/').next().map(str::to_owned),
                    _ => None,
                }));
            }
        }
        let Some(components) = openapi.components.as_mut() else { return };
        while let Some(name) = names.pop() {
            let Some(RefOr::T(Schema::Object(o))) = components.schemas.get_mut(&name) else { continue };
            if o.additional_properties.is_some() {
                continue;
            }
            o.additional_properties = Some(Box::new(AdditionalProperties::FreeForm(false)));
            names.extend(o.properties.values().filter_map(|p| match p {
                RefOr::Ref(r) => r.ref_location.rsplit('/').next().map(str::to_owned),
                _ => None,
            }));
        }
    }
}
