//! `evidence.json`: everything a reviewer signs off on, read live from the
//! deployment at the moment of export (docs/contract.md §5). Nothing here is
//! written by hand; [`Finding`]s are computed from the sections.

use std::collections::BTreeMap;

use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder};

use super::{
    catalog::{self},
    cohort,
    drills::DRILL_NAMES,
    durability, files,
    identity::{self, BuildEvidence},
    runs::{self},
};
use crate::{
    audit::{self},
    auth::{Permission, Principal, Role, Scope, role_allows},
    clock,
    entity::{
        api_token, audit_entry, endpoint, kek_version, key_approval, key_failure_rollup, key_use_rollup, signing_key,
        tenant, user,
    },
    error::DomainResult,
    registry::{hmac_profile::HmacProfile, keys, tenants},
    retention, retry_policy, service_keys,
    stats::{self, Window},
    vault::{SEALS_WARN_AT, Vault},
};

/// Live keys older than this are flagged for rotation.
pub const MAX_KEY_AGE_DAYS: i64 = 90;
/// A drill run older than this no longer counts as current evidence.
pub const DRILL_STALE_DAYS: i64 = 7;
const DAY_MS: i64 = 86_400_000;

pub use views::evidence::{
    AuditEvidence, CredentialRow, DatabaseEvidence, Deployment, DrillEvidence, Evidence, FileEvidence, Finding, Holder,
    KekSeals, KeyVerification, MetricsEvidence, RetentionEvidence, RetentionRow, RetryPolicyEvidence, RoleAccess,
    SignedCheckpoint,
};

/// Hours of per-key verification counts a bundle shows: the metrics
/// section's window (`Window::Week`, 168 hourly buckets).
const VERIFICATION_WINDOW_HOURS: i64 = crate::stats::WEEK_HOURS;

fn finding(severity: &str, id: &str, subject: impl Into<String>, message: impl Into<String>) -> Finding {
    Finding { severity: severity.into(), id: id.into(), subject: subject.into(), message: message.into() }
}

/// The tenant a bundle is limited to: the one asked for, or a clinic
/// admin's own.
async fn scope_tenant(
    db: &DatabaseConnection,
    principal: &Principal,
    slug: Option<&str>,
) -> DomainResult<Option<tenant::Model>> {
    Ok(match (slug.filter(|s| !s.is_empty()), principal.tenant_filter()) {
        (Some(slug), _) => Some(tenants::find(db, principal, slug).await?),
        (None, Some(own)) => {
            Some(tenant::Entity::find_by_id(own.to_owned()).one(db).await?.ok_or(crate::DomainError::NotFound)?)
        }
        (None, None) => None,
    })
}

/// Reads everything for the bundle. `tenant`: limit every section to it.
pub async fn collect(
    db: &DatabaseConnection,
    vault: &Vault,
    principal: &Principal,
    tenant: Option<&str>,
) -> DomainResult<Evidence> {
    let scope = scope_tenant(db, principal, tenant).await?;
    principal.authorize(Permission::ExportEvidence, scope.as_ref().map_or(Scope::Global, |t| Scope::Tenant(&t.id)))?;
    let now = clock::now_ms();
    let signer = service_keys::evidence_signer(db, vault).await?;
    let tenant_slug = scope.as_ref().map(|t| t.slug.clone());
    let build = identity::current().await;
    let database = durability::read(db).await?;
    let mut files = files::read(db, vault.files()).await?;
    if scope.is_some() {
        // A tenant's bundle shows the modes, not where the host keeps things.
        for f in files.iter_mut().filter(|f| f.path.is_some()) {
            f.path = None;
            f.note = Some("path shown in deployment-wide bundles".into());
        }
    }

    let credentials = credentials(db, principal, tenant_slug.as_deref(), now).await?;
    let access = access(db, scope.as_ref()).await?;
    let constraints = catalog::constraints(db).await?;
    let drills = drill_evidence(db, scope.as_ref(), &build, now).await?;
    let retention = retention_evidence(db, principal, scope.as_ref()).await?;
    let retry_policy = retry_evidence(db, principal, scope.as_ref(), &access).await?;
    let cohort_check = cohort::check(db, scope.as_ref()).await?;
    let metrics = metrics_evidence(db, principal, tenant_slug.as_deref()).await?;
    // Exports are POSTs: the mark may move (the next export starts there).
    let chain = audit::verify_new(db, true).await?;
    let cp = audit::checkpoint(db).await?;
    let audit = AuditEvidence {
        chain_verified: chain.ok,
        entries: chain.entries,
        head_seq: chain.head_seq,
        head_hash: chain.head_hash,
        keyed_since_seq: chain.keyed_since_seq,
        first_broken: chain.first_broken,
        verified_from_seq: chain.verified_from_seq,
        checkpoint: SignedCheckpoint {
            signature: signer.sign_base64(&cp.signed_bytes()),
            public_key: signer.public_key_base64(),
            checkpoint: cp,
        },
    };
    let mut e = Evidence {
        format: "signet-evidence/1".into(),
        generated_at: clock::rfc3339(now),
        deployment: Deployment {
            version: build.version.clone(),
            engine: database.engine.clone(),
            schema_version: database.schema_version.clone(),
            evidence_public_key: signer.public_key_base64(),
            kek_seals: kek_seals(db).await?,
        },
        build,
        database,
        files,
        tenant: tenant_slug,
        credentials,
        access,
        constraints,
        drills,
        retention,
        retry_policy,
        cohort_check,
        metrics,
        audit,
        findings: Vec::new(),
    };
    e.findings = findings(&e);
    Ok(e)
}

async fn kek_seals(db: &DatabaseConnection) -> DomainResult<Vec<KekSeals>> {
    let versions = kek_version::Entity::find().order_by_asc(kek_version::Column::Version).all(db).await?;
    let newest = versions.last().map(|v| v.version);
    Ok(versions
        .into_iter()
        .map(|v| KekSeals { version: v.version as u32, seals: v.seals, newest: Some(v.version) == newest })
        .collect())
}

async fn credentials(
    db: &DatabaseConnection,
    principal: &Principal,
    tenant: Option<&str>,
    now: i64,
) -> DomainResult<Vec<CredentialRow>> {
    let views =
        keys::list(db, principal, &keys::KeyFilter { tenant: tenant.map(str::to_owned), ..Default::default() }).await?;
    let ids: Vec<String> = views.iter().map(|k| k.key_id.clone()).collect();
    let rows: BTreeMap<String, signing_key::Model> = signing_key::Entity::find()
        .filter(signing_key::Column::Id.is_in(ids.clone()))
        .all(db)
        .await?
        .into_iter()
        .map(|k| (k.id.clone(), k))
        .collect();
    // An `hmac` endpoint's keys name its profile beside the scheme.
    let endpoint_ids: Vec<String> = rows.values().map(|k| k.endpoint_id.clone()).collect();
    let profiles: BTreeMap<String, String> = endpoint::Entity::find()
        .filter(endpoint::Column::Id.is_in(endpoint_ids))
        .filter(endpoint::Column::Scheme.eq("hmac"))
        .all(db)
        .await?
        .into_iter()
        .map(|e| {
            let profile = e.hmac_profile.as_deref().and_then(|p| serde_json::from_str::<HmacProfile>(p).ok());
            (e.id, profile.map_or_else(|| "hmac (profile unreadable)".to_owned(), |p| p.describe()))
        })
        .collect();
    // The approval in force: the newest `approved` decision per key.
    let mut approvals: BTreeMap<String, key_approval::Model> = BTreeMap::new();
    for a in key_approval::Entity::find()
        .filter(key_approval::Column::KeyId.is_in(ids))
        .filter(key_approval::Column::Decision.eq("approved"))
        .order_by_asc(key_approval::Column::DecidedAt)
        .all(db)
        .await?
    {
        approvals.insert(a.key_id.clone(), a);
    }
    let mut verification = verification_counts(db, &ids_in(&rows), now).await?;
    let mut out: Vec<CredentialRow> = views
        .into_iter()
        .filter_map(|k| {
            let row = rows.get(&k.key_id)?;
            let approval = approvals.get(&k.key_id);
            let mut verified = verification.remove(&k.key_id).unwrap_or_default();
            verified.last_failure_at = clock::rfc3339_opt(row.last_failure_at);
            verified.last_failure_reason = row.last_failure_reason.clone();
            Some(CredentialRow {
                tenant: k.tenant,
                endpoint: k.endpoint,
                status: k.status.as_str().to_owned(),
                scheme: profiles.get(&row.endpoint_id).cloned().unwrap_or_else(|| k.scheme.as_str().to_owned()),
                event_types: k.event_types,
                owner: k.owner,
                rotation_owner: k.rotation_owner,
                approved_by: approval.map(|a| a.reviewer.clone()),
                approved_at: approval.map(|a| clock::rfc3339(a.decided_at)),
                scope_hash: k.scope_hash,
                scope_approved: k.scope_approved,
                kek_version: row.kek_version,
                // A sealed private key (a pair Signet generated) can sign.
                can_sign: k.credential.can_sign() || !row.secret_ciphertext.is_empty(),
                credential: k.credential.as_str().to_owned(),
                created_at: k.created_at,
                age_days: (now - row.created_at) / DAY_MS,
                last_verified_at: k.last_verified_at,
                overlap_ends_at: if row.status == "retiring" { k.expires_at } else { None },
                verification: verified,
                key_id: k.key_id,
            })
        })
        .collect();
    out.sort_by(|a, b| {
        (&a.tenant, &a.endpoint, &a.created_at, &a.key_id).cmp(&(&b.tenant, &b.endpoint, &b.created_at, &b.key_id))
    });
    Ok(out)
}

fn ids_in(rows: &BTreeMap<String, signing_key::Model>) -> Vec<String> {
    rows.keys().cloned().collect()
}

/// Each key's successes and failures (by reason) over the last
/// [`VERIFICATION_WINDOW_HOURS`], summed in the database from the hourly
/// per-key rollups.
async fn verification_counts(
    db: &DatabaseConnection,
    ids: &[String],
    now: i64,
) -> DomainResult<BTreeMap<String, KeyVerification>> {
    use sea_orm::{QuerySelect, sea_query::Expr};
    let from_hour = now / 3_600_000 - VERIFICATION_WINDOW_HOURS + 1;
    let mut out: BTreeMap<String, KeyVerification> = BTreeMap::new();
    let uses: Vec<(String, i64)> = key_use_rollup::Entity::find()
        .select_only()
        .column(key_use_rollup::Column::KeyId)
        .column_as(Expr::cust("CAST(SUM(count) AS BIGINT)"), "n")
        .filter(key_use_rollup::Column::KeyId.is_in(ids.to_vec()))
        .filter(key_use_rollup::Column::Hour.gte(from_hour))
        .group_by(key_use_rollup::Column::KeyId)
        .into_tuple()
        .all(db)
        .await?;
    for (key, n) in uses {
        out.entry(key).or_default().successes = n;
    }
    let failures: Vec<(String, String, i64)> = key_failure_rollup::Entity::find()
        .select_only()
        .column(key_failure_rollup::Column::KeyId)
        .column(key_failure_rollup::Column::Reason)
        .column_as(Expr::cust("CAST(SUM(count) AS BIGINT)"), "n")
        .filter(key_failure_rollup::Column::KeyId.is_in(ids.to_vec()))
        .filter(key_failure_rollup::Column::Hour.gte(from_hour))
        .group_by(key_failure_rollup::Column::KeyId)
        .group_by(key_failure_rollup::Column::Reason)
        .into_tuple()
        .all(db)
        .await?;
    for (key, reason, count) in failures {
        let v = out.entry(key).or_default();
        v.failures += count;
        v.failures_by_reason.push(stats::ReasonCount { reason, count });
    }
    for v in out.values_mut() {
        v.failures_by_reason.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.reason.cmp(&b.reason)));
    }
    Ok(out)
}

fn permissions_of(role: Role) -> Vec<String> {
    Permission::ALL.iter().filter(|p| role_allows(role, **p)).map(|p| p.as_str().to_owned()).collect()
}

/// Each role's permissions and holders. In a tenant's bundle only that
/// tenant's clinic admins are named; holders of deployment-wide roles (users
/// and tokens with no tenant) are counted, so a clinic admin never learns
/// the names of the deployment's staff or tokens.
async fn access(db: &DatabaseConnection, scope: Option<&tenant::Model>) -> DomainResult<Vec<RoleAccess>> {
    let slugs: BTreeMap<String, String> =
        tenant::Entity::find().all(db).await?.into_iter().map(|t| (t.id, t.slug)).collect();
    #[derive(PartialEq)]
    enum Shown {
        Named,
        Counted,
        Hidden,
    }
    let shown = |tenant_id: &Option<String>| match (scope, tenant_id) {
        (None, _) => Shown::Named,
        (Some(_), None) => Shown::Counted,
        (Some(s), Some(t)) if &s.id == t => Shown::Named,
        (Some(_), Some(_)) => Shown::Hidden,
    };
    let mut roles: BTreeMap<String, RoleAccess> = Role::ALL
        .iter()
        .map(|r| {
            let a = RoleAccess {
                role: r.as_str().into(),
                permissions: permissions_of(*r),
                holders: Vec::new(),
                user_count: 0,
                token_count: 0,
            };
            (r.as_str().to_owned(), a)
        })
        .collect();
    for u in user::Entity::find()
        .filter(user::Column::Disabled.eq(false))
        .order_by_asc(user::Column::Username)
        .all(db)
        .await?
    {
        let (show, Some(a)) = (shown(&u.tenant_id), roles.get_mut(&u.role)) else { continue };
        if show == Shown::Hidden {
            continue;
        }
        a.user_count += 1;
        if show == Shown::Named {
            let tenant = u.tenant_id.as_ref().and_then(|t| slugs.get(t).cloned());
            a.holders.push(Holder { kind: "user".into(), name: u.username, tenant });
        }
    }
    for t in api_token::Entity::find()
        .filter(api_token::Column::RevokedAt.is_null())
        .order_by_asc(api_token::Column::Name)
        .all(db)
        .await?
    {
        let (show, Some(a)) = (shown(&t.tenant_id), roles.get_mut(&t.role)) else { continue };
        if show == Shown::Hidden {
            continue;
        }
        a.token_count += 1;
        if show == Shown::Named {
            let tenant = t.tenant_id.as_ref().and_then(|id| slugs.get(id).cloned());
            a.holders.push(Holder { kind: "token".into(), name: t.name, tenant });
        }
    }
    Ok(Role::ALL.iter().filter_map(|r| roles.remove(r.as_str())).collect())
}

async fn drill_evidence(
    db: &DatabaseConnection,
    scope: Option<&tenant::Model>,
    build: &BuildEvidence,
    now: i64,
) -> DomainResult<DrillEvidence> {
    let latest = runs::latest_finished(db, scope.map(|t| t.id.as_str())).await?;
    let mut reasons = Vec::new();
    if let Some(run) = &latest {
        // A run counts only for the build it ran on: an upgrade (another
        // binary, or another commit or version) needs drills again.
        if !identity::same_build(&run.version, &run.build_commit, &run.binary_sha256, build) {
            let was = match (run.build_commit.as_str(), run.binary_sha256.get(..12)) {
                ("", _) => format!("version {}, build not recorded", run.version),
                (commit, Some(sha)) if !sha.is_empty() => {
                    format!("version {}, commit {commit}, binary {sha}…", run.version)
                }
                (commit, _) => format!("version {}, commit {commit}", run.version),
            };
            reasons.push(format!(
                "the run was on another build ({was}; now version {}, commit {}, binary {}…)",
                build.version,
                build.commit,
                build.binary_sha256.get(..12).unwrap_or_default()
            ));
        }
        if now - run.started_at_ms > DRILL_STALE_DAYS * DAY_MS {
            reasons.push(format!("the run is older than {DRILL_STALE_DAYS} days"));
        }
        let schema = runs::schema_version(db).await?;
        if schema != run.schema_version {
            reasons.push(format!("the schema changed since the run ({} → {schema})", run.schema_version));
        }
        let key_changes = audit_entry::Entity::find()
            .filter(audit_entry::Column::Action.starts_with("key."))
            .filter(audit_entry::Column::At.gt(run.started_at_ms))
            .count(db)
            .await?;
        if key_changes > 0 {
            reasons.push(format!("{key_changes} key change(s) since the run"));
        }
    }
    Ok(DrillEvidence { stale: !reasons.is_empty(), stale_reasons: reasons, latest })
}

async fn retention_evidence(
    db: &DatabaseConnection,
    principal: &Principal,
    scope: Option<&tenant::Model>,
) -> DomainResult<RetentionEvidence> {
    let o = retention::overview(db, principal).await?;
    let endpoints = o
        .endpoints
        .into_iter()
        .filter(|r| scope.is_none_or(|t| t.slug == r.tenant))
        .map(|r| RetentionRow {
            guard_holds: r.current.dedup_secs >= r.horizon_secs,
            tenant: r.tenant,
            endpoint: r.endpoint,
            scheme: r.scheme,
            dedup_secs: r.current.dedup_secs,
            body_secs: r.current.body_secs,
            horizon_secs: r.horizon_secs,
            effective_dedup_secs: r.effective_dedup_secs,
            manual_resend_secs: r.manual_resend_secs,
            decided_by: r.current.actor,
            decided_at: r.current.created_at,
            reason: r.current.reason,
        })
        .collect();
    Ok(RetentionEvidence { horizons: o.horizons, horizon_history: o.horizon_history, endpoints })
}

async fn retry_evidence(
    db: &DatabaseConnection,
    principal: &Principal,
    scope: Option<&tenant::Model>,
    access: &[RoleAccess],
) -> DomainResult<Vec<RetryPolicyEvidence>> {
    let who: Vec<String> = access
        .iter()
        .filter(|a| a.permissions.iter().any(|p| p == Permission::ManageRetryPolicy.as_str()))
        .flat_map(|a| {
            let (users, tokens) = a.unnamed();
            let counted = (users + tokens > 0).then(|| {
                format!("{users} user(s) and {tokens} token(s) of role {} (not named in a tenant's bundle)", a.role)
            });
            std::iter::once(format!("role {}", a.role))
                .chain(a.holders.iter().map(|h| format!("{} {}", h.kind, h.name)))
                .chain(counted)
        })
        .collect();
    let mut out = Vec::new();
    for t in tenants::list(db, principal).await? {
        if scope.is_some_and(|s| s.slug != t.slug) {
            continue;
        }
        let v = retry_policy::get(db, principal, &t.slug).await?;
        out.push(RetryPolicyEvidence {
            open_overrides: crate::break_glass::open(db, &t.id, &t.slug).await?,
            tenant: v.tenant,
            policy: v.policy,
            version: v.version,
            history: v.history,
            may_roll_back: who.clone(),
        });
    }
    Ok(out)
}

async fn metrics_evidence(
    db: &DatabaseConnection,
    principal: &Principal,
    tenant: Option<&str>,
) -> DomainResult<MetricsEvidence> {
    let s = stats::stats(db, principal, tenant, Window::Week).await?;
    let series = |o: &str| s.series.iter().find(|x| x.outcome == o);
    Ok(MetricsEvidence {
        window: s.window.clone(),
        start: s.start.clone(),
        end: s.end.clone(),
        applied: series("applied").map_or(0, |x| x.total),
        duplicate_acks: series("duplicate").map_or(0, |x| x.total),
        verification_failures: series("verification_failed").map(|x| x.reasons.clone()).unwrap_or_default(),
        rollbacks: series("unavailable").map_or(0, |x| x.total),
        quarantined: series("quarantined").map(|x| x.reasons.clone()).unwrap_or_default(),
        quarantine_open: s.quarantine_open,
        outbox_backlog: s.outbox.backlog,
        outbox_oldest_pending_age_secs: s.outbox.oldest_pending_age_secs,
        outbox_dead: s.outbox.dead,
    })
}

/// What a reviewer must look at first, computed from the sections.
pub fn findings(e: &Evidence) -> Vec<Finding> {
    let mut out = Vec::new();
    for c in e.constraints.iter().filter(|c| !c.present) {
        out.push(finding(
            "critical",
            "constraint_missing",
            &c.id,
            format!("{} on {} is not enforced by the database: {}", c.kind, c.table, c.guarantees),
        ));
    }
    for w in durability::weak(&e.database) {
        out.push(finding(
            "critical",
            "durability_weak",
            w.setting,
            format!(
                "{} {} = {}: {} (the ack promise needs every acknowledged commit to survive a crash)",
                e.database.engine,
                w.setting,
                w.value.as_deref().unwrap_or("(could not be read)"),
                w.why
            ),
        ));
    }
    for f in e.files.iter().filter(|f| f.group_or_world_access) {
        let path = f.path.as_deref().unwrap_or(&f.role);
        let mode = f.mode.as_deref().unwrap_or("?");
        if f.role == files::MASTER_KEY_FILE {
            out.push(finding(
                "critical",
                "master_key_file_exposed",
                path,
                format!(
                    "the master key file has mode {mode}: group or others can read or change the key that opens \
                     every sealed secret; chmod 600 it"
                ),
            ));
        } else {
            out.push(finding(
                "warning",
                "data_file_exposed",
                path,
                format!("the {} has mode {mode}: group or others have access; chmod it owner-only", f.role),
            ));
        }
    }
    if !e.audit.chain_verified {
        let why =
            e.audit.first_broken.as_ref().map_or_else(String::new, |b| format!(" at entry {}: {}", b.seq, b.reason));
        out.push(finding("critical", "audit_chain_broken", "audit", format!("the audit chain does not verify{why}")));
    }
    match &e.drills.latest {
        None => {
            out.push(finding("warning", "drills_missing", "drills", "no drill run has finished on this deployment"))
        }
        Some(run) => {
            for d in run.drills.iter().filter(|d| !d.passed) {
                out.push(finding("critical", "drill_failed", &d.name, d.failures.join("; ")));
            }
            if let Some(err) = &run.error {
                out.push(finding("critical", "drill_failed", "drills", err.clone()));
            }
            if run.drills.len() < DRILL_NAMES.len() && run.error.is_none() {
                out.push(finding(
                    "critical",
                    "drill_failed",
                    "drills",
                    format!("only {} of {} drills ran", run.drills.len(), DRILL_NAMES.len()),
                ));
            }
            if e.drills.stale {
                out.push(finding("warning", "drills_stale", "drills", e.drills.stale_reasons.join("; ")));
            }
        }
    }
    for k in &e.credentials {
        if matches!(k.status.as_str(), "active" | "retiring") && k.age_days > MAX_KEY_AGE_DAYS {
            out.push(finding(
                "warning",
                "key_past_rotation_age",
                &k.key_id,
                format!(
                    "{}/{}: key is {} days old (rotate at {MAX_KEY_AGE_DAYS}); rotation owner {}",
                    k.tenant, k.endpoint, k.age_days, k.rotation_owner
                ),
            ));
        }
    }
    for r in e.retention.endpoints.iter().filter(|r| !r.guard_holds) {
        out.push(finding(
            "critical",
            "retention_below_horizon",
            format!("{}/{}", r.tenant, r.endpoint),
            format!(
                "dedup retention {} is below the {} redelivery horizon {}: a late redelivery could apply twice",
                retention::human(r.dedup_secs),
                r.scheme,
                retention::human(r.horizon_secs)
            ),
        ));
    }
    // A warning, not critical: the sender's automatic retries are still
    // covered, and only a person resending an older event by hand could
    // apply it twice; the decision was accepted on record, by name.
    for r in e.retention.endpoints.iter().filter(|r| r.guard_holds && r.dedup_secs < r.manual_resend_secs) {
        out.push(finding(
            "warning",
            "retention_below_manual_resend",
            format!("{}/{}", r.tenant, r.endpoint),
            format!(
                "dedup retention {} is below the {} manual resend window {} (risk accepted by {}: {}): an event \
                 resent by hand after its claim is purged would apply twice",
                retention::human(r.dedup_secs),
                r.scheme,
                retention::human(r.manual_resend_secs),
                r.decided_by,
                r.reason
            ),
        ));
    }
    for k in e.deployment.kek_seals.iter().filter(|k| k.newest && k.seals >= SEALS_WARN_AT) {
        out.push(finding(
            "warning",
            "kek_seal_count_high",
            format!("kek v{}", k.version),
            format!(
                "KEK version {} has sealed {} values (counted ahead), past 2^30; AES-GCM with random nonces must \
                 be rotated well before 2^32: run `signet kek rotate`",
                k.version, k.seals
            ),
        ));
    }
    let last_pass = e.drills.latest.as_ref().filter(|r| r.passed == Some(true)).and_then(|r| r.finished_at_ms);
    for p in e.retry_policy.iter().filter(|p| p.policy == retry_policy::ENABLED) {
        let since = p.history.first().and_then(|v| clock::parse_rfc3339(&v.created_at)).unwrap_or(0);
        if last_pass.is_none_or(|at| at < since) {
            out.push(finding(
                "warning",
                "retries_without_drill",
                &p.tenant,
                "retries are enabled and no drill run has passed since they were \
                 (seed 000: enable retries only after the drills pass)",
            ));
        }
    }
    for c in e.cohort_check.iter().filter(|c| c.breaches_total > 0) {
        let named: Vec<String> = c.breaches.iter().take(5).map(views::evidence::breach_text).collect();
        let more = c.breaches_total.saturating_sub(named.len() as u64);
        let more = if more > 0 { format!("; and {more} more") } else { String::new() };
        out.push(finding(
            "critical",
            "cohort_breach",
            &c.tenant,
            format!(
                "since retries were enabled ({}), {} event(s) broke once-only: {}{more}",
                c.enabled_since,
                c.breaches_total,
                named.join("; ")
            ),
        ));
    }
    for p in &e.retry_policy {
        for o in &p.open_overrides {
            out.push(finding("critical", "rollout_override", &p.tenant, crate::break_glass::finding_message(o)));
        }
    }
    let rank = |f: &Finding| match f.severity.as_str() {
        "critical" => 0,
        "warning" => 1,
        _ => 2,
    };
    out.sort_by(|a, b| (rank(a), &a.id, &a.subject).cmp(&(rank(b), &b.id, &b.subject)));
    out
}
