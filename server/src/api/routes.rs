//! The endpoint table (llama-swap parity plus `/api/queue`) and the layers every
//! request passes: authentication, JSON errors for unknown paths and methods.

use axum::Router;
use axum::extract::Request;
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, any, get, post, put};
use http::{Method, Uri};

use super::error::ApiError;
use super::front;
use super::manage::{activity, events, info, loadtest, logs, metrics, model_config, profiles, ui};
use super::model::{comfyui, model_endpoint, upstream_endpoint};
use super::state::AppState;

/// POST endpoints whose model is in the JSON body or multipart form.
const MODEL_POST: &[&str] = &[
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
const MODEL_GET: &[&str] = &["/sdapi/v1/loras", "/props"];

/// The application as a connection serves it: the model endpoints of
/// [`MODEL_POST`] called directly behind [`front::front_with`], everything
/// else through the axum router of [`app`].
///
/// The direct call does what the router would (the same layer, the same
/// endpoint) without its per-request steps (route lookup, the path and
/// parameter extensions, a boxed clone of the route and of the layer's inner
/// service, boxed futures), which cost the hottest requests measurable time.
#[derive(Clone)]
pub(crate) struct App {
    router: Router,
    state: AppState,
}

impl App {
    /// The application for `state`.
    pub(crate) fn new(state: AppState) -> Self {
        Self {
            router: app(state.clone()),
            state,
        }
    }

    /// Serves `request`.
    pub(crate) async fn call(self, request: Request) -> Response {
        if request.method() == Method::POST && MODEL_POST.contains(&request.uri().path()) {
            front::front_with(self.state, request, |state, request| {
                model_endpoint(axum::extract::State(state), request)
            })
            .await
        } else {
            let mut router = self.router;
            match tower::Service::call(&mut router, request).await {
                Ok(response) => response,
                Err(never) => match never {},
            }
        }
    }
}

/// Builds the axum application for `state`.
pub fn app(state: AppState) -> Router {
    const POST: &[&str] = &["POST"];
    const GET: &[&str] = &["GET", "HEAD"];
    let mut router = Router::new();
    for path in MODEL_POST {
        router = router.route(path, only(POST, post(model_endpoint)));
    }
    for path in MODEL_GET {
        router = router.route(path, only(GET, get(model_endpoint)));
    }
    router = router
        .route(
            "/v1/audio/voices",
            only(
                &["GET", "HEAD", "POST"],
                get(model_endpoint).post(model_endpoint),
            ),
        )
        .route("/upstream/{*path}", any(upstream_endpoint))
        .route("/comfyui", any(comfyui::redirect))
        .route("/comfyui/", any(comfyui::endpoint))
        .route("/comfyui/{*path}", any(comfyui::endpoint))
        .route("/v1/models", only(GET, get(info::models)))
        .route("/models", only(GET, get(info::models)))
        .route("/running", only(GET, get(info::running)))
        .route("/health", only(GET, get(info::health)))
        .route("/wol-health", only(GET, get(info::health)))
        .route("/", only(GET, get(info::root_redirect)))
        .route("/upstream", only(GET, get(info::upstream_redirect)))
        .route("/api/queue", only(GET, get(info::queue)))
        .route("/api/profiles", only(GET, get(profiles::list_profiles)))
        .route(
            "/api/profiles/active",
            only(&["PUT"], put(profiles::set_active_profile)),
        )
        .route("/metrics", only(GET, get(metrics::metrics)))
        .route("/unload", only(GET, get(info::unload_all_text)))
        .route("/api/models/unload", only(POST, post(info::unload_all)))
        .route(
            "/api/models/unload/{*model}",
            only(POST, post(info::unload_one)),
        )
        .route("/logs", only(GET, get(logs::history)))
        .route("/logs/stream", only(GET, get(logs::stream_all)))
        .route("/logs/stream/{*model}", only(GET, get(logs::stream_one)))
        .route("/api/events", only(GET, get(events::events)))
        .route("/api/activity", only(GET, get(activity::recent)))
        .route("/api/metrics/activity", only(GET, get(activity::history)))
        .route("/api/metrics/stats", only(GET, get(activity::stats)))
        .route("/api/captures/{id}", only(GET, get(activity::capture)))
        .route(
            "/api/models/load/{*model}",
            only(POST, post(activity::load)),
        )
        .route("/api/loadtest", only(POST, post(loadtest::loadtest)))
        .route(
            "/api/models/config/{*model}",
            only(GET, get(model_config::model_config)),
        )
        .route("/ui", only(GET, get(ui::index)))
        .route("/ui/", only(GET, get(ui::index)))
        .route("/ui/{*path}", only(GET, get(ui::file)))
        .route("/favicon.ico", only(GET, get(ui::favicon)))
        .fallback(not_found);
    // Request id, log, preflight, the loop check, then auth: one layer.
    router
        .layer(middleware::from_fn_with_state(state.clone(), front::front))
        .with_state(state)
}

/// Answers other methods than `allow` with the 405 envelope and `Allow`.
fn only(allow: &'static [&'static str], route: MethodRouter<AppState>) -> MethodRouter<AppState> {
    route.fallback(move |method: Method, uri: Uri| async move {
        ApiError::MethodNotAllowed {
            method,
            path: uri.path().to_owned(),
            allow: allow
                .iter()
                .filter_map(|m| Method::from_bytes(m.as_bytes()).ok())
                .collect(),
        }
        .into_response()
    })
}

async fn not_found(request: Request) -> Response {
    ApiError::NotFound {
        path: request.uri().path().to_owned(),
    }
    .into_response()
}
