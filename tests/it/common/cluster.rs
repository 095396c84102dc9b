//! A NATS server and hub *processes* for the cluster tests and the benchmark: each hub is the
//! real `aicard serve` binary on port 0 with its own data dir, so a node can be SIGKILLed.
//! Tests that need NATS skip, loudly, only when `nats-server` is absent and
//! `AICARD_REQUIRE_NATS` is unset (test-all.sh sets it, so CI never skips silently).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::TOKEN;

/// A plain nats-server (core NATS, no JetStream: the cluster needs none) on a free loopback port.
pub struct NatsServer {
    child: Child,
    pub url: String,
    _dir: tempfile::TempDir,
}

fn nats_binary() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("AICARD_NATS_SERVER") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|d| d.join("nats-server"))
        .find(|p| p.is_file())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind a free port")
        .local_addr()
        .unwrap()
        .port()
}

/// [`wait_line`], but `None` when the stream ends first (the process ended).
async fn try_wait_line<R: tokio::io::AsyncRead + Unpin + Send + 'static>(
    stream: R,
    needle: &'static str,
    what: &str,
) -> Option<String> {
    let mut lines = BufReader::new(stream).lines();
    let found = tokio::time::timeout(Duration::from_secs(20), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains(needle) {
                return Some(line);
            }
        }
        None
    })
    .await
    .unwrap_or_else(|_| panic!("{what}: no `{needle}` within 20 s"))?;
    // Keep draining so the child never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Some(found)
}

/// Reads `child`'s stream until a line contains `needle`; returns that line.
async fn wait_line<R: tokio::io::AsyncRead + Unpin + Send + 'static>(
    stream: R,
    needle: &'static str,
    what: &str,
) -> String {
    try_wait_line(stream, needle, what)
        .await
        .unwrap_or_else(|| panic!("{what} ended before `{needle}`"))
}

impl NatsServer {
    /// Starts one, or `None` (with a loud message) when nats-server is not installed and
    /// `AICARD_REQUIRE_NATS` is unset.
    pub async fn start() -> Option<NatsServer> {
        let Some(bin) = nats_binary() else {
            if std::env::var_os("AICARD_REQUIRE_NATS").is_some() {
                panic!("AICARD_REQUIRE_NATS is set but nats-server was not found (apt-get install nats-server)");
            }
            eprintln!(
                "\n!!!!!!!! SKIPPED: nats-server not found; the cluster tests did not run. \
                 Install it (apt-get install nats-server) or set AICARD_REQUIRE_NATS=1 to fail instead. !!!!!!!!\n"
            );
            return None;
        };
        let dir = tempfile::tempdir().expect("tempdir");
        // The free port is free when asked, not always when nats-server binds it (tests in
        // this binary bind ports at the same time): a server that ends at once gets another.
        for attempt in 1..=5 {
            let port = free_port();
            let mut child = Command::new(&bin)
                .args(["-a", "127.0.0.1", "-p", &port.to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
            let stderr = child.stderr.take().unwrap();
            if try_wait_line(stderr, "Server is ready", "nats-server")
                .await
                .is_some()
            {
                return Some(NatsServer {
                    child,
                    url: format!("nats://127.0.0.1:{port}"),
                    _dir: dir,
                });
            }
            eprintln!("nats-server on port {port} ended before it was ready (attempt {attempt}); another port");
        }
        panic!("nats-server ended before `Server is ready` on five ports");
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// Timings of the hubs under test: heartbeat 200 ms (presence lives 500 ms), grace 300 ms.
pub const HEARTBEAT_MS: u64 = 200;
pub const LOST_GRACE_MS: u64 = 300;

/// One `aicard serve` process.
pub struct Node {
    child: Option<Child>,
    pub name: String,
    pub addr: String,
    pub dir: tempfile::TempDir,
}

impl Node {
    /// Starts a hub; in the cluster of `nats` as `name` when given.
    pub async fn start(nats: Option<&NatsServer>, name: &str, flows: Option<&Path>) -> Node {
        Self::start_with_heartbeat(nats, name, flows, HEARTBEAT_MS).await
    }

    /// `start`, with its own heartbeat (ms).
    pub async fn start_with_heartbeat(
        nats: Option<&NatsServer>,
        name: &str,
        flows: Option<&Path>,
        heartbeat_ms: u64,
    ) -> Node {
        Self::start_with_args(nats, name, flows, heartbeat_ms, &[]).await
    }

    /// `start`, with its own heartbeat (ms) and more `serve` arguments (`--exec on`).
    pub async fn start_with_args(
        nats: Option<&NatsServer>,
        name: &str,
        flows: Option<&Path>,
        heartbeat_ms: u64,
        extra: &[&str],
    ) -> Node {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = std::fs::File::create(dir.path().join("hub.log")).expect("log file");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_aicard"));
        cmd.args(["serve", "--port", "0", "--token", TOKEN])
            .arg("--data-dir")
            .arg(dir.path())
            .arg("--flows")
            .arg(
                flows
                    .map(Path::to_path_buf)
                    .unwrap_or_else(|| dir.path().join("flows")),
            )
            .arg("--role-cards")
            .arg(dir.path().join("role-cards"))
            .arg("--skills")
            .arg(dir.path().join("skills"))
            .args(["--heartbeat-ms", &heartbeat_ms.to_string()])
            .args(["--lost-grace-ms", &LOST_GRACE_MS.to_string()])
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .kill_on_drop(true);
        if let Some(n) = nats {
            cmd.args(["--cluster", &n.url, "--node", name]);
        }
        cmd.args(extra);
        let mut child = cmd.spawn().expect("spawn aicard serve");
        let stdout = child.stdout.take().unwrap();
        let line = wait_line(stdout, "listening on http://", name).await;
        let addr = line.rsplit("http://").next().unwrap().trim().to_string();
        Node {
            child: Some(child),
            name: name.to_string(),
            addr,
            dir,
        }
    }

    pub fn ws_url(&self) -> String {
        format!("ws://{}/realtime", self.addr)
    }

    pub async fn get(&self, path: &str) -> Value {
        let url = format!("http://{}{}", self.addr, path);
        let res = aicard::http_client::plain()
            .get(&url)
            .bearer_auth(TOKEN)
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {url}: {e}"));
        let body = res.bytes().await.expect("body");
        serde_json::from_slice(&body).unwrap_or_else(|e| panic!("GET {url}: {e}"))
    }

    /// This node's `/api/tabs`.
    pub async fn tabs(&self) -> Vec<Value> {
        self.get("/api/tabs").await["tabs"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Ids of the tabs this node sees connected (its own and other nodes').
    pub async fn connected(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .tabs()
            .await
            .into_iter()
            .filter(|t| t["state"] != "offline")
            .map(|t| t["id"].as_str().unwrap().to_string())
            .collect();
        ids.sort();
        ids
    }

    /// `/api/cluster`.
    pub async fn cluster(&self) -> Value {
        self.get("/api/cluster").await
    }

    /// SIGKILL: no goodbye to the cluster.
    pub async fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill().await;
        }
    }

    /// The hub's log so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("hub.log")).unwrap_or_default()
    }
}

/// Polls `check` (every 10 ms) until it holds or `limit` passes; returns how long it took.
/// Used to *measure* convergence, which is asynchronous by design.
pub async fn converge<F, Fut>(limit: Duration, what: &str, mut check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let t0 = Instant::now();
    loop {
        if check().await {
            return t0.elapsed();
        }
        if t0.elapsed() > limit {
            panic!("{what}: not within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
