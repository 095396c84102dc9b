//! Who may talk to the hub: the token, the `Host` check (DNS rebinding) and the `Origin`
//! allowlist (cross-site WebSocket hijacking). All checks run before a socket is upgraded.

use std::path::{Path, PathBuf};

use subtle::ConstantTimeEq;

/// Hostnames of the chat sites the userscript runs on; their https origins are allowed.
pub const CHAT_SITE_HOSTS: &[&str] = &[
    "chat.deepseek.com",
    "www.doubao.com",
    "yuanbao.tencent.com",
    "tongyi.aliyun.com",
    "www.qianwen.com",
    "chat.qwen.ai",
    "chatgpt.com",
    "chat.openai.com",
    "claude.ai",
    "gemini.google.com",
    "kimi.moonshot.cn",
    "www.kimi.com",
    "chatglm.cn",
    "yiyan.baidu.com",
    "ernie.baidu.com",
    "xinghuo.xfyun.cn",
];

const TOKEN_FILE: &str = "token";

/// Path of the token file inside a data dir.
pub fn token_path(data_dir: &Path) -> PathBuf {
    data_dir.join(TOKEN_FILE)
}

/// Reads the token kept in `data_dir`, creating a new 256-bit one (mode 0600) on first start.
pub fn load_or_create_token(data_dir: &Path) -> std::io::Result<String> {
    crate::store::load_or_create_secret(&token_path(data_dir))
}

/// Compares a presented token with the hub's in constant time.
pub fn token_matches(expected: &str, presented: &str) -> bool {
    expected.len() == presented.len() && bool::from(expected.as_bytes().ct_eq(presented.as_bytes()))
}

/// True when `host` (a `Host` header value, maybe with a port) names this machine's loopback.
pub fn host_is_loopback(host: &str) -> bool {
    let name = strip_port(host.trim()).to_ascii_lowercase();
    if name == "localhost" || name.ends_with(".localhost") {
        return true;
    }
    let bare = name.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => false,
    }
}

fn strip_port(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        // [::1]:8027
        return match rest.find(']') {
            Some(i) => &host[..i + 2],
            None => host,
        };
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) && !name.contains(':') => {
            name
        }
        _ => host,
    }
}

/// Origins of browser extensions (userscript managers) in Chromium, Firefox and Safari.
const EXTENSION_SCHEMES: [&str; 3] = [
    "chrome-extension://",
    "moz-extension://",
    "safari-web-extension://",
];

/// Decides which `Origin` headers may reach a door (every door shares it: sockets, `/send`,
/// `/events`, the API, MCP). The rule is in `docs/security.md`, "Which origins may call".
#[derive(Debug)]
pub struct OriginPolicy {
    extra: Vec<String>,
    /// The hub's own port, set once its listener is bound: the hub's own pages are served
    /// from it, and a loopback origin on any other port is some other program's page.
    port: std::sync::OnceLock<u16>,
}

impl OriginPolicy {
    pub fn new(extra: &[String]) -> OriginPolicy {
        OriginPolicy {
            extra: extra
                .iter()
                .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
                .collect(),
            port: std::sync::OnceLock::new(),
        }
    }

    /// Records the port the hub listens on (once; later calls change nothing).
    pub fn set_port(&self, port: u16) {
        let _ = self.port.set(port);
    }

    /// `None` (no Origin: a non-browser client with the token) is allowed; so are the chat
    /// sites over https, the hub's own origins, the configured extras, and browser
    /// extensions: a userscript manager performs `GM_xmlhttpRequest` from its own pages, and
    /// Chromium stamps those POSTs `Origin: chrome-extension://ID`. No web page can send an
    /// extension's Origin, so this opens nothing to the web; the token is still required.
    /// `null` (sandboxed frames, Firefox's content-script sandbox) stays refused.
    pub fn allows(&self, origin: Option<&str>) -> bool {
        let Some(origin) = origin else { return true };
        let origin = origin.trim_end_matches('/').to_ascii_lowercase();
        if self.extra.contains(&origin) {
            return true;
        }
        for scheme in EXTENSION_SCHEMES {
            if let Some(id) = origin.strip_prefix(scheme) {
                return !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
            }
        }
        if let Some(host) = origin.strip_prefix("https://") {
            return CHAT_SITE_HOSTS.contains(&host);
        }
        if let Some(host) = origin.strip_prefix("http://") {
            return self.is_own(host);
        }
        false
    }

    /// Whether `host[:port]` (an http origin's) is one of the hub's own: `127.0.0.1`,
    /// `localhost`, `[::1]` or a per-tab `aicard-*.localhost` name (the userscript spreads
    /// its tabs over those: `userscript/src/core/transports.js`), on the hub's own port.
    fn is_own(&self, host: &str) -> bool {
        let Some(&own) = self.port.get() else {
            return false; // not listening: no page of its own yet
        };
        let (name, port) = match host.rsplit_once(':') {
            Some((name, port)) if !port.contains(']') => (name, port.parse::<u16>().ok()),
            _ => (host, Some(80)),
        };
        if port != Some(own) {
            return false;
        }
        matches!(name, "127.0.0.1" | "localhost" | "[::1]")
            || name
                .strip_suffix(".localhost")
                .and_then(|sub| sub.strip_prefix("aicard-"))
                .is_some_and(|id| {
                    !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for ok in [
            "127.0.0.1:8027",
            "localhost",
            "LOCALHOST:1",
            "[::1]:8027",
            "127.1.2.3",
            "x.localhost:80",
        ] {
            assert!(host_is_loopback(ok), "{ok}");
        }
        for bad in [
            "evil.com",
            "127.0.0.1.evil.com",
            "10.0.0.1:8027",
            "[::2]:1",
            "",
            "localhost.evil.com",
        ] {
            assert!(!host_is_loopback(bad), "{bad}");
        }
    }

    #[test]
    fn origins() {
        let p = OriginPolicy::new(&["http://chat.deepseek.com".into()]);
        p.set_port(8027);
        assert!(p.allows(None));
        assert!(p.allows(Some("https://chat.deepseek.com")));
        assert!(p.allows(Some("https://claude.ai")));
        assert!(p.allows(Some("http://127.0.0.1:8027")));
        assert!(p.allows(Some("http://chat.deepseek.com")));
        assert!(!p.allows(Some("https://evil.example")));
        assert!(!p.allows(Some("http://claude.ai")));
        assert!(!p.allows(Some("https://claude.ai.evil.example")));
        assert!(!p.allows(Some("null")));
        assert!(p.allows(Some("chrome-extension://abcdefghijklmnopabcdefghijklmnop")));
        assert!(p.allows(Some("moz-extension://0b4c1a9e-7f0d-4f43-9d7e-2f1c3c4b5a6d")));
        assert!(!p.allows(Some("chrome-extension://")));
        assert!(!p.allows(Some("chrome-extension://x.evil.example")));
        assert!(!p.allows(Some("chrome-extension-evil://abc")));
    }

    #[test]
    fn loopback_origins_are_the_hubs_own_port_and_names_only() {
        let p = OriginPolicy::new(&[]);
        // Not listening yet: no page is the hub's own.
        assert!(!p.allows(Some("http://127.0.0.1:8027")));
        p.set_port(8027);
        for own in [
            "http://127.0.0.1:8027",
            "http://localhost:8027",
            "http://LOCALHOST:8027/",
            "http://[::1]:8027",
            "http://aicard-0a1b2c3d.localhost:8027",
            "safari-web-extension://0b4c1a9e-7f0d-4f43-9d7e-2f1c3c4b5a6d",
        ] {
            assert!(p.allows(Some(own)), "{own}");
        }
        for foreign in [
            "http://127.0.0.1:1",
            "http://127.0.0.1",
            "http://localhost:3000",
            "http://[::1]:8028",
            "http://evil.localhost:3000",
            "http://evil.localhost:8027",
            "http://aicard-.localhost:8027",
            "http://aicard-x.evil.localhost:8027",
            "http://aicard-0a1b2c3d.localhost:3000",
            "http://127.0.0.2:8027",
            "http://127.0.0.1:8027.evil.example",
            "http://127.0.0.1:08027x",
            "https://127.0.0.1:8027",
            "null",
        ] {
            assert!(!p.allows(Some(foreign)), "{foreign}");
        }
        let on_80 = OriginPolicy::new(&[]);
        on_80.set_port(80);
        assert!(on_80.allows(Some("http://localhost")));
        assert!(!on_80.allows(Some("http://localhost:8027")));
    }

    #[test]
    fn token_is_created_once_with_0600() {
        let dir = tempfile::tempdir().unwrap();
        let a = load_or_create_token(dir.path()).unwrap();
        let b = load_or_create_token(dir.path()).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.len(), 64);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(token_path(dir.path()))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert!(token_matches(&a, &b));
        assert!(!token_matches(&a, "short"));
    }
}
