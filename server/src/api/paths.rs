//! The model endpoints' paths: the table the router serves them from and the
//! test of which requests need an admin key stand on it (a leaf, so that the
//! key rules of `front/scopes.rs` need not import the router).

/// POST endpoints whose model is in the JSON body or multipart form.
pub(crate) const MODEL_POST: &[&str] = &[
    "/v1/chat/completions",
    "/v1/responses",
    "/v1/completions",
    "/v1/messages",
    "/v1/messages/count_tokens",
    "/v1/embeddings",
    "/v1/rerank",
    "/v1/reranking",
    "/v1/audio/speech",
    "/v1/audio/transcriptions",
    "/v1/images/generations",
    "/v1/images/edits",
    "/rerank",
    "/reranking",
    "/infill",
    "/completion",
    "/sdapi/v1/txt2img",
    "/sdapi/v1/img2img",
    "/audioapi/v1/tasks/run",
    // Versionless variants; `/v` is stripped before forwarding.
    "/v/chat/completions",
    "/v/responses",
    "/v/completions",
    "/v/messages",
    "/v/messages/count_tokens",
    "/v/embeddings",
    "/v/rerank",
    "/v/reranking",
];

/// GET endpoints whose model is in `?model=`.
pub(crate) const MODEL_GET: &[&str] = &["/sdapi/v1/loras", "/props"];

/// Whether `path` is a model endpoint: one of [`MODEL_POST`] or
/// [`MODEL_GET`], `/v1/audio/voices`, `/upstream/...` or `/comfyui...`.
pub(crate) fn is_model_path(path: &str) -> bool {
    MODEL_POST.contains(&path)
        || MODEL_GET.contains(&path)
        || path == "/v1/audio/voices"
        || path.starts_with("/upstream/")
        || path == "/comfyui"
        || path.starts_with("/comfyui/")
}
