//! Drill runs: rate-limited per principal, scoped to a clinic admin's
//! tenant, and a stalled drill delivery never holds up another tenant.

use domain::{
    DomainError,
    evidence::{
        drills::{Answer, DrillRequest, Transport, TransportError, Until},
        runs,
    },
    receiver::faults::DrillFaults,
    registry::tenants,
};
use sea_orm::EntityTrait;
use views::roles::Role;

use super::{InProcess, finish_now, run_in};
use crate::{
    db_test,
    fixtures::*,
    receiver::{created, deliver, now_s, setup},
    support::TestDb,
};

db_test!(drill_runs_are_rate_limited_per_principal, async |t: &TestDb| {
    for _ in 0..runs::RUNS_PER_WINDOW {
        let run = runs::start(&t.db, &admin()).await.unwrap();
        finish_now(t, &run.run_id).await;
    }
    let refused = runs::start(&t.db, &admin()).await.unwrap_err();
    assert_eq!(refused.code(), "drill_rate_limited", "{refused:?}");
    let wait = refused.retry_after_secs().unwrap();
    assert!(wait > 0 && wait <= runs::WINDOW_MS / 1000, "{wait}");
    // Another principal is not held back by the admin's runs, nor is the CLI.
    let other = runs::start(&t.db, &reviewer()).await.unwrap();
    finish_now(t, &other.run_id).await;
    for _ in 0..=runs::RUNS_PER_WINDOW {
        let run = runs::start(&t.db, &domain::auth::Principal::cli()).await.unwrap();
        finish_now(t, &run.run_id).await;
    }
    // Once the admin's runs leave the window, it may start again.
    use domain::entity::drill_run;
    use sea_orm::{ColumnTrait, QueryFilter};
    drill_run::Entity::update_many()
        .col_expr(drill_run::Column::StartedAt, sea_orm::sea_query::Expr::value(0i64))
        .filter(drill_run::Column::Actor.eq("admin-user"))
        .exec(&t.db)
        .await
        .unwrap();
    runs::start(&t.db, &admin()).await.unwrap();
});

db_test!(a_clinic_admin_sees_only_its_own_tenants_runs, async |t: &TestDb| {
    active_key(t).await;
    let b = tenant(t, "clinic-b").await;
    let a_id = tenants::get(&t.db, &admin(), &"clinic-a".parse().unwrap()).await.unwrap().id;
    let ca = user(Role::ClinicAdmin, Some(&a_id));
    let cb = domain::auth::Principal {
        actor: domain::auth::Actor::User { id: "id-b".into(), username: "clinic-b-user".into() },
        role: Role::ClinicAdmin,
        tenant_id: Some(b.id.clone()),
    };
    let mut ids = Vec::new();
    for p in [&cb, &admin(), &ca] {
        let run = runs::start(&t.db, p).await.unwrap();
        finish_now(t, &run.run_id).await;
        ids.push(run.run_id);
    }
    let (by_b, by_admin, by_a) = (&ids[0], &ids[1], &ids[2]);
    let listed: Vec<String> = runs::list(&t.db, &ca, 10).await.unwrap().into_iter().map(|r| r.run_id).collect();
    assert_eq!(listed, [by_a.as_str()]);
    for other in [by_b, by_admin] {
        assert!(matches!(runs::get(&t.db, &ca, other).await, Err(DomainError::NotFound)));
    }
    assert_eq!(runs::get(&t.db, &ca, by_a).await.unwrap().actor.as_deref(), Some("clinic-admin-user"));
    assert_eq!(runs::list(&t.db, &admin(), 10).await.unwrap().len(), 3);
    assert_eq!(runs::get(&t.db, &reviewer(), by_b).await.unwrap().actor.as_deref(), Some("clinic-b-user"));
});

/// In-process deliveries whose lost connection is never noticed: the
/// `lost_ack` delivery sleeps out its whole post-commit stall, and meanwhile
/// another tenant's event goes through the same receiver.
struct NeverDrops {
    inner: InProcess,
    real: crate::receiver::Setup,
    beside: std::sync::Mutex<Option<(domain::receiver::Outcome, std::time::Duration)>>,
}

impl Transport for NeverDrops {
    async fn deliver(&self, req: &DrillRequest) -> Result<Answer, TransportError> {
        self.inner.deliver(req).await
    }

    async fn deliver_then_drop<'a>(
        &'a self,
        req: &'a DrillRequest,
        committed: Until<'a>,
    ) -> Result<bool, TransportError> {
        let (r, req) = (self.inner.r.clone(), req.clone());
        let stalled = tokio::spawn(async move { run_in(&r, req).await });
        let seen = committed.await;
        let body = created("r-beside-a-drill");
        let headers =
            crate::receiver::signed(&self.real, views::scheme::Scheme::StandardWebhooks, &body, now_s(), "evt-beside");
        let started = std::time::Instant::now();
        let outcome = deliver(&self.real, &headers, &body).await;
        *self.beside.lock().unwrap() = Some((outcome, started.elapsed()));
        let _ = stalled.await;
        Ok(seen)
    }

    async fn deliver_in_killed_process(&self, req: &DrillRequest) -> Result<String, TransportError> {
        self.inner.deliver_in_killed_process(req).await
    }

    fn faults(&self) -> &DrillFaults {
        self.inner.faults()
    }
}

// `lost_ack` stalls 3 s after its commit; the stall must not hold the
// receiver's write turn (SQLite), or every tenant waits it out.
db_test!(a_stalled_drill_delivery_never_holds_up_another_tenant, async |t: &TestDb| {
    let real = setup(t, views::scheme::Scheme::StandardWebhooks, None).await;
    let inner = InProcess { db: t.db.clone(), vault: t.vault.clone(), r: real.r.clone() };
    let transport = NeverDrops { inner, real, beside: std::sync::Mutex::new(None) };
    let run = runs::run(&t.db, &t.vault, &admin(), &transport).await.unwrap();
    assert_eq!(run.passed, Some(true), "{:?}", run.drills.iter().flat_map(|d| d.failures.clone()).collect::<Vec<_>>());
    let (outcome, took) = transport.beside.lock().unwrap().take().expect("a delivery beside the stalled one");
    assert!(matches!(outcome, domain::receiver::Outcome::Applied { .. }), "{outcome:?}");
    assert!(took < std::time::Duration::from_secs(1), "another tenant's event waited {took:?} for a drill's stall");
});
