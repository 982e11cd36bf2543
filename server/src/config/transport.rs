//! How upstreams are reached: a model's `timeouts`, and the top-level
//! `upstream` section (`ignorePaths`, and this server's `caFile`).

use std::fmt;

use regex::Regex;

use super::error::{KeyPath, Reason};
use super::fields::{Diagnostics, Fields, secs};
use super::node::Node;
use crate::proxy::Timeouts;

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

/// Reads a model's `timeouts` onto llama-swap's defaults; `0` disables one.
pub(crate) fn read_timeouts(node: &Node, path: &KeyPath, cx: &mut Diagnostics) -> Timeouts {
    let mut timeouts = Timeouts::default();
    let Some(mut fields) = Fields::new(node, path.clone(), cx) else {
        return timeouts;
    };
    let mut read = |key: &str, slot: &mut Option<std::time::Duration>| {
        if let Some((node, p)) = fields.take(key)
            && let Some(seconds) = cx.seconds(node, &p)
        {
            *slot = (seconds > 0).then(|| secs(seconds));
        }
    };
    read("connect", &mut timeouts.connect);
    read("keepalive", &mut timeouts.keepalive);
    read("responseHeader", &mut timeouts.response_header);
    read("tlsHandshake", &mut timeouts.tls_handshake);
    read("expectContinue", &mut timeouts.expect_continue);
    read("idleConn", &mut timeouts.idle_conn);
    fields.finish(cx);
    timeouts
}

/// Reads the top-level `upstream` section. A relative `caFile` is taken from
/// the working directory.
pub(crate) fn read_upstream(node: &Node, path: &KeyPath, cx: &mut Diagnostics) -> UpstreamConfig {
    let mut upstream = UpstreamConfig::default();
    let Some(mut fields) = Fields::new(node, path.clone(), cx) else {
        return upstream;
    };
    if let Some((node, list_path)) = fields.take("ignorePaths")
        && let Some(list) = cx.string_list(node, &list_path)
    {
        let mut patterns = Vec::with_capacity(list.len());
        for (pattern, pattern_path) in list {
            match Regex::new(&pattern) {
                Ok(re) => patterns.push(re),
                Err(source) => cx.error(
                    pattern_path,
                    Reason::InvalidRegex {
                        pattern,
                        reason: source.to_string(),
                    },
                ),
            }
        }
        if !patterns.is_empty() {
            upstream.ignore_paths = IgnorePaths(patterns);
        }
    }
    if let Some((node, file_path)) = fields.take("caFile")
        && let Some(file) = cx.non_empty_string(node, &file_path)
    {
        let file = std::path::PathBuf::from(file);
        match std::fs::read(&file)
            .map_err(|e| e.to_string())
            .and_then(|pem| crate::proxy::parse_pem_certificates(&pem))
            .and_then(|der| {
                // Checked now, so a bad file fails the load, not the first request.
                crate::proxy::UpstreamTls::only(&der)
                    .map(|_| der)
                    .map_err(|e| e.to_string())
            }) {
            Ok(der) => {
                upstream.ca_certificates = CaCertificates {
                    file: Some(file),
                    der,
                }
            }
            Err(reason) => cx.error(file_path, Reason::CaFile { file, reason }),
        }
    }
    fields.finish(cx);
    upstream
}

/// `--check-config` lines of a model's filters and non-default timeouts.
pub(crate) fn write_model_extras(
    f: &mut fmt::Formatter<'_>,
    model: &super::types::ModelConfig,
) -> fmt::Result {
    write_filters_and_timeouts(f, &model.filters, &model.timeouts, &Timeouts::default())
}

/// The `filters` and (when not `defaults`) `timeouts` lines of a model or peer.
pub(crate) fn write_filters_and_timeouts(
    f: &mut fmt::Formatter<'_>,
    filters: &crate::filters::Filters,
    timeouts: &Timeouts,
    defaults: &Timeouts,
) -> fmt::Result {
    if !filters.is_empty() {
        let list = |items: Vec<&str>| {
            if items.is_empty() {
                "-".to_owned()
            } else {
                items.join(", ")
            }
        };
        writeln!(
            f,
            "    filters:     strip [{}], set [{}], by name [{}]",
            list(filters.strip_params().collect()),
            list(filters.set_params().collect()),
            list(filters.by_id_names().collect()),
        )?;
    }
    if timeouts != defaults {
        let t = timeouts;
        let s = |d: Option<std::time::Duration>| {
            d.map_or_else(|| "off".to_owned(), |d| format!("{}s", d.as_secs()))
        };
        writeln!(
            f,
            "    timeouts:    connect {}, keepalive {}, responseHeader {}, tlsHandshake {}, expectContinue {}, idleConn {}",
            s(t.connect),
            s(t.keepalive),
            s(t.response_header),
            s(t.tls_handshake),
            s(t.expect_continue),
            s(t.idle_conn),
        )?;
    }
    Ok(())
}

/// The `--check-config` line of the `upstream` section.
pub(crate) fn write_upstream(f: &mut fmt::Formatter<'_>, upstream: &UpstreamConfig) -> fmt::Result {
    let ca = match &upstream.ca_certificates.file {
        Some(file) => format!(
            "{} ({} certificates)",
            file.display(),
            upstream.ca_certificates.der.len()
        ),
        None => "none (system roots only)".to_owned(),
    };
    writeln!(
        f,
        "upstream: ignorePaths [{}]; caFile {ca}",
        upstream
            .ignore_paths
            .patterns()
            .collect::<Vec<_>>()
            .join(", ")
    )
}
