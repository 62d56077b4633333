//! Findings: what a reviewer must look at first, computed from the
//! sections alone.

use views::{
    evidence::{DRILL_NAMES, Evidence, Finding},
    keys::KeyStatus,
    retry_policy::RetryPolicy,
};

use crate::{
    clock,
    evidence::{durability, files},
    vault::SEALS_WARN_AT,
};

/// Live keys older than this are flagged for rotation.
pub const MAX_KEY_AGE_DAYS: i64 = 90;

fn finding(severity: &str, id: &str, subject: impl Into<String>, message: impl Into<String>) -> Finding {
    Finding { severity: severity.into(), id: id.into(), subject: subject.into(), message: message.into() }
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
        if matches!(KeyStatus::parse(&k.status), Some(KeyStatus::Active | KeyStatus::Retiring))
            && k.age_days > MAX_KEY_AGE_DAYS
        {
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
                views::retention::human(r.dedup_secs),
                r.scheme,
                views::retention::human(r.horizon_secs)
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
                views::retention::human(r.dedup_secs),
                r.scheme,
                views::retention::human(r.manual_resend_secs),
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
    for p in e.retry_policy.iter().filter(|p| p.policy == RetryPolicy::Enabled.as_str()) {
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
