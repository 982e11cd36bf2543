//! The TLS client configuration for `https://` base URLs (feature `tls`): rustls with
//! the aws-lc-rs provider (the one reqwest's `rustls` feature brings), the platform's roots as `rustls-native-certs` finds them
//! (`SSL_CERT_FILE` and `SSL_CERT_DIR` honoured, as curl and OpenSSL do) and the roots
//! added with [`ClientBuilder::add_root_certificate_pem`](crate::ClientBuilder::add_root_certificate_pem).
//!
//! A self-signed certificate made the common way (`openssl req -x509`) is marked
//! `CA:TRUE`, and WebPKI refuses a CA certificate as the server's own
//! (`CaUsedAsEndEntity`) even when it is trusted. curl, openai-python and Go accept a
//! trusted certificate presented as is, so this does too: when the server presents
//! exactly one of the trusted certificates, it is accepted if it is valid now and
//! names the host. Everything else goes through WebPKI unchanged, and the handshake
//! signature is always checked.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::error::{Error, InvalidArgument};

/// The TLS configuration of a client. `https` says whether the base URL needs it: an
/// `http://` client gets one without roots (it never shakes hands), so building it
/// does not read the system's certificate store.
pub(crate) fn client_config(pems: &[Vec<u8>], https: bool) -> Result<rustls::ClientConfig, Error> {
    let mut anchors: Vec<CertificateDer<'static>> = Vec::new();
    for (index, pem) in pems.iter().enumerate() {
        let bad = || InvalidArgument::InvalidRootCertificate { index };
        let certs = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| bad())?;
        if certs.is_empty() {
            return Err(bad().into());
        }
        anchors.extend(certs);
    }
    let mut roots = RootCertStore::empty();
    for (index, cert) in anchors.iter().enumerate() {
        roots
            .add(cert.clone())
            .map_err(|_| InvalidArgument::InvalidRootCertificate { index })?;
    }
    if https {
        let native = rustls_native_certs::load_native_certs();
        for error in &native.errors {
            tracing::debug!(%error, "some system root certificates could not be read");
        }
        anchors.extend(native.certs.iter().cloned());
        roots.add_parsable_certificates(native.certs);
    }
    // Named, not the process default, so another crate's provider cannot make it
    // ambiguous.
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::HttpClient(Box::new(e)))?;
    let config = if roots.is_empty() {
        // Nothing is trusted (and WebPKI's verifier refuses to be built empty):
        // every handshake fails.
        builder.with_root_certificates(roots).with_no_client_auth()
    } else {
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| Error::HttpClient(Box::new(e)))?;
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(TrustedLeaf { webpki, anchors }))
            .with_no_client_auth()
    };
    Ok(config)
}

/// WebPKI, plus a trusted certificate accepted when the server presents exactly it.
#[derive(Debug)]
struct TrustedLeaf {
    webpki: Arc<WebPkiServerVerifier>,
    /// Every trusted certificate, as DER.
    anchors: Vec<CertificateDer<'static>>,
}

impl TrustedLeaf {
    /// Whether `cert` is itself trusted, valid at `now` and names `server_name`.
    fn accepts_as_is(
        &self,
        cert: &CertificateDer<'_>,
        server_name: &ServerName<'_>,
        now: UnixTime,
    ) -> bool {
        if !self.anchors.iter().any(|a| a.as_ref() == cert.as_ref()) {
            return false;
        }
        let names_host = ParsedCertificate::try_from(cert)
            .and_then(|parsed| rustls::client::verify_server_name(&parsed, server_name))
            .is_ok();
        let valid_now = i64::try_from(now.as_secs())
            .ok()
            .and_then(|secs| x509_parser::time::ASN1Time::from_timestamp(secs).ok())
            .zip(x509_parser::parse_x509_certificate(cert.as_ref()).ok())
            .is_some_and(|(at, (_, parsed))| parsed.validity().is_valid_at(at));
        names_host && valid_now
    }
}

impl ServerCertVerifier for TrustedLeaf {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.webpki.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(rustls::Error::InvalidCertificate(_))
                if self.accepts_as_is(end_entity, server_name, now) =>
            {
                Ok(ServerCertVerified::assertion())
            }
            verdict => verdict,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}
