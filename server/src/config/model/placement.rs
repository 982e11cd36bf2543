//! A model's keys for the memory router: `memory`, `gpus`, `persistent`.

use crate::config::document::error::KeyPath;
use crate::config::document::fields::{Diagnostics, Fields};
use crate::config::document::macros::GPU_PLACEHOLDER;
use crate::config::document::sizes::read_bytes;

/// What a model says about its GPU memory, and where it said it.
#[derive(Debug, Default)]
pub(crate) struct Placement {
    /// `memory`: bytes over all its GPUs.
    pub(crate) memory: Option<u64>,
    /// `gpus` (default 1).
    pub(crate) gpus: Option<usize>,
    /// `persistent` (default false).
    pub(crate) persistent: bool,
    /// Where each key present was written (for "has no effect" warnings).
    pub(crate) paths: Vec<KeyPath>,
    /// Where `memory` was written.
    pub(crate) memory_path: Option<KeyPath>,
    /// Where `gpus` was written.
    pub(crate) gpus_path: Option<KeyPath>,
}

/// Reads `memory`, `gpus` and `persistent` of one model.
pub(crate) fn read_placement(fields: &mut Fields<'_>, cx: &mut Diagnostics) -> Placement {
    let mut placement = Placement::default();
    if let Some((node, path)) = fields.take("memory") {
        placement.memory = read_bytes(node, &path, cx);
        placement.memory_path = Some(path.clone());
        placement.paths.push(path);
    }
    if let Some((node, path)) = fields.take("gpus") {
        placement.gpus = cx
            .int_min(node, &path, 1)
            .and_then(|n| usize::try_from(n).ok());
        placement.gpus_path = Some(path.clone());
        placement.paths.push(path);
    }
    if let Some((node, path)) = fields.take("persistent") {
        placement.persistent = cx.bool(node, &path).unwrap_or(false);
        placement.paths.push(path);
    }
    placement
}

/// `${GPU}` is filled in where a process is started: `cmd`, `cmdStop` and
/// `env`. Anywhere else in a model it is an error naming the key.
pub(crate) fn reject_gpu_elsewhere(
    expanded: &crate::config::document::node::Node,
    path: &KeyPath,
    cx: &mut Diagnostics,
) {
    use crate::config::document::node::Node;
    fn walk(node: &Node, path: &KeyPath, cx: &mut Diagnostics) {
        match node {
            Node::Str(s) if s.contains(GPU_PLACEHOLDER) => cx.error(
                path.clone(),
                crate::config::document::error::Reason::MacroNotAvailable {
                    name: "GPU",
                    where_available: "in cmd, cmdStop and env",
                },
            ),
            Node::Seq(items) => {
                for (i, item) in items.iter().enumerate() {
                    walk(item, &path.index(i), cx);
                }
            }
            Node::Map(entries) => {
                for (k, v) in entries {
                    walk(v, &path.key(k), cx);
                }
            }
            _ => {}
        }
    }
    if let Node::Map(entries) = expanded {
        for (key, value) in entries {
            if !matches!(key.as_str(), "cmd" | "cmdStop" | "env") {
                walk(value, &path.key(key), cx);
            }
        }
    }
}

/// `sleep`: `vllm`, `sglang`, or `{sleep: "POST /sleep?level=1", wake: "POST
/// /wake_up", memory: 1GiB}` (a call is `METHOD /path` or `/path`, POST by
/// default; `memory` is what the model keeps on its GPUs asleep, default 0).
pub(crate) fn read_sleep(
    fields: &mut Fields<'_>,
    cx: &mut Diagnostics,
) -> Option<crate::config::resolved::memory::SleepConfig> {
    use crate::config::document::error::Reason;
    use crate::config::document::node::Node;
    use crate::config::resolved::memory::SleepConfig;
    use crate::upstream::SleepSpec;
    let (node, path) = fields.take("sleep")?;
    match node {
        Node::Str(_) => match cx.word(node, &path, &["vllm", "sglang"])? {
            "vllm" => Some(SleepConfig::new(SleepSpec::vllm(), 0)),
            _ => Some(SleepConfig::new(SleepSpec::sglang(), 0)),
        },
        Node::Map(_) => {
            let mut map = Fields::new(node, path.clone(), cx)?;
            let call = |key: &str, map: &mut Fields<'_>, cx: &mut Diagnostics| {
                let Some((n, p)) = map.take(key) else {
                    cx.error(path.key(key), Reason::Missing);
                    return None;
                };
                let text = cx.string(n, &p)?;
                let parsed = parse_call(&text);
                if parsed.is_none() {
                    cx.error(p, Reason::InvalidSleepCall { got: text });
                }
                parsed
            };
            let sleep = call("sleep", &mut map, cx);
            let wake = call("wake", &mut map, cx);
            let memory = map
                .take("memory")
                .and_then(|(n, p)| read_bytes(n, &p, cx))
                .unwrap_or(0);
            map.finish(cx);
            Some(SleepConfig::new(
                SleepSpec {
                    sleep: sleep?,
                    wake: wake?,
                },
                memory,
            ))
        }
        other => cx.wrong_type(
            &path,
            "vllm, sglang or a map of sleep, wake and memory",
            other,
        ),
    }
}

/// `POST /sleep?level=1`, `PUT /x` or `/x` (POST).
fn parse_call(text: &str) -> Option<crate::upstream::HttpCall> {
    let text = text.trim();
    let (method, path) = match text.split_once(char::is_whitespace) {
        Some((method, path)) => (method, path.trim()),
        None => ("POST", text),
    };
    if !path.starts_with('/') || path.contains(char::is_whitespace) {
        return None;
    }
    let method = http::Method::from_bytes(method.to_ascii_uppercase().as_bytes()).ok()?;
    Some(crate::upstream::HttpCall {
        method,
        path: path.to_owned(),
    })
}
