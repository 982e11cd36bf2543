//! The HTTPS listener's certificate: a PEM certificate chain and private key
//! read from files (llama-swap's `-tls-cert-file`/`-tls-key-file`), read again
//! on every configuration reload so a renewed certificate is picked up
//! without a restart. Connections already open keep the certificate they
//! were made with.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio_rustls::TlsAcceptor;

/// Why the certificate or key could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A file could not be read or holds no usable PEM item.
    #[error("{}: {what}", path.display())]
    Pem {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        what: String,
    },
    /// The key does not fit the certificate, or its kind is not supported.
    #[error("{}: {source}", key.display())]
    Key {
        /// The key file.
        key: PathBuf,
        /// rustls's reason.
        #[source]
        source: rustls::Error,
    },
    /// No protocol version could be set up (a build without TLS 1.2/1.3 support).
    #[error("TLS cannot be set up: {0}")]
    Setup(#[source] rustls::Error),
}

/// A certificate and key served by the TLS listener, re-readable.
/// Cheap to clone: clones share the certificate.
#[derive(Clone)]
pub struct TlsFiles {
    inner: Arc<Inner>,
}

struct Inner {
    cert: PathBuf,
    key: PathBuf,
    resolver: Arc<Current>,
    acceptor: TlsAcceptor,
}

impl fmt::Debug for TlsFiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsFiles")
            .field("cert", &self.inner.cert)
            .field("key", &self.inner.key)
            .finish_non_exhaustive()
    }
}

/// The certificate handed to each new handshake.
struct Current(RwLock<Arc<CertifiedKey>>);

impl fmt::Debug for Current {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Current(<certificate>)")
    }
}

impl ResolvesServerCert for Current {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(
            &self.0.read().unwrap_or_else(PoisonError::into_inner),
        ))
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl TlsFiles {
    /// Reads the certificate chain (`cert`, PEM, leaf first) and its private key
    /// (`key`, PEM: PKCS#8, PKCS#1 or SEC1).
    ///
    /// # Errors
    ///
    /// [`TlsError`] when a file cannot be read, holds no certificate or key, or
    /// the key does not belong to the certificate.
    pub fn load(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Result<Self, TlsError> {
        let (cert, key) = (cert.into(), key.into());
        let certified = read(&cert, &key)?;
        let resolver = Arc::new(Current(RwLock::new(Arc::new(certified))));
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Setup)?
            .with_no_client_auth()
            .with_cert_resolver(resolver.clone());
        // hyper serves HTTP/1.1 here.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            inner: Arc::new(Inner {
                cert,
                key,
                resolver,
                acceptor: TlsAcceptor::from(Arc::new(config)),
            }),
        })
    }

    /// Reads the files again; new connections get the new certificate. On
    /// error the certificate in use is kept.
    ///
    /// # Errors
    ///
    /// As [`TlsFiles::load`].
    pub fn reload(&self) -> Result<(), TlsError> {
        let certified = read(&self.inner.cert, &self.inner.key)?;
        *self
            .inner
            .resolver
            .0
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(certified);
        Ok(())
    }

    /// The certificate file.
    #[must_use]
    pub fn cert_path(&self) -> &Path {
        &self.inner.cert
    }

    /// The key file.
    #[must_use]
    pub fn key_path(&self) -> &Path {
        &self.inner.key
    }

    pub(super) fn acceptor(&self) -> &TlsAcceptor {
        &self.inner.acceptor
    }
}

fn pem_error(path: &Path, what: impl fmt::Display) -> TlsError {
    TlsError::Pem {
        path: path.to_owned(),
        what: what.to_string(),
    }
}

fn read(cert: &Path, key: &Path) -> Result<CertifiedKey, TlsError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| pem_error(cert, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| pem_error(cert, e))?;
    if chain.is_empty() {
        return Err(pem_error(cert, "no CERTIFICATE in the file"));
    }
    let private = PrivateKeyDer::from_pem_file(key).map_err(|e| pem_error(key, e))?;
    CertifiedKey::from_der(chain, private, &provider()).map_err(|source| TlsError::Key {
        key: key.to_owned(),
        source,
    })
}
