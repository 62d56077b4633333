//! `evidence.html`: the bundle as one self-contained printable page (inline
//! CSS with print rules; no scripts, fonts or images from anywhere). Every
//! value is HTML-escaped: tenant names, owners and comments are user input.

use std::fmt::Write;

use super::bundle::Evidence;
use crate::retention::human;

/// Escapes text for HTML element content and attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = r#"
:root { color-scheme: light; }
body { font: 13px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #111;
       margin: 2rem auto; max-width: 1100px; padding: 0 1rem; }
h1 { font-size: 1.6rem; margin: 0 0 .25rem; }
h2 { font-size: 1.15rem; margin: 2rem 0 .5rem; border-bottom: 2px solid #222; padding-bottom: .2rem; }
p.meta, .muted { color: #555; }
table { border-collapse: collapse; width: 100%; margin: .5rem 0 1rem; }
th, td { border: 1px solid #bbb; padding: .25rem .4rem; text-align: left; vertical-align: top; }
th { background: #eee; font-weight: 600; }
code, .mono { font-family: ui-monospace, "SFMono-Regular", Menlo, monospace; font-size: 12px; word-break: break-all; }
.ok { color: #0a6b2d; font-weight: 600; }
.bad { color: #b00020; font-weight: 700; }
.warn { color: #8a5a00; font-weight: 600; }
.findings li { margin: .2rem 0; }
.summary { display: grid; grid-template-columns: repeat(4, 1fr); gap: .5rem; margin: 1rem 0; }
.summary div { border: 1px solid #bbb; padding: .5rem; }
.summary strong { display: block; font-size: 1.3rem; }
@media print {
  body { margin: 0; max-width: none; font-size: 10pt; }
  h2 { break-after: avoid; }
  tr, .summary div { break-inside: avoid; }
  a { color: inherit; text-decoration: none; }
}
"#;

/// The CSP source that allows exactly the page's style block:
/// `sha256-<base64>`.
pub fn style_hash() -> String {
    use base64::Engine;
    use sha2::Digest;
    format!("sha256-{}", base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(STYLE.as_bytes())))
}

fn yes_no(ok: bool) -> &'static str {
    if ok { "<span class=\"ok\">yes</span>" } else { "<span class=\"bad\">NO</span>" }
}

fn opt(v: &Option<String>) -> String {
    v.as_deref().map_or_else(|| "–".to_owned(), esc)
}

/// A key's verifications over the window, in words.
pub fn verification(v: &super::bundle::KeyVerification) -> String {
    let reasons: Vec<String> = v.failures_by_reason.iter().map(|r| format!("{} {}", esc(&r.reason), r.count)).collect();
    let mut out = format!("{} verified · {} failed", v.successes, v.failures);
    if !reasons.is_empty() {
        let _ = write!(out, " ({})", reasons.join(", "));
    }
    if let Some(at) = &v.last_failure_at {
        let _ =
            write!(out, "<br><span class=\"muted\">last failure {} ({})</span>", esc(at), opt(&v.last_failure_reason));
    }
    out
}

/// The build, the database's durability settings and the files' modes.
fn build_and_database(h: &mut String, e: &Evidence) {
    let weak: Vec<&str> = super::durability::weak(&e.database).into_iter().map(|w| w.setting).collect();
    let _ = writeln!(
        h,
        "<h2>Build and database</h2>\n<table><tbody><tr><th>Version</th><td>{}</td></tr>\
         <tr><th>Commit</th><td class=\"mono\">{}</td></tr>\
         <tr><th>Binary SHA-256</th><td class=\"mono\">{}</td></tr>\
         <tr><th>Engine · schema</th><td>{} · {}</td></tr>{}</tbody></table>",
        esc(&e.build.version),
        esc(&e.build.commit),
        if e.build.binary_sha256.is_empty() { "(not read)".to_owned() } else { esc(&e.build.binary_sha256) },
        esc(&e.database.engine),
        esc(&e.database.schema_version),
        e.database.synchronous_standby.map_or_else(String::new, |s| format!(
            "<tr><th>Synchronous standby</th><td>{}</td></tr>",
            if s { "configured" } else { "none" }
        )),
    );
    h.push_str(
        "<h3>Durability settings (read live)</h3>\n<table><thead><tr><th>Setting</th><th>Value</th>\
                <th>Holds the ack promise</th></tr></thead><tbody>\n",
    );
    for (name, value) in &e.database.durability {
        let judged = super::durability::judged(&e.database.engine, name);
        let _ = writeln!(
            h,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
            esc(name),
            esc(value),
            if !judged {
                "<span class=\"muted\">shown, not judged</span>"
            } else {
                yes_no(!weak.contains(&name.as_str()))
            }
        );
    }
    for w in weak.iter().filter(|w| !e.database.durability.contains_key(**w)) {
        let _ = writeln!(
            h,
            "<tr><td><code>{}</code></td><td>(could not be read)</td><td>{}</td></tr>",
            esc(w),
            yes_no(false)
        );
    }
    h.push_str(
        "</tbody></table>\n<h3>Files</h3>\n<table><thead><tr><th>What</th><th>Path</th><th>Mode</th>\
                <th>Owner (uid:gid)</th><th>Group or others have access</th></tr></thead><tbody>\n",
    );
    for f in &e.files {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"mono\">{}</td><td>{}</td><td>{}{}</td><td>{}</td></tr>",
            esc(&f.role.replace('_', " ")),
            f.path.as_deref().map_or_else(|| opt(&f.note), esc),
            opt(&f.mode),
            match (f.uid, f.gid) {
                (Some(u), Some(g)) => format!("{u}:{g}"),
                _ => "–".to_owned(),
            },
            match f.owned_by_signet {
                Some(false) => " <span class=\"warn\">(not Signet's user)</span>",
                _ => "",
            },
            if f.mode.is_none() { "–" } else { yes_no(!f.group_or_world_access) }
        );
    }
    if e.files.is_empty() {
        h.push_str("<tr><td colspan=\"5\" class=\"muted\">Not known to this process.</td></tr>\n");
    }
    h.push_str("</tbody></table>\n");
}

/// Renders the page. `evidence_sha256` is printed so the page can be tied to
/// its `evidence.json`.
/// The live cohort check: one row per tenant with retries enabled.
fn cohort_section(h: &mut String, e: &Evidence) {
    h.push_str("<h2>Live cohort check (since retries were enabled)</h2>\n");
    if e.cohort_check.is_empty() {
        h.push_str("<p>No tenant has retries enabled.</p>\n");
        return;
    }
    h.push_str(
        "<table><thead><tr><th>Tenant</th><th>Enabled since</th><th>Events checked</th><th>Breaches</th>\
         </tr></thead><tbody>\n",
    );
    for c in &e.cohort_check {
        let breaches = if c.breaches_total == 0 {
            "<span class=\"ok\">none</span>".to_owned()
        } else {
            let named: Vec<String> = c.breaches.iter().map(|b| esc(&views::evidence::breach_text(b))).collect();
            let more = c.breaches_total.saturating_sub(c.breaches.len() as u64);
            format!(
                "<span class=\"bad\">{}</span><br>{}{}",
                c.breaches_total,
                named.join("<br>"),
                if more > 0 { format!("<br>and {more} more") } else { String::new() }
            )
        };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&c.tenant),
            esc(&c.enabled_since),
            c.events_checked,
            breaches
        );
    }
    h.push_str("</tbody></table>\n");
}

pub fn render(e: &Evidence, evidence_sha256: &str) -> String {
    let mut h = String::with_capacity(32 * 1024);
    let scope = e.tenant.as_deref().map_or_else(|| "all tenants".to_owned(), |t| format!("tenant {}", esc(t)));
    let critical = e.findings.iter().filter(|f| f.severity == "critical").count();
    let _ = write!(
        h,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>Signet sign-off evidence ({scope})</title>\
         <style>{STYLE}</style></head><body>\n<h1>Signet sign-off evidence</h1>\n\
         <p class=\"meta\">Generated {} for {scope} · Signet {} on {} · schema {}{}<br>\
         evidence.json SHA-256 <code>{}</code><br>Evidence-signing public key (Ed25519) <code>{}</code></p>\n",
        esc(&e.generated_at),
        esc(&e.deployment.version),
        esc(&e.deployment.engine),
        esc(&e.deployment.schema_version),
        e.deployment
            .kek_seals
            .iter()
            .find(|k| k.newest)
            .map_or_else(String::new, |k| format!(" · KEK v{}: {} values sealed (counted ahead)", k.version, k.seals)),
        esc(evidence_sha256),
        esc(&e.deployment.evidence_public_key),
    );
    let drills_ok = e.drills.latest.as_ref().is_some_and(|r| r.passed == Some(true));
    let _ = writeln!(
        h,
        "<div class=\"summary\"><div>Findings<strong class=\"{}\">{} critical · {} warning</strong></div>\
         <div>Constraints present<strong>{} of {}</strong></div><div>Latest drills\
         <strong class=\"{}\">{}</strong></div>\
         <div>Audit chain<strong class=\"{}\">{}</strong></div></div>",
        if critical > 0 { "bad" } else { "ok" },
        critical,
        e.findings.len() - critical,
        e.constraints.iter().filter(|c| c.present).count(),
        e.constraints.len(),
        if drills_ok && !e.drills.stale { "ok" } else { "bad" },
        match &e.drills.latest {
            None => "none".to_owned(),
            Some(r) => format!(
                "{}{}",
                if r.passed == Some(true) { "passed" } else { "FAILED" },
                if e.drills.stale { " (stale)" } else { "" }
            ),
        },
        if e.audit.chain_verified { "ok" } else { "bad" },
        if e.audit.chain_verified { "verified" } else { "BROKEN" },
    );

    h.push_str("<h2>Findings</h2>\n");
    if e.findings.is_empty() {
        h.push_str("<p class=\"ok\">No findings.</p>\n");
    } else {
        h.push_str("<ul class=\"findings\">\n");
        for f in &e.findings {
            let class = if f.severity == "critical" { "bad" } else { "warn" };
            let _ = writeln!(
                h,
                "<li><span class=\"{class}\">{}</span> <code>{}</code> {}: {}</li>",
                esc(&f.severity),
                esc(&f.id),
                esc(&f.subject),
                esc(&f.message)
            );
        }
        h.push_str("</ul>\n");
    }

    build_and_database(&mut h, e);

    h.push_str(
        "<h2>Credentials</h2>\n<table><thead><tr><th>Tenant / endpoint</th><th>Key</th><th>Status</th>\
                <th>Scheme · event types</th>\
                <th>Owner · rotation owner</th><th>Approved by</th><th>Scope hash</th><th>KEK</th><th>Age</th>\
                <th>Last verified</th><th>Overlap ends</th><th>Verifications (window)</th></tr></thead><tbody>\n",
    );
    for k in &e.credentials {
        let _ = writeln!(
            h,
            "<tr><td>{}/{}</td><td class=\"mono\">{}</td><td>{}</td><td>{} · {}</td><td>{} · {}</td><td>{}{}</td>\
             <td class=\"mono\">{}{}</td><td>{}</td><td>{} d</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&k.tenant),
            esc(&k.endpoint),
            esc(&k.key_id),
            esc(&k.status),
            esc(&k.scheme),
            esc(&k.event_types.join(", ")),
            esc(&k.owner),
            esc(&k.rotation_owner),
            opt(&k.approved_by),
            k.approved_at
                .as_deref()
                .map(|a| format!("<br><span class=\"muted\">{}</span>", esc(a)))
                .unwrap_or_default(),
            esc(&k.scope_hash),
            if k.scope_approved { "" } else { " <span class=\"bad\">(not the approved scope)</span>" },
            kek_cell(k),
            k.age_days,
            opt(&k.last_verified_at),
            opt(&k.overlap_ends_at),
            verification(&k.verification),
        );
    }
    if e.credentials.is_empty() {
        h.push_str("<tr><td colspan=\"12\" class=\"muted\">No keys.</td></tr>\n");
    }
    h.push_str(
        "</tbody></table>\n<h3>Who can touch credentials</h3>\n<table><thead><tr><th>Role</th>\
                <th>Permissions (live policy)</th><th>Held by</th></tr></thead><tbody>\n",
    );
    for a in &e.access {
        let mut holders: Vec<String> = a
            .holders
            .iter()
            .map(|x| {
                format!(
                    "{} {}{}",
                    esc(&x.kind),
                    esc(&x.name),
                    x.tenant.as_deref().map(|t| format!(" ({})", esc(t))).unwrap_or_default()
                )
            })
            .collect();
        let (users, tokens) = a.unnamed();
        if users + tokens > 0 {
            holders.push(format!("{users} user(s), {tokens} token(s), not named in a tenant's bundle"));
        }
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&a.role),
            esc(&a.permissions.join(", ")),
            if holders.is_empty() { "–".into() } else { holders.join("<br>") }
        );
    }
    h.push_str("</tbody></table>\n");

    h.push_str(
        "<h2>Database constraints (live catalog)</h2>\n<table><thead><tr><th>Constraint</th><th>Table</th>\
                <th>Rule</th><th>Guarantees</th><th>Present</th><th>Enforced by</th></tr></thead><tbody>\n",
    );
    for c in &e.constraints {
        let rule = match &c.references {
            Some(r) => format!("{} ({}) → {}", c.kind, c.columns.join(", "), r),
            None if c.columns.is_empty() => c.kind.clone(),
            None => format!("{} ({})", c.kind, c.columns.join(", ")),
        };
        let _ = writeln!(
            h,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"mono\">{}</td></tr>",
            esc(&c.id),
            esc(&c.table),
            esc(&rule),
            esc(&c.guarantees),
            yes_no(c.present),
            esc(&c.enforced_by.join(", "))
        );
    }
    h.push_str("</tbody></table>\n");

    h.push_str("<h2>Drills (concurrency and crash tests on this deployment)</h2>\n");
    match &e.drills.latest {
        None => h.push_str("<p class=\"bad\">No drill run has finished on this deployment.</p>\n"),
        Some(r) => {
            let _ = writeln!(
                h,
                "<p>Run <code>{}</code> by {} ({}) on {} · started {} · finished {} · {}{}</p>",
                esc(&r.run_id),
                esc(r.actor.as_deref().unwrap_or("someone outside this tenant")),
                esc(&r.actor_kind),
                esc(&r.engine),
                esc(&r.started_at),
                opt(&r.finished_at),
                if r.passed == Some(true) {
                    "<span class=\"ok\">all passed</span>"
                } else {
                    "<span class=\"bad\">FAILED</span>"
                },
                if e.drills.stale {
                    format!(" · <span class=\"warn\">stale: {}</span>", esc(&e.drills.stale_reasons.join("; ")))
                } else {
                    String::new()
                },
            );
            let _ =
                writeln!(h, "<p>Signature schemes verified: {}</p>", esc(&views::evidence::schemes_text(&r.schemes)));
            h.push_str(
                "<table><thead><tr><th>Drill</th><th>Result</th><th>Expected</th><th>Observed</th>\
                        <th>Time</th></tr></thead><tbody>\n",
            );
            for d in &r.drills {
                let list = |m: &serde_json::Map<String, serde_json::Value>| {
                    m.iter()
                        .map(|(k, v)| format!("{}: {}", esc(k), esc(&v.to_string())))
                        .collect::<Vec<_>>()
                        .join("<br>")
                };
                let _ = writeln!(
                    h,
                    "<tr><td><code>{}</code></td><td>{}{}</td><td class=\"mono\">{}</td><td class=\"mono\">{}</td>\
                     <td>{} ms</td></tr>",
                    esc(&d.name),
                    if d.passed { "<span class=\"ok\">passed</span>" } else { "<span class=\"bad\">FAILED</span>" },
                    if d.failures.is_empty() { String::new() } else { format!("<br>{}", esc(&d.failures.join("; "))) },
                    list(&d.expected),
                    list(&d.observed),
                    d.duration_ms
                );
            }
            h.push_str("</tbody></table>\n");
        }
    }

    h.push_str(
        "<h2>Retention</h2>\n<table><thead><tr><th>Scheme</th><th>Redelivery horizon (automatic retries)</th>\
                <th>Manual resend window</th><th>Version</th>\
                <th>Decided by</th><th>When</th><th>Why</th></tr></thead><tbody>\n",
    );
    for x in &e.retention.horizons {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}<br>{}</td><td>{}<br>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&x.scheme),
            esc(&human(x.horizon_secs)),
            esc(x.source.as_deref().unwrap_or("")),
            esc(&human(x.manual_resend_secs)),
            esc(x.manual_resend_source.as_deref().unwrap_or("none recorded")),
            x.version,
            esc(&x.actor),
            esc(&x.created_at),
            esc(&x.reason)
        );
    }
    h.push_str(
        "</tbody></table>\n<table><thead><tr><th>Tenant / endpoint</th><th>Scheme</th><th>Dedup</th>\
                <th>Bodies</th><th>Horizon</th><th>Guard holds</th><th>Manual resend</th><th>Covers it</th>\
                <th>Decided by</th><th>When</th><th>Why</th></tr></thead><tbody>\n",
    );
    for r in &e.retention.endpoints {
        let _ = writeln!(
            h,
            "<tr><td>{}/{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&r.tenant),
            esc(&r.endpoint),
            esc(&r.scheme),
            esc(&human(r.dedup_secs)),
            esc(&human(r.body_secs)),
            esc(&human(r.horizon_secs)),
            yes_no(r.guard_holds),
            esc(&human(r.manual_resend_secs)),
            yes_no(r.dedup_secs >= r.manual_resend_secs),
            esc(&r.decided_by),
            esc(&r.decided_at),
            esc(&r.reason)
        );
    }
    h.push_str("</tbody></table>\n");

    h.push_str(
        "<h2>Retry policy (the rollback switch)</h2>\n<table><thead><tr><th>Tenant</th><th>Now</th>\
                <th>History (newest first)</th><th>May roll back</th></tr></thead><tbody>\n",
    );
    for p in &e.retry_policy {
        let hist: Vec<String> = p
            .history
            .iter()
            .map(|v| {
                format!(
                    "v{} {} by {} at {}: {}",
                    v.version,
                    esc(&v.policy),
                    esc(&v.actor),
                    esc(&v.created_at),
                    esc(&v.reason)
                )
            })
            .collect();
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{} (v{})</td><td>{}</td><td>{}</td></tr>",
            esc(&p.tenant),
            esc(&p.policy),
            p.version,
            hist.join("<br>"),
            esc(&p.may_roll_back.join(", "))
        );
    }
    h.push_str("</tbody></table>\n");
    cohort_section(&mut h, e);

    let m = &e.metrics;
    let reasons = |rs: &[crate::stats::ReasonCount]| {
        if rs.is_empty() {
            "none".to_owned()
        } else {
            rs.iter().map(|r| format!("{} {}", esc(&r.reason), r.count)).collect::<Vec<_>>().join(", ")
        }
    };
    let _ = write!(
        h,
        "<h2>Metrics ({} window, {} – {})</h2>\n<table><tbody>\
         <tr><th>Applied</th><td>{}</td></tr><tr><th>Duplicate acknowledgements</th><td>{}</td></tr>\
         <tr><th>Verification failures</th><td>{}</td></tr><tr><th>Rollbacks (transient failures answered 503)</th>\
         <td>{}</td></tr>\
         <tr><th>Quarantined</th><td>{}</td></tr><tr><th>Awaiting triage now</th><td>{}</td></tr>\
         <tr><th>Outbox backlog now</th><td>{} (oldest {}; dead {})</td></tr></tbody></table>\n",
        esc(&m.window),
        esc(&m.start),
        esc(&m.end),
        m.applied,
        m.duplicate_acks,
        reasons(&m.verification_failures),
        m.rollbacks,
        reasons(&m.quarantined),
        m.quarantine_open,
        m.outbox_backlog,
        m.outbox_oldest_pending_age_secs.map_or_else(|| "–".to_owned(), |s| format!("{s} s")),
        m.outbox_dead,
    );

    let a = &e.audit;
    let _ = write!(
        h,
        "<h2>Audit log</h2>\n<table><tbody><tr><th>Chain verifies</th><td>{}{}</td></tr><tr><th>Entries</th>\
         <td>{}</td></tr><tr><th>Recomputed for this bundle</th><td>{}</td></tr>\
         <tr><th>Keyed (HMAC under a vault-sealed key) since entry</th><td>{}</td></tr>\
         <tr><th>Signed checkpoint</th><td class=\"mono\">seq {} · head {} · at {}\
         <br>signature {}</td></tr></tbody></table>\n",
        yes_no(a.chain_verified),
        a.first_broken.as_ref().map(|b| format!(" at entry {}: {}", b.seq, esc(&b.reason))).unwrap_or_default(),
        a.entries,
        views::evidence::chain_recomputed(a.verified_from_seq),
        a.keyed_since_seq.map_or_else(|| "–".to_owned(), |s| s.to_string()),
        a.checkpoint.checkpoint.seq,
        esc(&a.checkpoint.checkpoint.head),
        esc(&a.checkpoint.checkpoint.at),
        esc(&a.checkpoint.signature),
    );
    h.push_str(
        "<p class=\"muted\">Verify this bundle with \
         <code>signet evidence verify &lt;dir&gt; --public-key &lt;file&gt;</code>; \
         the public key comes from <code>signet evidence public-key</code> on the deployment.</p>\n</body></html>\n",
    );
    h
}

/// The KEK column: the sealing version (for an Ed25519 key, of the private
/// key Signet generated and holds), or for a public key a provider uploaded
/// that nothing is sealed and the stored credential cannot sign.
fn kek_cell(k: &views::evidence::CredentialRow) -> String {
    match (k.can_sign, k.credential.as_str()) {
        (true, "hmac") => format!("v{}", k.kek_version),
        (true, other) => format!("v{} · {} private key held · can sign", k.kek_version, esc(other)),
        (false, other) => format!("{} public key · cannot sign", esc(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::{Evidence, esc, render};

    /// Today's page for the fixture bundles, kept as golden files: whatever
    /// renders the page next must write them byte for byte.
    /// `SIGNET_WRITE_GOLDEN=1` writes them from this renderer.
    #[test]
    fn evidence_page_matches_golden() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
        for name in ["full", "tenant", "empty"] {
            let json = std::fs::read_to_string(format!("{dir}/evidence-{name}.json")).expect("fixture");
            let e: Evidence = serde_json::from_str(&json).expect("fixture parses");
            let html = render(&e, "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8");
            let golden = format!("{dir}/evidence-{name}.html");
            if std::env::var_os("SIGNET_WRITE_GOLDEN").is_some() {
                std::fs::write(&golden, &html).expect("write golden");
            }
            assert_eq!(html, std::fs::read_to_string(&golden).expect("golden"), "{golden}");
        }
    }

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            esc(r#"<script>alert("x")</script> & 'y'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
    }
}
