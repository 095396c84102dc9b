//! Logging in to the dashboard: `aicard serve` prints `/login?code=…` (a one-time code);
//! opening it sets an HttpOnly, SameSite=Strict session cookie and redirects to `/`.
//! `aicard open` asks the running hub for a fresh code with the token.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::DashboardDoor;
use super::{assets, authorize, session_cookie, Credential, COOKIE, SESSION_TTL};
use crate::hub::auth;

/// `GET /login?code=…`.
pub async fn login(
    State(door): State<Arc<DashboardDoor>>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if !auth::host_is_loopback(host) {
        return (
            StatusCode::FORBIDDEN,
            "Host 不是本机 / Host is not loopback",
        )
            .into_response();
    }
    let code = q.get("code").map(String::as_str).unwrap_or("");
    match door.dashboard.redeem(code) {
        Some(session) => {
            let cookie = format!(
                "{COOKIE}={session}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}",
                SESSION_TTL.as_secs()
            );
            (
                StatusCode::SEE_OTHER,
                assets::security_headers(),
                [
                    (header::SET_COOKIE, cookie),
                    (header::LOCATION, "/".to_string()),
                    (header::CACHE_CONTROL, "no-store".to_string()),
                ],
            )
                .into_response()
        }
        None => (
            StatusCode::FORBIDDEN,
            assets::security_headers(),
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "登录码无效或已用过 / this login code is unknown, used or expired: run `aicard open` \
             for a fresh one\n",
        )
            .into_response(),
    }
}

/// `POST /logout`: ends the session (same checks as the API).
pub async fn logout(State(door): State<Arc<DashboardDoor>>, headers: HeaderMap) -> Response {
    if let Err(r) = authorize(&door, &Method::POST, &headers) {
        return r.into_response();
    }
    if let Some(s) = session_cookie(&headers) {
        door.dashboard.logout(&s);
    }
    (
        StatusCode::NO_CONTENT,
        [(
            header::SET_COOKIE,
            format!("{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"),
        )],
    )
        .into_response()
}

/// `POST /api/login-codes` (token only): a fresh login URL for `aicard open`.
pub async fn new_code(State(door): State<Arc<DashboardDoor>>, headers: HeaderMap) -> Response {
    match authorize(&door, &Method::POST, &headers) {
        Ok(Credential::Token) => {}
        Ok(Credential::Session(_)) => {
            return (
                StatusCode::FORBIDDEN,
                "只接受令牌 / the token is required here",
            )
                .into_response()
        }
        Err(r) => return r.into_response(),
    }
    let code = door.dashboard.login_code();
    let url = format!("{}/login?code={code}", door.public_url());
    axum::Json(serde_json::json!({"code": code, "url": url})).into_response()
}

/// Options of `aicard open`.
#[derive(Debug, clap::Args)]
pub struct OpenArgs {
    /// The running hub.
    #[arg(
        long = "hub",
        default_value = "http://127.0.0.1:8027",
        value_name = "URL"
    )]
    pub hub_url: String,
    // Data directory (help per OS: src/config.rs).
    #[arg(long, value_name = "DIR", help = concat!(
        "Data directory holding the hub's token [default: ",
        crate::default_data_dir_shown!(),
        "]"
    ))]
    pub data_dir: Option<PathBuf>,
    /// The hub's token, if it was started with `--token`.
    #[arg(long, env = "AICARD_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Only print the URL; do not start a browser.
    #[arg(long)]
    pub no_browser: bool,
}

/// `aicard open`: prints a fresh login URL and opens it in a browser where it can.
pub async fn open(args: OpenArgs) -> anyhow::Result<i32> {
    let (base, v) = ask_hub(&args, "/api/login-codes", "a login code").await?;
    let code = v["code"].as_str().context("no code in the hub's answer")?;
    show_link(&args, &format!("{base}/login?code={code}"));
    Ok(0)
}

/// `aicard install`: prints a fresh one-time install link (the userscript with the token in
/// it, `hub::install`) and opens it where it can, so the manager offers to install.
pub async fn install(args: OpenArgs) -> anyhow::Result<i32> {
    let (_, v) = ask_hub(&args, "/install-codes", "an install link").await?;
    let url = v["url"].as_str().context("no url in the hub's answer")?;
    show_link(&args, url);
    Ok(0)
}

/// POSTs to the running hub with its token; the hub's base URL and its JSON answer.
async fn ask_hub(
    args: &OpenArgs,
    path: &str,
    what: &str,
) -> anyhow::Result<(String, serde_json::Value)> {
    let token = match args.token.as_ref().filter(|t| !t.is_empty()) {
        Some(t) => t.clone(),
        None => {
            let dir = args
                .data_dir
                .clone()
                .unwrap_or_else(crate::config::HubConfig::default_data_dir);
            let path = auth::token_path(&dir);
            std::fs::read_to_string(&path)
                .with_context(|| format!("reading the token in {}", path.display()))?
                .trim()
                .to_string()
        }
    };
    let base = args.hub_url.trim_end_matches('/').to_string();
    let hostport = base
        .strip_prefix("http://")
        .context("--hub must be an http:// URL")?;
    let body = post_json(hostport, path, &token)
        .await
        .with_context(|| format!("asking the hub at {base} for {what} (is it running?)"))?;
    let v = serde_json::from_str(&body).context("the hub's answer")?;
    Ok((base, v))
}

fn show_link(args: &OpenArgs, url: &str) {
    println!("{url}");
    if !args.no_browser {
        open_browser(url);
    }
}

/// A minimal HTTP/1.1 POST with the bearer token; the body of a 200 answer.
async fn post_json(hostport: &str, path: &str, token: &str) -> anyhow::Result<String> {
    let mut s = tokio::net::TcpStream::connect(hostport).await?;
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: {hostport}\r\nAuthorization: Bearer {token}\r\n\
         Content-Length: 0\r\nConnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await?;
    let mut buf = Vec::new();
    tokio::time::timeout(std::time::Duration::from_secs(10), s.read_to_end(&mut buf))
        .await
        .context("timed out")??;
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text.split_once("\r\n\r\n").context("bad HTTP answer")?;
    let status = head.split_whitespace().nth(1).unwrap_or("");
    if status != "200" {
        anyhow::bail!("HTTP {status}: {}", body.trim());
    }
    // The hub answers small JSON bodies; chunked encoding is not used for them, but be safe.
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        let mut out = String::new();
        let mut rest = body;
        while let Some((len, tail)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(len.trim(), 16).unwrap_or(0);
            if n == 0 || tail.len() < n {
                break;
            }
            out.push_str(&tail[..n]);
            rest = tail[n..].trim_start_matches("\r\n");
        }
        return Ok(out);
    }
    Ok(body.to_string())
}

/// Starts the desktop's browser if there is a way to (the OS's own opener:
/// `crate::exec::open_url`); never fails.
fn open_browser(url: &str) {
    match crate::exec::open_url(url) {
        Ok(()) => {}
        Err(e) => {
            eprintln!("  (未能打开浏览器 / could not start a browser: {e}; open the URL above)")
        }
    }
}
