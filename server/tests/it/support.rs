//! Boots the real `signet` binary against a fresh SQLite or PostgreSQL
//! database, and runs its CLI against the same data.
//!
//! PostgreSQL comes from `SIGNET_TEST_PG_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`); each server gets a fresh
//! database. Without PostgreSQL the PG half is skipped visibly, unless
//! `SIGNET_REQUIRE_PG=1` (CI), where it fails.

use std::{
    io::{BufRead, BufReader, Write},
    path::PathBuf,
    process::{Child, Command, Output, Stdio},
    sync::{Arc, Mutex},
    time::Duration,
};

pub const BIN: &str = env!("CARGO_BIN_EXE_signet");

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Sqlite,
    Postgres,
}

/// Environment for one Signet installation: a data dir and a database.
pub struct Install {
    pub dir: tempfile::TempDir,
    pub database_url: String,
    pub engine: Engine,
    pg_cleanup: Option<(String, String)>,
}

impl Install {
    pub fn new(engine: Engine) -> Option<Install> {
        let dir = tempfile::tempdir().expect("tempdir");
        match engine {
            Engine::Sqlite => {
                let url = format!("sqlite://{}/signet.db?mode=rwc", dir.path().display());
                Some(Install { dir, database_url: url, engine, pg_cleanup: None })
            }
            Engine::Postgres => {
                let admin = std::env::var("SIGNET_TEST_PG_URL")
                    .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
                let name = format!("signet_s_{}", uuid::Uuid::new_v4().simple());
                let ok = Command::new("psql").arg(&admin).arg("-qc").arg(format!("CREATE DATABASE {name}")).output();
                match ok {
                    Ok(o) if o.status.success() => {}
                    other => {
                        if std::env::var("SIGNET_REQUIRE_PG").is_ok_and(|v| v == "1") {
                            panic!("PostgreSQL is required (SIGNET_REQUIRE_PG=1) but unusable at {admin}: {other:?}");
                        }
                        eprintln!(
                            "SKIPPED (PostgreSQL unusable at {admin}); \
                             set SIGNET_TEST_PG_URL to run the PostgreSQL half"
                        );
                        return None;
                    }
                }
                let base = admin.rsplit_once('/').map(|(b, _)| b.to_owned()).unwrap_or(admin.clone());
                Some(Install { dir, database_url: format!("{base}/{name}"), engine, pg_cleanup: Some((admin, name)) })
            }
        }
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().to_owned()
    }

    /// `signet` with this installation's environment (and nothing else).
    pub fn command(&self) -> Command {
        let mut c = Command::new(BIN);
        c.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("SIGNET_DATA_DIR", self.dir.path())
            .env("DATABASE_URL", &self.database_url)
            // Two tests run at once, some with three servers, against one
            // PostgreSQL whose max_connections is 100: at the default 32 a
            // burst could exhaust it ("too many clients").
            .env("SIGNET_PG_POOL_SIZE", "12");
        c
    }

    /// Runs `signet <args>` with `stdin`; returns its output.
    pub fn cli(&self, args: &[&str], stdin: &str) -> Output {
        let mut child = self
            .command()
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn signet");
        child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("write stdin");
        child.wait_with_output().expect("signet output")
    }

    /// Posts `body` to `url` as a provider would (`signet send`, Standard
    /// Webhooks, with `event_id`); the send must succeed.
    pub fn send_event(&self, url: &str, secret: &str, event_id: &str, body: &str) {
        let file = self.data_dir().join(format!("{event_id}.json"));
        std::fs::write(&file, body).expect("write body");
        let out = self.cli(
            &[
                "send",
                url,
                "--scheme",
                "standard-webhooks",
                "--secret",
                secret,
                "--file",
                file.to_str().expect("utf-8 path"),
                "--event-id",
                event_id,
            ],
            "",
        );
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }

    /// Runs a CLI command with `--json` that must succeed; returns its value.
    pub fn cli_json(&self, args: &[&str]) -> serde_json::Value {
        self.cli_json_stdin(args, "")
    }

    pub fn cli_json_stdin(&self, args: &[&str], stdin: &str) -> serde_json::Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let out = self.cli(&all, stdin);
        assert!(out.status.success(), "signet {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!("signet {args:?} printed non-JSON ({e}): {}", String::from_utf8_lossy(&out.stdout))
        })
    }

    /// Meets the rollout order that enabling retries needs, as an operator
    /// would: `signet drill run` on this binary, then a deployment-wide
    /// bundle exported and approved by a reviewer through the API (each
    /// critical finding acknowledged), covering the keys that exist now.
    /// Starts and stops its own server; callable from sync code.
    pub fn meet_rollout_order(&self) {
        static REVIEWERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let run = self.cli_json(&["drill", "run"]);
        assert_eq!(run["passed"], true, "{run:#}");
        let n = REVIEWERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("rollout-reviewer-{n}");
        let token = self.cli_json(&["token", "create", "--name", &name, "--role", "reviewer"])["token"]
            .as_str()
            .expect("token")
            .to_owned();
        let s = self.serve();
        let (exports, signoffs) = (s.url("/api/v1/evidence/exports"), s.url("/api/v1/evidence/signoffs"));
        let sign = async move {
            let c = reqwest::Client::new();
            let bundle: serde_json::Value =
                c.post(exports).bearer_auth(&token).send().await.unwrap().json().await.unwrap();
            let mut critical: Vec<&str> = bundle["evidence"]["findings"]
                .as_array()
                .expect("findings")
                .iter()
                .filter(|f| f["severity"] == "critical")
                .filter_map(|f| f["id"].as_str())
                .collect();
            critical.sort_unstable();
            critical.dedup();
            let acknowledge: Vec<_> =
                critical.iter().map(|f| serde_json::json!({"finding": f, "comment": "test install"})).collect();
            let body = serde_json::json!({
                "digest": bundle["digest"], "decision": "approved", "comment": "rollout order for the test",
                "acknowledge": acknowledge,
            });
            let signed = c.post(signoffs).bearer_auth(&token).json(&body).send().await.unwrap();
            assert_eq!(signed.status(), 201, "{}", signed.text().await.unwrap());
        };
        // Its own runtime on its own thread: callers may be sync or async.
        std::thread::scope(|scope| {
            scope
                .spawn(|| tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(sign))
                .join()
                .expect("sign-off")
        });
        drop(s);
    }

    /// Starts `signet serve` on a free port.
    pub fn serve(&self) -> Server {
        self.serve_with(&[])
    }

    /// Starts `signet serve` with extra environment (e.g. `SIGNET_FAULTS`).
    pub fn serve_with(&self, env: &[(&str, &str)]) -> Server {
        let mut cmd = self.command();
        // Many servers run at once: each gets its own metrics port (a test
        // may still override it).
        cmd.env("SIGNET_METRICS_ADDR", "127.0.0.1:0");
        // Dropping a server SIGKILLs it, and the next one on the same data
        // waits for its job leases to expire: short here, so it waits little.
        cmd.env("SIGNET_JOB_LEASE_MS", "1500");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .args(["serve"])
            .env("SIGNET_LOG", "info")
            .env("SIGNET_ADDR", "127.0.0.1:0")
            .env("LEPTOS_SITE_ROOT", self.dir.path().join("site"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn signet serve");
        let stdout = child.stdout.take().expect("stdout");
        let stderr = child.stderr.take().expect("stderr");
        let output = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let metrics = Arc::new(Mutex::new(String::new()));
        for (pipe, tx) in [(Box::new(stdout) as Box<dyn std::io::Read + Send>, Some(tx)), (Box::new(stderr), None)] {
            let output = output.clone();
            let metrics = metrics.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    // Recorded before announcing the address, so a test that
                    // has the address also sees the line in `output()`. The
                    // line and its newline go in under one lock: the stdout
                    // and stderr readers would otherwise interleave.
                    {
                        let mut out = output.lock().expect("log lock");
                        out.push_str(&line);
                        out.push('\n');
                    }
                    if let Some(url) = line.strip_prefix("Signet metrics on ") {
                        *metrics.lock().expect("metrics lock") = url.trim().to_owned();
                    }
                    if let (Some(tx), Some(rest)) = (&tx, line.strip_prefix("Signet is listening on ")) {
                        let _ = tx.send(rest.trim().to_owned());
                    }
                }
            });
        }
        let base = rx.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|_| {
            let _ = child.kill();
            panic!("signet serve did not start: {}", output.lock().expect("log lock"))
        });
        let metrics = metrics.lock().expect("metrics lock").clone();
        Server { child, base, output, metrics }
    }
}

impl Drop for Install {
    fn drop(&mut self) {
        if let Some((admin, name)) = self.pg_cleanup.take() {
            let _ = Command::new("psql")
                .arg(&admin)
                .arg("-qc")
                .arg(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .output();
        }
    }
}

/// A running `signet serve`.
pub struct Server {
    pub child: Child,
    pub base: String,
    output: Arc<Mutex<String>>,
    /// `http://…/metrics` on the separate metrics listener.
    pub metrics: String,
}

impl Server {
    /// Kills the process with SIGKILL (no graceful shutdown).
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
    /// Everything the server printed so far (stdout and stderr).
    pub fn output(&self) -> String {
        self.output.lock().expect("log lock").clone()
    }
    /// A client that keeps cookies and does not follow redirects.
    pub fn client(&self) -> reqwest::Client {
        reqwest::Client::builder()
            .cookie_store(true)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("client")
    }
    /// [`Server::client`], logged in to the console as `username`.
    pub async fn logged_in(&self, username: &str, password: &str) -> reqwest::Client {
        let c = self.client();
        let login = c
            .post(self.url("/fn/login"))
            .header("Origin", &self.base)
            .form(&[("username", username), ("password", password)])
            .send()
            .await
            .expect("login");
        assert_eq!(login.status(), 200, "login as {username}");
        c
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs an async test body once per engine.
#[macro_export]
macro_rules! both_engines {
    ($name:ident, $body:expr) => {
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let i = $crate::support::Install::new($crate::support::Engine::Sqlite).expect("sqlite");
                ($body)(&i).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let Some(i) = $crate::support::Install::new($crate::support::Engine::Postgres) else { return };
                ($body)(&i).await;
            }
        }
    };
}

/// Now in seconds, as providers sign timestamps.
pub fn now() -> i64 {
    domain::clock::now_ms() / 1000
}

/// A `reminder.created` envelope for reminder `id`, event id `evt_<id>`.
pub fn created(id: &str) -> Vec<u8> {
    let data = serde_json::json!({"reminder_id": id, "send_at": "2027-01-05T09:00:00Z"});
    serde_json::json!({"id": format!("evt_{id}"), "type": "reminder.created", "data": data}).to_string().into_bytes()
}

/// Posts `body` to `url` with `headers` as given: the status and the JSON
/// answer (`Null` when the answer is not JSON).
pub async fn post(
    c: &reqwest::Client,
    url: &str,
    headers: &[(String, String)],
    body: Vec<u8>,
) -> (reqwest::StatusCode, serde_json::Value) {
    let mut r = c.post(url).body(body);
    for (k, v) in headers {
        r = r.header(k.as_str(), v.as_str());
    }
    let res = r.send().await.expect("post");
    let status = res.status();
    (status, res.json().await.unwrap_or(serde_json::Value::Null))
}

/// Asserts an answer's status and the value of one of its fields.
#[track_caller]
pub fn expect(got: (reqwest::StatusCode, serde_json::Value), status: u16, field: &str, value: &str) {
    assert_eq!(got.0.as_u16(), status, "{got:?}");
    assert_eq!(got.1[field], value, "{got:?}");
}

impl Install {
    /// Tenant clinic-a and its endpoint `hooks` verifying `scheme`, for
    /// `event_types` (comma-separated), with `extra` flags appended.
    pub fn clinic_a_hooks(&self, scheme: &str, event_types: &str, extra: &[&str]) {
        self.cli_json(&["tenant", "create", "clinic-a"]);
        let mut args =
            vec!["endpoint", "create", "clinic-a", "hooks", "--scheme", scheme, "--event-types", event_types];
        args.extend_from_slice(extra);
        self.cli_json(&args);
    }

    /// A key for clinic-a/hooks that may sign `event_types`, approved by
    /// rita: its id and secret.
    pub fn clinic_a_hooks_key(&self, event_types: &str) -> (String, domain::crypto::SigningSecret) {
        let k = self.cli_json(&[
            "key",
            "provision",
            "clinic-a",
            "hooks",
            "--approve-as",
            "rita",
            "--event-types",
            event_types,
        ]);
        let secret = domain::crypto::SigningSecret::parse(k["secret"].as_str().expect("secret")).expect("secret");
        (k["key_id"].as_str().expect("key id").to_owned(), secret)
    }
}
