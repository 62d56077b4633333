//! How drills reach a receiver (`domain::evidence::drills::Transport`):
//! real HTTP to `/hooks` of a listening server — the running `signet serve`
//! itself, or, for `signet drill run`, an in-process receiver on a loopback
//! port — and a child `signet drill child` process for the drill that must
//! be killed mid-transaction.

use std::{process::Stdio, sync::Arc, time::Duration};

use domain::{
    auth::Principal,
    evidence::{
        drills::{Answer, DrillRequest, Transport, TransportError, Until},
        runs::{self, DrillSpawner},
    },
    receiver::{
        Receiver,
        faults::{DrillFault, DrillFaults, Faults},
    },
    vault::Vault,
};
use sea_orm::DatabaseConnection;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::config::DbArgs;

/// The header that carries [`RunnerToken`].
pub const RUNNER_HEADER: &str = "signet-drill-runner";

/// A secret the drill runner sends with each of its deliveries, so that
/// `/hooks` tells the runner's own traffic to `/hooks/_drill…` from anyone
/// else's (which is counted and logged). Random per process, never logged
/// or stored; the in-process receiver and the transport share it.
pub struct RunnerToken(zeroize::Zeroizing<String>);

impl RunnerToken {
    pub fn generate() -> Arc<RunnerToken> {
        let t = domain::crypto::random_token("");
        Arc::new(RunnerToken(zeroize::Zeroizing::new(t.expose().to_owned())))
    }

    /// Whether `headers` carry this token (compared in constant time).
    pub fn sent_with(&self, headers: &http::HeaderMap) -> bool {
        headers.get(RUNNER_HEADER).is_some_and(|v| domain::crypto::constant_time_eq(v.as_bytes(), self.0.as_bytes()))
    }
}

impl std::fmt::Debug for RunnerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RunnerToken(<redacted>)")
    }
}

/// Delivers drill requests to `base` (e.g. `http://127.0.0.1:3000`).
pub struct HttpTransport {
    base: String,
    client: reqwest::Client,
    faults: Arc<DrillFaults>,
    child: ChildEnv,
    token: Arc<RunnerToken>,
}

/// What a `signet drill child` needs to open the same database and vault
/// as this process. Passed through the environment, never on the command
/// line (which other local users can read).
#[derive(Clone, Debug)]
pub struct ChildEnv {
    pub database_url: String,
    pub data_dir: std::path::PathBuf,
    pub master_key_file: Option<std::path::PathBuf>,
}

impl ChildEnv {
    pub fn from_args(args: &DbArgs) -> Result<ChildEnv, String> {
        Ok(ChildEnv {
            database_url: args.url().map_err(|e| e.to_string())?,
            data_dir: args.data_dir.clone(),
            master_key_file: args.master_key_file.clone(),
        })
    }
}

impl HttpTransport {
    pub fn new(
        base: String,
        faults: Arc<DrillFaults>,
        child: ChildEnv,
        token: Arc<RunnerToken>,
    ) -> Result<HttpTransport, String> {
        let client = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().map_err(|e| e.to_string())?;
        Ok(HttpTransport { base, client, faults, child, token })
    }

    fn post(&self, client: &reqwest::Client, req: &DrillRequest) -> reqwest::RequestBuilder {
        let mut r = client.post(format!("{}/hooks/{}/{}", self.base, req.tenant, req.endpoint)).body(req.body.clone());
        for (k, v) in &req.headers {
            r = r.header(k, v);
        }
        r.header("content-type", "application/json").header(RUNNER_HEADER, self.token.0.as_str())
    }
}

/// A failed delivery in fixed words; reqwest's own text (the URL, the OS
/// error) only as the detail, for the log.
fn delivery_failed(e: reqwest::Error) -> TransportError {
    let what = if e.is_timeout() {
        "the receiver did not answer in time"
    } else if e.is_connect() {
        "the receiver refused the connection"
    } else {
        "the delivery failed before an answer"
    };
    TransportError::new(what, e)
}

impl Transport for HttpTransport {
    async fn deliver(&self, req: &DrillRequest) -> Result<Answer, TransportError> {
        let res = self.post(&self.client, req).send().await.map_err(delivery_failed)?;
        let status = res.status().as_u16();
        let body = res.json().await.unwrap_or(serde_json::Value::Null);
        Ok(Answer { status, body })
    }

    async fn deliver_then_drop<'a>(
        &'a self,
        req: &'a DrillRequest,
        committed: Until<'a>,
    ) -> Result<bool, TransportError> {
        // Its own client: dropping the request must close its connection,
        // not return it to a shared pool.
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .map_err(|e| TransportError::new("the drill's HTTP client could not be built", e))?;
        let send = self.post(&client, req).send();
        tokio::select! {
            // The answer came first: nothing was lost, the drill did not
            // happen as designed.
            answer = send => answer.map(|_| false).map_err(delivery_failed),
            seen = committed => Ok(seen),
        }
    }

    async fn deliver_in_killed_process(&self, req: &DrillRequest) -> Result<String, TransportError> {
        kill_child_before_commit(&self.child, req).await
    }

    fn faults(&self) -> &DrillFaults {
        &self.faults
    }
}

/// The line a drill child prints once its transaction is held open.
pub const HELD: &str = "held-before-commit";

/// Runs `signet drill child` with `req` in its environment
/// ([`REQUEST_ENV`]: it has it from its first instruction, whatever happens
/// to this process after the spawn), waits until it holds the claim
/// transaction open before COMMIT, and SIGKILLs it there. Its stdin is a
/// pipe this process keeps open until then: if this process dies first, the
/// child reads end of file and leaves at once, so its open transaction (and
/// SQLite's write lock) never outlives the drill.
async fn kill_child_before_commit(env: &ChildEnv, req: &DrillRequest) -> Result<String, TransportError> {
    let exe = std::env::current_exe().map_err(|e| TransportError::new("the signet binary could not be found", e))?;
    let mut cmd = tokio::process::Command::new(exe);
    cmd.args(["drill", "child"])
        .env("DATABASE_URL", &env.database_url)
        .env("SIGNET_DATA_DIR", &env.data_dir)
        .env("SIGNET_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    if let Some(f) = &env.master_key_file {
        cmd.env("SIGNET_MASTER_KEY_FILE", f);
    }
    let request = serde_json::to_string(req)
        .map_err(|e| TransportError::new("the drill request could not be handed to the child", e))?;
    cmd.env(REQUEST_ENV, request);
    let mut child = cmd.spawn().map_err(|e| TransportError::new("the drill child could not be started", e))?;
    let pid = child.id().unwrap_or_default();
    let handed =
        |e: &dyn std::fmt::Display| TransportError::new("the drill request could not be handed to the child", e);
    let stdin = child.stdin.take().ok_or_else(|| handed(&"no stdin"))?;
    let stdout = child.stdout.take().ok_or_else(|| handed(&"no stdout"))?;
    let mut lines = BufReader::new(stdout).lines();
    let held = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.trim() == HELD {
                return Ok(());
            }
            if let Some(answer) = line.strip_prefix("answered ") {
                return Err(TransportError::new(
                    "the drill child answered without holding the transaction open",
                    format!("it answered {answer}"),
                ));
            }
        }
        Err(TransportError::new("the drill child exited before holding the transaction open", format!("pid {pid}")))
    })
    .await
    .map_err(|_| TransportError::new("the drill child did not hold the transaction within 30 s", format!("pid {pid}")));
    // SIGKILL, whatever happened: never leave a child holding a transaction.
    child.start_kill().map_err(|e| TransportError::new("the drill child could not be killed", e))?;
    let status = child.wait().await.map_err(|e| TransportError::new("the drill child could not be waited for", e))?;
    drop(stdin);
    held??;
    Ok(format!("signet drill child (pid {pid}) killed with SIGKILL while holding the claim transaction open: {status}"))
}

/// `signet drill child`: one delivery through an in-process receiver whose
/// drill fault holds the transaction open before COMMIT; prints [`HELD`] and
/// waits to be killed. It never outlives its parent's interest: when its
/// stdin closes (the parent died, or dropped the drill) it exits at once,
/// and after [`CHILD_MAX_HOLD`] without being killed it exits too; either
/// way the transaction dies with the process, uncommitted.
pub async fn child(db: DatabaseConnection, vault: Arc<Vault>) -> Result<(), String> {
    let req = read_request()?;
    exit_when_stdin_closes();
    let faults = Faults::default();
    let reached = Arc::new(tokio::sync::Notify::new());
    faults.drill.arm(DrillFault::HoldBeforeCommit { reached: reached.clone() });
    let receiver = Arc::new(Receiver::new(db, vault, faults));
    let (tenant, endpoint) =
        domain::receiver::address(&req.tenant, &req.endpoint).ok_or("endpoint lookup: not an endpoint's path")?;
    let ep = receiver.resolve(&tenant, &endpoint).await.map_err(|o| format!("endpoint lookup: {:?}", o.labels()))?;
    if !ep.synthetic {
        return Err("drill children only deliver to the drill tenant".into());
    }
    let headers = RequestHeaders(req.headers.clone());
    let task = tokio::spawn({
        let receiver = receiver.clone();
        async move {
            let delivery = domain::receiver::Buffered { headers: &headers, body: bytes::Bytes::from(req.body) };
            domain::receiver::receive(&receiver, &ep.tenant_slug, &ep.endpoint_slug, delivery).await.outcome
        }
    });
    tokio::select! {
        () = reached.notified() => {
            println!("{HELD}");
            use std::io::Write;
            std::io::stdout().flush().ok();
            tokio::time::sleep(CHILD_MAX_HOLD).await;
            // Never killed: leave without committing.
            std::process::exit(3);
        }
        outcome = task => {
            let label = outcome.map(|o| o.labels().0).unwrap_or("panicked");
            println!("answered {label}");
            Err("the delivery finished without reaching the commit".into())
        }
    }
}

/// How long a drill child holds its transaction open if its parent, alive,
/// never kills it. The parent kills it as soon as it reads [`HELD`].
const CHILD_MAX_HOLD: Duration = Duration::from_secs(10);

/// Where a drill child finds its request: the environment, set at exec.
/// (Synthetic drill data only: the drill tenant's ids and a body of its own.)
pub const REQUEST_ENV: &str = "SIGNET_DRILL_REQUEST";

fn read_request() -> Result<DrillRequest, String> {
    let text =
        std::env::var(REQUEST_ENV).map_err(|_| format!("{REQUEST_ENV} is not set: run by `signet drill run`"))?;
    serde_json::from_str(&text).map_err(|e| format!("bad drill request: {e}"))
}

/// Watches stdin on a thread of its own (the runtime may be stuck in the
/// held transaction): the parent keeps it open while it lives, so end of
/// file means nobody will kill this process. It exits then, within
/// milliseconds of the parent's death; the open transaction dies with it.
fn exit_when_stdin_closes() {
    std::thread::spawn(|| {
        use std::io::Read;
        let mut buf = [0u8; 64];
        loop {
            match std::io::stdin().read(&mut buf) {
                Ok(0) => std::process::exit(4),
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => std::process::exit(4),
            }
        }
    });
}

struct RequestHeaders(Vec<(String, String)>);

impl domain::crypto::signature::HeaderSource for RequestHeaders {
    fn header(&self, name: &str) -> Option<&[u8]> {
        self.0.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_bytes())
    }
}

/// Starts drill runs in the background of `signet serve`, delivering over
/// HTTP to this server's own listener.
pub struct ServeSpawner {
    pub db: DatabaseConnection,
    pub vault: Arc<Vault>,
    pub transport: Arc<HttpTransport>,
}

impl DrillSpawner for ServeSpawner {
    fn spawn(&self, principal: Principal, run_id: String) {
        let (db, vault, transport) = (self.db.clone(), self.vault.clone(), self.transport.clone());
        tokio::spawn(async move {
            if let Err(e) = runs::execute(&db, &vault, &principal, &run_id, transport.as_ref()).await {
                tracing::error!(run_id, error = %e, "drill run failed to record its result");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A refused connection is recorded in fixed words; the URL and the OS
    // error stay in the detail, which only the log sees.
    #[tokio::test]
    async fn a_refused_connection_is_told_without_its_url_or_os_error() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let child = ChildEnv { database_url: String::new(), data_dir: "/nonexistent".into(), master_key_file: None };
        let t = HttpTransport::new(format!("http://127.0.0.1:{port}"), Arc::default(), child, RunnerToken::generate())
            .unwrap();
        let req = DrillRequest { tenant: "_drill".into(), endpoint: "drill".into(), headers: vec![], body: vec![] };
        let e = t.deliver(&req).await.unwrap_err();
        assert_eq!(e.to_string(), "the receiver refused the connection");
        assert!(e.detail.contains(&port.to_string()), "the detail keeps what the log needs: {}", e.detail);
    }

    #[test]
    fn the_runner_token_is_recognised_and_never_printed() {
        let token = RunnerToken::generate();
        let mut headers = http::HeaderMap::new();
        assert!(!token.sent_with(&headers));
        headers.insert(RUNNER_HEADER, http::HeaderValue::from_str(token.0.as_str()).unwrap());
        assert!(token.sent_with(&headers));
        assert!(!RunnerToken::generate().sent_with(&headers), "each process has its own");
        assert!(!format!("{token:?}").contains(token.0.as_str()));
    }
}
