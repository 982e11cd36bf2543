//! Trust for `https://` upstreams: rustls (ring provider) with the system's
//! root certificates and, optionally, extra ones (`upstream.caFile`).
//!
//! The system roots are what `rustls-native-certs` finds: the platform store,
//! or the PEM file in `SSL_CERT_FILE` and the directories in `SSL_CERT_DIR`
//! when those are set (as OpenSSL honours them).

use std::fmt;
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

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
        let (added, ignored) = roots.add_parsable_certificates(native.certs);
        if ignored > 0 {
            tracing::debug!(
                ignored,
                "system root certificates rustls cannot use were skipped"
            );
        }
        Self::with_roots(roots, added, extra)
    }

    /// Only `extra` is trusted, not the system's roots (for tests).
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new).
    pub fn only(extra: &[Vec<u8>]) -> Result<Self, TlsSetupError> {
        Self::with_roots(RootCertStore::empty(), 0, extra)
    }

    fn with_roots(
        mut roots: RootCertStore,
        mut count: usize,
        extra: &[Vec<u8>],
    ) -> Result<Self, TlsSetupError> {
        for (index, der) in extra.iter().enumerate() {
            roots
                .add(CertificateDer::from(der.clone()))
                .map_err(|source| TlsSetupError::BadCertificate { index, source })?;
            count += 1;
        }
        // The provider is named, not taken from a process default, so another
        // crate enabling a second provider cannot make this ambiguous.
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(TlsSetupError::Config)?
            .with_root_certificates(roots)
            .with_no_client_auth();
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

/// Reads every certificate of a PEM document, DER-encoded.
///
/// # Errors
///
/// A message when the text is not PEM or holds no certificate.
pub fn parse_pem_certificates(pem: &[u8]) -> Result<Vec<Vec<u8>>, String> {
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
