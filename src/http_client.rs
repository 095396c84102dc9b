//! The HTTP client of every request the hub makes: webhook deliveries, `--fetch-urls`, the
//! MCP servers of `mcp.json` and `aicard mcp-relay`. One TLS setup for all of them: rustls with
//! the ring provider and Mozilla's roots compiled into the binary (webpki-roots), so trust is
//! the same on every OS and never comes from the system store or from input; certificates and
//! host names are always verified (docs/api.md "Files and images").
//!
//! reqwest builds a client's TLS itself unless it is handed one; [`builder`] hands it ours.
//! A client made elsewhere (`reqwest::Client::new()` in rmcp or a test) takes the process's
//! default provider, which [`install_provider`] sets to the same ring.

use std::sync::{Arc, Once};

/// Sets ring as the process's rustls provider, once; harmless when one is already set.
pub fn install_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // An `Err` means another provider was installed first: it stays, ours is not needed.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Our TLS: Mozilla's roots, plus `extra_roots` (DER; tests' own CAs only, never from input).
pub fn tls_config(extra_roots: &[Vec<u8>]) -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    for der in extra_roots {
        let cert = rustls::pki_types::CertificateDer::from(der.clone());
        roots
            .add(cert)
            .map_err(|e| format!("a test root certificate is not usable: {e}"))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS set-up: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    // reqwest is built without HTTP/2: offer only what it speaks.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// A client builder with [`tls_config`]'s TLS and no extra roots.
pub fn builder() -> reqwest::ClientBuilder {
    builder_trusting(&[]).expect("Mozilla's roots and ring make a valid TLS config")
}

/// A finished client with [`builder`]'s TLS and reqwest's defaults otherwise (rmcp's clients).
pub fn plain() -> reqwest::Client {
    builder()
        .build()
        .expect("a client with a finished TLS config builds")
}

/// [`builder`] that also trusts `extra_roots` (DER): tests only.
pub fn builder_trusting(extra_roots: &[Vec<u8>]) -> Result<reqwest::ClientBuilder, String> {
    install_provider();
    Ok(reqwest::Client::builder().tls_backend_preconfigured(tls_config(extra_roots)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_roots_are_mozillas_and_a_bad_extra_root_is_an_error() {
        let config = tls_config(&[]).unwrap();
        assert_eq!(config.alpn_protocols, vec![b"http/1.1".to_vec()]);
        let err = tls_config(&[b"not a certificate".to_vec()]).unwrap_err();
        assert!(err.contains("test root certificate"), "{err}");
    }

    #[tokio::test]
    async fn a_client_builds_and_a_plain_client_finds_the_provider() {
        builder().build().unwrap();
        // rmcp and tests call `reqwest::Client::new()`; it panics without a provider.
        install_provider();
        reqwest::Client::new();
    }
}
