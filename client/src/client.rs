//! [`Client`] and its builder.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::header::AUTHORIZATION;
use http::{HeaderMap, HeaderValue};

use crate::error::{Error, InvalidArgument};
use crate::middleware::Middleware;
use crate::options::{RetryPolicy, Timeouts, is_secret_header, parse_header};
use crate::priority::{PRIORITY_HEADER, Priority};

/// Default limit for one server-sent event (and one unterminated line): 8 MiB.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 8 << 20;

/// Default limit for a non-streaming response body: 256 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 256 << 20;

/// How much of an error body is kept: 64 KiB.
pub(crate) const MAX_ERROR_BODY_BYTES: usize = 64 << 10;

/// A handle to one proxy. Cheap to clone: clones share the connection pool and
/// settings.
///
/// Every call takes [`CallOptions`](crate::CallOptions); per-call values override
/// the settings made here.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
    /// Set by [`Client::with_priority`]; overrides the builder's default.
    pub(crate) priority_override: Option<Priority>,
}

pub(crate) struct Inner {
    pub(crate) http: reqwest::Client,
    /// Normalised: no trailing slash.
    pub(crate) base_url: String,
    /// Default headers with `X-Priority` already taken out.
    pub(crate) headers: HeaderMap,
    pub(crate) default_priority: Priority,
    pub(crate) timeouts: Timeouts,
    pub(crate) retry: RetryPolicy,
    pub(crate) max_event_bytes: usize,
    pub(crate) max_body_bytes: usize,
    /// Run around every attempt, in order.
    pub(crate) middleware: Vec<Arc<dyn Middleware>>,
}

impl Client {
    /// Starts a builder; [`ClientBuilder::base_url`] is the one required setting.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// A client for `base_url` with every other setting at its default.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when the URL is not a usable `http(s)` base URL.
    pub fn new(base_url: impl Into<String>) -> Result<Client, Error> {
        Client::builder().base_url(base_url).build()
    }

    /// A clone whose default priority is `priority`, sharing the same connection
    /// pool. Useful for frameworks that cannot pass options per call.
    #[must_use]
    pub fn with_priority(&self, priority: Priority) -> Client {
        Client {
            inner: Arc::clone(&self.inner),
            priority_override: Some(priority),
        }
    }

    /// The priority a call gets when its options set none.
    pub fn default_priority(&self) -> Priority {
        self.priority_override
            .unwrap_or(self.inner.default_priority)
    }

    /// The base URL, without a trailing slash or a last `/v1` segment.
    pub fn base_url(&self) -> &str {
        &self.inner.base_url
    }

    /// The client-wide timeouts.
    pub fn timeouts(&self) -> &Timeouts {
        &self.inner.timeouts
    }

    /// The client-wide retry policy.
    pub fn retry_policy(&self) -> &RetryPolicy {
        &self.inner.retry
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Header names only: values may be credentials.
        let header_names: Vec<&str> = self.inner.headers.keys().map(|k| k.as_str()).collect();
        f.debug_struct("Client")
            .field("base_url", &self.inner.base_url)
            .field("default_priority", &self.default_priority())
            .field("default_header_names", &header_names)
            .field("timeouts", &self.inner.timeouts)
            .field("retry", &self.inner.retry)
            .finish_non_exhaustive()
    }
}

/// Builds a [`Client`]. Setters never fail; [`ClientBuilder::build`] reports every
/// bad setting as [`Error::InvalidArgument`].
#[must_use]
#[derive(Default)]
pub struct ClientBuilder {
    base_url: Option<String>,
    api_key: Option<String>,
    headers: Vec<(String, String)>,
    header_map: HeaderMap,
    default_priority: Option<Priority>,
    timeouts: Timeouts,
    retry: Option<RetryPolicy>,
    http: Option<reqwest::Client>,
    max_event_bytes: Option<usize>,
    max_body_bytes: Option<usize>,
    middleware: Vec<Arc<dyn Middleware>>,
    root_certificates: Vec<Vec<u8>>,
}

impl fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("default_priority", &self.default_priority)
            .field("timeouts", &self.timeouts)
            .field("middlewares", &self.middleware.len())
            .finish_non_exhaustive()
    }
}

impl ClientBuilder {
    /// The proxy's base URL, for example `http://127.0.0.1:8080` (a path prefix is
    /// kept). The OpenAI form other SDKs take, `http://127.0.0.1:8080/v1`, means the
    /// same: a last `/v1` segment is dropped, since every endpoint adds its own
    /// `/v1/...` and the proxy's own endpoints (`/running`, `/upstream/...`) sit beside
    /// it. Required; no default.
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = Some(url.into());
        self
    }

    /// An API key, sent as `Authorization: Bearer <key>` and never printed.
    /// Default: none.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// A header sent with every call (a per-call header of the same name replaces
    /// it). Default: none. An `X-Priority` given here is read as the default
    /// priority (`10`, `0` or `-10`) unless [`ClientBuilder::default_priority`] is
    /// set; it is never sent twice.
    pub fn default_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Headers sent with every call (same rules as [`ClientBuilder::default_header`]).
    pub fn default_headers(mut self, headers: HeaderMap) -> Self {
        self.header_map.extend(headers);
        self
    }

    /// The priority of calls whose options set none. Default: `Normal` (no header).
    pub fn default_priority(mut self, priority: Priority) -> Self {
        self.default_priority = Some(priority);
        self
    }

    /// All timeouts at once. Default: [`Timeouts::default`].
    pub fn timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// Connect timeout. Default 10 s. Ignored with an injected HTTP client.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.timeouts.connect = timeout;
        self
    }

    /// Time from the start of a call to the response headers, retries included.
    /// Default 10 minutes (a model swap can take minutes); `None` waits forever.
    pub fn first_byte_timeout(mut self, timeout: impl Into<Option<Duration>>) -> Self {
        self.timeouts.first_byte = timeout.into();
        self
    }

    /// Longest gap between two pieces of a response body. Default 5 minutes;
    /// `None` waits forever.
    pub fn idle_timeout(mut self, timeout: impl Into<Option<Duration>>) -> Self {
        self.timeouts.idle = timeout.into();
        self
    }

    /// Deadline for a whole call, retries and body included. Default `None`.
    pub fn total_timeout(mut self, timeout: impl Into<Option<Duration>>) -> Self {
        self.timeouts.total = timeout.into();
        self
    }

    /// The retry policy. Default: [`RetryPolicy::default`] (2 retries).
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry = Some(policy);
        self
    }

    /// Adds a middleware run around every HTTP attempt (see [`Middleware`]); they
    /// run in the order added. Default: none.
    pub fn middleware(mut self, middleware: Arc<dyn Middleware>) -> Self {
        self.middleware.push(middleware);
        self
    }

    /// Trusts the root certificates in this PEM text (one or several) for
    /// `https://` base URLs, besides the platform's roots (which include
    /// `SSL_CERT_FILE` and `SSL_CERT_DIR`). Default: the platform's roots only.
    /// Ignored with an injected HTTP client.
    pub fn add_root_certificate_pem(mut self, certificate: impl Into<Vec<u8>>) -> Self {
        self.root_certificates.push(certificate.into());
        self
    }

    /// Uses this `reqwest::Client` (its connect timeout, proxy and TLS settings)
    /// instead of building one. Default: a client with the connect timeout, no
    /// proxy from the environment and, with the `tls` feature, rustls with the
    /// platform's certificate roots.
    pub fn http_client(mut self, client: reqwest::Client) -> Self {
        self.http = Some(client);
        self
    }

    /// Largest server-sent event (or unterminated line) a stream accepts before
    /// failing with [`Error::EventTooLarge`]. Default 8 MiB.
    pub fn max_event_bytes(mut self, limit: usize) -> Self {
        self.max_event_bytes = Some(limit);
        self
    }

    /// Largest non-streaming response body accepted before failing with
    /// [`Error::BodyTooLarge`]. Default 256 MiB.
    pub fn max_body_bytes(mut self, limit: usize) -> Self {
        self.max_body_bytes = Some(limit);
        self
    }

    /// Checks every setting and builds the client.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a missing or unusable base URL (an `https`
    /// one without the `tls` feature), an API key or header that HTTP cannot carry,
    /// an `X-Priority` header that is not an integer, a zero timeout, an inverted backoff
    /// range or a root certificate that does not parse; [`Error::HttpClient`] when
    /// the HTTP client cannot be built.
    pub fn build(self) -> Result<Client, Error> {
        let base_url = normalise_base_url(self.base_url.as_deref())?;

        let mut headers = self.header_map;
        for (name, value) in &self.headers {
            let (name, value) = parse_header(name, value)?;
            headers.insert(name, value);
        }
        for (name, value) in headers.iter_mut() {
            if is_secret_header(name) {
                value.set_sensitive(true);
            }
        }
        let header_priority = take_priority_header(&mut headers)?;
        if let Some(key) = &self.api_key {
            let mut value = HeaderValue::from_str(&format!("Bearer {key}"))
                .map_err(|_| InvalidArgument::InvalidApiKey)?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }

        self.timeouts.validate()?;
        let retry = self.retry.unwrap_or_default();
        retry.validate()?;

        let http = match self.http {
            Some(client) => client,
            None => {
                if base_url.starts_with("https:") && !cfg!(feature = "tls") {
                    return Err(InvalidArgument::TlsDisabled.into());
                }
                let builder = reqwest::Client::builder()
                    .connect_timeout(self.timeouts.connect)
                    .no_proxy();
                let builder = add_roots(
                    builder,
                    &self.root_certificates,
                    base_url.starts_with("https:"),
                )?;
                builder
                    .build()
                    .map_err(|e| Error::HttpClient(Box::new(e)))?
            }
        };

        Ok(Client {
            inner: Arc::new(Inner {
                http,
                base_url,
                headers,
                default_priority: self
                    .default_priority
                    .or(header_priority)
                    .unwrap_or_default(),
                timeouts: self.timeouts,
                retry,
                max_event_bytes: self.max_event_bytes.unwrap_or(DEFAULT_MAX_EVENT_BYTES),
                max_body_bytes: self.max_body_bytes.unwrap_or(DEFAULT_MAX_BODY_BYTES),
                middleware: self.middleware,
            }),
            priority_override: None,
        })
    }
}

#[cfg(feature = "tls")]
fn add_roots(
    builder: reqwest::ClientBuilder,
    certificates: &[Vec<u8>],
    https: bool,
) -> Result<reqwest::ClientBuilder, Error> {
    let config = crate::tls::client_config(certificates, https)?;
    Ok(builder.tls_backend_preconfigured(config))
}

#[cfg(not(feature = "tls"))]
fn add_roots(
    builder: reqwest::ClientBuilder,
    certificates: &[Vec<u8>],
    _https: bool,
) -> Result<reqwest::ClientBuilder, Error> {
    if certificates.is_empty() {
        Ok(builder)
    } else {
        Err(InvalidArgument::TlsDisabled.into())
    }
}

/// Removes every `X-Priority` entry from `headers` and reads it as a tier.
///
/// The typed priority is the one source of truth for the header, so a header map
/// that names it is translated rather than sent alongside.
pub(crate) fn take_priority_header(
    headers: &mut HeaderMap,
) -> Result<Option<Priority>, InvalidArgument> {
    let mut found: Option<Priority> = None;
    for value in headers.get_all(&PRIORITY_HEADER) {
        let priority = Priority::from_header_value(value)
            .map_err(|e| InvalidArgument::PriorityHeaderValue { value: e.input })?;
        if found.is_some_and(|p| p != priority) {
            return Err(InvalidArgument::PriorityHeaderValue {
                value: String::from_utf8_lossy(value.as_bytes()).into_owned(),
            });
        }
        found = Some(priority);
    }
    headers.remove(&PRIORITY_HEADER);
    Ok(found)
}

fn normalise_base_url(url: Option<&str>) -> Result<String, InvalidArgument> {
    let raw = url.ok_or(InvalidArgument::MissingBaseUrl)?.trim();
    let parsed = reqwest::Url::parse(raw).map_err(|_| InvalidArgument::UnparseableBaseUrl {
        url: raw.to_owned(),
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(InvalidArgument::UnsupportedScheme {
            scheme: parsed.scheme().to_owned(),
        });
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(InvalidArgument::CredentialsInBaseUrl);
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(InvalidArgument::QueryInBaseUrl);
    }
    // Other SDKs are configured with the OpenAI base (`http://host:8080/v1`); the
    // endpoints here add `/v1/...` themselves, and the proxy's own endpoints
    // (`/running`, `/upstream/...`) live beside `/v1`, so a last `/v1` segment is
    // dropped rather than doubled.
    let mut parsed = parsed;
    let last_is_v1 = parsed
        .path_segments()
        .and_then(|mut segments| segments.rfind(|s| !s.is_empty()))
        == Some("v1");
    if last_is_v1 && let Ok(mut segments) = parsed.path_segments_mut() {
        segments.pop_if_empty().pop();
    }
    Ok(parsed.as_str().trim_end_matches('/').to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build_err(builder: ClientBuilder) -> InvalidArgument {
        match builder.build() {
            Err(Error::InvalidArgument(e)) => e,
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }

    #[test]
    fn a_base_url_ending_in_v1_is_the_same_base_as_without_it() {
        for (given, base) in [
            ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080"),
            ("http://127.0.0.1:8080/v1/", "http://127.0.0.1:8080"),
            ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
            ("https://gpu.lan/llm/v1", "https://gpu.lan/llm"),
            ("https://gpu.lan/llm", "https://gpu.lan/llm"),
            ("http://v1:8080/", "http://v1:8080"),
            ("http://h/v1/v1", "http://h/v1"),
            ("http://h/api/v10", "http://h/api/v10"),
        ] {
            let client = Client::builder().base_url(given).build().unwrap();
            assert_eq!(client.base_url(), base, "{given}");
        }
    }

    #[test]
    fn base_url_is_required_and_checked() {
        assert_eq!(
            build_err(Client::builder()),
            InvalidArgument::MissingBaseUrl
        );
        assert!(matches!(
            build_err(Client::builder().base_url("not a url")),
            InvalidArgument::UnparseableBaseUrl { .. }
        ));
        assert!(matches!(
            build_err(Client::builder().base_url("ftp://h")),
            InvalidArgument::UnsupportedScheme { .. }
        ));
        assert_eq!(
            build_err(Client::builder().base_url("http://u:pw@h")),
            InvalidArgument::CredentialsInBaseUrl
        );
        assert_eq!(
            build_err(Client::builder().base_url("http://h/?a=1")),
            InvalidArgument::QueryInBaseUrl
        );
    }

    #[test]
    fn base_url_keeps_prefix_and_drops_trailing_slash() {
        let c = Client::new("http://127.0.0.1:9/proxy/").unwrap();
        assert_eq!(c.base_url(), "http://127.0.0.1:9/proxy");
        let c = Client::new("http://127.0.0.1:9").unwrap();
        assert_eq!(c.base_url(), "http://127.0.0.1:9");
    }

    #[test]
    fn api_key_never_shows_in_debug_or_errors() {
        let b = Client::builder()
            .base_url("http://h")
            .api_key("sk-very-secret");
        assert!(!format!("{b:?}").contains("sk-very-secret"));
        let c = b.build().unwrap();
        assert!(!format!("{c:?}").contains("sk-very-secret"));
        let err = Client::builder()
            .base_url("http://h")
            .api_key("sk-bad\nkey")
            .build()
            .unwrap_err();
        assert!(!format!("{err} {err:?}").contains("sk-bad"));
    }

    #[test]
    fn priority_in_default_headers_becomes_the_default_priority() {
        let c = Client::builder()
            .base_url("http://h")
            .default_header("X-Priority", "-10")
            .build()
            .unwrap();
        assert_eq!(c.default_priority(), Priority::Low);
        assert!(c.inner.headers.get(PRIORITY_HEADER).is_none());
        let c = Client::builder()
            .base_url("http://h")
            .default_header("X-Priority", "-10")
            .default_priority(Priority::Elevated)
            .build()
            .unwrap();
        assert_eq!(c.default_priority(), Priority::Elevated);
    }

    #[test]
    fn unusable_priority_header_is_rejected_by_build() {
        assert_eq!(
            build_err(
                Client::builder()
                    .base_url("http://h")
                    .default_header("x-priority", "high")
            ),
            InvalidArgument::PriorityHeaderValue {
                value: "high".into()
            }
        );
    }

    #[test]
    fn another_integer_in_a_header_map_is_a_custom_priority() {
        let c = Client::builder()
            .base_url("http://h")
            .default_header("x-priority", "5")
            .build()
            .unwrap();
        assert_eq!(c.default_priority(), Priority::custom(5).unwrap());
    }

    #[test]
    fn zero_priority_header_means_normal_and_conflicting_values_are_rejected() {
        let c = Client::builder()
            .base_url("http://h")
            .default_header("x-priority", "0")
            .build()
            .unwrap();
        assert_eq!(c.default_priority(), Priority::Normal);
        assert!(c.inner.headers.get(PRIORITY_HEADER).is_none());
        let mut map = HeaderMap::new();
        map.append(PRIORITY_HEADER, HeaderValue::from_static("10"));
        map.append(PRIORITY_HEADER, HeaderValue::from_static("-10"));
        assert_eq!(
            build_err(Client::builder().base_url("http://h").default_headers(map)),
            InvalidArgument::PriorityHeaderValue {
                value: "-10".into()
            }
        );
    }

    #[test]
    fn https_base_url_needs_the_tls_feature_and_bad_roots_are_named() {
        let https = Client::builder().base_url("https://127.0.0.1:9").build();
        if cfg!(feature = "tls") {
            assert!(https.is_ok());
            assert_eq!(
                build_err(
                    Client::builder()
                        .base_url("https://h")
                        .add_root_certificate_pem(b"-----BEGIN CERTIFICATE-----\nnope\n".to_vec())
                ),
                InvalidArgument::InvalidRootCertificate { index: 0 }
            );
        } else {
            assert!(matches!(
                https,
                Err(Error::InvalidArgument(InvalidArgument::TlsDisabled))
            ));
        }
    }

    #[test]
    fn with_priority_changes_only_the_derived_client() {
        let c = Client::new("http://h").unwrap();
        let low = c.with_priority(Priority::Low);
        assert_eq!(low.default_priority(), Priority::Low);
        assert_eq!(c.default_priority(), Priority::Normal);
        assert!(Arc::ptr_eq(&c.inner, &low.inner));
    }

    #[test]
    fn zero_timeout_and_bad_backoff_are_rejected() {
        assert!(matches!(
            build_err(
                Client::builder()
                    .base_url("http://h")
                    .first_byte_timeout(Duration::ZERO)
            ),
            InvalidArgument::ZeroTimeout { .. }
        ));
        assert!(matches!(
            build_err(Client::builder().base_url("http://h").retry_policy(
                RetryPolicy::default().with_backoff(Duration::from_secs(2), Duration::from_secs(1))
            )),
            InvalidArgument::BackoffRange { .. }
        ));
    }
}
