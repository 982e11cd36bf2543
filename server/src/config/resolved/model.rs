//! One model as loaded: [`ModelConfig`], its [`Capabilities`] as `/v1/models`
//! shows them, and the fixed settings of the model `/comfyui/` serves.

use std::time::Duration;

use serde_json::{Map, Value, json};

/// The model ID `/comfyui/...` is served by (llama-swap's fixed name).
pub const COMFYUI_MODEL_ID: &str = "comfyui_auto";

/// The lowest `concurrencyLimit` of [`COMFYUI_MODEL_ID`]: a ComfyUI page loads
/// many assets and API calls at once.
pub const COMFYUI_MIN_CONCURRENCY: usize = 50;

/// One entry of `models`.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ModelConfig {
    /// The model ID (its key under `models`).
    pub id: String,
    /// `cmd`, macros expanded and comment lines removed; split without a shell at
    /// spawn time.
    pub cmd: String,
    /// `cmdStop`, macros expanded; `${PID}` is still in it, substituted at stop time.
    pub cmd_stop: Option<String>,
    /// `proxy` (default `http://localhost:${PORT}`), expanded.
    pub proxy: String,
    /// The port `${PORT}` allocated for this model, when its `cmd` uses it.
    pub port: Option<u16>,
    /// `aliases`: other names routed to this model; unique across the config.
    pub aliases: Vec<String>,
    /// `env`: `NAME=value` entries added to the inherited environment, in order.
    pub env: Vec<(String, String)>,
    /// `checkEndpoint` (default `/health`); `None` when set to `none`.
    pub check_endpoint: Option<String>,
    /// Idle time after which the model is unloaded (`ttl`, else `globalTTL`); `None`
    /// means never.
    pub ttl: Option<Duration>,
    /// `minResident` (seconds; this server's extension): how long after it
    /// became ready a swap for a waiter of the same or lower priority may not
    /// stop it. `None`: `priority.minResident` applies; `Some(0)`: off for it.
    pub min_resident: Option<Duration>,
    /// `maxQueueWait` (this server's extension; default: the global one, 0 =
    /// no bound): the longest a request waits for its turn, the default and
    /// the cap of its `X-Queue-Timeout` header.
    pub max_queue_wait: Option<Duration>,
    /// `healthCheckInterval`, `healthCheckFailures`, `maxRestarts` and
    /// `restartWindow` (this server's extensions; default: the global ones):
    /// how the ready process is watched and its restarts paced.
    pub monitor: crate::upstream::Monitor,
    /// `unloadTimeout` (default: the global one).
    pub unload_timeout: Duration,
    /// `unlisted` (default false): hidden from `/v1/models`, still routable.
    pub unlisted: bool,
    /// `useModelName`: the model name written into requests sent upstream.
    pub use_model_name: Option<String>,
    /// `name`: display name.
    pub name: Option<String>,
    /// `description`.
    pub description: Option<String>,
    /// `metadata`: free-form data shown in `/v1/models`.
    pub metadata: Option<serde_json::Value>,
    /// `concurrencyLimit` (default 10): admitted requests (queued, waiting, serving).
    pub concurrency_limit: usize,
    /// `parallel` (this server's extension; default: no limit): most requests
    /// forwarded to the upstream at once, the rest ranked in the queue.
    pub parallel: crate::scheduler::Parallel,
    /// `sendLoadingState` (default: the global one).
    pub send_loading_state: bool,
    /// `filters` (`stripParams`, `setParams`, `setParamsByID`): applied to JSON
    /// bodies of model-dispatched requests. Each `setParamsByID` name is also
    /// in [`aliases`](Self::aliases).
    pub filters: crate::filters::Filters,
    /// `timeouts` (llama-swap's defaults; 0 disables one): the upstream
    /// client's transport timeouts.
    pub timeouts: crate::proxy::Timeouts,
    /// `capabilities` (none when absent or empty): rendered into `/v1/models`.
    pub capabilities: Option<Capabilities>,
    /// `compat.ignoreWebsockets` (default false; always true for
    /// [`COMFYUI_MODEL_ID`]): websocket upgrades bypass
    /// the scheduler. They never start the model (409 while it is not ready),
    /// are not counted as in flight, and do not keep it from being stopped.
    pub ignore_websockets: bool,
    /// `memory` (this server's extension; memory router only): GPU memory in
    /// bytes the model needs over all its GPUs.
    pub memory: Option<u64>,
    /// `gpus` (default 1; memory router only): how many GPUs it spans, the
    /// memory split evenly over them.
    pub gpus: usize,
    /// `persistent` (default false; memory router only): never stopped to
    /// make room for another model.
    pub persistent: bool,
    /// `sleep` (this server's extension): a swap puts the model to sleep
    /// instead of stopping it, and the next start wakes it.
    pub sleep: Option<super::memory::SleepConfig>,
}

/// Keys the rendering owns: a model's `metadata` entries with these names are
/// dropped from `meta.llamaswap` when capabilities are set (as in llama-swap).
const RENDERED_KEYS: &[&str] = &[
    "architecture",
    "capabilities",
    "supported_parameters",
    "context_length",
];

/// What a model supports, for clients reading `/v1/models`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Capabilities {
    /// `in`: input modalities (`text`, `audio`, `image`).
    pub input: Vec<String>,
    /// `out`: output modalities.
    pub output: Vec<String>,
    /// `tools`: function calling.
    pub tools: bool,
    /// `reranker`.
    pub reranker: bool,
    /// `context`: the context length in tokens (0 = not said).
    pub context: u64,
}

impl Capabilities {
    /// Adds llama-swap's fields to a `/v1/models` row: `architecture`
    /// (modalities), `capabilities` (vision, audio_transcriptions, audio_speech,
    /// image_generation, image_to_image, function_calling, reranker),
    /// `supported_parameters`, `context_length` and `meta.n_ctx`; removes the
    /// same names from `meta.llamaswap`.
    pub fn render_into(&self, row: &mut Value) {
        let has = |list: &[String], m: &str| list.iter().any(|x| x == m);
        let (has_in, has_out) = (!self.input.is_empty(), !self.output.is_empty());
        let mut arch = Map::new();
        if has_in {
            arch.insert("input_modalities".into(), json!(self.input));
        }
        if has_out {
            arch.insert("output_modalities".into(), json!(self.output));
        }
        if has_in && has_out {
            arch.insert(
                "modality".into(),
                json!(format!(
                    "{}->{}",
                    self.input.join("+"),
                    self.output.join("+")
                )),
            );
        }
        let mut caps = Map::new();
        if has(&self.input, "image") {
            caps.insert("vision".into(), json!(true));
        }
        for (input, output, name) in [
            ("audio", "text", "audio_transcriptions"),
            ("text", "audio", "audio_speech"),
            ("text", "image", "image_generation"),
            ("image", "image", "image_to_image"),
        ] {
            if has(&self.input, input) && has(&self.output, output) {
                caps.insert(name.into(), json!(true));
            }
        }
        if self.tools {
            caps.insert("function_calling".into(), json!(true));
            row["supported_parameters"] = json!(["tools", "tool_choice"]);
        }
        if self.reranker {
            caps.insert("reranker".into(), json!(true));
        }
        if !arch.is_empty() {
            row["architecture"] = Value::Object(arch);
        }
        if !caps.is_empty() {
            row["capabilities"] = Value::Object(caps);
        }
        if let Some(Value::Object(meta)) = row.get_mut("meta") {
            if let Some(Value::Object(llamaswap)) = meta.get_mut("llamaswap") {
                for key in RENDERED_KEYS {
                    llamaswap.remove(*key);
                }
            }
            if self.context > 0 {
                meta.insert("n_ctx".into(), json!(self.context));
            }
        } else if self.context > 0 {
            row["meta"] = json!({"n_ctx": self.context});
        }
        if self.context > 0 {
            row["context_length"] = json!(self.context);
        }
    }
}
