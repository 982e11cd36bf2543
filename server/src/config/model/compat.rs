//! A model's `compat` section (`ignoreWebsockets`).

use crate::config::document::error::{KeyPath, WarningKind};
use crate::config::document::fields::{Diagnostics, Fields};
use crate::config::document::node::Node;
use crate::config::resolved::model::COMFYUI_MODEL_ID;

/// Reads `compat.ignoreWebsockets` (default false) of model `id`; for
/// [`COMFYUI_MODEL_ID`] it is always true, as in llama-swap (a `false` there
/// warns that it has no effect).
pub(crate) fn read_ignore_websockets(
    id: &str,
    compat: Option<(&Node, KeyPath)>,
    cx: &mut Diagnostics,
) -> bool {
    let comfyui = id == COMFYUI_MODEL_ID;
    let Some((node, path)) = compat else {
        return comfyui;
    };
    let Some(mut fields) = Fields::new(node, path, cx) else {
        return comfyui;
    };
    let configured = fields
        .take("ignoreWebsockets")
        .and_then(|(node, path)| Some((cx.bool(node, &path)?, path)));
    fields.finish(cx);
    match configured {
        Some((false, path)) if comfyui => {
            cx.warn(
                path,
                WarningKind::NoEffect {
                    because: "the model is comfyui_auto, whose websockets are always ignored (as in llama-swap)",
                },
            );
            true
        }
        Some((value, _)) => value,
        None => comfyui,
    }
}
