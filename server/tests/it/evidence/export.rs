//! Bundles export, verify, and refuse bad input with one clear line; an
//! export never writes through a planted symlink; exports are idempotent
//! POSTs and GETs never write.

use std::path::Path;

use serde_json::{Value, json};

use super::stderr;
use crate::{both_engines, support::Install};

fn write_key(dir: &Path, i: &Install) -> std::path::PathBuf {
    let pk = i.cli(&["evidence", "public-key"], "");
    assert!(pk.status.success(), "{}", stderr(&pk));
    let path = dir.join("signet.pub");
    std::fs::write(&path, &pk.stdout).unwrap();
    path
}

both_engines!(evidence_exports_verifies_and_refuses_bad_input, async |i: &Install| {
    // Owner-only, as `signet` makes a data directory it creates (a temporary
    // directory starts 0755, which the bundle would flag).
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(i.data_dir(), std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    i.cli_json(&["tenant", "create", "clinic-a"]);
    i.cli_json(&["endpoint", "create", "clinic-a", "hooks", "--scheme", "github"]);
    i.cli_json(&["key", "provision", "clinic-a", "hooks", "--approve-as", "rita"]);
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("bundle");
    let exported = i.cli_json(&["evidence", "export", "--out", out.to_str().unwrap(), "--run-drills"]);
    assert_eq!(exported["drills_passed"], true, "{exported}");
    let mut names: Vec<String> =
        std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["evidence.html", "evidence.json", "manifest.json", "manifest.sig"]);
    let evidence: Value = serde_json::from_slice(&std::fs::read(out.join("evidence.json")).unwrap()).unwrap();
    for key in [
        "generated_at",
        "deployment",
        "credentials",
        "constraints",
        "drills",
        "retention",
        "retry_policy",
        "metrics",
        "audit",
    ] {
        assert!(evidence.get(key).is_some(), "evidence.json lacks {key}");
    }
    assert_eq!(evidence["credentials"][0]["tenant"], "clinic-a");
    assert!(evidence["credentials"][0].get("secret").is_none());
    assert!(evidence["constraints"].as_array().unwrap().iter().all(|c| c["present"] == true));
    assert_eq!(evidence["drills"]["latest"]["passed"], true);
    assert_eq!(evidence["audit"]["chain_verified"], true);
    // Bound to this binary and this database (issue 23 item 2): the drills
    // ran on the same binary the bundle names.
    let binary = domain::crypto::sha256_hex(&std::fs::read(crate::support::BIN).unwrap());
    assert_eq!(evidence["build"]["binary_sha256"], binary.as_str());
    assert_eq!(evidence["drills"]["latest"]["binary_sha256"], binary.as_str());
    assert_eq!(evidence["build"]["version"], env!("CARGO_PKG_VERSION"));
    let engine = if matches!(i.engine, crate::support::Engine::Postgres) { "postgres" } else { "sqlite" };
    assert_eq!(evidence["database"]["engine"], engine);
    assert!(evidence["database"]["schema_version"].as_str().unwrap().starts_with('m'));
    let setting = if engine == "postgres" { "synchronous_commit" } else { "synchronous" };
    assert!(evidence["database"]["durability"][setting].is_string(), "{}", evidence["database"]);
    let file = |role: &str| {
        evidence["files"].as_array().unwrap().iter().find(|f| f["role"] == role).cloned().unwrap_or_default()
    };
    assert_eq!(file("data_dir")["path"], i.data_dir().display().to_string());
    assert_eq!(file("data_dir")["mode"], "0700");
    assert_eq!(file("master_key_file")["mode"], "0600", "{}", evidence["files"]);
    assert_eq!(file("master_key_file")["owned_by_signet"], true);
    assert_eq!(file("sqlite_file")["mode"].as_str(), (engine == "sqlite").then_some("0600"));
    let ids: Vec<&str> = evidence["findings"].as_array().unwrap().iter().filter_map(|f| f["id"].as_str()).collect();
    for never in ["durability_weak", "master_key_file_exposed", "data_file_exposed", "drills_stale"] {
        assert!(!ids.contains(&never), "{never} in {ids:?}");
    }
    let html = std::fs::read_to_string(out.join("evidence.html")).unwrap();
    assert!(html.contains("Build and database") && html.contains(&binary), "the printable page shows the build");
    assert!(
        html.contains("@media print")
            && !html.contains("<script")
            && !html.contains("http://")
            && !html.contains("https://"),
        "self-contained, printable, no external assets"
    );
    let key = write_key(work.path(), i);
    let ok = i.cli(&["--json", "evidence", "verify", out.to_str().unwrap(), "--public-key", key.to_str().unwrap()], "");
    assert!(ok.status.success(), "{}", stderr(&ok));
    let report: Value = serde_json::from_slice(&ok.stdout).unwrap();
    assert_eq!(report["digest"], exported["digest"]);
    assert_eq!(report["signer"], "given");

    // Tampering: one byte, a missing file, an extra file, a swapped signature.
    let tampered = work.path().join("tampered");
    std::fs::create_dir(&tampered).unwrap();
    for n in ["evidence.json", "evidence.html", "manifest.json", "manifest.sig"] {
        std::fs::copy(out.join(n), tampered.join(n)).unwrap();
    }
    let mut json_bytes = std::fs::read(tampered.join("evidence.json")).unwrap();
    json_bytes[10] ^= 1;
    std::fs::write(tampered.join("evidence.json"), &json_bytes).unwrap();
    let bad = i.cli(&["evidence", "verify", tampered.to_str().unwrap(), "--public-key", key.to_str().unwrap()], "");
    assert!(!bad.status.success());
    assert_eq!(stderr(&bad).lines().count(), 1, "{}", stderr(&bad));
    assert!(stderr(&bad).contains("evidence.json does not match"), "{}", stderr(&bad));
    std::fs::copy(out.join("evidence.json"), tampered.join("evidence.json")).unwrap();
    std::fs::remove_file(tampered.join("evidence.html")).unwrap();
    let missing = i.cli(&["evidence", "verify", tampered.to_str().unwrap()], "");
    assert!(!missing.status.success() && stderr(&missing).contains("evidence.html is missing"), "{}", stderr(&missing));
    std::fs::copy(out.join("evidence.html"), tampered.join("evidence.html")).unwrap();
    std::fs::write(tampered.join("extra.txt"), "x").unwrap();
    let extra = i.cli(&["evidence", "verify", tampered.to_str().unwrap()], "");
    assert!(
        !extra.status.success() && stderr(&extra).contains("extra.txt is not part of the bundle"),
        "{}",
        stderr(&extra)
    );
    std::fs::remove_file(tampered.join("extra.txt")).unwrap();
    let other = work.path().join("other");
    i.cli_json(&["evidence", "export", "--out", other.to_str().unwrap()]);
    std::fs::copy(other.join("manifest.sig"), tampered.join("manifest.sig")).unwrap();
    let swapped = i.cli(&["evidence", "verify", tampered.to_str().unwrap(), "--public-key", key.to_str().unwrap()], "");
    assert!(
        !swapped.status.success() && stderr(&swapped).contains("manifest.sig does not verify"),
        "{}",
        stderr(&swapped)
    );

    // Bad input: a non-empty directory, an unwritable path, a missing bundle.
    let again = i.cli(&["evidence", "export", "--out", out.to_str().unwrap()], "");
    assert!(!again.status.success() && stderr(&again).contains("not empty; pass --force"), "{}", stderr(&again));
    let forced = i.cli(&["evidence", "export", "--out", out.to_str().unwrap(), "--force"], "");
    assert!(forced.status.success(), "{}", stderr(&forced));
    let file = work.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let unwritable = i.cli(&["evidence", "export", "--out", file.join("sub").to_str().unwrap()], "");
    assert!(!unwritable.status.success());
    assert_eq!(stderr(&unwritable).lines().count(), 1, "{}", stderr(&unwritable));
    let nothing = i.cli(&["evidence", "verify", work.path().join("nope").to_str().unwrap()], "");
    assert!(!nothing.status.success() && stderr(&nothing).contains("cannot read"), "{}", stderr(&nothing));
    // Everything is recorded and the chain still verifies, against a signed
    // checkpoint too.
    let cp = work.path().join("checkpoint.json");
    let printed = i.cli(&["audit", "checkpoint"], "");
    assert!(printed.status.success(), "{}", stderr(&printed));
    std::fs::write(&cp, &printed.stdout).unwrap();
    let verified =
        i.cli(&["audit", "verify", "--checkpoint", cp.to_str().unwrap(), "--public-key", key.to_str().unwrap()], "");
    assert!(verified.status.success(), "{}", stderr(&verified));
});

both_engines!(export_never_writes_through_a_planted_symlink, async |i: &Install| {
    use std::os::unix::fs::{PermissionsExt, symlink};
    i.cli_json(&["tenant", "create", "clinic-a"]);
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("bundle");
    std::fs::create_dir(&out).unwrap();
    // Links planted at two of the bundle's names: one at a file someone
    // cares about, one dangling (it would create the file it names).
    let victim = work.path().join("authorized_keys");
    std::fs::write(&victim, "ssh-ed25519 AAAA the owner's key\n").unwrap();
    symlink(&victim, out.join("evidence.json")).unwrap();
    let nowhere = work.path().join("created-elsewhere");
    symlink(&nowhere, out.join("manifest.sig")).unwrap();

    let refused = i.cli(&["evidence", "export", "--out", out.to_str().unwrap()], "");
    assert!(!refused.status.success() && stderr(&refused).contains("not empty"), "{}", stderr(&refused));
    let forced = i.cli(&["--json", "evidence", "export", "--out", out.to_str().unwrap(), "--force"], "");
    assert!(forced.status.success(), "{}", stderr(&forced));

    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "ssh-ed25519 AAAA the owner's key\n", "target untouched");
    assert!(!nowhere.exists(), "nothing created through a dangling link");
    let mut names: Vec<String> =
        std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["evidence.html", "evidence.json", "manifest.json", "manifest.sig"], "no temporary files left");
    for name in &names {
        let meta = std::fs::symlink_metadata(out.join(name)).unwrap();
        assert!(meta.file_type().is_file(), "{name} is a regular file now");
        assert_eq!(meta.permissions().mode() & 0o777, 0o600, "{name}");
    }
    let ok = i.cli(&["evidence", "verify", out.to_str().unwrap()], "");
    assert!(ok.status.success(), "{}", stderr(&ok));

    // A directory the export creates is owner-only too.
    let fresh = work.path().join("fresh");
    i.cli_json(&["evidence", "export", "--out", fresh.to_str().unwrap()]);
    assert_eq!(std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o777, 0o700);
});

// Exports are POSTs: eight at once all answer (201, or 200 with the stored
// identical bundle; never a 500), GETs read what was stored and write
// nothing, and one caller's exports are budgeted (429 with Retry-After).
both_engines!(exports_are_idempotent_posts_and_gets_never_write, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    let token = |name: &str| {
        i.cli_json(&["token", "create", "--name", name, "--role", "reviewer"])["token"].as_str().unwrap().to_owned()
    };
    let (rita, ross) = (token("rita"), token("ross"));
    let s = i.serve();
    let api = reqwest::Client::new();
    let post = || api.post(s.url("/api/v1/evidence/exports")).bearer_auth(&rita).json(&json!({})).send();
    let answers = futures_util::future::join_all((0..8).map(|_| post())).await;
    let mut bodies = Vec::new();
    for res in answers {
        let res = res.unwrap();
        let status = res.status().as_u16();
        assert!(matches!(status, 200 | 201), "a concurrent export answered {status}: {}", res.text().await.unwrap());
        bodies.push((status, res.json::<Value>().await.unwrap()));
    }
    for (status, body) in &bodies {
        let first = bodies.iter().find(|(_, b)| b["digest"] == body["digest"]).unwrap();
        assert_eq!(&first.1, body, "one digest, one bundle");
        if *status == 200 {
            assert!(bodies.iter().any(|(st, b)| *st == 201 && b["digest"] == body["digest"]), "200 repeats a 201");
        }
    }
    let listed = |api: reqwest::Client, url: String, t: String| async move {
        api.get(url).bearer_auth(t).send().await.unwrap().json::<Value>().await.unwrap()
    };
    let exports_before = listed(api.clone(), s.url("/api/v1/evidence/exports"), rita.clone()).await;
    let audit_before = listed(api.clone(), s.url("/api/v1/audit?limit=200"), ross.clone()).await;
    for path in ["/api/v1/evidence", "/api/v1/evidence.html", "/api/v1/evidence/exports"] {
        let res = api.get(s.url(path)).bearer_auth(&rita).send().await.unwrap();
        assert_eq!(res.status(), 200, "{path}");
    }
    assert_eq!(listed(api.clone(), s.url("/api/v1/evidence/exports"), rita.clone()).await, exports_before);
    assert_eq!(listed(api.clone(), s.url("/api/v1/audit?limit=200"), ross.clone()).await, audit_before);
    // Rita spent 8 of her burst of 10: within a few more she is refused.
    let mut refused = None;
    for _ in 0..6 {
        let res = post().await.unwrap();
        if res.status() == 429 {
            refused = Some(res);
            break;
        }
        assert!(res.status().is_success(), "{}", res.status());
    }
    let refused = refused.expect("an export budget");
    let wait: u64 = refused.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=11).contains(&wait), "Retry-After {wait}");
    assert_eq!(refused.json::<Value>().await.unwrap()["error"], "export_rate_limited");
    // Another caller is not affected.
    let other = api.post(s.url("/api/v1/evidence/exports")).bearer_auth(&ross).send().await.unwrap();
    assert!(other.status().is_success(), "{}", other.status());
});
