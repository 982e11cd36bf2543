//! A model's commands (`cmd`, `cmdStop`) and where it is reached (`proxy`,
//! `checkEndpoint`).

use crate::config::document::error::{KeyPath, Reason, WarningKind};
use crate::config::document::fields::Diagnostics;
use crate::config::document::node::Node;
use crate::upstream::{CommandError, split_command};

/// Removes lines whose first non-blank character is `#`, as llama-swap does before
/// anything else looks at a command.
pub(crate) fn strip_comment_lines(text: &str) -> String {
    let kept: Vec<&str> = text
        .lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .collect();
    kept.join("\n").trim().to_owned()
}

/// Reads `cmd`/`cmdStop` and checks it splits the way the supervisor will split it
/// at spawn time, so a bad command fails the load rather than the first request.
pub(crate) fn read_command(node: &Node, path: &KeyPath, cx: &mut Diagnostics) -> Option<String> {
    let text = cx.string(node, path)?;
    let text = strip_comment_lines(&text);
    match split_command(&text) {
        Ok(_) => Some(text),
        Err(CommandError::Empty) => {
            cx.error(path.clone(), Reason::EmptyCommand);
            None
        }
        Err(err) => {
            cx.error(path.clone(), Reason::InvalidCommand(err));
            None
        }
    }
}

/// `checkEndpoint`: a path, `none`, or a full URL. Of a URL only the path (and
/// query) is polled, on the model's proxy, as llama-swap does; a warning says
/// so when its host differs from the proxy's.
pub(crate) fn read_check_endpoint(
    node: &Node,
    path: KeyPath,
    proxy: Option<&str>,
    cx: &mut Diagnostics,
) -> Option<String> {
    let text = cx.string(node, &path)?;
    let trimmed = text.trim();
    if trimmed == "none" {
        return None;
    }
    if trimmed.starts_with('/') {
        return Some(trimmed.to_owned());
    }
    let url = trimmed
        .parse::<http::Uri>()
        .ok()
        .filter(|u| matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some());
    let Some(url) = url else {
        cx.error(path, Reason::InvalidCheckEndpoint { got: text });
        return None;
    };
    let polled = url
        .path_and_query()
        .map_or_else(|| "/".to_owned(), |pq| pq.as_str().to_owned());
    let proxy_authority = proxy
        .and_then(|p| p.parse::<http::Uri>().ok())
        .and_then(|p| p.authority().cloned());
    if let Some(proxy) = proxy
        && url.authority() != proxy_authority.as_ref()
    {
        cx.warn(
            path,
            WarningKind::CheckEndpointHostIgnored {
                path: polled.clone(),
                proxy: proxy.to_owned(),
            },
        );
    }
    Some(polled)
}

/// Reads an upstream URL (a model's `proxy`, a peer's `proxy`): http or https
/// with a host.
pub(crate) fn read_proxy(node: &Node, path: &KeyPath, cx: &mut Diagnostics) -> Option<String> {
    let text = cx.non_empty_string(node, path)?;
    let valid = text.parse::<http::Uri>().ok().is_some_and(|uri| {
        matches!(uri.scheme_str(), Some("http" | "https"))
            && uri.host().is_some_and(|h| !h.is_empty())
    });
    if !valid {
        cx.error(path.clone(), Reason::InvalidUrl { got: text });
        return None;
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comment_lines_are_removed_from_commands() {
        let cmd = "llama-server\n  # --flash-attn\n  --port ${PORT}\n";
        assert_eq!(strip_comment_lines(cmd), "llama-server\n  --port ${PORT}");
    }
}
