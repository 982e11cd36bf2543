//! `priority_tiers --base-url https://...`: the example trusts a private CA through
//! `SSL_CERT_FILE`, as curl does, and its six calls reach the proxy over TLS with
//! their priorities.

use std::net::{IpAddr, Ipv4Addr};
use std::process::Stdio;
use std::sync::Arc;

use llama_swap_suite::harness::{built, finish};
use mockswap::MockSwap;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, SanType};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::Command;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

/// Terminates TLS on a loopback port and passes the bytes to `backend`. The
/// returned set owns the accept loop and every connection; dropping it ends them.
async fn tls_front(backend: String) -> (String, String, JoinSet<()>) {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "llama-swap e2e test CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let mut leaf = CertificateParams::new(Vec::<String>::new()).unwrap();
    leaf.subject_alt_names = vec![SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST))];
    let key = KeyPair::generate().unwrap();
    let cert = leaf.signed_by(&key, &ca).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![cert.der().clone()],
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    )
    .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let mut tasks = JoinSet::new();
    tasks.spawn(async move {
        let mut connections = JoinSet::new();
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let backend = backend.clone();
            connections.spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let Ok(mut plain) = TcpStream::connect(&backend).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    (url, ca.pem(), tasks)
}

#[tokio::test]
async fn priority_tiers_reaches_an_https_proxy_trusting_ssl_cert_file() {
    let mock = MockSwap::start().await;
    let backend = mock.uri().trim_start_matches("http://").to_owned();
    let (url, ca_pem, _front) = tls_front(backend).await;
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("test-ca.pem");
    std::fs::write(&ca_file, ca_pem).unwrap();

    let mut command = Command::new(built("examples/priority_tiers"));
    command
        .args(["--base-url", url.as_str(), "--model", "demo"])
        .env("SSL_CERT_FILE", &ca_file)
        .env_remove("SSL_CERT_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let child = command.spawn().expect("cannot start the example");
    let output = finish(
        "the example",
        tokio::spawn(async move { child.wait_with_output().await.expect("example I/O failed") }),
    )
    .await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the example failed over https: {}\nstdout:\n{stdout}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    mock.assert_priorities([Some(10), None, Some(-10), Some(10), None, Some(-10)]);
}
