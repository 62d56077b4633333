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
    let serve = std::process::Command::new(crate::support::BIN)
        .env("SIGNET_DATA_DIR", i.data_dir())
        .env("DATABASE_URL", &i.database_url)
        .env("SIGNET_ADDR", "127.0.0.1:0")
        .args(["serve"])
        .output()
        .unwrap();
    assert!(!serve.status.success());
    let err = String::from_utf8_lossy(&serve.stderr);
    assert!(err.contains("does not exist"), "{err}");
    assert!(!key_path.exists(), "no new key was generated over existing data");
    // A different key: refuse with a clear message.
    std::fs::write(&key_path, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n").unwrap();
    let serve = std::process::Command::new(crate::support::BIN)
        .env("SIGNET_DATA_DIR", i.data_dir())
        .env("DATABASE_URL", &i.database_url)
        .env("SIGNET_ADDR", "127.0.0.1:0")
        .args(["serve"])
        .output()
        .unwrap();
    assert!(!serve.status.success());
    let err = String::from_utf8_lossy(&serve.stderr);
    assert!(err.contains("not the key"), "{err}");
    std::fs::write(&key_path, original).unwrap();
    let s = i.serve();
    assert!(s.output().contains("listening"));
});
