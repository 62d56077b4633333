//! Principals, a small registry to act on, and the evidence export as the
//! edges call it.

use domain::{
    auth::{Actor, Principal},
    registry::{
        endpoints::{self, NewEndpoint},
        keys::{self, Approval, ProvisionRequest, ProvisionedKey},
        tenants::{self, NewTenant},
    },
};
use views::{registry::TenantView, retry_policy::RetryPolicy, roles::Role, scheme::Scheme};

pub use self::export::Via;
use crate::support::TestDb;

/// The domain's export as the edges call it: with the printable page they
/// all pass (`evidence_html::render`).
pub mod export {
    pub use domain::evidence::export::*;
    use domain::{DomainResult, auth::Principal, vault::Vault};
    use sea_orm::DatabaseConnection;

    pub async fn export(
        db: &DatabaseConnection,
        vault: &Vault,
        principal: &Principal,
        tenant: Option<&str>,
        via: Via,
    ) -> DomainResult<Exported> {
        let tenant = domain::ids::named_filter(tenant)?;
        domain::evidence::export::export(db, vault, principal, tenant.as_ref(), via, evidence_html::render).await
    }
}

/// A quarantine filter with its tenant parsed, as the edges parse it.
pub fn parsed(f: views::quarantine::QuarantineFilter) -> domain::quarantine::Filter {
    domain::quarantine::Filter::named(f).expect("the filter's tenant is a slug")
}

/// Every quarantine entry, whatever its status, as an admin lists them.
pub async fn all_quarantined(t: &TestDb) -> Vec<views::quarantine::QuarantineView> {
    let all = views::quarantine::QuarantineFilter { status: Some("all".into()), ..Default::default() };
    domain::quarantine::list(&t.db, &admin(), &parsed(all)).await.expect("quarantine list").items
}

pub fn user(role: Role, tenant_id: Option<&str>) -> Principal {
    Principal {
        actor: Actor::User { id: format!("id-{}", role.as_str()), username: format!("{}-user", role.as_str()) },
        role,
        tenant_id: tenant_id.map(str::to_owned),
    }
}

pub fn admin() -> Principal {
    user(Role::Admin, None)
}

pub fn reviewer() -> Principal {
    user(Role::Reviewer, None)
}

pub fn oncall() -> Principal {
    user(Role::Oncall, None)
}

pub async fn tenant(t: &TestDb, slug: &str) -> TenantView {
    tenants::create(&t.db, &admin(), NewTenant { slug: slug.into(), name: None, notify_url: None })
        .await
        .expect("tenant")
}

pub async fn endpoint(t: &TestDb, tenant: &str, slug: &str, types: Option<&[&str]>) {
    endpoints::create(
        &t.db,
        &admin(),
        &tenant.parse().unwrap(),
        NewEndpoint {
            slug: slug.into(),
            scheme: Scheme::StandardWebhooks,
            event_types: types.map(|ts| ts.iter().map(|s| s.to_string()).collect()),
            tolerance_secs: None,
            max_body_bytes: None,
            hmac_profile: None,
        },
    )
    .await
    .expect("endpoint");
}

/// A tenant `clinic-a` with endpoint `reminders` and an active key.
pub async fn active_key(t: &TestDb) -> ProvisionedKey {
    tenant(t, "clinic-a").await;
    endpoint(t, "clinic-a", "reminders", Some(&["reminder.created", "otp.requested"])).await;
    keys::provision(
        &t.db,
        &t.vault,
        &admin(),
        &"clinic-a".parse().unwrap(),
        &"reminders".parse().unwrap(),
        ProvisionRequest::default(),
        Approval::ApproveAs { reviewer: "rev".into(), comment: "ok".into() },
    )
    .await
    .expect("provision")
}

/// Audit entries with this action, oldest first: (target id, after).
pub async fn audit_entries(t: &TestDb, action: &str) -> Vec<(String, serde_json::Value)> {
    use domain::entity::audit_entry;
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
    audit_entry::Entity::find()
        .filter(audit_entry::Column::Action.eq(action))
        .order_by_asc(audit_entry::Column::Seq)
        .all(&t.db)
        .await
        .expect("audit entries")
        .into_iter()
        .map(|e| {
            (
                e.target_id,
                e.after.as_deref().map_or(serde_json::Value::Null, |a| serde_json::from_str(a).expect("after is JSON")),
            )
        })
        .collect()
}

/// The rollout gate with the default drill age.
pub fn gate(t: &TestDb) -> domain::rollout::Rollout<'_> {
    domain::rollout::Rollout { vault: &t.vault, drill_max_age_days: domain::rollout::DEFAULT_DRILL_MAX_AGE_DAYS }
}

/// Test seam for the rollout order's first half: a drill run that passed on
/// this build and schema, stored as `runs::execute` stores one (running the
/// seven drills in every test that enables retries would add seconds each;
/// the drills themselves are tested in `evidence`). It verified every scheme.
pub async fn record_passing_drill(t: &TestDb) {
    record_drill_covering(t, Some(r#"["standard-webhooks","stripe","github"]"#)).await;
}

/// A passing run on this build that recorded `schemes` (JSON; `None`: a run
/// stored before schemes were recorded).
pub async fn record_drill_covering(t: &TestDb, schemes: Option<&str>) {
    use domain::{
        entity::drill_run,
        evidence::{identity, runs},
    };
    use sea_orm::{ActiveModelTrait, Set};
    let build = identity::current().await;
    let now = domain::clock::now_ms();
    drill_run::ActiveModel {
        id: Set(domain::ids::new_id()),
        actor: Set("admin-user".into()),
        actor_kind: Set("user".into()),
        tenant_id: Set(None),
        status: Set(views::evidence::DrillStatus::Finished),
        passed: Set(Some(true)),
        engine: Set(runs::engine_name(&t.db).into()),
        version: Set(build.version),
        build_commit: Set(build.commit),
        binary_sha256: Set(build.binary_sha256),
        schema_version: Set(runs::schema_version(&t.db).await.unwrap()),
        results: Set("[]".into()),
        error: Set(None),
        started_at: Set(now),
        updated_at: Set(now),
        finished_at: Set(Some(now)),
        schemes: Set(schemes.map(str::to_owned)),
    }
    .insert(&t.db)
    .await
    .expect("drill run");
}

/// The second half, through the real functions: a deployment-wide bundle
/// exported now and approved by a reviewer, acknowledging each critical
/// finding. Returns its digest.
pub async fn approve_current_bundle(t: &TestDb) -> String {
    use domain::evidence::signoff::{self, NewAcknowledgement, NewSignoff};
    let b = export::export(&t.db, &t.vault, &admin(), None, Via::Cli).await.expect("export").bundle;
    let mut ids: Vec<String> =
        b.evidence.findings.iter().filter(|f| f.severity == "critical").map(|f| f.id.clone()).collect();
    ids.dedup();
    let acknowledge = ids.into_iter().map(|finding| NewAcknowledgement { finding, comment: "test".into() }).collect();
    let new = NewSignoff { digest: b.digest.clone(), decision: "approved".into(), comment: "ok".into(), acknowledge };
    signoff::sign_off(&t.db, &t.vault, &reviewer(), &new).await.expect("sign off");
    b.digest
}

/// Both prerequisites of enabling retries, as things stand now.
pub async fn meet_rollout_order(t: &TestDb) {
    record_passing_drill(t).await;
    approve_current_bundle(t).await;
}

/// Turns the tenant's retry policy on (new tenants start with it off),
/// meeting the rollout order first.
pub async fn enable_retries(t: &TestDb, slug: &str) {
    meet_rollout_order(t).await;
    domain::retry_policy::set(
        &t.db,
        &gate(t),
        &admin(),
        &slug.parse().unwrap(),
        RetryPolicy::Enabled,
        "test: retries on",
    )
    .await
    .expect("enable retries");
}

/// How many days of replay records a purge at `now` drops: those whose
/// messages can no longer pass the timestamp gate (0 on SQLite).
pub async fn replay_days_past(t: &TestDb, now: i64) -> u64 {
    use domain::retention::partitions::{self, DAY_MS, REPLAY_DAY_KEPT_MS};
    if !t.is_postgres() {
        return 0;
    }
    let days = partitions::days(&t.db, "replay_records").await.unwrap();
    days.iter().filter(|d| (*d + 1) * DAY_MS + REPLAY_DAY_KEPT_MS <= now).count() as u64
}

/// A claim received at `at` (ms) with its body `sealed`, filed in its day
/// (on PostgreSQL only the bodies' partition of that day is created: the
/// other tables' days would change what a purge drops).
pub async fn stored_claim(t: &TestDb, tenant_id: &str, endpoint_id: &str, event_id: &str, at: i64, sealed: Vec<u8>) {
    use domain::entity::{event_body, inbox_claim};
    use sea_orm::{ConnectionTrait, EntityTrait, IntoActiveModel, Set};
    use views::events::ClaimOutcome;
    inbox_claim::Entity::insert(inbox_claim::ActiveModel {
        tenant_id: Set(tenant_id.into()),
        endpoint_id: Set(endpoint_id.into()),
        event_id: Set(event_id.into()),
        body_digest: Set("d".into()),
        event_type: Set(Some("reminder.created".into())),
        key_id: Set("k".into()),
        outcome: Set(ClaimOutcome::Applied),
        received_at: Set(at),
        first_answer: Set(Some(ClaimOutcome::Applied)),
        message_digest: Set(None),
    })
    .exec_without_returning(&t.db)
    .await
    .unwrap();
    if t.is_postgres() {
        let sql = migrations::partitioning::create_sql("event_bodies", 1, domain::retention::partitions::day_of(at));
        t.db.execute_unprepared(&sql).await.unwrap();
    }
    let row = domain::bodies::row(tenant_id, endpoint_id, event_id, at, sealed, 1).into_active_model();
    event_body::Entity::insert(row).exec_without_returning(&t.db).await.unwrap();
}
