//! Hub configuration: addresses, directories, limits and timings, with defaults justified in
//! docs/ARCHITECTURE.md (anchors: Centrifugo, Socket.IO, uWebSockets — see shared reference).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// `--exec`: whether hub-side shell commands may run at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ExecFlag {
    /// Every shell command is refused with a reason (the default).
    #[default]
    Off,
    /// Only `--allow`ed programs, run from argv without a shell.
    Allowlist,
    /// Any command through `sh -c`; variables only through the environment.
    On,
}

/// Repair rounds an invalid plan gets by default (n8n retries once; three rounds let a
/// planner fix a second mistake its first fix revealed).
pub const DEFAULT_PLAN_REPAIRS: usize = 3;

/// `serve --cluster URL --node NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    /// `nats://HOST:PORT`.
    pub url: String,
    /// This node's name, unique in the cluster (`[A-Za-z0-9_-]+`).
    pub node: String,
}

/// Everything `aicard serve` can be told; `HubConfig::for_tests` gives a fast-timing variant.
#[derive(Debug, Clone)]
pub struct HubConfig {
    /// Where to listen; loopback unless the person says otherwise.
    pub bind: SocketAddr,
    /// SQLite store, token file and exec workspace live here.
    pub data_dir: PathBuf,
    /// `--files DIR`: where `with files=[…]` names are read from (default `DATA_DIR/files`).
    pub files_dir: PathBuf,
    /// `--max-file-mb`: the largest file a task may carry (20).
    pub max_file_mb: u64,
    /// `--fetch-urls`: the OpenAI door fetches a remote `image_url` (http(s), public addresses
    /// only, docs/api.md); off: such a URL is refused with 400.
    pub fetch_urls: bool,
    /// Exact `ip:port` pairs a fetch may reach although they are not public: tests only
    /// (a local server standing in for the internet); never set from the command line.
    pub fetch_allow: Vec<SocketAddr>,
    /// DER certificates an outgoing https request (a fetch, an MCP server's `url`) trusts
    /// besides the web PKI roots: tests only (a local HTTPS server with a CA of its own);
    /// never set from the command line.
    pub test_roots: Vec<Vec<u8>>,
    /// `--memory-summarizer TARGET`: the tab that summarizes each scope's new memories (off).
    pub memory_summarizer: Option<String>,
    /// `--memory-summary-every N`: new entries of a scope per summary (500).
    pub memory_summary_every: u64,
    /// `manager run NAME` loads `flows_dir/NAME.yaml`.
    pub flows_dir: PathBuf,
    /// Role cards (YAML / seed JSON).
    pub role_cards_dir: PathBuf,
    /// Skills (`*.yaml`), hot-reloaded.
    pub skills_dir: PathBuf,
    /// Overrides the stored token (`--token` / `AICARD_TOKEN`).
    pub token: Option<String>,
    /// Origins allowed on top of the nine chat sites and the hub itself.
    pub extra_origins: Vec<String>,
    /// Shell execution policy; off by default.
    pub exec_mode: ExecFlag,
    pub exec_allow: Vec<String>,
    /// MCP servers for `?<mcp …>!` (`--mcp-config`); `data_dir/mcp.json` when unset.
    pub mcp_config: Option<PathBuf>,
    /// `--cluster nats://… --node NAME`: join a cluster of hubs (docs/cluster.md); none =
    /// the single hub, as always.
    pub cluster: Option<ClusterConfig>,
    /// The planner tab of `manager plan` (`--planner`); else a `planner: true` role card,
    /// else the master's own tab.
    pub planner: Option<String>,
    /// Repair rounds for an invalid plan (`--plan-repairs`).
    pub plan_repairs: usize,
    /// Receivers of the signed lifecycle callbacks (`--webhook`, docs/cluster.md).
    pub webhooks: Vec<crate::webhooks::WebhookSpec>,
    /// Their HMAC key (`--webhook-secret`); else `data_dir/webhook-secret`, made once.
    pub webhook_secret: Option<String>,
    /// The agent loop (docs/agents.md): `--agent-loop`, `--agent-gap`, `--agent-max-*`.
    pub agent: AgentSettings,
    pub limits: Limits,
    pub timing: Periods,
}

/// The agent loop's switches and limits (docs/agents.md; docs/agents.md says why each is what it is).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSettings {
    /// `--agent-loop on|off`: off, no tab loops (agents' tasks are refused).
    pub enabled: bool,
    /// `--agent-max-rounds` (25).
    pub max_rounds: u32,
    /// `--agent-max-minutes` (30).
    pub max_minutes: u64,
    /// `--agent-gap MIN-MAX`, in ms (2,000–5,000): the pause between two automatic sends.
    pub gap_ms: (u64, u64),
    /// `--agent-result-chars` (4,000): longer outputs are cut, kept whole as `$Rk`.
    pub result_chars: usize,
    /// `--agent-arrival-ms`: how long a send may take to show the new turn before one
    /// resend (15 s); a tab's `held` starts it again.
    pub arrival_ms: u64,
    /// `--agent-hold-ms`: nothing is typed into a box the person pressed a key in this
    /// recently (3 s); sent to each tab in its `welcome`.
    pub hold_ms: u64,
    /// `--agent-task-pause-s`, in ms: an `agent task` whose session stays paused this long
    /// answers its caller ✗ with the pause's why and the text so far (60 s).
    pub task_pause_ms: u64,
    /// The importance summed since an agent's last reflection that asks for the next (50).
    pub reflect_threshold: u32,
}

impl Default for AgentSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            max_rounds: 25,
            max_minutes: 30,
            gap_ms: (2_000, 5_000),
            result_chars: 4_000,
            arrival_ms: 15_000,
            hold_ms: 3_000,
            task_pause_ms: 60_000,
            reflect_threshold: 50,
        }
    }
}

/// Parses `--agent-gap MIN-MAX` (seconds, decimals allowed; `0-0` sends at once).
pub fn parse_gap(s: &str) -> Result<(u64, u64), String> {
    let bad = || {
        format!("--agent-gap 需要 最小-最大 秒数 / --agent-gap wants MIN-MAX seconds, e.g. 2-5; got `{s}`")
    };
    let (a, b) = s.split_once('-').ok_or_else(bad)?;
    let secs = |t: &str| -> Result<u64, String> {
        let v: f64 = t.trim().parse().map_err(|_| bad())?;
        if !(0.0..=3600.0).contains(&v) {
            return Err(bad());
        }
        Ok((v * 1000.0).round() as u64)
    };
    let (lo, hi) = (secs(a)?, secs(b)?);
    if lo > hi {
        return Err(bad());
    }
    Ok((lo, hi))
}

/// Bounds that keep one bad tab from growing the hub's memory.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest inbound WebSocket message (bytes); larger → close 1009.
    pub max_frame_bytes: usize,
    /// Frames waiting to be written to one tab; full → the tab is closed as a slow consumer.
    pub outbound_queue: usize,
    /// Connected tabs at once.
    pub max_clients: usize,
    /// Flow runs in progress at once.
    pub max_runs: usize,
    /// Undelivered frames kept (in the store) for an offline tab; over it, the oldest
    /// progress frames go first (docs/protocol.md).
    pub offline_frames: usize,
    /// Bytes of undelivered frames kept for an offline tab.
    pub offline_bytes: usize,
    /// Tasks waiting for one tab.
    pub task_queue: usize,
    /// Open HTTP connections that have not had a request accepted yet (no answer below 400:
    /// a silent socket, a trickled header, a wrong token). At the cap the hub accepts no new
    /// connection until one of them is answered or closed.
    pub pending_connections: usize,
}

/// Heartbeat and timeout periods.
#[derive(Debug, Clone)]
pub struct Periods {
    /// How long a socket may stay silent before saying `hello`.
    pub hello_timeout: Duration,
    /// WebSocket ping period (also advertised as `heartbeat_ms`).
    pub ping_interval: Duration,
    /// No frame and no pong for this long → the tab is lost.
    pub dead_after: Duration,
    /// A lost tab's in-flight task goes back to the queue after this grace.
    pub lost_grace: Duration,
    /// A tab that did not come back is dropped from memory this long after it was last seen
    /// (its identity stays in the store), unless a task still waits on it.
    pub forget_in_memory: Duration,
    /// A tab that did not come back for this long is forgotten for good: its identity and
    /// the frames kept for it leave the store (not while a run in progress has it as master
    /// or a task waits on it).
    pub forget_after: Duration,
    /// Default time a tab has to answer a task.
    pub task_timeout: Duration,
    /// An SSE event stream whose `welcome` the tab has not confirmed (`ack`) within this is
    /// closed: its userscript manager buffers the response and the tab would never receive.
    pub stream_confirm: Duration,
    /// An HTTP connection must send a whole request head within this, counted from when it
    /// opened or its last answer: a silent or trickling client is closed, and so is a
    /// kept-alive connection idle this long. WebSocket and SSE streams are past their head and
    /// are not affected.
    pub http_header_read: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            // Centrifugo caps at 64 KB; a whole chat reply in one `turn_end` can be larger.
            max_frame_bytes: 1024 * 1024,
            outbound_queue: 256,
            max_clients: 20_000,
            max_runs: 64,
            // A run's progress is a few dozen frames; a tab away for a while gets its
            // results and the latest progress, not an unbounded backlog.
            offline_frames: 1024,
            offline_bytes: 16 * 1024 * 1024,
            task_queue: 64,
            // A tab's connection is pending for a millisecond or two; thousands of tabs
            // reconnecting at once wait in the listen backlog, not in the hub's memory.
            pending_connections: 512,
        }
    }
}

impl Default for Periods {
    fn default() -> Self {
        Periods {
            hello_timeout: Duration::from_secs(5),
            // Socket.IO and Centrifugo ping every 25 s; browsers answer WS pings from
            // throttled background tabs, so 20 s is cheap and catches loss within a minute.
            ping_interval: Duration::from_secs(20),
            dead_after: Duration::from_secs(60),
            lost_grace: Duration::from_secs(30),
            // Twice the reconnect grace: its tasks have failed over by then.
            forget_in_memory: Duration::from_secs(60),
            forget_after: Duration::from_secs(24 * 3600),
            task_timeout: Duration::from_secs(300),
            // Twice the hello timeout: the welcome has to travel out and the ack back.
            stream_confirm: Duration::from_secs(10),
            // nginx's client_header_timeout is 60 s, Go's servers are often set to 5–10 s; a
            // browser or script on loopback sends its head in milliseconds.
            http_header_read: Duration::from_secs(10),
        }
    }
}

impl HubConfig {
    /// Defaults for a data dir: loopback:8027, exec off, flows and role cards from the cwd.
    pub fn new(data_dir: PathBuf) -> HubConfig {
        HubConfig {
            bind: SocketAddr::from(([127, 0, 0, 1], 8027)),
            files_dir: data_dir.join("files"),
            max_file_mb: 20,
            fetch_urls: false,
            fetch_allow: Vec::new(),
            test_roots: Vec::new(),
            memory_summarizer: None,
            memory_summary_every: 500,
            data_dir,
            flows_dir: PathBuf::from("flows"),
            role_cards_dir: PathBuf::from("role-cards"),
            skills_dir: PathBuf::from("skills"),
            token: None,
            extra_origins: Vec::new(),
            exec_mode: ExecFlag::Off,
            exec_allow: Vec::new(),
            mcp_config: None,
            cluster: None,
            planner: None,
            plan_repairs: DEFAULT_PLAN_REPAIRS,
            webhooks: Vec::new(),
            webhook_secret: None,
            agent: AgentSettings::default(),
            limits: Limits::default(),
            timing: Periods::default(),
        }
    }

    /// Port 0 and short timings, for tests that must not wait a minute for a loss.
    pub fn for_tests(data_dir: PathBuf) -> HubConfig {
        let mut c = HubConfig::new(data_dir);
        c.bind = SocketAddr::from(([127, 0, 0, 1], 0));
        c.token = Some("test-token".into());
        c.timing = Periods {
            hello_timeout: Duration::from_millis(500),
            ping_interval: Duration::from_millis(200),
            dead_after: Duration::from_millis(800),
            lost_grace: Duration::from_millis(300),
            forget_in_memory: Duration::from_secs(600),
            forget_after: Duration::from_secs(24 * 3600),
            task_timeout: Duration::from_secs(30),
            stream_confirm: Duration::from_secs(5),
            http_header_read: Duration::from_secs(10),
        };
        c.agent.gap_ms = (0, 0);
        c
    }

    /// The user's data directory, by the OS's convention for an application's local data
    /// (`--help` shows it: `default_data_dir_shown!`): `~/.local/share/aicard` on Linux,
    /// `~/Library/Application Support/aicard` on macOS, `%LOCALAPPDATA%\aicard` on Windows
    /// (local, not roaming: the store and workspace stay on this machine; docs/windows.md).
    pub fn default_data_dir() -> PathBuf {
        dirs::data_local_dir()
            .unwrap_or_else(|| PathBuf::from("."))
            .join("aicard")
    }
}

/// [`HubConfig::default_data_dir`] as `--help` shows it, for this OS (a literal, so that
/// `concat!` can put it into clap's help text).
#[cfg(windows)]
#[macro_export]
#[doc(hidden)]
macro_rules! default_data_dir_shown {
    () => {
        r"%LOCALAPPDATA%\aicard"
    };
}
/// [`HubConfig::default_data_dir`] as `--help` shows it, for this OS (a literal, so that
/// `concat!` can put it into clap's help text).
#[cfg(target_os = "macos")]
#[macro_export]
#[doc(hidden)]
macro_rules! default_data_dir_shown {
    () => {
        "~/Library/Application Support/aicard"
    };
}
/// [`HubConfig::default_data_dir`] as `--help` shows it, for this OS (a literal, so that
/// `concat!` can put it into clap's help text).
#[cfg(all(unix, not(target_os = "macos")))]
#[macro_export]
#[doc(hidden)]
macro_rules! default_data_dir_shown {
    () => {
        "~/.local/share/aicard"
    };
}
