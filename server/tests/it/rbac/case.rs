//! The matrix's vocabulary: the callers, the role sets a case allows, what
//! a case needs created fresh, and how it builds its request.

use reqwest::Method;
use serde_json::Value;

pub(super) const PASSWORD: &str = "a long enough password";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Who {
    Admin,
    Reviewer,
    Oncall,
    /// Clinic admin of clinic-a (the tenant every case acts on).
    ClinicOwn,
    /// Clinic admin of clinic-b.
    ClinicOther,
    Anonymous,
}

pub(super) const EVERYONE: [Who; 6] =
    [Who::Admin, Who::Reviewer, Who::Oncall, Who::ClinicOwn, Who::ClinicOther, Who::Anonymous];
pub(super) const READERS: &[Who] = &[Who::Admin, Who::Reviewer, Who::Oncall, Who::ClinicOwn];
pub(super) const SIGNED_IN: &[Who] = &[Who::Admin, Who::Reviewer, Who::Oncall, Who::ClinicOwn, Who::ClinicOther];
pub(super) const MANAGERS: &[Who] = &[Who::Admin, Who::ClinicOwn];
pub(super) const REVIEWERS: &[Who] = &[Who::Admin, Who::Reviewer];
pub(super) const ADMIN: &[Who] = &[Who::Admin];
pub(super) const TRIAGE: &[Who] = &[Who::Admin, Who::Oncall];
/// The roles not bound to one tenant (deployment-wide reads).
pub(super) const GLOBAL: &[Who] = &[Who::Admin, Who::Reviewer, Who::Oncall];
/// Drills and evidence: everyone but on-call (a clinic admin for its own
/// tenant).
pub(super) const EVIDENCE: &[Who] = &[Who::Admin, Who::Reviewer, Who::ClinicOwn, Who::ClinicOther];
pub(super) const EVIDENCE_OF_A: &[Who] = &[Who::Admin, Who::Reviewer, Who::ClinicOwn];

/// What a case needs created fresh before each call.
#[derive(Clone, Copy, Debug)]
pub(super) enum Fresh {
    Nothing,
    ActiveKey,
    PendingKey,
    /// A reminder in clinic-a, created by a signed webhook.
    Reminder,
    /// An event of clinic-a/hooks, applied (its id).
    Event,
    /// An open quarantine entry in clinic-a (`reminder_not_found`) whose
    /// cause has since been fixed, so a release applies.
    Quarantined,
    /// A dead outbox intent of clinic-a (its relay URL refuses connections).
    DeadIntent,
    /// A running bulk release over clinic-a's open quarantine.
    BulkRelease,
    /// A bulk release of clinic-a whose runner stopped reporting.
    InterruptedBulkRelease,
    /// No drill run in progress (runs go one at a time).
    IdleDrills,
    /// A finished drill run of clinic-a (started by its clinic admin).
    DrillRun,
    /// An exported evidence bundle of clinic-a (its digest).
    Export,
    /// No KEK rewrap running.
    IdleKek,
    /// A rewrap that stopped (failed), to resume or cancel (its id).
    StoppedRewrap,
    /// A KEK version no row uses, a newer one long in the ring (its number).
    RetirableKek,
    /// A pending break-glass override of clinic-a, asked for by the CLI (its id).
    PendingOverride,
}

pub(super) struct Case {
    /// Server function endpoint name, or `METHOD /api/v1/path-template`.
    pub(super) name: &'static str,
    pub(super) allowed: &'static [Who],
    /// Whether the resource belongs to clinic-a (a foreign clinic admin then
    /// gets 404, not 403).
    pub(super) tenant_scoped: bool,
    pub(super) fresh: Fresh,
    /// Builds the request: (method, path, form-or-json body) from the fresh id and a unique suffix.
    pub(super) build: fn(&str, usize) -> (Method, String, Body),
}

pub(super) enum Body {
    None,
    Form(Vec<(&'static str, String)>),
    Json(Value),
}

pub(super) fn get(path: String) -> (Method, String, Body) {
    (Method::GET, path, Body::None)
}
pub(super) fn form(path: &str, fields: Vec<(&'static str, String)>) -> (Method, String, Body) {
    (Method::POST, path.to_owned(), Body::Form(fields))
}
pub(super) fn json_req(method: Method, path: String, body: Value) -> (Method, String, Body) {
    (method, path, Body::Json(body))
}
