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
    if let Some(port) = unusable_port(&text) {
        cx.error(path.clone(), Reason::InvalidUrlPort { got: text, port });
        return None;
    }
    Some(text)
}

/// The port of an `http(s)://` URL's authority when it is not a TCP port a
/// connection can be made to (0, or past 65535): `http::Uri` accepts any
/// digits there, and such a URL would only fail when a request waits on it.
fn unusable_port(url: &str) -> Option<String> {
    let authority = url.parse::<http::Uri>().ok()?.authority()?.clone();
    let host_port = authority
        .as_str()
        .rsplit_once('@')
        .map_or(authority.as_str(), |(_, after)| after);
    let port = match host_port.rsplit_once(']') {
        Some((_, after)) => after.strip_prefix(':')?,
        None => host_port.rsplit_once(':')?.1,
    };
    if port.is_empty() {
        // `http://host:` is the scheme's default port, as in a browser.
        return None;
    }
    match port.parse::<u16>() {
        Ok(n) if n > 0 => None,
        _ => Some(port.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_outside_1_to_65535_are_unusable_and_others_are_not() {
        assert_eq!(
            unusable_port("http://127.0.0.1:99999"),
            Some("99999".into())
        );
        assert_eq!(unusable_port("http://127.0.0.1:0/v1"), Some("0".into()));
        assert_eq!(unusable_port("https://[::1]:70000"), Some("70000".into()));
        assert_eq!(
            unusable_port("http://u:p@host:123456"),
            Some("123456".into())
        );
        assert_eq!(unusable_port("http://127.0.0.1:65535"), None);
        assert_eq!(unusable_port("http://[::1]:8080/x"), None);
        assert_eq!(unusable_port("http://[::1]"), None);
        assert_eq!(unusable_port("https://gpu-box"), None);
        assert_eq!(unusable_port("http://u:p@host"), None);
    }

    #[test]
    fn comment_lines_are_removed_from_commands() {
        let cmd = "llama-server\n  # --flash-attn\n  --port ${PORT}\n";
        assert_eq!(strip_comment_lines(cmd), "llama-server\n  --port ${PORT}");
    }
}
