//! A model's `compat` section (`ignoreWebsockets`) and the fixed settings of
//! the `comfyui_auto` model that `/comfyui/` serves.

use super::error::{KeyPath, WarningKind};
use super::fields::{Diagnostics, Fields};
use super::node::Node;

/// The model ID `/comfyui/...` is served by (llama-swap's fixed name).
pub const COMFYUI_MODEL_ID: &str = "comfyui_auto";

/// The lowest `concurrencyLimit` of [`COMFYUI_MODEL_ID`]: a ComfyUI page loads
/// many assets and API calls at once.
pub const COMFYUI_MIN_CONCURRENCY: usize = 50;

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
