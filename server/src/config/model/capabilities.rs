//! A model's `capabilities` (`in`, `out`, `tools`, `reranker`, `context`).

use crate::config::document::error::{KeyPath, Reason};
use crate::config::document::fields::{Diagnostics, Fields};
use crate::config::document::node::Node;
use crate::config::resolved::model::Capabilities;

/// The modalities llama-swap accepts.
const MODALITIES: &[&str] = &["text", "audio", "image"];

/// Reads `capabilities`; an empty block is no block (as in llama-swap).
pub(crate) fn read_capabilities(
    node: &Node,
    path: &KeyPath,
    cx: &mut Diagnostics,
) -> Option<Capabilities> {
    let mut fields = Fields::new(node, path.clone(), cx)?;
    let modalities = |key: &str, cx: &mut Diagnostics, fields: &mut Fields<'_>| {
        let mut out = Vec::new();
        if let Some((node, p)) = fields.take(key)
            && let Some(list) = cx.string_list(node, &p)
        {
            for (m, m_path) in list {
                if MODALITIES.contains(&m.as_str()) {
                    out.push(m);
                } else {
                    cx.error(
                        m_path,
                        Reason::NotOneOf {
                            allowed: MODALITIES,
                            got: m,
                        },
                    );
                }
            }
        }
        out
    };
    let input = modalities("in", cx, &mut fields);
    let output = modalities("out", cx, &mut fields);
    let flag = |key: &str, cx: &mut Diagnostics, fields: &mut Fields<'_>| {
        fields
            .take(key)
            .and_then(|(node, p)| cx.bool(node, &p))
            .unwrap_or(false)
    };
    let tools = flag("tools", cx, &mut fields);
    let reranker = flag("reranker", cx, &mut fields);
    let context = fields
        .take("context")
        .and_then(|(node, p)| cx.seconds(node, &p))
        .unwrap_or(0);
    fields.finish(cx);
    let caps = Capabilities {
        input,
        output,
        tools,
        reranker,
        context,
    };
    (caps != Capabilities::default()).then_some(caps)
}
