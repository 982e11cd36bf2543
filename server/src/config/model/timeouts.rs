//! A model's (and a peer's) `timeouts`: the upstream client's transport
//! timeouts.

use crate::config::document::error::KeyPath;
use crate::config::document::fields::{Diagnostics, Fields, secs};
use crate::config::document::node::Node;
use crate::proxy::Timeouts;

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
    read("bodyIdle", &mut timeouts.body_idle);
    fields.finish(cx);
    timeouts
}
