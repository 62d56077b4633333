//! `/api/v1`: the JSON admin API (docs/contract.md §4). Bearer tokens from
//! `signet token create`; the same roles and tenant scoping as the console,
//! enforced by the domain. Errors are `{"error": code, "message": text}`.

mod admin;
mod auth;
mod break_glass;
mod events;
pub mod evidence;
mod jobs;
mod keys;
mod operations;
mod params;
mod registry;
mod retention;
mod stats;

use crate::http::state::AppState;
use auth::Failure;
use axum::{Router, body::Bytes, routing::get};
use http::header;
use utoipa::{
    Modify, OpenApi,
    openapi::{
        ContentBuilder, Ref, RefOr, ResponseBuilder, Schema,
        path::{Operation, ParameterIn},
        schema::AdditionalProperties,
        security::{HttpAuthScheme, HttpBuilder, SecurityScheme},
    },
};
use utoipa_axum::{router::OpenApiRouter, routes};

pub use auth::ApiError;

/// `/api/v1`'s router, with its document at `/openapi.json`. Each route is
/// declared once, in its handler's `#[utoipa::path]` (method and path, under
/// `/api/v1`): `routes!` mounts the handler there and puts the same
/// operation in the document, so neither can list a route the other lacks
/// (`tests/it/openapi.rs` checks both ways over HTTP). One `routes!` per
/// path: it mounts every handler it is given on each of their paths.
pub fn routes() -> Router<AppState> {
    let (router, paths) = OpenApiRouter::default()
        .routes(routes!(registry::list_tenants, registry::create_tenant))
        .routes(routes!(registry::get_tenant, registry::update_tenant))
        .routes(routes!(registry::list_endpoints, registry::create_endpoint))
        .routes(routes!(registry::get_endpoint, registry::update_endpoint))
        .routes(routes!(keys::list_endpoint_keys, keys::provision))
        .routes(routes!(registry::test_delivery))
        .routes(routes!(registry::get_event_key, registry::set_event_key))
        .routes(routes!(events::list_events))
        .routes(routes!(events::get_event_story))
        .routes(routes!(events::get_reminder))
        .routes(routes!(keys::list_keys))
        .routes(routes!(keys::get_key, keys::set_scope))
        .routes(routes!(keys::approve))
        .routes(routes!(keys::reject))
        .routes(routes!(keys::rotate))
        .routes(routes!(keys::revoke))
        .routes(routes!(admin::list_users, admin::create_user))
        .routes(routes!(admin::update_user))
        .routes(routes!(admin::list_audit))
        .routes(routes!(operations::list_quarantine))
        .routes(routes!(operations::list_bulk_releases, operations::start_bulk_release))
        .routes(routes!(operations::get_bulk_release))
        .routes(routes!(operations::resume_bulk_release))
        .routes(routes!(operations::cancel_bulk_release))
        .routes(routes!(operations::get_quarantine))
        .routes(routes!(operations::release))
        .routes(routes!(operations::discard))
        .routes(routes!(operations::list_outbox))
        .routes(routes!(operations::retry_outbox))
        .routes(routes!(operations::get_retry_policy, operations::set_retry_policy))
        .routes(routes!(operations::rollback_retry_policy))
        .routes(routes!(break_glass::list_overrides))
        .routes(routes!(break_glass::approve_override))
        .routes(routes!(break_glass::reject_override))
        .routes(routes!(stats::get_stats))
        .routes(routes!(jobs::list_jobs))
        .routes(routes!(retention::overview))
        .routes(routes!(retention::set_horizon))
        .routes(routes!(retention::get_retention, retention::set_retention))
        .routes(routes!(evidence::list_drills, evidence::start_drills))
        .routes(routes!(evidence::get_drill))
        .routes(routes!(evidence::get_evidence))
        .routes(routes!(evidence::get_evidence_html))
        .routes(routes!(evidence::list_exports, evidence::create_export))
        .routes(routes!(evidence::get_export))
        .routes(routes!(evidence::list_signoffs, evidence::sign_off))
        .routes(routes!(evidence::public_key))
        .split_for_parts();
    // Serialized once; every answer is these bytes.
    let doc = Bytes::from(serde_json::to_vec(&document(paths)).expect("the OpenAPI document serializes"));
    router
        .route(
            "/openapi.json",
            get(move || {
                let doc = doc.clone();
                async move { ([(header::CONTENT_TYPE, "application/json")], doc) }
            }),
        )
        .fallback(|| async { ApiError::not_found() })
}

/// The document's frame: its paths are the router's (see [`routes`]), its
/// modifiers run on the whole (see [`document`]).
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Signet admin API",
        description = "Tenants, endpoints, signing keys, users, the audit log, quarantine triage, retry policies, \
                       retention, drills and sign-off evidence."
    ),
    components(schemas(auth::ErrorBody)),
    security(("bearer" = []))
)]
struct ApiDoc;

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
pub const READS_WITH_A_ROLE_CHECK: [&str; 11] = [
    "GET /api/v1/users",
    "GET /api/v1/jobs",
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

/// The document as served: the frame with the router's paths under
/// `/api/v1`, utoipa's modifiers (run here, on the whole: the derive would
/// run them before the paths are in), plus the slug links.
fn document(paths: utoipa::openapi::OpenApi) -> serde_json::Value {
    let mut api = ApiDoc::openapi().nest("/api/v1", paths);
    let modifiers: [&dyn Modify; 4] = [&BearerAuth, &ErrorResponses, &ClosedBodies, &PathParametersRequired];
    for modifier in modifiers {
        modifier.modify(&mut api);
    }
    let mut doc = serde_json::to_value(api).expect("the OpenAPI document serializes");
    slug_links(&mut doc);
    hmac_profile_schema(&mut doc);
    cross_field_rules(&mut doc);
    // An export's body may be omitted (a body that is there must be the
    // object): utoipa states that only as a nullable body.
    if let Some(body) = doc.pointer_mut("/paths/~1api~1v1~1evidence~1exports/post/requestBody") {
        body["required"] = serde_json::Value::Bool(false);
    }
    doc
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
