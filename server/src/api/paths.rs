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

/// Whether a request keeps a history row, as llama-swap keeps one: a `POST`
/// to one of [`MODEL_POST`] or `/v1/audio/voices`, directly or through
/// `/upstream/<model>/` (the path after some model prefix is one of them).
/// Health checks, other GETs and other paths through `/upstream` are in
/// flight while they run but leave no row (a websocket keeps one: the
/// caller adds it).
pub(crate) fn is_metered(method: &http::Method, path: &str) -> bool {
    let endpoint = |p: &str| MODEL_POST.contains(&p) || p == "/v1/audio/voices";
    *method == http::Method::POST
        && (endpoint(path)
            || path.strip_prefix("/upstream/").is_some_and(|tail| {
                tail.match_indices('/')
                    .any(|(at, _)| at > 0 && endpoint(&tail[at..]))
            }))
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    #[test]
    fn posts_to_model_endpoints_are_metered_directly_and_through_upstream() {
        for path in [
            "/v1/chat/completions",
            "/v/messages",
            "/v1/audio/voices",
            "/upstream/a/v1/chat/completions",
            "/upstream/org/model/v1/embeddings",
            "/upstream/a/completion",
        ] {
            assert!(is_metered(&Method::POST, path), "{path}");
        }
        for (method, path) in [
            (Method::GET, "/v1/chat/completions"),
            (Method::GET, "/props"),
            (Method::GET, "/upstream/a/health"),
            (Method::POST, "/upstream/a/health"),
            (Method::POST, "/upstream/a/v1/whatever"),
            (Method::POST, "/upstream//v1/chat/completions"),
            (Method::POST, "/comfyui/prompt"),
            (Method::POST, "/v1/models"),
        ] {
            assert!(!is_metered(&method, path), "{method} {path}");
        }
    }
}
