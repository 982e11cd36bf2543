//! The top-level `upstream` section: `ignorePaths`, and this server's `caFile`.

use regex::Regex;

use super::document::error::{KeyPath, Reason};
use super::document::fields::{Diagnostics, Fields};
use super::document::node::Node;
use super::resolved::upstream::{CaCertificates, IgnorePaths, UpstreamConfig};

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
            upstream.ignore_paths = IgnorePaths::new(patterns);
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
