//! A remote `image_url` fetched for a chat request (`--fetch-urls`, off by default;
//! docs/api.md "Files and images"): http(s) only, never to an address that is not public —
//! checked after DNS (our own resolver drops such addresses, so reqwest connects only to a
//! checked one, for https as for http) and again on every redirect (a custom policy, at most
//! [`MAX_HOPS`], never from https down to http); no proxy, no cookies, `image/*` only,
//! size-capped, with a timeout. https is rustls with Mozilla's roots compiled in
//! (webpki-roots): a certificate that does not chain to one of them, or names another host,
//! is refused.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;

use crate::http_client;

/// Redirects followed at most.
pub const MAX_HOPS: usize = 3;
/// The whole fetch, connect to last byte.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(20);
/// Connecting alone.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why an address is not fetched from, or None when it is public.
pub fn forbidden(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(a) => v4_forbidden(a),
        IpAddr::V6(a) => v6_forbidden(a),
    }
}

fn v4_forbidden(a: Ipv4Addr) -> Option<&'static str> {
    let o = a.octets();
    let why = if a.is_unspecified() || o[0] == 0 {
        "unspecified (0.0.0.0/8)"
    } else if a.is_loopback() {
        "loopback (127.0.0.0/8)"
    } else if a.is_private() {
        "private (10/8, 172.16/12, 192.168/16)"
    } else if a.is_link_local() {
        "link-local (169.254/16)"
    } else if o[0] == 100 && (o[1] & 0xc0) == 64 {
        "carrier-grade NAT (100.64/10)"
    } else if a.is_multicast() {
        "multicast (224/4)"
    } else if a.is_broadcast() || o[0] >= 240 {
        "reserved (240/4)"
    } else if o[0] == 192 && o[1] == 0 && (o[2] == 0 || o[2] == 2) {
        "special-purpose (192.0.0/24, 192.0.2/24)"
    } else if o[0] == 198 && (o[1] & 0xfe) == 18 {
        "benchmarking (198.18/15)"
    } else if (o[0] == 198 && o[1] == 51 && o[2] == 100)
        || (o[0] == 203 && o[1] == 0 && o[2] == 113)
    {
        "documentation"
    } else {
        return None;
    };
    Some(why)
}

fn v6_forbidden(a: Ipv6Addr) -> Option<&'static str> {
    if let Some(v4) = a.to_ipv4_mapped() {
        return v4_forbidden(v4);
    }
    let s = a.segments();
    let embedded =
        |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
    let why = if a.is_unspecified() {
        "unspecified (::)"
    } else if a.is_loopback() {
        "loopback (::1)"
    } else if a.is_multicast() {
        "multicast (ff00::/8)"
    } else if (s[0] & 0xfe00) == 0xfc00 {
        "unique local (fc00::/7)"
    } else if (s[0] & 0xffc0) == 0xfe80 || (s[0] & 0xffc0) == 0xfec0 {
        "link-local (fe80::/10)"
    } else if s[0] == 0 && s[1] == 0 && s[2] == 0 && s[3] == 0 && s[4] == 0 && s[5] == 0 {
        // ::a.b.c.d (IPv4-compatible, deprecated): never a public host of its own.
        "IPv4-compatible (::/96)"
    } else if s[0] == 0x64 && s[1] == 0xff9b {
        // NAT64 (64:ff9b::/96): the IPv4 address inside decides.
        return v4_forbidden(embedded(s[6], s[7]));
    } else if s[0] == 0x2002 {
        // 6to4 (2002::/16) carries an IPv4 address in bits 16..48.
        return v4_forbidden(embedded(s[1], s[2]));
    } else if s[0] == 0x2001 && s[1] == 0 {
        "Teredo (2001::/32)"
    } else if s[0] == 0x2001 && s[1] == 0x0db8 {
        "documentation (2001:db8::/32)"
    } else if s[0] == 0x0100 && s[1] == 0 && s[2] == 0 && s[3] == 0 {
        "discard-only (100::/64)"
    } else {
        return None;
    };
    Some(why)
}

/// Why a redirect to `next` is not followed, or Ok: more than [`MAX_HOPS`], from https
/// down to http (what TLS protected would go in clear), or `next` itself refused by
/// [`check_url`]. `previous` is the request's URL and every hop since, as reqwest gives them.
pub fn check_hop(
    previous: &[reqwest::Url],
    next: &reqwest::Url,
    allow: &[SocketAddr],
) -> Result<(), String> {
    if previous.len() > MAX_HOPS {
        return Err(format!("more than {MAX_HOPS} redirects"));
    }
    if next.scheme() == "http" && previous.iter().any(|u| u.scheme() == "https") {
        return Err("a redirect from https down to http is not followed".into());
    }
    check_url(next, allow)
}

/// Why a URL is not fetched (scheme, or a literal address that is not public), or Ok.
/// `allow` lets exact `ip:port` pairs through (tests; never set from the command line).
pub fn check_url(url: &reqwest::Url, allow: &[SocketAddr]) -> Result<(), String> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "only http and https are fetched, not `{}:`",
            url.scheme()
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("a URL with credentials is not fetched".into());
    }
    let Some(host) = url.host_str() else {
        return Err("the URL names no host".into());
    };
    // The URL parser already turned `2130706433` or `0x7f.1` into dotted IPv4.
    let Ok(ip) = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
    else {
        return Ok(()); // a name: the resolver checks what it resolves to
    };
    let port = url.port_or_known_default().unwrap_or(0);
    if allow.contains(&SocketAddr::new(ip, port)) {
        return Ok(());
    }
    match forbidden(ip) {
        Some(why) => Err(format!("{ip} is not a public address: {why}")),
        None => Ok(()),
    }
}

/// Resolves names and keeps only public addresses: reqwest connects to what this returns,
/// so a name that resolves (or rebinds) to a private address is never connected to.
struct PublicOnly;

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<SocketAddr> = found
                .iter()
                .copied()
                .filter(|a| forbidden(a.ip()).is_none())
                .collect();
            if public.is_empty() {
                let why = found
                    .first()
                    .and_then(|a| forbidden(a.ip()).map(|w| format!("{} is {w}", a.ip())))
                    .unwrap_or_else(|| "no address".into());
                return Err(format!("`{host}` resolves to no public address ({why})").into());
            }
            Ok(Box::new(public.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// What a fetch gave: the bytes and the type the server named.
pub struct Fetched {
    pub mime: String,
    pub bytes: Vec<u8>,
}

/// The client of every fetch: the rules above, and for https only the web PKI roots
/// compiled into the binary (`http_client`: no system store, nothing from input),
/// certificates and host names always verified. `roots` (DER) are trusted too: tests only,
/// whose local HTTPS server has a CA of its own (`HubConfig::test_roots`, never set
/// from the command line).
fn client(allow: &[SocketAddr], roots: &[Vec<u8>]) -> Result<reqwest::ClientBuilder, String> {
    let hops = allow.to_vec();
    let policy = reqwest::redirect::Policy::custom(move |attempt| {
        match check_hop(attempt.previous(), attempt.url(), &hops) {
            Ok(()) => attempt.follow(),
            Err(why) => {
                let why = format!("redirect to {} refused: {why}", attempt.url());
                attempt.error(why)
            }
        }
    });
    Ok(http_client::builder_trusting(roots)?
        .no_proxy()
        .redirect(policy)
        .dns_resolver(Arc::new(PublicOnly))
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(FETCH_TIMEOUT))
}

/// Fetches `url` under the rules above, at most `max` bytes; the error is a sentence for the
/// caller. `allow` and `test_roots` are empty but in tests.
pub async fn fetch_image(
    url: &str,
    max: u64,
    allow: &[SocketAddr],
    test_roots: &[Vec<u8>],
) -> Result<Fetched, String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("not a URL: {e}"))?;
    check_url(&parsed, allow)?;
    let client = client(allow, test_roots)?.build().map_err(|e| chain(&e))?;
    let resp = client
        .get(parsed)
        .header(reqwest::header::ACCEPT, "image/*")
        .send()
        .await
        .map_err(|e| chain(&e))?;
    if !resp.status().is_success() {
        return Err(format!("the server answered {}", resp.status()));
    }
    let mime = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_default();
    if !mime.starts_with("image/") {
        return Err(format!("the server sent `{mime}`, not an image"));
    }
    if resp.content_length().is_some_and(|n| n > max) {
        return Err(format!("the image is over the limit of {max} bytes"));
    }
    let mut bytes = Vec::new();
    let mut body = resp.bytes_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| chain(&e))?;
        if (bytes.len() + chunk.len()) as u64 > max {
            return Err(format!("the image is over the limit of {max} bytes"));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Fetched { mime, bytes })
}

/// An error with its causes, `a: b: c` (reqwest hides the policy's and resolver's reasons
/// in the chain).
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let s_text = s.to_string();
        if !out.contains(&s_text) {
            out.push_str(": ");
            out.push_str(&s_text);
        }
        cur = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_that_are_not_public_are_refused_v4_v6_and_mapped() {
        let refused = [
            "127.0.0.1",
            "127.255.0.9",
            "0.0.0.0",
            "0.1.2.3",
            "10.0.0.1",
            "172.16.5.4",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.254",
            "224.0.0.1",
            "239.255.255.250",
            "255.255.255.255",
            "240.0.0.1",
            "192.0.0.8",
            "198.18.0.1",
            "::",
            "::1",
            "fe80::1",
            "fc00::1",
            "fd12:3456::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.1.2.3",
            "::ffff:169.254.169.254",
            "::ffff:100.64.0.1",
            "::ffff:0.0.0.0",
            "::127.0.0.1",
            "64:ff9b::7f00:1",
            "2002:7f00:1::",
            "2001:db8::1",
            "2001::1",
        ];
        for a in refused {
            let ip: IpAddr = a.parse().unwrap();
            assert!(forbidden(ip).is_some(), "{a} must be refused");
        }
        let public = [
            "1.1.1.1",
            "8.8.8.8",
            "100.63.255.255",
            "100.128.0.1",
            "172.15.0.1",
            "172.32.0.1",
            "192.169.0.1",
            "2606:4700:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::",
        ];
        for a in public {
            let ip: IpAddr = a.parse().unwrap();
            assert_eq!(forbidden(ip), None, "{a} is public");
        }
    }

    #[test]
    fn urls_are_checked_by_scheme_credentials_and_literal_address() {
        let url = |s: &str| reqwest::Url::parse(s).unwrap();
        assert!(check_url(&url("http://example.com/a.png"), &[]).is_ok());
        assert!(check_url(&url("https://8.8.8.8/a.png"), &[]).is_ok());
        for bad in [
            "file:///etc/passwd",
            "ftp://example.com/a.png",
            "http://127.0.0.1/a.png",
            "http://[::1]:8080/",
            "http://[::ffff:7f00:1]/",
            "http://169.254.169.254/latest/meta-data",
            "http://user:pw@example.com/",
            "http://2130706433/",
            "http://0x7f.1/",
        ] {
            assert!(check_url(&url(bad), &[]).is_err(), "{bad} must be refused");
        }
        let allowed: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert!(check_url(&url("http://127.0.0.1:8080/x"), &[allowed]).is_ok());
        assert!(
            check_url(&url("http://127.0.0.1:8081/x"), &[allowed]).is_err(),
            "only the exact pair"
        );
    }

    #[test]
    fn a_redirect_never_goes_from_https_down_to_http_nor_past_the_hop_limit() {
        let url = |s: &str| reqwest::Url::parse(s).unwrap();
        let tls = [url("https://example.com/a")];
        assert!(check_hop(&tls, &url("https://example.org/b.png"), &[]).is_ok());
        let down = check_hop(&tls, &url("http://example.com/a"), &[]).unwrap_err();
        assert!(down.contains("https down to http"), "{down}");
        // Once https, never http again, even after an http hop and for an allowed address.
        let allowed: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let mixed = [
            url("https://example.com/a"),
            url("https://127.0.0.1:8080/b"),
        ];
        assert!(check_hop(&mixed, &url("http://127.0.0.1:8080/c"), &[allowed]).is_err());
        assert!(check_hop(&mixed, &url("https://127.0.0.1:8080/c"), &[allowed]).is_ok());
        // Up from http is fine; the address rules still apply to the target.
        let plain = [url("http://example.com/a")];
        assert!(check_hop(&plain, &url("https://example.com/a"), &[]).is_ok());
        assert!(check_hop(&plain, &url("https://10.0.0.1/a"), &[]).is_err());
        let many: Vec<_> = (0..=MAX_HOPS)
            .map(|i| url(&format!("https://example.com/{i}")))
            .collect();
        let over = check_hop(&many, &url("https://example.com/z"), &[]).unwrap_err();
        assert!(over.contains("redirects"), "{over}");
        assert!(check_hop(&many[..MAX_HOPS], &url("https://example.com/z"), &[]).is_ok());
    }
}
