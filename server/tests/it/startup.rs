//! Start-up behaviour: master key handling, setup link, health.

use crate::{both_engines, support::Install};

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
    use std::io::Read;
    let mut child = std::process::Command::new(crate::support::BIN)
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
