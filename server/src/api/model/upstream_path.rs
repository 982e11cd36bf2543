//! Splitting `/upstream/<model>/<path>` into a model and the path to forward.
//!
//! Model IDs may contain `/` (`org/model`), so the model is the **longest** run of
//! leading path segments that names a configured model or alias. Segments are
//! percent-decoded for matching; the remainder is forwarded still encoded, so
//! escaped characters reach the upstream unchanged.

use percent_encoding::percent_decode_str;

/// The result of splitting an `/upstream/...` path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UpstreamTarget<'a> {
    /// The model ID the prefix resolved to.
    pub model: String,
    /// The raw (still-encoded) prefix that named it, as the client wrote it.
    pub prefix: &'a str,
    /// The path to forward, starting with `/`; empty when the request named
    /// only the model (`/upstream/<model>` without a trailing slash).
    pub rest: &'a str,
}

/// Splits `tail`, the part of the path after `/upstream/`, using `resolve` (model
/// ID or alias → model ID). Returns `None` when no prefix names a model.
pub(crate) fn split_upstream_path<'a>(
    tail: &'a str,
    resolve: impl Fn(&str) -> Option<String>,
) -> Option<UpstreamTarget<'a>> {
    let mut best = None;
    let ends = tail
        .match_indices('/')
        .map(|(i, _)| i)
        .chain(std::iter::once(tail.len()));
    for end in ends {
        let prefix = &tail[..end];
        if prefix.is_empty() {
            continue;
        }
        let Ok(decoded) = percent_decode_str(prefix).decode_utf8() else {
            continue;
        };
        if let Some(model) = resolve(&decoded) {
            best = Some(UpstreamTarget {
                model,
                prefix,
                rest: &tail[end..],
            });
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolver(name: &str) -> Option<String> {
        match name {
            "org" => Some("org".into()),
            "org/model" | "alias" => Some("org/model".into()),
            "a b" => Some("a b".into()),
            _ => None,
        }
    }

    #[test]
    fn longest_matching_prefix_wins() {
        let t = split_upstream_path("org/model/v1/chat/completions", resolver).unwrap();
        assert_eq!(t.model, "org/model");
        assert_eq!(t.prefix, "org/model");
        assert_eq!(t.rest, "/v1/chat/completions");
        let t = split_upstream_path("org/other/health", resolver).unwrap();
        assert_eq!(t.model, "org");
        assert_eq!(t.rest, "/other/health");
    }

    #[test]
    fn alias_resolves_to_the_model_id() {
        let t = split_upstream_path("alias/health", resolver).unwrap();
        assert_eq!(t.model, "org/model");
        assert_eq!(t.rest, "/health");
    }

    #[test]
    fn model_without_trailing_path_has_empty_rest() {
        let t = split_upstream_path("org/model", resolver).unwrap();
        assert_eq!(t.rest, "");
        let t = split_upstream_path("org/model/", resolver).unwrap();
        assert_eq!(t.rest, "/");
    }

    #[test]
    fn encoded_segments_match_decoded_names_and_rest_stays_encoded() {
        let t = split_upstream_path("a%20b/x%2Fy", resolver).unwrap();
        assert_eq!(t.model, "a b");
        assert_eq!(t.rest, "/x%2Fy");
    }

    #[test]
    fn unknown_model_is_none() {
        assert_eq!(split_upstream_path("nope/v1/models", resolver), None);
        assert_eq!(split_upstream_path("", resolver), None);
    }
}
