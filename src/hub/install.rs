//! How the hub token reaches a userscript manager, and only a manager (docs/reliability.md, docs/security.md).
//!
//! `GET /aicard.user.js` is a URL any web page can name in `<script src>`; a page that runs the
//! script in its own context with its own `GM_setValue` would read whatever the script carries.
//! So the plain script carries no token. The token is filled in only for:
//! - `GET /install/CODE/aicard.user.js`, where CODE is a one-time install code that only the
//!   person sees (printed by `aicard serve` and `aicard install`, shown by the dashboard);
//! - a request that already holds the token (`Authorization: Bearer …`: tools and tests).
//!
//! Every script request is also refused when the browser says it is a subresource load
//! (`Sec-Fetch-Dest` other than `document` or `empty`): opening the link as a page, or a
//! manager's own fetch, still works. The script keeps the token in the manager's storage, so
//! the manager's later update checks (`@updateURL`, the plain URL) need no code.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::{header, HeaderMap};
use rand::RngCore;

/// How long a fresh install code may wait for its first use.
pub const CODE_TTL: Duration = Duration::from_secs(15 * 60);
/// After its first use a code still serves for this long: a manager fetches the script once
/// to show its install page and again when the person clicks "install".
pub const REUSE_GRACE: Duration = Duration::from_secs(120);
/// At most this many codes wait at once; minting more forgets the oldest.
const MAX_CODES: usize = 32;

/// The one-time install codes this hub handed out.
#[derive(Default)]
pub struct InstallCodes {
    codes: Mutex<HashMap<String, Instant>>,
}

impl InstallCodes {
    /// A new code (128 random bits, hex), valid for [`CODE_TTL`].
    pub fn mint(&self) -> String {
        let mut bytes = [0u8; 16];
        rand::rng().fill_bytes(&mut bytes);
        let code: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let now = Instant::now();
        let mut codes = self.lock();
        codes.retain(|_, until| *until > now);
        while codes.len() >= MAX_CODES {
            let Some(oldest) = codes
                .iter()
                .min_by_key(|(_, u)| **u)
                .map(|(c, _)| c.clone())
            else {
                break;
            };
            codes.remove(&oldest);
        }
        codes.insert(code.clone(), now + CODE_TTL);
        code
    }

    /// True when `code` is known and not expired; its first use shortens its life to
    /// [`REUSE_GRACE`].
    pub fn redeem(&self, code: &str) -> bool {
        self.redeem_at(code, Instant::now())
    }

    fn redeem_at(&self, code: &str, now: Instant) -> bool {
        let mut codes = self.lock();
        codes.retain(|_, until| *until > now);
        // Compared in constant time, like the token: a code is a short-lived secret.
        let found = codes
            .keys()
            .find(|c| super::auth::token_matches(c, code))
            .cloned();
        match found {
            Some(c) => {
                let until = codes.get_mut(&c).expect("found above");
                *until = (*until).min(now + REUSE_GRACE);
                true
            }
            None => false,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
        self.codes.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Why a script request was refused, before anything else is looked at.
pub const SUBRESOURCE_REFUSED: &str =
    "用户脚本只能作为页面打开或由脚本管理器获取，不能被网页当作子资源加载 / the userscript is \
     installed by opening its link as a page (or by a userscript manager), never loaded by a web \
     page as a subresource";

/// Refuses what only a web page's subresource load looks like (`<script src>`, `import`,
/// `<link>`, a worker, an iframe): `Sec-Fetch-Dest` other than `document` or `empty`. A browser
/// that sends no Fetch Metadata is let through: the plain script it gets carries no token.
pub fn check_fetch_metadata(headers: &HeaderMap) -> Result<(), &'static str> {
    match headers.get("sec-fetch-dest").map(|v| v.to_str()) {
        None => Ok(()),
        Some(Ok("document" | "empty")) => Ok(()),
        Some(_) => Err(SUBRESOURCE_REFUSED),
    }
}

/// The token presented as `Authorization: Bearer TOKEN`, if any.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(str::trim)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn a_code_serves_once_then_for_the_grace_only() {
        let codes = InstallCodes::default();
        let code = codes.mint();
        assert_eq!(code.len(), 32);
        let t0 = Instant::now();
        assert!(codes.redeem_at(&code, t0));
        assert!(
            codes.redeem_at(&code, t0 + REUSE_GRACE / 2),
            "the manager's second fetch"
        );
        assert!(!codes.redeem_at(&code, t0 + REUSE_GRACE + Duration::from_secs(1)));
        assert!(!codes.redeem(&code), "expired codes are forgotten");
    }

    #[test]
    fn unknown_and_stale_codes_are_refused() {
        let codes = InstallCodes::default();
        let code = codes.mint();
        assert!(!codes.redeem(""));
        assert!(!codes.redeem("00000000000000000000000000000000"));
        assert!(!codes.redeem_at(&code, Instant::now() + CODE_TTL + Duration::from_secs(1)));
    }

    #[test]
    fn minting_is_bounded() {
        let codes = InstallCodes::default();
        let first = codes.mint();
        for _ in 0..MAX_CODES {
            codes.mint();
        }
        assert_eq!(codes.lock().len(), MAX_CODES);
        assert!(!codes.redeem(&first), "the oldest was forgotten");
    }

    #[test]
    fn fetch_metadata_refuses_subresource_loads_only() {
        let with = |dest: &str| {
            let mut h = HeaderMap::new();
            h.insert("sec-fetch-dest", HeaderValue::from_str(dest).unwrap());
            h
        };
        assert!(check_fetch_metadata(&HeaderMap::new()).is_ok());
        for ok in ["document", "empty"] {
            assert!(check_fetch_metadata(&with(ok)).is_ok(), "{ok}");
        }
        for bad in [
            "script", "style", "iframe", "worker", "object", "embed", "image",
        ] {
            assert!(check_fetch_metadata(&with(bad)).is_err(), "{bad}");
        }
    }
}
