//! Start-up behaviour: master key handling, setup link, health.

use crate::{
    both_engines,
    support::{Engine, Install},
};

both_engines!(health_and_setup_link, async |i: &Install| {
    let s = i.serve();
    let c = s.client();
    assert_eq!(c.get(s.url("/healthz")).send().await.unwrap().status(), 200);
    assert_eq!(c.get(s.url("/readyz")).send().await.unwrap().status(), 200);
    assert!(s.output().contains("/setup?token=setup_"), "setup link printed while no user exists");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(i.data_dir().join("master.key")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    assert!(s.output().contains("production must supply its own"));
});

both_engines!(refuses_to_start_with_the_wrong_master_key, async |i: &Install| {
    i.cli_json(&["tenant", "create", "clinic-a"]);
    i.cli_json(&["endpoint", "create", "clinic-a", "hooks", "--scheme", "github"]);
    i.cli_json(&["key", "provision", "clinic-a", "hooks"]);
    let key_path = i.data_dir().join("master.key");
    let original = std::fs::read(&key_path).unwrap();
    std::fs::remove_file(&key_path).unwrap();
    // Missing key on a database that has sealed data: refuse, create nothing.
    let err = serve_must_refuse(i);
    assert!(err.contains("does not exist"), "{err}");
    assert!(!key_path.exists(), "no new key was generated over existing data");
    // A different key: refuse with a clear message.
    std::fs::write(&key_path, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n").unwrap();
    let err = serve_must_refuse(i);
    assert!(err.contains("not the key"), "{err}");
    std::fs::write(&key_path, original).unwrap();
    let s = i.serve();
    assert!(s.output().contains("listening"));
});

/// Starts `signet serve`, which must refuse to start within 20 s; returns
/// its stderr.
fn serve_must_refuse(i: &Install) -> String {
    serve_must_refuse_with(i, &[])
}

/// [`serve_must_refuse`] with extra environment.
fn serve_must_refuse_with(i: &Install, env: &[(&str, &str)]) -> String {
    use std::io::Read;
    let mut child = std::process::Command::new(crate::support::BIN)
        .envs(env.iter().copied())
        .env("SIGNET_DATA_DIR", i.data_dir())
        .env("DATABASE_URL", &i.database_url)
        .env("SIGNET_ADDR", "127.0.0.1:0")
        .args(["serve"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > std::time::Duration::from_secs(20) {
            let _ = child.kill();
            panic!("signet serve started although it should have refused");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(!status.success());
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    err
}

/// Item 24.11: a bad `SIGNET_TRUSTED_PROXIES` (or `--trusted-proxies`)
/// refuses to start, with one line naming the entry.
#[test]
fn a_bad_trusted_proxy_block_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    for (bad, says) in [
        ("10.0.0.0/33", "`10.0.0.0/33` is not a CIDR block"),
        ("10.0.0.0/8,10.0.0.1/8", "`10.0.0.1/8` has host bits set; the block is 10.0.0.0/8"),
        ("proxy.internal", "`proxy.internal` is not an address"),
    ] {
        for by_flag in [false, true] {
            let mut cmd = std::process::Command::new(crate::support::BIN);
            cmd.env_clear()
                .env("SIGNET_DATA_DIR", dir.path())
                .env("SIGNET_ADDR", "127.0.0.1:0")
                .env("SIGNET_METRICS_ADDR", "127.0.0.1:0")
                .arg("serve");
            if by_flag {
                cmd.args(["--trusted-proxies", bad]);
            } else {
                cmd.env("SIGNET_TRUSTED_PROXIES", bad);
            }
            let out = cmd.output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{bad}: started");
            assert_eq!(err.trim_end().lines().count(), 1, "{bad}: one line: {err}");
            assert!(err.contains("SIGNET_TRUSTED_PROXIES") && err.contains(says), "{bad}: {err}");
        }
    }
}

/// Item 25.5: a second instance whose metrics port is taken refuses to start,
/// and its error says the port is taken and names `SIGNET_METRICS_ADDR`.
#[test]
fn a_taken_metrics_port_refuses_to_start_naming_signet_metrics_addr() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(crate::support::BIN)
        .env_clear()
        .env("SIGNET_DATA_DIR", dir.path())
        .env("SIGNET_ADDR", "127.0.0.1:0")
        .env("SIGNET_METRICS_ADDR", &addr)
        .env("SIGNET_LOG", "warn")
        .arg("serve")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "started although {addr} is taken: {err}");
    let line = err.lines().find(|l| l.contains("/metrics")).unwrap_or_else(|| panic!("no /metrics error: {err}"));
    assert!(line.contains(&addr) && line.contains("the port is taken"), "{line}");
    assert!(line.contains("SIGNET_METRICS_ADDR"), "{line}");
    // It stopped before anything else: no setup link, no listening line.
    assert!(!String::from_utf8_lossy(&out.stdout).contains("listening"));
    drop(taken);
}

/// Debian's libfaketime (`/usr/lib/<arch>/faketime/`), which, preloaded,
/// moves the clock of `signet serve` and not PostgreSQL's (SQLite reads the
/// process's own clock, so it has no offset).
fn faketime() -> Option<String> {
    let arches = std::fs::read_dir("/usr/lib").ok()?;
    let mut libs = arches.flatten().map(|d| d.path().join("faketime/libfaketime.so.1"));
    libs.find(|p| p.exists()).map(|p| p.display().to_string())
}

/// The environment that moves the process's wall clock `by` (libfaketime's
/// syntax: seconds, or with `m`, `h`); `None` (skipped) without
/// libfaketime, except where PostgreSQL tests are required (CI).
fn clock_moved(by: &'static str) -> Option<[(&'static str, String); 3]> {
    let Some(lib) = faketime() else {
        assert!(std::env::var_os("SIGNET_REQUIRE_PG").is_none(), "libfaketime is missing: scripts/setup.sh --test");
        eprintln!("SKIPPED: libfaketime is not installed (scripts/setup.sh --test installs it)");
        return None;
    };
    Some([("LD_PRELOAD", lib), ("FAKETIME", by.into()), ("FAKETIME_DONT_FAKE_MONOTONIC", "1".into())])
}

fn env<'a>(vars: &'a [(&'static str, String); 3]) -> Vec<(&'static str, &'a str)> {
    vars.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clock_far_off_the_databases_is_refused_and_a_near_one_is_measured() {
    let Some(i) = Install::new(Engine::Postgres) else { return };
    let Some(ahead) = clock_moved("+2h") else { return };
    let err = serve_must_refuse_with(&i, &env(&ahead));
    assert!(err.contains("refusing to start: this machine's clock is 7"), "{err}");
    assert!(err.contains(" s ahead of the database's (at most 600 s allowed)"), "{err}");
    let behind = clock_moved("-15m").unwrap();
    let err = serve_must_refuse_with(&i, &env(&behind));
    assert!(err.contains("clock is 9") && err.contains(" s behind the database's"), "{err}");
    // A CLI command too, before it migrates or writes.
    let out = i.command().envs(env(&behind)).args(["tenant", "create", "clinic-b"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains(" s behind the database's"), "{err}");
    assert!(!i.cli_json(&["tenant", "list"]).to_string().contains("clinic-b"), "nothing was created");

    // Within the limit it starts, says so once, and reports the offset.
    let s = i.serve_with(&env(&clock_moved("+45").unwrap()));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let offset = loop {
        let metrics = reqwest::get(&s.metrics).await.unwrap().text().await.unwrap();
        let sample = metrics.lines().find_map(|l| l.strip_prefix("signet_clock_offset_seconds "));
        let offset: f64 = sample.expect("the metric is exported").parse().unwrap();
        if offset != 0.0 || std::time::Instant::now() > deadline {
            break offset;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert!((44.0..=46.0).contains(&offset), "{offset}");
    assert_eq!(s.output().matches("clock is off the database's by more than 30 s").count(), 1, "{}", s.output());
}
