//! TLS servers for tests of the hub's outgoing https: a CA of the test's own and servers
//! signed by it or by nobody.

/// A CA of the test's own: the hub trusts it only through `HubConfig::test_roots`.
pub struct TestCa {
    pub der: Vec<u8>,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl TestCa {
    pub fn new() -> TestCa {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "aicard test CA");
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        TestCa {
            der: cert.der().to_vec(),
            issuer: rcgen::Issuer::new(params, key),
        }
    }

    /// A server certificate for `names` signed by this CA.
    pub fn server(&self, names: &[&str]) -> TlsServer {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &self.issuer)
            .unwrap();
        TlsServer::new(cert.der().to_vec(), key.serialize_der())
    }
}

/// A TLS server's certificate and key.
pub struct TlsServer {
    config: std::sync::Arc<tokio_rustls::rustls::ServerConfig>,
}

impl TlsServer {
    pub fn new(cert: Vec<u8>, pkcs8: Vec<u8>) -> TlsServer {
        use tokio_rustls::rustls::{self, pki_types};
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![pki_types::CertificateDer::from(cert)],
                pki_types::PrivateKeyDer::Pkcs8(pkcs8.into()),
            )
            .unwrap();
        TlsServer {
            config: std::sync::Arc::new(config),
        }
    }

    /// A certificate for 127.0.0.1 that signs itself: in no trust store.
    pub fn self_signed() -> TlsServer {
        let rcgen::CertifiedKey { cert, signing_key } =
            rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
        TlsServer::new(cert.der().to_vec(), signing_key.serialize_der())
    }

    /// Serves `app` over TLS on 127.0.0.1 (HTTP/1, as the hub's client speaks it).
    pub async fn serve(self, app: axum::Router) -> std::net::SocketAddr {
        let acceptor = tokio_rustls::TlsAcceptor::from(self.config);
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = l.accept().await {
                let (acceptor, app) = (acceptor.clone(), app.clone());
                tokio::spawn(async move {
                    // A client that refuses the certificate ends the handshake here.
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let io = hyper_util::rt::TokioIo::new(tls);
                    let svc = hyper_util::service::TowerToHyperService::new(app);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, svc)
                        .await;
                });
            }
        });
        addr
    }

    /// Ends TLS on 127.0.0.1 and passes the bytes on to `to` unchanged (an https front of a
    /// plain HTTP server, the way a reverse proxy stands before one).
    pub async fn forward(self, to: std::net::SocketAddr) -> std::net::SocketAddr {
        let acceptor = tokio_rustls::TlsAcceptor::from(self.config);
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = l.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let Ok(mut back) = tokio::net::TcpStream::connect(to).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut back).await;
                });
            }
        });
        addr
    }
}
