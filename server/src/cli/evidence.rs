//! `signet drill …`, `signet evidence …` and `signet audit …`: the reviewer's
//! commands (docs/contract.md §5).

use std::{collections::BTreeMap, path::Path, sync::Arc};

use domain::{
    audit,
    auth::Principal,
    evidence::{
        export::{self, Via},
        manifest, runs,
    },
    receiver::{Receiver, faults::Faults, telemetry::Telemetry},
    vault::Vault,
};
use sea_orm::DatabaseConnection;
use serde_json::json;
use views::evidence::SignedCheckpoint;

use super::{
    AuditCmd, DrillCmd, EvidenceCmd,
    output::{CliError, emit},
};
use crate::{
    config::DbArgs,
    drills::{ChildEnv, HttpTransport},
};

fn need(vault: Option<Vault>) -> Result<Vault, CliError> {
    vault.ok_or_else(|| CliError::new("vault", "this command needs the vault"))
}

pub async fn drill(
    json: bool,
    args: &DbArgs,
    db: &DatabaseConnection,
    vault: Option<Vault>,
    p: &Principal,
    cmd: DrillCmd,
) -> Result<(), CliError> {
    match cmd {
        DrillCmd::Run => {
            let vault = Arc::new(need(vault)?);
            let run = run_drills(args, db, &vault, p).await?;
            emit(json, &run, || describe_run(&run));
            fail_unless_passed(&run)
        }
        DrillCmd::List { limit } => {
            let runs = runs::list(db, p, limit).await?;
            emit(json, &runs, || {
                runs.iter()
                    .map(|r| {
                        let verdict = match r.passed {
                            Some(true) => "passed",
                            Some(false) => "FAILED",
                            None => r.status.as_str(),
                        };
                        format!(
                            "{}  {}  {}  {}/{} drills  schemes {}  by {}",
                            r.started_at,
                            r.run_id,
                            verdict,
                            r.done,
                            r.total,
                            views::evidence::schemes_text(&r.schemes),
                            r.actor.as_deref().unwrap_or("-")
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            });
            Ok(())
        }
        DrillCmd::Child => Err(CliError::new("drill_child", "internal command")),
    }
}

/// Runs every drill through an in-process receiver listening on a loopback
/// port: real HTTP, the real `/hooks` handler, this process's drill faults.
async fn run_drills(
    args: &DbArgs,
    db: &DatabaseConnection,
    vault: &Arc<Vault>,
    p: &Principal,
) -> Result<views::evidence::DrillRunView, CliError> {
    let faults = Faults::default();
    let drill_runner = crate::drills::RunnerToken::generate();
    let hooks = crate::http::hooks::HookState {
        receiver: Arc::new(Receiver::new(db.clone(), vault.clone(), faults.clone())),
        telemetry: Arc::new(Telemetry::default()),
        metrics: Arc::new(crate::metrics::Metrics::new().map_err(|e| CliError::new("metrics", e.to_string()))?),
        body_read: std::time::Duration::from_secs(30),
        unknown_log: Arc::default(),
        body_budget: crate::http::limits::BodyBudget::new(crate::config::DEFAULT_MAX_INFLIGHT_BODY_BYTES as usize),
        shed_log: Arc::default(),
        drill_runner: drill_runner.clone(),
        drill_log: Arc::default(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| CliError::new("listen", format!("cannot open a loopback port for the drills: {e}")))?;
    let addr = listener.local_addr().map_err(|e| CliError::new("listen", e.to_string()))?;
    let router = axum::Router::new().nest_service("/hooks", crate::http::hooks::routes(hooks));
    let server = tokio::spawn(async move { axum::serve(listener, router).await });
    let transport = HttpTransport::new(
        format!("http://{addr}"),
        faults.drill.clone(),
        ChildEnv::from_args(args).map_err(|e| CliError::new("config", e))?,
        drill_runner,
    )
    .map_err(|e| CliError::new("http", e))?;
    let run = runs::run(db, vault, p, &transport).await;
    server.abort();
    Ok(run?)
}

fn describe_run(r: &views::evidence::DrillRunView) -> String {
    let mut lines = vec![format!(
        "drill run {} on {}: {}",
        r.run_id,
        r.engine,
        match r.passed {
            Some(true) => "all passed".to_owned(),
            _ => format!(
                "{} of {} FAILED",
                r.drills.iter().filter(|d| !d.passed).count() + usize::from(r.error.is_some()),
                r.total
            ),
        }
    )];
    for d in &r.drills {
        lines.push(format!(
            "  {:<26} {:<6} {:>6} ms",
            d.name,
            if d.passed { "passed" } else { "FAILED" },
            d.duration_ms
        ));
        for f in &d.failures {
            lines.push(format!("      {f}"));
        }
    }
    if let Some(e) = &r.error {
        lines.push(format!("  {e}"));
    }
    lines.push(format!("  signature schemes verified: {}", views::evidence::schemes_text(&r.schemes)));
    lines.join("\n")
}

fn fail_unless_passed(r: &views::evidence::DrillRunView) -> Result<(), CliError> {
    if r.passed == Some(true) {
        return Ok(());
    }
    let failed: Vec<String> = r
        .drills
        .iter()
        .filter(|d| !d.passed)
        .map(|d| format!("{} ({})", d.name, d.failures.first().map_or("failed", String::as_str)))
        .collect();
    let what = if failed.is_empty() {
        r.error.clone().unwrap_or_else(|| "the run did not finish".into())
    } else {
        failed.join(", ")
    };
    Err(CliError::new("drills_failed", format!("drills failed: {what}")))
}

pub async fn evidence(
    json: bool,
    args: &DbArgs,
    db: &DatabaseConnection,
    vault: Option<Vault>,
    p: &Principal,
    cmd: EvidenceCmd,
) -> Result<(), CliError> {
    let vault = Arc::new(need(vault)?);
    match cmd {
        EvidenceCmd::Export { out, tenant, run_drills: with_drills, force } => {
            prepare_dir(&out, force)?;
            let run = if with_drills { Some(run_drills(args, db, &vault, p).await?) } else { None };
            let tenant = domain::ids::named_filter(tenant.as_deref())?;
            let bundle = export::export(db, &vault, p, tenant.as_ref(), Via::Cli, evidence_html::render).await?.bundle;
            for (name, bytes) in bundle.files() {
                replace_file(&out, name, &bytes)
                    .map_err(|e| CliError::new("write", format!("cannot write {}: {e}", out.join(name).display())))?;
            }
            let critical = bundle.evidence.findings.iter().filter(|f| f.severity == "critical").count();
            let report = json!({
                "dir": out.display().to_string(),
                "digest": bundle.digest,
                "files": manifest::FILES,
                "findings": {"critical": critical, "warning": bundle.evidence.findings.len() - critical},
                "drills_passed": run.as_ref().and_then(|r| r.passed),
            });
            emit(json, &report, || {
                let mut lines = vec![format!(
                    "wrote {} ({} files); manifest digest {}",
                    out.display(),
                    manifest::FILES.len(),
                    bundle.digest
                )];
                for f in &bundle.evidence.findings {
                    lines.push(format!("  {}: {} {}: {}", f.severity, f.id, f.subject, f.message));
                }
                lines.join("\n")
            });
            match run {
                Some(r) => fail_unless_passed(&r),
                None => Ok(()),
            }
        }
        EvidenceCmd::Verify { dir, public_key } => {
            let key = match &public_key {
                Some(path) => Some(
                    std::fs::read_to_string(path)
                        .map_err(|e| CliError::new("public_key", format!("cannot read {}: {e}", path.display())))?,
                ),
                None => None,
            };
            let files = read_bundle(&dir)?;
            let report = manifest::verify(&files, key.as_deref());
            let live = live_chain(db, &files, report.ok).await?;
            let mut problems = report.problems.clone();
            problems.extend(live.problems.iter().cloned());
            let mut out = serde_json::to_value(&report).unwrap_or_default();
            out["ok"] = json!(problems.is_empty());
            out["problems"] = json!(problems);
            out["live_chain"] = json!({"checked": live.checked, "note": live.note, "problems": live.problems});
            emit(json, &out, || {
                let mut lines: Vec<String> =
                    report.files.iter().map(|f| format!("{:<14} {}", f.name, f.status)).collect();
                lines.push(format!(
                    "signature      {} (checked against the {} public key)",
                    report.signature, report.signer
                ));
                if report.signer == "manifest" {
                    lines.push(
                        "note: pass --public-key (from `signet evidence public-key`) to check who signed it".into(),
                    );
                }
                lines.push(format!("live chain     {}", live.note));
                lines.join("\n")
            });
            match problems.first() {
                None => Ok(()),
                Some(first) => Err(CliError::new(
                    "evidence_invalid",
                    if problems.len() > 1 {
                        format!("{first} (and {} more problems)", problems.len() - 1)
                    } else {
                        first.clone()
                    },
                )),
            }
        }
        EvidenceCmd::PublicKey { pem } => {
            let signer = domain::service_keys::evidence_signer(db, &vault).await?;
            let b64 = signer.public_key_base64();
            let text = if pem {
                domain::crypto::service::public_key_pem(&b64).map_err(|e| CliError::new("public_key", e.to_string()))?
            } else {
                b64.clone()
            };
            emit(json, &json!({"algorithm": "ed25519", "public_key": b64, "pem": pem.then_some(text.clone())}), || {
                text.trim_end().to_owned()
            });
            Ok(())
        }
    }
}

/// The output directory must be empty (or absent) unless `force`.
fn prepare_dir(out: &Path, force: bool) -> Result<(), CliError> {
    if out.exists() {
        if !out.is_dir() {
            return Err(CliError::new(
                "out_not_a_directory",
                format!("{} exists and is not a directory", out.display()),
            ));
        }
        let non_empty = std::fs::read_dir(out)
            .map_err(|e| CliError::new("out", format!("cannot read {}: {e}", out.display())))?
            .next()
            .is_some();
        if non_empty && !force {
            return Err(CliError::new(
                "out_not_empty",
                format!("{} is not empty; pass --force to overwrite the bundle's files in it", out.display()),
            ));
        }
    }
    crate::config::private_dir(out)
        .map_err(|e| CliError::new("out", format!("cannot create {}: {e}", out.display())))?;
    // Fail before exporting (an export is recorded) if nothing can be written.
    let probe = out.join(temp_name("write-test"));
    new_private_file(&probe)
        .map_err(|e| CliError::new("out_not_writable", format!("cannot write to {}: {e}", out.display())))?;
    std::fs::remove_file(&probe).ok();
    Ok(())
}

/// A name no one else can have planted anything at in advance.
fn temp_name(what: &str) -> String {
    format!(".signet-{what}-{}", uuid::Uuid::new_v4().simple())
}

/// Created exclusively (`O_CREAT | O_EXCL`, which never follows a symlink)
/// and owner-only.
fn new_private_file(path: &Path) -> std::io::Result<std::fs::File> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    opts.open(path)
}

/// Writes `dir/name` without writing through whatever is already there: the
/// bytes go to a new private file in `dir`, which is then renamed over
/// `name`. A symlink (or a file) at `name` is replaced, never followed, so
/// a link planted in the output directory cannot aim the export at a file
/// elsewhere; and a reader never sees a half-written file.
fn replace_file(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = dir.join(temp_name(name));
    let written = new_private_file(&tmp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, dir.join(name))
    });
    if written.is_err() {
        std::fs::remove_file(&tmp).ok();
    }
    written
}

/// Every regular file in `dir` (a bundle has no subdirectories).
fn read_bundle(dir: &Path) -> Result<BTreeMap<String, Vec<u8>>, CliError> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| CliError::new("bundle", format!("cannot read {}: {e}", dir.display())))?;
    let mut files = BTreeMap::new();
    for entry in entries {
        let entry = entry.map_err(|e| CliError::new("bundle", format!("cannot read {}: {e}", dir.display())))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if !path.is_file() {
            return Err(CliError::new(
                "evidence_invalid",
                format!("{name} in {} is not a file; a bundle holds only its four files", dir.display()),
            ));
        }
        // Bundles are small; a huge file is not part of one.
        if entry.metadata().map(|m| m.len()).unwrap_or(0) > 64 * 1024 * 1024 {
            return Err(CliError::new("evidence_invalid", format!("{name} is larger than any bundle file")));
        }
        files.insert(
            name,
            std::fs::read(&path)
                .map_err(|e| CliError::new("bundle", format!("cannot read {}: {e}", path.display())))?,
        );
    }
    Ok(files)
}

pub async fn audit(json: bool, db: &DatabaseConnection, vault: Option<Vault>, cmd: AuditCmd) -> Result<(), CliError> {
    let vault = need(vault)?;
    match cmd {
        AuditCmd::Verify { checkpoint, checkpoints, public_key } => {
            if public_key.is_some() && checkpoint.is_none() && checkpoints.is_none() {
                return Err(CliError::new("usage", "--public-key checks --checkpoint or --checkpoints; give one"));
            }
            let key = match public_key {
                Some(p) => std::fs::read_to_string(&p)
                    .map_err(|e| CliError::new("public_key", format!("cannot read {}: {e}", p.display())))?
                    .trim()
                    .to_owned(),
                None => domain::service_keys::evidence_signer(db, &vault).await?.public_key_base64(),
            };
            // Bad input first, each as one line naming what is wrong.
            let anchored = match &checkpoints {
                Some(path) => {
                    let text = std::fs::read_to_string(path)
                        .map_err(|e| CliError::new("checkpoints", format!("cannot read {}: {e}", path.display())))?;
                    let lines = audit::anchor::parse(&text)
                        .map_err(|e| CliError::new("checkpoints", format!("{}: {e}", path.display())))?;
                    if lines.is_empty() {
                        return Err(CliError::new("checkpoints", format!("{} holds no checkpoint", path.display())));
                    }
                    Some(lines)
                }
                None => None,
            };
            let report = audit::verify_chain(db).await?;
            let mut problems: Vec<String> = report
                .first_broken
                .iter()
                .map(|b| format!("audit chain broken at entry {}: {}", b.seq, b.reason))
                .collect();
            let mut checked = None;
            if let Some(path) = checkpoint {
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| CliError::new("checkpoint", format!("cannot read {}: {e}", path.display())))?;
                let cp: SignedCheckpoint = serde_json::from_str(&text).map_err(|e| {
                    CliError::new("checkpoint", format!("{} is not a signed checkpoint: {e}", path.display()))
                })?;
                if let Err(e) =
                    domain::crypto::service::verify_signature(&key, &cp.checkpoint.signed_bytes(), &cp.signature)
                {
                    problems.push(format!("the checkpoint's signature does not verify: {e}"));
                } else if let Err(why) = audit::matches_checkpoint(db, &cp.checkpoint).await? {
                    problems.push(why);
                }
                checked = Some(cp.checkpoint);
            }
            let anchors_checked = anchored.as_ref().map(Vec::len);
            if let (Some(lines), Some(path)) = (&anchored, &checkpoints) {
                for p in audit::anchor::check(db, lines, &key).await? {
                    problems.push(format!("{}: {p}", path.display()));
                }
            }
            // The chain report's fields, as before, plus the checkpoints' verdict.
            let mut out = serde_json::to_value(&report).unwrap_or_default();
            out["ok"] = json!(problems.is_empty());
            out["checkpoint"] = json!(checked);
            out["checkpoints_checked"] = json!(anchors_checked);
            out["problems"] = json!(problems);
            emit(json, &out, || match problems.first() {
                None => format!(
                    "audit chain intact: {} entries, keyed since entry {}{}{}",
                    report.entries,
                    report.keyed_since_seq.map_or_else(|| "–".into(), |s| s.to_string()),
                    if out["checkpoint"].is_null() {
                        String::new()
                    } else {
                        "; the signed checkpoint is still part of it".into()
                    },
                    anchors_checked.map_or_else(String::new, |n| format!("; it holds all {n} anchored checkpoints")),
                ),
                Some(_) => {
                    let mut lines = vec![format!("audit chain BROKEN: {}", problems[0])];
                    lines.extend(problems.iter().skip(1).map(|p| format!("  also: {p}")));
                    lines.join("\n")
                }
            });
            match problems.first() {
                None => Ok(()),
                Some(p) => Err(CliError::new("audit_chain_broken", p.clone())),
            }
        }
        AuditCmd::Checkpoint => {
            let signed = audit::anchor::signed(db, &vault).await?;
            // A document to keep: JSON either way.
            let _ = json;
            println!("{}", serde_json::to_string_pretty(&signed).unwrap_or_default());
            Ok(())
        }
    }
}

/// What the live chain says of a bundle's audit checkpoint.
struct LiveChain {
    checked: bool,
    note: String,
    problems: Vec<String>,
}

/// Holds the bundle's signed audit checkpoint against this deployment's
/// live chain, when the bundle is this deployment's (signed by its evidence
/// key) and intact; a bundle of another deployment is not checked, and
/// says so.
async fn live_chain(
    db: &DatabaseConnection,
    files: &std::collections::BTreeMap<String, Vec<u8>>,
    intact: bool,
) -> Result<LiveChain, CliError> {
    let skip = |note: &str| Ok(LiveChain { checked: false, note: note.to_owned(), problems: Vec::new() });
    if !intact {
        return skip("not checked (the bundle itself does not verify)");
    }
    let evidence: Option<views::evidence::Evidence> =
        files.get(manifest::EVIDENCE_JSON).and_then(|b| serde_json::from_slice(b).ok());
    let Some(evidence) = evidence else { return skip("not checked (evidence.json has no audit checkpoint)") };
    let ours = domain::service_keys::evidence_public_key(db).await?;
    let cp = evidence.audit.checkpoint;
    if ours.as_deref() != Some(cp.public_key.as_str()) {
        return skip("not checked (the bundle is another deployment's)");
    }
    let anchored = [audit::anchor::Anchored { source: "the bundle's checkpoint".into(), checkpoint: cp.clone() }];
    let problems = audit::anchor::check(db, &anchored, &cp.public_key).await?;
    let note = match problems.first() {
        None => format!("holds the bundle's checkpoint (entry {})", cp.checkpoint.seq),
        Some(p) => format!("BROKEN: {p}"),
    };
    Ok(LiveChain { checked: true, note, problems })
}
