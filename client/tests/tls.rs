//! `https://` base URLs against a local rustls server whose certificate comes from
//! a throwaway test CA.
#![cfg(feature = "tls")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::{IpAddr, Ipv4Addr};
use std::process::Stdio;
use std::sync::Arc;

use llama_swap_client::{
    CallOptions, ChatMessage, ChatRequest, Client, Error, Priority, RetryPolicy,
};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, SanType};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

const LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// A test CA and a server certificate for 127.0.0.1 and localhost signed by it.
struct TestPki {
    ca_pem: String,
    server_cert: rustls::pki_types::CertificateDer<'static>,
    server_key: Vec<u8>,
}

/// A self-signed certificate for `names` made as `openssl req -x509` makes it
/// (basicConstraints CA:TRUE): it is its own CA and the server's certificate at once.
fn self_signed_ca_for(names: &[&str]) -> TestPki {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "self-signed test server");
    params.subject_alt_names = names
        .iter()
        .map(|name| match name.parse::<IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName((*name).try_into().unwrap()),
        })
        .collect();
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    TestPki {
        ca_pem: cert.pem(),
        server_cert: cert.der().clone(),
        server_key: key.serialize_der(),
    }
}

fn test_pki() -> TestPki {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "llama-swap-client test CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let mut leaf = CertificateParams::new(Vec::<String>::new()).unwrap();
    leaf.subject_alt_names = vec![
        SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        SanType::DnsName("localhost".try_into().unwrap()),
    ];
    let leaf_key = KeyPair::generate().unwrap();
    let cert = leaf.signed_by(&leaf_key, &ca).unwrap();
    TestPki {
        ca_pem: ca.pem(),
        server_cert: cert.der().clone(),
        server_key: leaf_key.serialize_der(),
    }
}

/// An HTTPS server answering every request with one chat completion; sends the
/// head of each request it read.
struct TlsServer {
    base_url: String,
    heads: mpsc::UnboundedReceiver<String>,
    task: JoinHandle<()>,
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn tls_server(pki: &TestPki) -> TlsServer {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![pki.server_cert.clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(pki.server_key.clone())),
        )
        .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, heads) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            // A client that rejects the certificate ends the handshake: not an
            // error for the server.
            let Ok(mut tls) = acceptor.accept(tcp).await else {
                continue;
            };
            let mut seen = Vec::new();
            let mut buf = [0u8; 4096];
            while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                match tls.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => seen.extend_from_slice(&buf[..n]),
                }
            }
            let _ = tx.send(String::from_utf8_lossy(&seen).into_owned());
            let body = common::chat_json().to_string();
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = tls.write_all(response.as_bytes()).await;
            let _ = tls.shutdown().await;
        }
    });
    TlsServer {
        base_url: format!("https://127.0.0.1:{port}"),
        heads,
        task,
    }
}

fn chat_request() -> ChatRequest {
    ChatRequest::new("demo", vec![ChatMessage::user("hi")])
}

#[tokio::test]
async fn https_base_url_works_with_the_test_ca_and_carries_the_priority() {
    let pki = test_pki();
    let mut server = tls_server(&pki).await;
    let client = Client::builder()
        .base_url(&server.base_url)
        .add_root_certificate_pem(pki.ca_pem.as_bytes().to_vec())
        .build()
        .unwrap();
    let resp = tokio::time::timeout(
        LIMIT,
        client.chat(
            &chat_request(),
            &CallOptions::with_priority(Priority::Elevated),
        ),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(resp.text(), "Hello");
    let head = server.heads.recv().await.unwrap().to_ascii_lowercase();
    assert!(head.starts_with("post /v1/chat/completions"), "{head}");
    assert!(head.contains("\r\nx-priority: 10\r\n"), "{head}");
}

#[tokio::test]
async fn a_certificate_from_an_unknown_ca_is_a_connect_error() {
    let pki = test_pki();
    let server = tls_server(&pki).await;
    let client = Client::builder()
        .base_url(&server.base_url)
        .retry_policy(RetryPolicy::none())
        .build()
        .unwrap();
    let err = tokio::time::timeout(LIMIT, client.chat(&chat_request(), &CallOptions::new()))
        .await
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, Error::Connect(_)), "{err:?}");
}

#[tokio::test]
async fn a_trusted_self_signed_ca_certificate_presented_as_is_is_accepted() {
    let pki = self_signed_ca_for(&["127.0.0.1", "localhost"]);
    let mut server = tls_server(&pki).await;
    let client = Client::builder()
        .base_url(&server.base_url)
        .add_root_certificate_pem(pki.ca_pem.as_bytes().to_vec())
        .build()
        .unwrap();
    let resp = tokio::time::timeout(
        LIMIT,
        client.chat(&chat_request(), &CallOptions::with_priority(Priority::Low)),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(resp.text(), "Hello");
    let head = server.heads.recv().await.unwrap().to_ascii_lowercase();
    assert!(head.contains("\r\nx-priority: -10\r\n"), "{head}");
}

#[tokio::test]
async fn a_trusted_self_signed_ca_certificate_for_another_name_is_a_connect_error() {
    let pki = self_signed_ca_for(&["gpu.example"]);
    let server = tls_server(&pki).await;
    let client = Client::builder()
        .base_url(&server.base_url)
        .add_root_certificate_pem(pki.ca_pem.as_bytes().to_vec())
        .retry_policy(RetryPolicy::none())
        .build()
        .unwrap();
    let err = tokio::time::timeout(LIMIT, client.chat(&chat_request(), &CallOptions::new()))
        .await
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, Error::Connect(_)), "{err:?}");
}

/// Set by the parent of [`ssl_cert_file_child`]: the base URL to call.
const CHILD_BASE_URL: &str = "LLAMA_SWAP_CLIENT_TEST_TLS_BASE_URL";

#[tokio::test]
async fn a_self_signed_ca_certificate_trusted_through_ssl_cert_file_is_accepted() {
    // SSL_CERT_FILE is read from the environment, which a test cannot change for
    // itself (other tests share the process): the call runs in a child process of
    // this test binary with the variable set.
    let pki = self_signed_ca_for(&["127.0.0.1", "localhost"]);
    let mut server = tls_server(&pki).await;
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("trusted.pem");
    std::fs::write(&bundle, &pki.ca_pem).unwrap();
    let child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "ssl_cert_file_child", "--ignored", "--nocapture"])
        .env("SSL_CERT_FILE", &bundle)
        .env_remove("SSL_CERT_DIR")
        .env(CHILD_BASE_URL, &server.base_url)
        .stdin(Stdio::null())
        .output();
    let output = tokio::time::timeout(LIMIT, child).await.unwrap().unwrap();
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{log}");
    assert!(
        log.contains("1 passed"),
        "the child test did not run: {log}"
    );
    let head = server.heads.recv().await.unwrap().to_ascii_lowercase();
    assert!(head.contains("\r\nx-priority: 10\r\n"), "{head}");
}

/// The child of the test above: calls the server trusting only what the
/// environment names. Ignored unless run by its parent.
#[tokio::test]
#[ignore = "run by a_self_signed_ca_certificate_trusted_through_ssl_cert_file_is_accepted"]
async fn ssl_cert_file_child() {
    let base_url = std::env::var(CHILD_BASE_URL).expect("run by its parent test");
    let client = Client::builder()
        .base_url(base_url)
        .retry_policy(RetryPolicy::none())
        .build()
        .unwrap();
    let resp = tokio::time::timeout(
        LIMIT,
        client.chat(
            &chat_request(),
            &CallOptions::with_priority(Priority::Elevated),
        ),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(resp.text(), "Hello");
}
