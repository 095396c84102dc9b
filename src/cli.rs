//! The `aicard` command line: `serve`, `demo`, `flow validate|show`, `open`, `token`, `mcp [doctor]`,
//! `skill list|enable`.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

mod skill;

use crate::app::App;
use crate::config::{ExecFlag, HubConfig};

/// AIcard: one hub for many web AI chat tabs / 把多个网页 AI 聊天标签页变成一个团队。
#[derive(Debug, Parser)]
#[command(name = "aicard", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: CliCommand,
}

#[derive(Debug, Subcommand)]
pub enum CliCommand {
    /// Run the hub; prints where to install the userscript / 运行集线器
    Serve(Box<ServeArgs>),
    /// Hub + simulated chat tabs + the demo flow, end to end / 演示
    Demo(crate::demo::DemoArgs),
    /// Check or draw flow files / 校验或绘制流程文件
    #[command(subcommand)]
    Flow(FlowCommand),
    /// Print a fresh dashboard login URL and open a browser where possible / 打开仪表盘
    Open(crate::dashboard::login::OpenArgs),
    /// Print a fresh one-time link that installs the userscript with the token, and open it
    /// where possible / 打印一次性的用户脚本安装链接
    Install(crate::dashboard::login::OpenArgs),
    /// MCP on stdio, relaying to the running hub (for Claude Desktop); `doctor` checks it / MCP 服务器
    Mcp(McpCli),
    /// Program skills: list them, enable one after reading it / 程序技能：列出、启用
    Skill(skill::SkillArgs),
    /// Print the hub's token (creating it on first use) / 打印令牌
    Token {
        // Data directory (help per OS: src/config.rs).
        #[arg(long, value_name = "DIR", help = concat!(
            "Data directory holding the token and the store [default: ",
            crate::default_data_dir_shown!(),
            "]"
        ))]
        data_dir: Option<PathBuf>,
        /// The token the hub was started with (`serve --token` / `AICARD_TOKEN`): printed as
        /// it is, nothing is read or created.
        #[arg(long, env = "AICARD_TOKEN", hide_env_values = true)]
        token: Option<String>,
    },
}

/// `aicard flow …`
#[derive(Debug, Subcommand)]
pub enum FlowCommand {
    /// Exit 0 if every file is valid; else print FILE:LINE:COL: message per problem, exit 1
    Validate {
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
    /// Write the native equivalent of a flow file (the manual's seed forms included)
    Import {
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// Where to write it [default: standard output]
        #[arg(short = 'o', long = "output", value_name = "OUT")]
        output: Option<PathBuf>,
    },
    /// Draw a flow's DAG as text, Mermaid or DOT
    Show {
        #[arg(value_name = "FILE")]
        file: PathBuf,
        #[arg(long, value_enum, default_value_t = ShowFormat::Text)]
        format: ShowFormat,
    },
}

/// Options of `aicard mcp`.
#[derive(Debug, Args)]
pub struct McpCli {
    #[command(subcommand)]
    pub action: Option<McpAction>,
    /// The running hub.
    #[arg(long = "hub", value_name = "URL", default_value = crate::mcp::relay::DEFAULT_HUB, global = true)]
    pub hub_url: String,
    // The hub's data directory, where its token is read (help per OS: src/config.rs).
    #[arg(long, value_name = "DIR", global = true, help = concat!(
        "The hub's data directory, where its token is read [default: ",
        crate::default_data_dir_shown!(),
        "]"
    ))]
    pub data_dir: Option<PathBuf>,
    /// The hub token (instead of reading it from the data directory).
    #[arg(long, env = "AICARD_TOKEN", hide_env_values = true, global = true)]
    pub token: Option<String>,
}

/// `aicard mcp …`
#[derive(Debug, Subcommand)]
pub enum McpAction {
    /// Print the config snippets for Claude Desktop, Cursor and Cline, and check one round trip
    Doctor,
}

impl McpCli {
    fn data_dir(&self) -> PathBuf {
        self.data_dir
            .clone()
            .unwrap_or_else(HubConfig::default_data_dir)
    }

    fn token(&self) -> anyhow::Result<String> {
        if let Some(t) = self.token.as_ref().filter(|t| !t.is_empty()) {
            return Ok(t.clone());
        }
        let path = crate::hub::auth::token_path(&self.data_dir());
        let t = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "读取令牌 / reading the hub token in {} (start the hub once, or pass --token)",
                path.display()
            )
        })?;
        Ok(t.trim().to_string())
    }
}

/// Output format of `flow show`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ShowFormat {
    Text,
    Mermaid,
    Dot,
}

/// Options of `aicard serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on; loopback unless you really mean it.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// Port (0 picks a free one).
    #[arg(long, default_value_t = 8027)]
    pub port: u16,
    // Data directory (help per OS: src/config.rs).
    #[arg(long, value_name = "DIR", help = concat!(
        "Data directory: token, SQLite store, exec workspace [default: ",
        crate::default_data_dir_shown!(),
        "]"
    ))]
    pub data_dir: Option<PathBuf>,
    /// Where `manager run NAME` finds NAME.yaml.
    #[arg(long, value_name = "DIR", default_value = "flows")]
    pub flows: PathBuf,
    /// Role cards directory.
    #[arg(long, value_name = "DIR", default_value = "role-cards")]
    pub role_cards: PathBuf,
    /// Skills directory (`*.yaml`, reloaded when files change).
    #[arg(long, value_name = "DIR", default_value = "skills")]
    pub skills: PathBuf,
    /// Hub-side shell commands: off (default), allowlist (only --allow programs, no shell), on.
    #[arg(long, value_enum, default_value_t = ExecFlag::Off)]
    pub exec: ExecFlag,
    /// A program allowed under --exec allowlist (repeatable).
    #[arg(long = "allow", value_name = "PROGRAM")]
    pub allow: Vec<String>,
    /// Use this token instead of the stored one.
    #[arg(long, env = "AICARD_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Also accept this exact Origin (repeatable), e.g. a local mock site.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origin: Vec<String>,
    /// Allow binding a non-loopback address (tabs on other machines could then connect).
    #[arg(long)]
    pub i_know_this_is_public: bool,
    /// MCP servers for ?<mcp …>! in Claude Desktop's format [default: DATA_DIR/mcp.json].
    #[arg(long, value_name = "FILE")]
    pub mcp_config: Option<PathBuf>,
    /// Join a cluster of hubs through this NATS server (core NATS; `nats-server` 2.9 or later).
    /// Tabs on every node are then reachable from any node (docs/cluster.md).
    #[arg(long, value_name = "nats://HOST:PORT", requires = "node")]
    pub cluster: Option<String>,
    /// This hub's name in the cluster, unique among its nodes ([A-Za-z0-9_-], 1–64).
    #[arg(long, value_name = "NAME", requires = "cluster")]
    pub node: Option<String>,
    /// WebSocket ping and cluster presence refresh interval, in ms; a tab is dead after 3
    /// silent intervals and a node's tabs leave the cluster's view after 3.
    #[arg(long, value_name = "MS", default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(50..))]
    pub heartbeat_ms: u64,
    /// How long a disconnected tab keeps its tasks before they fail over, in ms.
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    pub lost_grace_ms: u64,
    /// The tab that writes plans for ?<manager plan GOAL>! (site, label or client id)
    /// [default: a role card with `planner: true`, else the master's own tab].
    #[arg(long, value_name = "TARGET")]
    pub planner: Option<String>,
    /// Repair rounds a plan gets when the planner's flow is invalid (0 = none).
    #[arg(long, value_name = "N", default_value_t = crate::config::DEFAULT_PLAN_REPAIRS)]
    pub plan_repairs: usize,
    /// POST lifecycle events as signed JSON to URL; `#EVENT,EVENT…` picks events (flow_start,
    /// flow_pause, flow_resume, flow_stop, flow_complete, node_start, node_complete,
    /// node_error, data_published); repeatable / 生命周期事件回调
    #[arg(long = "webhook", value_name = "URL[#EVENTS]")]
    pub webhooks: Vec<crate::webhooks::WebhookSpec>,
    /// HMAC-SHA256 key of `X-AIcard-Signature` [default: made once, kept in DATA_DIR/webhook-secret]
    #[arg(
        long,
        env = "AICARD_WEBHOOK_SECRET",
        hide_env_values = true,
        value_name = "S"
    )]
    pub webhook_secret: Option<String>,
    /// The agent loop: on (default) lets agents and `loop: true` masters act on their
    /// commands' results; off stops every loop / 代理循环开关
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    pub agent_loop: OnOff,
    /// Seconds between two automatic sends to one tab, picked at random in MIN-MAX
    /// (0-0: at once) / 自动发送间隔
    #[arg(long, value_name = "MIN-MAX", default_value = "2-5", value_parser = crate::config::parse_gap)]
    pub agent_gap: (u64, u64),
    /// Most rounds of one agent session (a role card's `max_rounds` wins for its tab).
    #[arg(long, value_name = "N", default_value_t = 25, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub agent_max_rounds: u32,
    /// Most minutes of one agent session.
    #[arg(long, value_name = "MIN", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=1440))]
    pub agent_max_minutes: u64,
    /// Characters of one command's output typed back; the rest is kept as $R1, $R2, ….
    #[arg(long, value_name = "N", default_value_t = 4000, value_parser = clap::value_parser!(u64).range(200..=100_000))]
    pub agent_result_chars: u64,
    /// Milliseconds a sent results message may take to show in its tab before one resend
    /// (a tab holding it while the person types starts the wait again) / 到达等待（毫秒）
    #[arg(long, value_name = "MS", default_value_t = 15_000, value_parser = clap::value_parser!(u64).range(200..=600_000))]
    pub agent_arrival_ms: u64,
    /// Nothing is typed into an input box the person pressed a key in within this many
    /// milliseconds / 用户输入时暂缓自动发送（毫秒）
    #[arg(long, value_name = "MS", default_value_t = 3_000, value_parser = clap::value_parser!(u64).range(100..=120_000))]
    pub agent_hold_ms: u64,
    /// Seconds an `agent task` session may stay paused before its caller is answered ✗
    /// with the pause's reason and the reply so far / 暂停多久后答复调用方（秒）
    #[arg(long, value_name = "S", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub agent_task_pause_s: u64,
    /// Where `?<to TAB with files=[a.png]: …>!` reads file names from (default DATA_DIR/files);
    /// nothing outside it can be named / 文件目录
    #[arg(long = "files", value_name = "DIR")]
    pub files_dir: Option<PathBuf>,
    /// The largest file one task may carry, in MB (all of a task's files: at most 50 MB)
    /// / 单个文件上限（MB）
    #[arg(long, value_name = "MB", default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=50))]
    pub max_file_mb: u64,
    /// Let the OpenAI door fetch a remote image URL (http(s), public addresses only, checked
    /// after DNS and on every redirect, image/* only, size-capped); off: refused with 400
    /// / 允许 API 下载远程图片（默认关闭）
    #[arg(long)]
    pub fetch_urls: bool,
    /// A tab (site, label or id) that summarizes every --memory-summary-every new memories of
    /// a scope into one that cites them; off by default: memories reach a site only when you
    /// say so / 自动总结记忆的标签页（默认关闭）
    #[arg(long, value_name = "TARGET")]
    pub memory_summarizer: Option<String>,
    /// New memories of a scope per automatic summary / 每多少条新记忆总结一次
    #[arg(long, value_name = "N", default_value_t = 500, value_parser = clap::value_parser!(u64).range(2..=1_000_000))]
    pub memory_summary_every: u64,
}

/// `on` or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnOff {
    On,
    Off,
}

impl ServeArgs {
    pub fn into_config(self) -> anyhow::Result<HubConfig> {
        if !self.bind.is_loopback() && !self.i_know_this_is_public {
            anyhow::bail!(
                "拒绝监听非本机地址 {} / refusing to bind non-loopback {} without \
                 --i-know-this-is-public",
                self.bind,
                self.bind
            );
        }
        let data_dir = self.data_dir.unwrap_or_else(HubConfig::default_data_dir);
        let mut c = HubConfig::new(data_dir);
        c.bind = SocketAddr::new(self.bind, self.port);
        c.flows_dir = self.flows;
        c.role_cards_dir = self.role_cards;
        c.skills_dir = self.skills;
        c.exec_mode = self.exec;
        c.exec_allow = self.allow;
        c.token = self.token;
        c.extra_origins = self.allow_origin;
        c.mcp_config = self.mcp_config;
        let beat = std::time::Duration::from_millis(self.heartbeat_ms);
        if beat != c.timing.ping_interval {
            c.timing.ping_interval = beat;
            c.timing.dead_after = beat * 3;
        }
        c.timing.lost_grace = std::time::Duration::from_millis(self.lost_grace_ms);
        if let (Some(url), Some(node)) = (self.cluster, self.node) {
            crate::hub::engine::check_node_name(&node).map_err(anyhow::Error::msg)?;
            if !url.starts_with("nats://") {
                anyhow::bail!("--cluster 需要 nats://HOST:PORT / --cluster wants nats://HOST:PORT, got `{url}`");
            }
            c.cluster = Some(crate::config::ClusterConfig { url, node });
        }
        c.planner = self.planner;
        c.plan_repairs = self.plan_repairs;
        c.webhooks = self.webhooks;
        c.webhook_secret = self.webhook_secret;
        c.agent.enabled = self.agent_loop == OnOff::On;
        c.agent.gap_ms = self.agent_gap;
        c.agent.max_rounds = self.agent_max_rounds;
        c.agent.max_minutes = self.agent_max_minutes;
        c.agent.result_chars = self.agent_result_chars as usize;
        c.agent.arrival_ms = self.agent_arrival_ms;
        c.agent.hold_ms = self.agent_hold_ms;
        c.agent.task_pause_ms = self.agent_task_pause_s * 1000;
        if let Some(dir) = self.files_dir {
            c.files_dir = dir;
        }
        c.max_file_mb = self.max_file_mb;
        c.fetch_urls = self.fetch_urls;
        c.memory_summarizer = self.memory_summarizer;
        c.memory_summary_every = self.memory_summary_every;
        Ok(c)
    }
}

/// The `aicard` binary after its allocator (`src/main.rs`): TLS, the async runtime, the
/// command line and the logs, then the chosen command; exits the process with its code.
///
/// It lives in the library, not in the binary, for the release build's sake: the generic code
/// it instantiates (the log subscriber's layers, clap's parse, the runtime's `block_on`) is
/// compiled once with the library's, in parallel code units, instead of in the binary's own
/// step, which ran one unit at a time (docs/benchmarks.md, "The loop of minutes").
pub fn run_binary() {
    // Any HTTP client reqwest builds by itself takes this TLS provider (docs/api.md).
    crate::http_client::install_provider();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| {
            eprintln!("aicard: cannot start the async runtime: {e}");
            std::process::exit(2);
        });
    runtime.block_on(async {
        let code = parse_and_run().await;
        // Exit from inside the runtime: dropping it would wait for blocking tasks (a relay's
        // stdin reader) that never end by themselves.
        std::process::exit(code)
    })
}

/// Parses the command line, starts the logs and runs the command; the exit code.
async fn parse_and_run() -> i32 {
    use tracing_subscriber::EnvFilter;
    let cli = Cli::parse();
    // The demo prints its own progress; the hub's info logs would drown it.
    let default = match cli.command {
        CliCommand::Demo(_) => "aicard=warn",
        _ => "aicard=info",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default)),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("aicard: {e:#}");
            2
        }
    }
}

/// Runs the parsed command line; the process exit code.
pub async fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        CliCommand::Serve(args) => serve(*args).await,
        CliCommand::Demo(args) => crate::demo::run(args).await,
        CliCommand::Open(args) => crate::dashboard::login::open(args).await,
        CliCommand::Install(args) => crate::dashboard::login::install(args).await,
        CliCommand::Flow(FlowCommand::Validate { files }) => Ok(validate(&files)),
        CliCommand::Flow(FlowCommand::Import { file, output }) => {
            let flow = match crate::flows::load_file(&file) {
                Ok(f) => f,
                Err(diags) => {
                    for d in diags {
                        eprintln!("{d}");
                    }
                    return Ok(1);
                }
            };
            let text = crate::flows::native_yaml(&flow, &file.display().to_string())?;
            match output {
                Some(out) => std::fs::write(&out, text)
                    .with_context(|| format!("写入 / writing {}", out.display()))?,
                None => print!("{text}"),
            }
            Ok(0)
        }
        CliCommand::Flow(FlowCommand::Show { file, format }) => {
            let flow = match crate::flows::load_file(&file) {
                Ok(f) => f,
                Err(diags) => {
                    for d in diags {
                        eprintln!("{d}");
                    }
                    return Ok(1);
                }
            };
            let out = match format {
                ShowFormat::Text => crate::flows::render::text(&flow),
                ShowFormat::Mermaid => crate::flows::render::mermaid(&flow),
                ShowFormat::Dot => crate::flows::render::dot(&flow),
            };
            print!("{out}");
            Ok(0)
        }
        CliCommand::Mcp(args) => mcp(args).await,
        CliCommand::Skill(args) => skill::run(args),
        CliCommand::Token {
            token: Some(token), ..
        } if !token.is_empty() => {
            println!("{token}");
            Ok(0)
        }
        CliCommand::Token { data_dir, .. } => {
            let dir = data_dir.unwrap_or_else(HubConfig::default_data_dir);
            let token = crate::hub::auth::load_or_create_token(&dir)
                .with_context(|| format!("reading the token in {}", dir.display()))?;
            println!("{token}");
            Ok(0)
        }
    }
}

/// `aicard mcp` (stdio relay) and `aicard mcp doctor`.
async fn mcp(args: McpCli) -> anyhow::Result<i32> {
    match args.action {
        None => {
            let token = args.token()?;
            crate::mcp::relay::serve_stdio(args.hub_url.clone(), token).await?;
            Ok(0)
        }
        Some(McpAction::Doctor) => {
            let exe = std::env::current_exe()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| "aicard".into());
            let dir = args.data_dir().display().to_string();
            print!(
                "{}",
                crate::mcp::doctor::snippets(&exe, &args.hub_url, &dir)
            );
            println!();
            let token = match args.token() {
                Ok(t) => t,
                Err(e) => {
                    println!("FAIL: {e:#}");
                    return Ok(1);
                }
            };
            match crate::mcp::doctor::round_trip(&args.hub_url, &token).await {
                Ok(s) => {
                    println!("{s}");
                    Ok(0)
                }
                Err(e) => {
                    println!("FAIL: {e}");
                    Ok(1)
                }
            }
        }
    }
}

/// `flow validate`: every problem of every file, then the exit code.
fn validate(files: &[PathBuf]) -> i32 {
    let mut bad = 0;
    for f in files {
        let loaded = crate::flows::load_file(f);
        bad += usize::from(loaded.is_err());
        print!(
            "{}",
            crate::flows::validate_output(&f.display().to_string(), &loaded)
        );
    }
    i32::from(bad > 0)
}

async fn serve(args: ServeArgs) -> anyhow::Result<i32> {
    let config = args.into_config()?;
    let data_dir = config.data_dir.clone();
    let token_given = config.token.as_ref().is_some_and(|t| !t.is_empty());
    raise_fd_limit(config.limits.max_clients);
    let running = App::start(config).await?;
    let url = running.url();
    println!("AIcard hub listening on {url}");
    println!(
        "  安装用户脚本 / install the userscript (one-time link, 15 min; `aicard install` for \
         a fresh one): {}",
        running.app.install_url()
    );
    println!(
        "  仪表盘 / dashboard: {url}/login?code={}",
        running.app.dashboard.login_code()
    );
    if token_given {
        println!("  令牌 / token: the one given by --token / AICARD_TOKEN (not stored)");
    } else {
        println!(
            "  令牌保存在 / token kept in: {}",
            crate::hub::auth::token_path(&data_dir).display()
        );
    }
    let app = running.app.clone();
    crate::spawn::task(async move {
        shutdown_signal().await;
        tracing::info!("signal received, shutting down");
        app.shutdown.cancel();
    });
    running.wait().await;
    Ok(0)
}

/// Files the hub needs besides one socket per tab (listener, store, logs, role cards, exec).
/// Unix only: Windows has no such limit on sockets.
#[cfg(unix)]
const FD_MARGIN: u64 = 256;

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (each tab is a socket, and the usual
/// soft limit of 1,024 would refuse tabs long before `limits.max_clients`), and says so when
/// even the hard limit is too low for `max_clients`.
// `rlim_t` is u64 here but not on every unix.
#[allow(clippy::unnecessary_cast)]
fn raise_fd_limit(max_clients: usize) {
    #[cfg(unix)]
    {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `lim` is a valid out-pointer for getrlimit/setrlimit.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
            tracing::warn!("could not read the open-file limit");
            return;
        }
        let before = lim.rlim_cur;
        if lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            // SAFETY: as above.
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
                lim.rlim_cur = before;
            }
        }
        let need = max_clients as u64 + FD_MARGIN;
        let have = lim.rlim_cur as u64;
        if have < need {
            tracing::warn!(
                open_files = have,
                needed = need,
                "the open-file limit is too low for limits.max_clients = {max_clients}: \
                 about {} tabs can connect (raise `ulimit -Hn`, or LimitNOFILE= in systemd)",
                have.saturating_sub(FD_MARGIN)
            );
        } else {
            tracing::info!(from = before as u64, to = have, "open-file limit");
        }
    }
    #[cfg(not(unix))]
    let _ = max_clients;
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
