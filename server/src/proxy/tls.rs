//! Trust for `https://` upstreams: rustls (ring provider) with the system's
//! root certificates and, optionally, extra ones (`upstream.caFile`).
//!
//! The system roots are what `rustls-native-certs` finds: the platform store,
//! or the PEM file in `SSL_CERT_FILE` and the directories in `SSL_CERT_DIR`
//! when those are set (as OpenSSL honours them).
//!
//! A self-signed certificate made the common way (`openssl req -x509`) is marked
//! `CA:TRUE`; WebPKI refuses a CA certificate as the server's own
//! (`CaUsedAsEndEntity`) even when it is trusted. curl, Go (llama-swap) and
//! Python accept a trusted certificate presented as is, so [`TrustedLeaf`] does
//! too: when the server presents exactly one of the trusted certificates, it is
//! accepted if it is valid now and names the host. Everything else goes through
//! WebPKI unchanged, and the handshake signature is always checked.

use std::fmt;
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

/// Why the upstream TLS client could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsSetupError {
    /// An extra certificate is not one rustls can use as a trust anchor.
    #[error("certificate {index} of the CA file is not a usable trust anchor: {source}")]
    BadCertificate {
        /// Its position in the file, from 0.
        index: usize,
        /// What rustls said.
        #[source]
        source: rustls::Error,
    },
    /// rustls refused the configuration.
    #[error("the TLS client configuration was refused: {0}")]
    Config(#[source] rustls::Error),
    /// The certificate verifier could not be built from the roots.
    #[error("the certificate verifier could not be built: {0}")]
    Verifier(#[source] rustls::client::VerifierBuilderError),
}

/// The TLS client settings shared by every connection to `https://`
/// upstreams (proxying and health checks). Cheap to clone.
#[derive(Clone)]
pub struct UpstreamTls {
    config: Arc<rustls::ClientConfig>,
    roots: usize,
}

impl UpstreamTls {
    /// The system's roots plus `extra` (DER certificates, e.g. from
    /// [`parse_pem_certificates`]). Unreadable system stores are logged and
    /// skipped: the extra certificates may be all that is needed.
    ///
    /// # Errors
    ///
    /// [`TlsSetupError`] when an extra certificate cannot be a trust anchor.
    pub fn new(extra: &[Vec<u8>]) -> Result<Self, TlsSetupError> {
        let mut roots = RootCertStore::empty();
        let native = rustls_native_certs::load_native_certs();
        for error in &native.errors {
            tracing::warn!(%error, "some system root certificates could not be read");
        }
        let anchors = native.certs.clone();
        let (added, ignored) = roots.add_parsable_certificates(native.certs);
        if ignored > 0 {
            tracing::debug!(
                ignored,
                "system root certificates rustls cannot use were skipped"
            );
        }
        Self::with_roots(roots, anchors, added, extra)
    }

    /// Only `extra` is trusted, not the system's roots (for tests).
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new).
    pub fn only(extra: &[Vec<u8>]) -> Result<Self, TlsSetupError> {
        Self::with_roots(RootCertStore::empty(), Vec::new(), 0, extra)
    }

    fn with_roots(
        mut roots: RootCertStore,
        mut anchors: Vec<CertificateDer<'static>>,
        mut count: usize,
        extra: &[Vec<u8>],
    ) -> Result<Self, TlsSetupError> {
        for (index, der) in extra.iter().enumerate() {
            let cert = CertificateDer::from(der.clone());
            roots
                .add(cert.clone())
                .map_err(|source| TlsSetupError::BadCertificate { index, source })?;
            anchors.push(cert);
            count += 1;
        }
        // The provider is named, not taken from a process default, so another
        // crate enabling a second provider cannot make this ambiguous.
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(TlsSetupError::Config)?;
        // Without any root nothing can be trusted, and WebPKI's verifier refuses to
        // be built empty: every handshake then fails, as it should.
        let mut config = if roots.is_empty() {
            builder.with_root_certificates(roots).with_no_client_auth()
        } else {
            let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(TlsSetupError::Verifier)?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(TrustedLeaf { webpki, anchors }))
                .with_no_client_auth()
        };
        // The proxy speaks HTTP/1.1 to upstreams (websocket upgrades need it).
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            config: Arc::new(config),
            roots: count,
        })
    }

    /// A connector for one handshake.
    pub(crate) fn connector(&self) -> tokio_rustls::TlsConnector {
        tokio_rustls::TlsConnector::from(Arc::clone(&self.config))
    }
}

impl fmt::Debug for UpstreamTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpstreamTls")
            .field("roots", &self.roots)
            .finish_non_exhaustive()
    }
}

/// WebPKI, plus a trusted certificate accepted when the server presents exactly
/// it (see the module docs).
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

/// Reads every certificate of a PEM document, DER-encoded.
///
/// # Errors
///
/// A message when the text is not PEM or holds no certificate.
pub(crate) fn parse_pem_certificates(pem: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let mut out = Vec::new();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(|e| format!("not a PEM certificate file: {e}"))?;
        out.push(cert.as_ref().to_vec());
    }
    if out.is_empty() {
        return Err("holds no PEM certificate (-----BEGIN CERTIFICATE-----)".to_owned());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A self-signed certificate for `name`, as `openssl req -x509` makes it when
    /// `ca` (basicConstraints CA:TRUE); returns it (DER) and its key (PKCS#8 DER).
    fn self_signed(name: &str, ca: bool, expired: bool) -> (Vec<u8>, Vec<u8>) {
        let mut params = CertificateParams::new(vec![name.to_owned()]).unwrap();
        if ca {
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        }
        if expired {
            params.not_before = rcgen::date_time_ymd(2000, 1, 1);
            params.not_after = rcgen::date_time_ymd(2001, 1, 1);
        }
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        (cert.der().to_vec(), key.serialize_der())
    }

    /// One TLS handshake (and one byte each way) between a server presenting `cert`
    /// and a client trusting only `trusted`, connecting to `localhost`.
    async fn handshake(cert: (Vec<u8>, Vec<u8>), trusted: &[Vec<u8>]) -> Result<(), String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![CertificateDer::from(cert.0)],
                rustls::pki_types::PrivateKeyDer::Pkcs8(cert.1.into()),
            )
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            if let Ok(mut tls) = acceptor.accept(tcp).await {
                let mut byte = [0u8; 1];
                if tls.read_exact(&mut byte).await.is_ok() {
                    let _ = tls.write_all(&byte).await;
                    let _ = tls.flush().await;
                }
            }
        });
        let connector = UpstreamTls::only(trusted).unwrap().connector();
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let name = ServerName::try_from("localhost").unwrap();
        let result = async {
            let mut tls = connector
                .connect(name, tcp)
                .await
                .map_err(|e| e.to_string())?;
            tls.write_all(b"x").await.map_err(|e| e.to_string())?;
            let mut byte = [0u8; 1];
            tls.read_exact(&mut byte).await.map_err(|e| e.to_string())?;
            Ok(())
        }
        .await;
        server.abort();
        result
    }

    #[tokio::test]
    async fn a_trusted_self_signed_ca_certificate_presented_as_is_is_accepted() {
        let cert = self_signed("localhost", true, false);
        let trusted = [cert.0.clone()];
        handshake(cert, &trusted).await.unwrap();
    }

    #[tokio::test]
    async fn a_trusted_self_signed_certificate_without_ca_is_still_accepted() {
        let cert = self_signed("localhost", false, false);
        let trusted = [cert.0.clone()];
        handshake(cert, &trusted).await.unwrap();
    }

    #[tokio::test]
    async fn a_trusted_ca_certificate_for_another_name_is_refused() {
        let cert = self_signed("other.example", true, false);
        let trusted = [cert.0.clone()];
        let err = handshake(cert, &trusted).await.unwrap_err();
        assert!(err.contains("certificate"), "{err}");
    }

    #[tokio::test]
    async fn an_expired_trusted_ca_certificate_is_refused() {
        let cert = self_signed("localhost", true, true);
        let trusted = [cert.0.clone()];
        let err = handshake(cert, &trusted).await.unwrap_err();
        assert!(err.contains("certificate"), "{err}");
    }

    #[tokio::test]
    async fn a_ca_certificate_that_is_not_the_trusted_one_is_refused() {
        let cert = self_signed("localhost", true, false);
        let other = self_signed("localhost", true, false);
        let err = handshake(cert, &[other.0]).await.unwrap_err();
        assert!(err.contains("certificate"), "{err}");
    }
}
