//! The top-level `upstream` section as loaded: `ignorePaths`, and this
//! server's `caFile`.

use std::fmt;

use regex::Regex;

/// llama-swap's default `upstream.ignorePaths`: static assets, which must not
/// start a model when a browser asks for them.
pub const DEFAULT_IGNORE_PATH: &str = r".*\.(js|json|css|png|gif|jpg|jpeg|ico|txt)$";

/// The top-level `upstream` section.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct UpstreamConfig {
    /// `ignorePaths` (default [`DEFAULT_IGNORE_PATH`]; a list replaces it, an
    /// empty list keeps it, as in llama-swap): a `/upstream/<model>/<path>`
    /// request whose path matches one of these and whose model is not ready is
    /// answered 409 without starting the model.
    pub ignore_paths: IgnorePaths,
    /// `caFile` (this server's extension; default none): PEM certificates
    /// trusted for `https://` upstreams in addition to the system's roots.
    pub ca_certificates: CaCertificates,
}

/// Compiled `upstream.ignorePaths` patterns (RE2-like syntax, unanchored).
#[derive(Clone)]
pub struct IgnorePaths(Vec<Regex>);

impl Default for IgnorePaths {
    fn default() -> Self {
        // The default pattern is a constant known to compile.
        Self(Regex::new(DEFAULT_IGNORE_PATH).into_iter().collect())
    }
}

impl IgnorePaths {
    /// Patterns already compiled (the reader refuses those that do not compile).
    pub(crate) fn new(patterns: Vec<Regex>) -> Self {
        Self(patterns)
    }

    /// True when `path` (the decoded path after `/upstream/<model>`) matches.
    pub fn matches(&self, path: &str) -> bool {
        self.0.iter().any(|re| re.is_match(path))
    }

    /// The patterns, as written.
    pub fn patterns(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(Regex::as_str)
    }
}

impl PartialEq for IgnorePaths {
    fn eq(&self, other: &Self) -> bool {
        self.patterns().eq(other.patterns())
    }
}

impl fmt::Debug for IgnorePaths {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.patterns()).finish()
    }
}

/// Extra trusted certificates for `https://` upstreams, read at load time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CaCertificates {
    /// Where they were read from (for messages).
    pub file: Option<std::path::PathBuf>,
    /// The certificates, DER-encoded.
    pub der: Vec<Vec<u8>>,
}
