//! The audit chain's checkpoints kept outside the database catch a tail
//! cut by hand.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use serde_json::Value;

use super::stderr;
use crate::{both_engines, support::Install};

/// The last line of the checkpoint file, once it records `seq` or later.
fn anchored_at_least(path: &Path, seq: i64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if let Some(last) = text.lines().last().map(|l| serde_json::from_str::<Value>(l).unwrap())
            && last["seq"].as_i64().unwrap() >= seq
        {
            return last;
        }
        assert!(Instant::now() < deadline, "no checkpoint of entry {seq} in {}: {text}", path.display());
        std::thread::sleep(Duration::from_millis(200));
    }
}

// Issue 23 item 1: someone with write access to the database drops the
// append-only triggers, deletes the newest entries, points the head at the
// new end and removes the verification mark. The chain that remains
// verifies; the checkpoints kept outside it (the file `serve` appends to,
// and the one in an exported bundle) do not, and say which entries are gone.
both_engines!(a_tail_cut_by_hand_is_caught_by_the_checkpoints_kept_outside, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    i.cli_json(&["endpoint", "create", "clinic-a", "hooks", "--scheme", "standard-webhooks"]);
    let file = i.dir.path().join("audit-checkpoints.jsonl");
    let s = i.serve();
    let head = || i.cli_json(&["audit", "verify"])["head_seq"].as_i64().unwrap();
    // A sensitive action is anchored within a second or two.
    i.cli_json(&["key", "provision", "clinic-a", "hooks"]);
    let first = anchored_at_least(&file, head());
    assert!(first["signature"].is_string() && first["public_key"].is_string(), "{first}");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    let bundle = i.dir.path().join("bundle");
    i.cli_json(&["evidence", "export", "--out", bundle.to_str().unwrap()]);
    let exported: Value = serde_json::from_slice(&std::fs::read(bundle.join("evidence.json")).unwrap()).unwrap();
    let bundle_seq = exported["audit"]["checkpoint"]["seq"].as_i64().unwrap();
    // More changes, the last one sensitive, and anchored too.
    for t in ["clinic-b", "clinic-c"] {
        i.cli_json(&["tenant", "create", t]);
    }
    i.cli_json(&["token", "create", "--name", "rita", "--role", "reviewer"]);
    let newest = anchored_at_least(&file, head())["seq"].as_i64().unwrap();
    drop(s);
    let intact = i.cli(&["audit", "verify", "--checkpoints", file.to_str().unwrap()], "");
    assert!(intact.status.success(), "{}", stderr(&intact));

    let db = domain::db::connect(&i.database_url).await.unwrap();
    use sea_orm::ConnectionTrait;
    let keep = bundle_seq - 1;
    let drop_triggers = if i.database_url.starts_with("postgres") {
        "ALTER TABLE audit_log DISABLE TRIGGER USER"
    } else {
        "DROP TRIGGER audit_log_no_update; DROP TRIGGER audit_log_no_delete"
    };
    db.execute_unprepared(drop_triggers).await.unwrap();
    db.execute_unprepared(&format!("DELETE FROM audit_log WHERE seq > {keep}")).await.unwrap();
    db.execute_unprepared(&format!(
        "UPDATE audit_head SET seq = {keep}, hash = (SELECT hash FROM audit_log WHERE seq = {keep})"
    ))
    .await
    .unwrap();
    db.execute_unprepared("DELETE FROM audit_verified").await.unwrap();
    db.close().await.ok();

    // Inside the database nothing shows it.
    let alone = i.cli(&["audit", "verify"], "");
    assert!(alone.status.success(), "the cut chain verifies on its own: {}", stderr(&alone));
    let against_file = i.cli(&["audit", "verify", "--checkpoints", file.to_str().unwrap()], "");
    assert_eq!(against_file.status.code(), Some(1));
    let why = stderr(&against_file);
    assert!(why.contains(&format!("entries {}–{newest} are missing", keep + 1)), "{why}");
    assert_eq!(why.lines().count(), 1, "{why}");
    let against_bundle = i.cli(&["evidence", "verify", bundle.to_str().unwrap()], "");
    assert_eq!(against_bundle.status.code(), Some(1));
    let why = stderr(&against_bundle);
    assert!(why.contains(&format!("recorded entry {bundle_seq}")) && why.contains("missing"), "{why}");

    // Bad input: one line naming the file, or the line.
    let gone = i.cli(&["audit", "verify", "--checkpoints", "/nonexistent/anchors.jsonl"], "");
    assert_eq!(gone.status.code(), Some(1));
    assert!(stderr(&gone).contains("cannot read /nonexistent/anchors.jsonl"), "{}", stderr(&gone));
    let garbled = i.dir.path().join("garbled.jsonl");
    let first_line = std::fs::read_to_string(&file).unwrap().lines().next().unwrap().to_owned();
    std::fs::write(&garbled, format!("{first_line}\nnot json\n")).unwrap();
    let bad = i.cli(&["audit", "verify", "--checkpoints", garbled.to_str().unwrap()], "");
    assert_eq!(bad.status.code(), Some(1));
    assert!(stderr(&bad).contains("line 2: not a signed checkpoint"), "{}", stderr(&bad));
    assert_eq!(stderr(&bad).lines().count(), 1);
});
