//! Prometheus metrics: webhook outcomes by tenant, endpoint, outcome and
//! reason; latency; quarantine size and outbox backlog; and what the alert
//! rules in `deploy/prometheus/alerts.yml` need (the build, keys in overlap,
//! claim rollbacks, `/hooks` load, the audit checkpoint, drills, sign-offs).

use std::time::Duration;

use domain::receiver::{Outcome, cache::EndpointCtx};
use prometheus::{
    Encoder, Gauge, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder};
use views::{
    decision::Decision, evidence::DrillStatus, keys::KeyStatus, outbox::OutboxStatus, quarantine::QuarantineStatus,
};

/// How an outbox send attempt ended (`signet_outbox_send_attempts_total`'s
/// `result`).
#[derive(Debug, Clone, Copy)]
pub enum SendResult {
    Delivered,
    Failed,
    /// The relay's address was refused before any connection (`egress`).
    Refused,
}

pub struct Metrics {
    registry: Registry,
    webhooks: IntCounterVec,
    latency: HistogramVec,
    quarantine_open: IntGauge,
    outbox_pending: IntGauge,
    outbox_oldest_age: IntGauge,
    purged: IntCounterVec,
    purge_runs: IntCounterVec,
    purge_last_success: IntGauge,
    partitions_dropped: IntCounter,
    partition_upkeep_runs: IntCounterVec,
    claim_batches: IntCounter,
    claim_batched_events: IntCounter,
    delivery_log_written: IntCounter,
    delivery_log_dropped: IntCounter,
    claim_retries: IntCounter,
    key_failures: IntCounterVec,
    outbox_attempts: IntCounterVec,
    outbox_dead: IntCounter,
    drill_webhooks: IntCounterVec,
    drill_foreign: IntCounterVec,
    test_deliveries: IntCounterVec,
    shed: IntCounterVec,
    kek_seals: IntGaugeVec,
    quarantine_oldest_open_age: IntGauge,
    claim_rollbacks: IntCounterVec,
    key_overlap_end: IntGaugeVec,
    key_overlap_last_verified: IntGaugeVec,
    hooks_in_flight: IntGauge,
    hooks_overloaded: IntCounter,
    audit_checkpoint: IntGauge,
    audit_checkpoint_interval: IntGauge,
    purge_interval: IntGauge,
    drills_last_run: IntGaugeVec,
    evidence_last_signoff: IntGaugeVec,
    clock_offset: Gauge,
}

/// Drill results exported by `signet_drills_last_run_timestamp_seconds`.
const DRILL_RESULTS: [&str; 3] = ["passed", "failed", "interrupted"];

impl Metrics {
    pub fn new() -> Result<Metrics, prometheus::Error> {
        let registry = Registry::new();
        let webhooks = IntCounterVec::new(
            Opts::new("signet_webhooks_total", "Webhook requests by tenant, endpoint, outcome and reason"),
            &["tenant", "endpoint", "outcome", "reason"],
        )?;
        let latency = HistogramVec::new(
            HistogramOpts::new("signet_webhook_duration_seconds", "Time from request to answer")
                .buckets(vec![0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5]),
            &["outcome"],
        )?;
        let quarantine_open = IntGauge::new("signet_quarantine_open", "Quarantined events awaiting triage")?;
        let outbox_pending = IntGauge::new("signet_outbox_pending", "Outbox intents not yet delivered")?;
        let outbox_oldest_age =
            IntGauge::new("signet_outbox_oldest_pending_age_seconds", "Age of the oldest pending outbox intent")?;
        let purged = IntCounterVec::new(
            Opts::new("signet_retention_purged_total", "Rows removed or cleared by the retention purge"),
            &["kind"],
        )?;
        let purge_runs = IntCounterVec::new(
            Opts::new("signet_retention_purge_runs_total", "Retention purge runs by result"),
            &["result"],
        )?;
        let purge_last_success = IntGauge::new(
            "signet_retention_last_success_timestamp_seconds",
            "When the retention purge last completed (Unix time)",
        )?;
        let partitions_dropped = IntCounter::new(
            "signet_retention_partitions_dropped_total",
            "Daily partitions dropped whole by the retention purge (PostgreSQL)",
        )?;
        let partition_upkeep_runs = IntCounterVec::new(
            Opts::new("signet_partition_upkeep_runs_total", "Partition upkeep runs by result (PostgreSQL)"),
            &["result"],
        )?;
        for result in ["ok", "error"] {
            partition_upkeep_runs.with_label_values(&[result]);
        }
        let claim_batches =
            IntCounter::new("signet_claim_batches_total", "Shared claim transactions committed (group commit)")?;
        let delivery_log_written =
            IntCounter::new("signet_delivery_log_written_total", "Delivery-log rows written (one per answer)")?;
        let delivery_log_dropped = IntCounter::new(
            "signet_delivery_log_dropped_total",
            "Delivery-log rows dropped: the queue was full or the write failed",
        )?;
        let claim_batched_events = IntCounter::new(
            "signet_claim_batched_events_total",
            "Events claimed in shared transactions; divided by batches, events per commit",
        )?;
        let drill_webhooks = IntCounterVec::new(
            Opts::new(
                "signet_drill_webhooks_total",
                "Deliveries made by the drills (synthetic tenant), by outcome; never counted in signet_webhooks_total",
            ),
            &["outcome"],
        )?;
        let test_deliveries = IntCounterVec::new(
            Opts::new(
                "signet_test_deliveries_total",
                "Test deliveries sent from the console or the API, by outcome; never counted in signet_webhooks_total",
            ),
            &["outcome"],
        )?;
        let drill_foreign = IntCounterVec::new(
            Opts::new(
                "signet_drill_foreign_requests_total",
                "Requests to /hooks/_drill… that the drill runner did not send, by outcome",
            ),
            &["outcome"],
        )?;
        let shed = IntCounterVec::new(
            Opts::new(
                "signet_webhooks_shed_total",
                "Webhooks answered 503 overloaded unprocessed, by the limit reached (in_flight, body_bytes)",
            ),
            &["limit"],
        )?;
        let kek_seals = IntGaugeVec::new(
            Opts::new(
                "signet_kek_seals",
                "Values sealed under each KEK version, counted ahead (never under); rotate well before 2^32",
            ),
            &["version"],
        )?;
        let claim_retries = IntCounter::new(
            "signet_claim_retries_total",
            "Claim attempts repeated after a transient failure or a lost database connection",
        )?;
        // One series per key that ever failed: bounded by the keys an
        // endpoint has accepted, never by what requests say.
        let key_failures = IntCounterVec::new(
            Opts::new(
                "signet_key_verification_failures_total",
                "Verification failures counted under a key: the one named (signet-key-id) or matched, \
                 else the endpoint's last to verify",
            ),
            &["tenant", "endpoint", "key_id", "reason"],
        )?;
        let outbox_attempts = IntCounterVec::new(
            Opts::new("signet_outbox_send_attempts_total", "Outbox send attempts by result"),
            &["result"],
        )?;
        let outbox_dead = IntCounter::new("signet_outbox_dead_total", "Outbox intents that went dead (given up on)")?;
        let build_info = IntGaugeVec::new(
            Opts::new("signet_build_info", "Always 1: the running build's version and git commit"),
            &["version", "commit"],
        )?;
        build_info.with_label_values(&[env!("CARGO_PKG_VERSION"), build_commit()]).set(1);
        let quarantine_oldest_open_age = IntGauge::new(
            "signet_quarantine_oldest_open_age_seconds",
            "Age of the oldest quarantined event awaiting triage (0: none)",
        )?;
        let claim_rollbacks = IntCounterVec::new(
            Opts::new(
                "signet_claim_rollbacks_total",
                "Claim transactions that ended without a commit, by reason (replay, refused, quarantine, error)",
            ),
            &["reason"],
        )?;
        for reason in ["replay", "refused", "quarantine", "error"] {
            claim_rollbacks.with_label_values(&[reason]);
        }
        let key_overlap_end = IntGaugeVec::new(
            Opts::new(
                "signet_key_overlap_end_timestamp_seconds",
                "When a rotated-out key (in its overlap) stops verifying (Unix time)",
            ),
            &["tenant", "endpoint", "key_id"],
        )?;
        let key_overlap_last_verified = IntGaugeVec::new(
            Opts::new(
                "signet_key_overlap_last_verified_timestamp_seconds",
                "When a key in its overlap last verified a delivery (Unix time; 0: never)",
            ),
            &["tenant", "endpoint", "key_id"],
        )?;
        let hooks_in_flight = IntGauge::new("signet_hooks_in_flight", "Webhook deliveries being processed now")?;
        let hooks_overloaded = IntCounter::new(
            "signet_hooks_overloaded_total",
            "Webhooks answered 503 overloaded (any limit; by limit: signet_webhooks_shed_total)",
        )?;
        let audit_checkpoint = IntGauge::new(
            "signet_audit_checkpoint_timestamp_seconds",
            "When this process last wrote a signed audit checkpoint (Unix time; 0: not yet)",
        )?;
        let audit_checkpoint_interval = IntGauge::new(
            "signet_audit_checkpoint_interval_seconds",
            "The longest wait between audit checkpoints (SIGNET_AUDIT_CHECKPOINT_SECS)",
        )?;
        let purge_interval = IntGauge::new(
            "signet_retention_purge_interval_seconds",
            "Seconds between retention purges (SIGNET_PURGE_INTERVAL_SECS; 0: never)",
        )?;
        let drills_last_run = IntGaugeVec::new(
            Opts::new(
                "signet_drills_last_run_timestamp_seconds",
                "When the last drill run on this build's version ended, by result (Unix time; 0: none)",
            ),
            &["result"],
        )?;
        let evidence_last_signoff = IntGaugeVec::new(
            Opts::new(
                "signet_evidence_last_signoff_timestamp_seconds",
                "When the last evidence sign-off was recorded, by decision (Unix time; 0: none)",
            ),
            &["decision"],
        )?;
        for g in [&build_info, &key_overlap_end, &key_overlap_last_verified, &drills_last_run, &evidence_last_signoff] {
            registry.register(Box::new(g.clone()))?;
        }
        for g in [&quarantine_oldest_open_age, &hooks_in_flight, &audit_checkpoint, &audit_checkpoint_interval] {
            registry.register(Box::new(g.clone()))?;
        }
        registry.register(Box::new(purge_interval.clone()))?;
        let clock_offset = Gauge::new(
            "signet_clock_offset_seconds",
            "How far this process's clock is ahead of the database's (negative: behind), measured every minute",
        )?;
        registry.register(Box::new(clock_offset.clone()))?;
        registry.register(Box::new(claim_rollbacks.clone()))?;
        registry.register(Box::new(hooks_overloaded.clone()))?;
        registry.register(Box::new(claim_retries.clone()))?;
        registry.register(Box::new(key_failures.clone()))?;
        registry.register(Box::new(outbox_attempts.clone()))?;
        registry.register(Box::new(outbox_dead.clone()))?;
        registry.register(Box::new(drill_webhooks.clone()))?;
        registry.register(Box::new(drill_foreign.clone()))?;
        registry.register(Box::new(test_deliveries.clone()))?;
        registry.register(Box::new(shed.clone()))?;
        registry.register(Box::new(kek_seals.clone()))?;
        registry.register(Box::new(claim_batches.clone()))?;
        registry.register(Box::new(claim_batched_events.clone()))?;
        registry.register(Box::new(delivery_log_written.clone()))?;
        registry.register(Box::new(delivery_log_dropped.clone()))?;
        registry.register(Box::new(purged.clone()))?;
        registry.register(Box::new(purge_runs.clone()))?;
        registry.register(Box::new(purge_last_success.clone()))?;
        registry.register(Box::new(partitions_dropped.clone()))?;
        registry.register(Box::new(partition_upkeep_runs.clone()))?;
        registry.register(Box::new(webhooks.clone()))?;
        registry.register(Box::new(latency.clone()))?;
        registry.register(Box::new(quarantine_open.clone()))?;
        registry.register(Box::new(outbox_pending.clone()))?;
        registry.register(Box::new(outbox_oldest_age.clone()))?;
        Ok(Metrics {
            registry,
            webhooks,
            latency,
            quarantine_open,
            outbox_pending,
            outbox_oldest_age,
            purged,
            purge_runs,
            purge_last_success,
            partitions_dropped,
            partition_upkeep_runs,
            claim_batches,
            claim_batched_events,
            delivery_log_written,
            delivery_log_dropped,
            claim_retries,
            key_failures,
            outbox_attempts,
            outbox_dead,
            drill_webhooks,
            drill_foreign,
            test_deliveries,
            shed,
            kek_seals,
            quarantine_oldest_open_age,
            claim_rollbacks,
            key_overlap_end,
            key_overlap_last_verified,
            hooks_in_flight,
            hooks_overloaded,
            audit_checkpoint,
            audit_checkpoint_interval,
            purge_interval,
            drills_last_run,
            evidence_last_signoff,
            clock_offset,
        })
    }

    /// The configured intervals the alert rules compare against.
    pub fn set_intervals(&self, purge_secs: u64, audit_checkpoint_secs: u64) {
        self.purge_interval.set(purge_secs as i64);
        self.audit_checkpoint_interval.set(audit_checkpoint_secs as i64);
    }

    /// An audit checkpoint was written at `at` (Unix seconds).
    pub fn audit_checkpoint_written(&self, at: i64) {
        self.audit_checkpoint.set(at);
    }

    /// The latest `domain::clock_offset::measure`, in seconds.
    pub fn clock_offset(&self, offset_ms: i64) {
        self.clock_offset.set(offset_ms as f64 / 1000.0);
    }

    /// `/hooks` deliveries being processed (see `http::limits`).
    pub fn hooks_in_flight(&self) -> &IntGauge {
        &self.hooks_in_flight
    }

    /// Counts one request. Unknown paths share one label value so probing
    /// random URLs cannot blow up the label set. `key_id` is the key a
    /// failed verification is counted under (only ever one of the
    /// endpoint's accepted keys).
    pub fn observe(&self, ep: Option<&EndpointCtx>, outcome: &Outcome, key_id: Option<&str>, elapsed: Duration) {
        let (tenant, endpoint) =
            ep.map(|e| (e.tenant_slug.as_str(), e.endpoint_slug.as_str())).unwrap_or(("_unknown", "_unknown"));
        let (label, reason) = outcome.labels();
        self.webhooks.with_label_values(&[tenant, endpoint, label, &reason]).inc();
        self.latency.with_label_values(&[label]).observe(elapsed.as_secs_f64());
        // The receiver names only a key the endpoint accepts (at most a few
        // per endpoint), never one a request made up.
        if let (Some(_), Some(key), "verification_failed") = (ep, key_id, label) {
            self.key_failures.with_label_values(&[tenant, endpoint, key, &reason]).inc();
        }
    }

    /// One outbox send attempt by its result; `dead` when it was the last one.
    pub fn observe_send(&self, result: SendResult, dead: bool) {
        let label = match result {
            SendResult::Delivered => "delivered",
            SendResult::Failed => "failed",
            SendResult::Refused => "refused",
        };
        self.outbox_attempts.with_label_values(&[label]).inc();
        if dead {
            self.outbox_dead.inc();
        }
    }

    /// Counts one drill delivery (see `http::hooks`).
    pub fn observe_drill(&self, outcome: &Outcome) {
        self.drill_webhooks.with_label_values(&[outcome.labels().0]).inc();
    }

    /// Counts one `/hooks/_drill…` request the drill runner did not send.
    pub fn observe_drill_foreign(&self, outcome: &Outcome) {
        self.drill_foreign.with_label_values(&[outcome.labels().0]).inc();
    }

    /// Counts one webhook answered 503 `overloaded` by `limit`.
    pub fn observe_shed(&self, limit: &str) {
        self.shed.with_label_values(&[limit]).inc();
        self.hooks_overloaded.inc();
    }

    /// Refreshes the gauges from the database (small tables, indexed).
    pub async fn refresh_gauges(&self, db: &DatabaseConnection) -> Result<(), sea_orm::DbErr> {
        use domain::entity::{outbox_intent, quarantine_entry};
        use domain::registry::tenants::not_synthetic_tenant;
        let open = quarantine_entry::Entity::find()
            .filter(quarantine_entry::Column::Status.eq(QuarantineStatus::Open))
            .filter(not_synthetic_tenant(quarantine_entry::Column::TenantId))
            .count(db)
            .await?;
        // Undelivered: waiting, or leased to a worker that is sending it.
        let pending_q = outbox_intent::Entity::find()
            .filter(outbox_intent::Column::Status.is_in([OutboxStatus::Pending, OutboxStatus::Sending]))
            .filter(not_synthetic_tenant(outbox_intent::Column::TenantId));
        let pending = pending_q.clone().count(db).await?;
        let oldest = pending_q.order_by_asc(outbox_intent::Column::CreatedAt).one(db).await?;
        self.quarantine_open.set(open as i64);
        self.outbox_pending.set(pending as i64);
        self.outbox_oldest_age.set(oldest.map(|o| (domain::clock::now_ms() - o.created_at) / 1000).unwrap_or(0));
        let versions = domain::entity::kek_version::Entity::find().all(db).await?;
        self.kek_seals.reset();
        for v in versions {
            self.kek_seals.with_label_values(&[&v.version.to_string()]).set(v.seals);
        }
        let now = domain::clock::now_ms();
        let oldest_open = quarantine_entry::Entity::find()
            .filter(quarantine_entry::Column::Status.eq(QuarantineStatus::Open))
            .filter(not_synthetic_tenant(quarantine_entry::Column::TenantId))
            .order_by_asc(quarantine_entry::Column::CreatedAt)
            .one(db)
            .await?;
        self.quarantine_oldest_open_age.set(oldest_open.map_or(0, |q| (now - q.created_at).max(0) / 1000));
        self.refresh_overlaps(db, now).await?;
        self.refresh_evidence(db).await
    }

    /// One series per key in its overlap (at most a few per endpoint); keys
    /// whose overlap ended leave the gauge.
    async fn refresh_overlaps(&self, db: &DatabaseConnection, now: i64) -> Result<(), sea_orm::DbErr> {
        use std::collections::HashMap;

        use domain::entity::{endpoint, signing_key, tenant};
        let keys = signing_key::Entity::find()
            .filter(signing_key::Column::Status.eq(KeyStatus::Retiring))
            .filter(signing_key::Column::ExpiresAt.gt(now))
            .filter(domain::registry::tenants::not_synthetic_tenant(signing_key::Column::TenantId))
            .all(db)
            .await?;
        let tenants: HashMap<String, String> = tenant::Entity::find()
            .filter(tenant::Column::Id.is_in(keys.iter().map(|k| k.tenant_id.clone())))
            .all(db)
            .await?
            .into_iter()
            .map(|t| (t.id, t.slug))
            .collect();
        let endpoints: HashMap<String, String> = endpoint::Entity::find()
            .filter(endpoint::Column::Id.is_in(keys.iter().map(|k| k.endpoint_id.clone())))
            .all(db)
            .await?
            .into_iter()
            .map(|e| (e.id, e.slug))
            .collect();
        self.key_overlap_end.reset();
        self.key_overlap_last_verified.reset();
        for k in keys {
            let (Some(t), Some(e), Some(end)) =
                (tenants.get(&k.tenant_id), endpoints.get(&k.endpoint_id), k.expires_at)
            else {
                continue;
            };
            let labels = [t.as_str(), e.as_str(), k.id.as_str()];
            self.key_overlap_end.with_label_values(&labels).set(end / 1000);
            self.key_overlap_last_verified.with_label_values(&labels).set(k.last_verified_at.unwrap_or(0) / 1000);
        }
        Ok(())
    }

    /// The last drill run on this version by result, and the last sign-off
    /// by decision (0 when there is none, so the series always exists).
    async fn refresh_evidence(&self, db: &DatabaseConnection) -> Result<(), sea_orm::DbErr> {
        use domain::entity::{drill_run, evidence_signoff};
        let runs = drill_run::Entity::find().filter(drill_run::Column::Version.eq(env!("CARGO_PKG_VERSION")));
        for result in DRILL_RESULTS {
            let run = match result {
                "interrupted" => runs.clone().filter(drill_run::Column::Status.eq(DrillStatus::Interrupted)),
                _ => runs
                    .clone()
                    .filter(drill_run::Column::Status.eq(DrillStatus::Finished))
                    .filter(drill_run::Column::Passed.eq(result == "passed")),
            };
            let last = run.order_by_desc(drill_run::Column::UpdatedAt).one(db).await?;
            let at = last.map_or(0, |r| r.finished_at.unwrap_or(r.updated_at) / 1000);
            self.drills_last_run.with_label_values(&[result]).set(at);
        }
        // Every decision gets its series (0 until one is recorded).
        for &decision in Decision::ALL {
            let last = evidence_signoff::Entity::find()
                .filter(evidence_signoff::Column::Decision.eq(decision))
                .order_by_desc(evidence_signoff::Column::At)
                .one(db)
                .await?;
            self.evidence_last_signoff.with_label_values(&[decision.as_str()]).set(last.map_or(0, |s| s.at / 1000));
        }
        Ok(())
    }

    pub fn record_purge(&self, r: &domain::retention::purge::PurgeReport) {
        for (kind, n) in [
            ("claims", r.claims_deleted),
            ("quarantine", r.quarantine_deleted),
            ("bodies", r.bodies_cleared),
            ("replay", r.replay_deleted),
            ("minute_rollups", r.minute_rollups_deleted),
            ("hourly_rollups", r.hourly_rollups_deleted),
            ("deliveries", r.deliveries_deleted),
        ] {
            self.purged.with_label_values(&[kind]).inc_by(n);
        }
        self.partitions_dropped.inc_by(r.partitions_dropped);
        self.purge_runs.with_label_values(&["ok"]).inc();
        self.purge_last_success.set(domain::clock::now_ms() / 1000);
    }

    pub fn record_partition_upkeep(&self, ok: bool) {
        self.partition_upkeep_runs.with_label_values(&[if ok { "ok" } else { "error" }]).inc();
    }

    pub fn record_purge_failure(&self) {
        self.purge_runs.with_label_values(&["error"]).inc();
    }

    /// Brings the group-commit counters up to the receiver's own (kept in
    /// the domain crate, which has no Prometheus in it).
    pub fn sync_batches(&self, stats: &domain::receiver::BatchStats) {
        use std::sync::atomic::Ordering::Relaxed;
        for (counter, total) in [(&self.claim_batches, &stats.batches), (&self.claim_batched_events, &stats.events)] {
            counter.inc_by(total.load(Relaxed).saturating_sub(counter.get()));
        }
    }

    /// Brings the delivery-log counters up to the receiver's own.
    pub fn sync_delivery_log(&self, stats: &domain::receiver::DeliveryLogStats) {
        use std::sync::atomic::Ordering::Relaxed;
        for (counter, total) in
            [(&self.delivery_log_written, &stats.written), (&self.delivery_log_dropped, &stats.dropped)]
        {
            counter.inc_by(total.load(Relaxed).saturating_sub(counter.get()));
        }
    }

    /// Brings the claim-retry counter up to the receiver's own.
    pub fn sync_retries(&self, total: u64) {
        self.claim_retries.inc_by(total.saturating_sub(self.claim_retries.get()));
    }

    /// Brings the claim-rollback counters up to the receiver's own.
    pub fn sync_rollbacks(&self, rollbacks: &domain::receiver::Rollbacks) {
        for (reason, total) in rollbacks.totals() {
            let counter = self.claim_rollbacks.with_label_values(&[reason]);
            counter.inc_by(total.saturating_sub(counter.get()));
        }
    }

    /// Brings the test-delivery counters up to the receiver's own.
    pub fn sync_test_deliveries(&self, tests: &domain::receiver::TestDeliveries) {
        for (outcome, total) in tests.totals() {
            let counter = self.test_deliveries.with_label_values(&[outcome]);
            counter.inc_by(total.saturating_sub(counter.get()));
        }
    }

    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut buf) {
            tracing::error!(error = %e, "encoding metrics failed");
        }
        String::from_utf8(buf).unwrap_or_default()
    }
}

/// The git commit this binary was built from (`domain/build.rs`; `unknown`
/// outside git): the same one the evidence bundle's `build` names.
fn build_commit() -> &'static str {
    domain::evidence::identity::COMMIT
}
