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

/// Reads the token kept in `data_dir`, creating a new 256-bit one on first start, readable by
/// this user only: mode 0600 on Unix; on Windows an ACL that lets in this user alone and
/// inherits nothing from its folder, set on the empty file before the token is written (and
/// again at each start). Where that ACL cannot be set (a FAT drive, a file another user owns)
/// the hub says so and goes on (docs/windows.md).
pub fn load_or_create_token(data_dir: &Path) -> std::io::Result<String> {
    let path = token_path(data_dir);
    #[cfg(windows)]
    {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        if let Err(e) = owner_only::protect(&path) {
            tracing::warn!(
                path = %path.display(),
                "could not limit the token file to this user ({e}); its folder's ACL applies"
            );
        }
    }
    crate::store::load_or_create_secret(&path)
}

/// The Windows counterpart of mode 0600 (docs/windows.md).
#[cfg(windows)]
mod owner_only {
    use std::io;
    use std::os::windows::ffi::OsStrExt;
    use std::path::Path;

    use windows_sys::Win32::Foundation::{CloseHandle, LocalFree, HANDLE};
    use windows_sys::Win32::Security::Authorization::{
        ConvertSidToStringSidW, ConvertStringSecurityDescriptorToSecurityDescriptorW,
        SetNamedSecurityInfoW, SDDL_REVISION_1, SE_FILE_OBJECT,
    };
    use windows_sys::Win32::Security::{
        GetSecurityDescriptorDacl, GetTokenInformation, TokenUser, ACL, DACL_SECURITY_INFORMATION,
        PROTECTED_DACL_SECURITY_INFORMATION, PSECURITY_DESCRIPTOR, TOKEN_QUERY, TOKEN_USER,
    };
    use windows_sys::Win32::System::Threading::{GetCurrentProcess, OpenProcessToken};

    fn wide(s: &std::ffi::OsStr) -> Vec<u16> {
        s.encode_wide().chain(std::iter::once(0)).collect()
    }

    /// This process's user as an SDDL SID string (`S-1-5-21-…`).
    fn current_user_sid() -> io::Result<String> {
        // SAFETY: every pointer passed is valid for the call; the token handle is closed and
        // the SID string freed with LocalFree, as the API documents.
        unsafe {
            let mut token: HANDLE = std::ptr::null_mut();
            if OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &mut token) == 0 {
                return Err(io::Error::last_os_error());
            }
            let mut buf = vec![0u64; 128];
            let mut len = 0u32;
            let ok = GetTokenInformation(
                token,
                TokenUser,
                buf.as_mut_ptr().cast(),
                (buf.len() * 8) as u32,
                &mut len,
            );
            let err = io::Error::last_os_error();
            CloseHandle(token);
            if ok == 0 {
                return Err(err);
            }
            let user = &*(buf.as_ptr() as *const TOKEN_USER);
            let mut text: *mut u16 = std::ptr::null_mut();
            if ConvertSidToStringSidW(user.User.Sid, &mut text) == 0 {
                return Err(io::Error::last_os_error());
            }
            let n = (0..).take_while(|&i| *text.add(i) != 0).count();
            let sid = String::from_utf16_lossy(std::slice::from_raw_parts(text, n));
            LocalFree(text.cast());
            Ok(sid)
        }
    }

    /// Replaces `path`'s ACL with one entry, full access for this user, marked protected so
    /// that nothing is inherited from the folder (SDDL `D:P(A;;FA;;;SID)`).
    pub(super) fn protect(path: &Path) -> io::Result<()> {
        let sddl = wide(format!("D:P(A;;FA;;;{})", current_user_sid()?).as_ref());
        let name = wide(path.as_os_str());
        // SAFETY: as above; `sd` is freed with LocalFree, `dacl` points into it.
        unsafe {
            let mut sd: PSECURITY_DESCRIPTOR = std::ptr::null_mut();
            if ConvertStringSecurityDescriptorToSecurityDescriptorW(
                sddl.as_ptr(),
                SDDL_REVISION_1,
                &mut sd,
                std::ptr::null_mut(),
            ) == 0
            {
                return Err(io::Error::last_os_error());
            }
            let (mut present, mut defaulted) = (0, 0);
            let mut dacl: *mut ACL = std::ptr::null_mut();
            let got = GetSecurityDescriptorDacl(sd, &mut present, &mut dacl, &mut defaulted);
            let result = if got == 0 || present == 0 {
                Err(io::Error::last_os_error())
            } else {
                match SetNamedSecurityInfoW(
                    name.as_ptr(),
                    SE_FILE_OBJECT,
                    DACL_SECURITY_INFORMATION | PROTECTED_DACL_SECURITY_INFORMATION,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    dacl,
                    std::ptr::null(),
                ) {
                    0 => Ok(()),
                    code => Err(io::Error::from_raw_os_error(code as i32)),
                }
            };
            LocalFree(sd);
            result
        }
    }
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
    fn token_is_created_once_for_this_user_only() {
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
