//! `signet config check` (issue 25 item 5): the effective configuration
//! without secrets, exit 0 when good; one line per problem and exit 1 when
//! not.

use std::process::Output;

use crate::{both_engines, support::Install};

/// A master key file only its owner can read; returns its path and the key.
fn key_file(i: &Install, mode: u32) -> (String, String) {
    use std::os::unix::fs::PermissionsExt;
    let (_, encoded) = domain::crypto::MasterKey::generate();
    let path = i.data_dir().join("operator.key");
    std::fs::write(&path, format!("{}\n", &*encoded)).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    (path.display().to_string(), encoded.to_string())
}

fn check(i: &Install, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = i.command();
    cmd.envs(env.iter().copied()).args(["config", "check"]).args(args);
    cmd.output().unwrap()
}

/// A command's extra environment.
type Env<'a> = &'a [(&'a str, &'a str)];

fn problems(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr).lines().filter(|l| l.starts_with("problem: ")).map(str::to_owned).collect()
}

both_engines!(a_good_configuration_prints_itself_without_secrets_and_exits_0, async |i: &Install| {
    let (path, key) = key_file(i, 0o600);
    let env = [("SIGNET_MASTER_KEY_FILE", path.as_str()), ("SIGNET_ADDR", "127.0.0.1:3000")];
    let out = check(i, &env, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stderr.trim().is_empty(), "{stderr}");
    assert!(stdout.contains("configuration OK"), "{stdout}");
    for line in ["addr                     127.0.0.1:3000", "metrics_addr             127.0.0.1:9464"] {
        assert!(stdout.contains(line), "{line}: {stdout}");
    }
    assert!(stdout.contains(&format!("file {path}")), "{stdout}");
    assert!(!stdout.contains(&key), "the key is printed");
    // Exposed on a non-loopback address behind TLS: still good.
    let env = [
        ("SIGNET_MASTER_KEY_FILE", path.as_str()),
        ("SIGNET_ADDR", "0.0.0.0:3000"),
        ("SIGNET_PUBLIC_URL", "https://signet.example.org"),
    ];
    let out = check(i, &env, &["--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ok"], true);
    assert_eq!(v["problems"], serde_json::json!([]));
    assert_eq!(v["config"]["public_url"], "https://signet.example.org");
    // The pool's size as the process took it (the test support sets 12).
    assert_eq!(v["config"]["pg_pool_size"], "12");
    // The key itself in the environment: named, never printed.
    let out = check(i, &[("SIGNET_MASTER_KEY", key.as_str())], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("SIGNET_MASTER_KEY (the environment)") && !stdout.contains(&key), "{stdout}");
});

// Each problem alone: exit 1 and exactly its one line.
both_engines!(each_bad_setting_is_refused_with_its_own_line, async |i: &Install| {
    let (good, _) = key_file(i, 0o600);
    let good = good.as_str();
    let cases: [(Env, &str); 4] = [
        (
            &[("SIGNET_MASTER_KEY_FILE", good), ("DATABASE_URL", "postgres://signet:hunter2@127.0.0.1:1/nowhere")],
            "DATABASE_URL: cannot reach the database at postgres://…@127.0.0.1:1/nowhere",
        ),
        (
            &[("SIGNET_METRICS_ADDR", "127.0.0.1:3000"), ("SIGNET_MASTER_KEY_FILE", good)],
            "SIGNET_METRICS_ADDR (127.0.0.1:3000) is the public address SIGNET_ADDR (127.0.0.1:3000)",
        ),
        (
            &[("SIGNET_ADDR", "0.0.0.0:3000"), ("SIGNET_MASTER_KEY_FILE", good)],
            "SIGNET_PUBLIC_URL (http://0.0.0.0:3000) is not https, but SIGNET_ADDR (0.0.0.0:3000) is not loopback",
        ),
        (
            &[
                ("SIGNET_ADDR", "10.1.2.3:443"),
                ("SIGNET_PUBLIC_URL", "http://signet.example.org"),
                ("SIGNET_MASTER_KEY_FILE", good),
            ],
            "SIGNET_PUBLIC_URL (http://signet.example.org) is not https",
        ),
    ];
    for (env, says) in cases {
        let out = check(i, env, &[]);
        assert_eq!(out.status.code(), Some(1), "{env:?}");
        let found = problems(&out);
        assert_eq!(found.len(), 1, "{env:?}: {found:?}");
        assert!(found[0].contains(says), "{env:?}: {}", found[0]);
        let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(!all.contains("hunter2"), "a database password is printed: {all}");
    }
    // A key file others can read.
    let (loose, _) = key_file(i, 0o644);
    let out = check(i, &[("SIGNET_MASTER_KEY_FILE", loose.as_str())], &[]);
    assert_eq!(out.status.code(), Some(1));
    let found = problems(&out);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains(&format!("SIGNET_MASTER_KEY_FILE {loose} is readable by group or others (mode 0644)")));
});

// All four at once: four lines, and `--json` lists the same four.
both_engines!(every_problem_is_listed_at_once, async |i: &Install| {
    let (loose, _) = key_file(i, 0o640);
    let env = [
        ("SIGNET_MASTER_KEY_FILE", loose.as_str()),
        ("DATABASE_URL", "postgres://127.0.0.1:1/nowhere"),
        ("SIGNET_ADDR", "0.0.0.0:8080"),
        ("SIGNET_METRICS_ADDR", "127.0.0.1:8080"),
    ];
    let out = check(i, &env, &[]);
    assert_eq!(out.status.code(), Some(1));
    let found = problems(&out);
    assert_eq!(found.len(), 4, "{found:?}");
    for want in ["SIGNET_MASTER_KEY_FILE", "DATABASE_URL", "SIGNET_METRICS_ADDR", "SIGNET_PUBLIC_URL"] {
        assert!(found.iter().any(|l| l.starts_with(&format!("problem: {want}"))), "{want}: {found:?}");
    }
    let out = check(i, &env, &["--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["problems"].as_array().unwrap().len(), 4);
});
