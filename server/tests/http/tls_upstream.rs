//! A small `https://` upstream for tests: a test CA (rcgen), a certificate for
//! `localhost` signed by it, and a rustls server answering `GET /health` with
//! 200 and every other request with a JSON echo of its method and path.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::json;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

/// A test certificate authority.
pub(crate) struct TestCa {
    /// The CA certificate, PEM.
    pub pem: String,
    params: CertificateParams,
    key: KeyPair,
}

impl TestCa {
    /// A fresh CA.
    pub(crate) fn new() -> Self {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let cert = params.self_signed(&key).unwrap();
        Self {
            pem: cert.pem(),
            params,
            key,
        }
    }

    /// A leaf certificate for `localhost` and its key.
    fn leaf(&self) -> (CertificateDer<'static>, PrivateKeyDer<'static>) {
        let key = KeyPair::generate().unwrap();
        let params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).unwrap();
        let der = PrivatePkcs8KeyDer::from(key.serialize_der());
        (cert.der().clone(), PrivateKeyDer::Pkcs8(der))
    }
}

/// A running `https://localhost:<port>` upstream; stops when dropped.
pub(crate) struct TlsUpstream {
    _tasks: JoinSet<()>,
}

impl TlsUpstream {
    /// Serves on 127.0.0.1:`port` with a certificate signed by `ca`.
    pub(crate) async fn start_on(ca: &TestCa, port: u16) -> Self {
        let (cert, key) = ca.leaf();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert], key)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind(("127.0.0.1", port)).await.unwrap();
        let mut tasks = JoinSet::new();
        tasks.spawn(async move {
            let mut connections = JoinSet::new();
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let acceptor = acceptor.clone();
                connections.spawn(async move {
                    // A client that does not trust the CA fails here; that is a test too.
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(answer);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        Self { _tasks: tasks }
    }
}

async fn answer(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = request.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let response = if parts.uri.path() == "/health" {
        Response::new(Full::new(Bytes::from_static(b"ok")))
    } else {
        let echo = json!({
            "via": "https",
            "method": parts.method.as_str(),
            "path": parts.uri.path(),
            "body": String::from_utf8_lossy(&body),
        });
        let mut response = Response::new(Full::new(Bytes::from(echo.to_string())));
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        response
    };
    Ok(response)
}
