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
use super::paths::{MODEL_GET, MODEL_POST};
use super::state::AppState;

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
pub(crate) fn app(state: AppState) -> Router {
    let mut router = Router::new();
    for endpoint in endpoints() {
        let route = match endpoint.allow {
            Some(allow) => only(allow, endpoint.route),
            None => endpoint.route,
        };
        router = router.route(endpoint.path, route);
    }
    // Request id, log, preflight, the loop check, then auth: one layer.
    router
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(state.clone(), front::front))
        .with_state(state)
}

/// One route of the table: its path, the methods it takes, its handler.
struct Endpoint {
    path: &'static str,
    /// `None`: every method.
    allow: Option<&'static [&'static str]>,
    route: MethodRouter<AppState>,
}

impl Endpoint {
    /// `path` for the methods in `allow` (others answer 405).
    fn only(
        path: &'static str,
        allow: &'static [&'static str],
        route: MethodRouter<AppState>,
    ) -> Self {
        Self {
            path,
            allow: Some(allow),
            route,
        }
    }

    /// `path` for every method.
    fn any(path: &'static str, route: MethodRouter<AppState>) -> Self {
        Self {
            path,
            allow: None,
            route,
        }
    }
}

/// The endpoint table. The doc of [`crate::api`] lists the same endpoints
/// for readers; a test holds the two together.
fn endpoints() -> Vec<Endpoint> {
    const POST: &[&str] = &["POST"];
    const GET: &[&str] = &["GET", "HEAD"];
    let mut table = Vec::new();
    for path in MODEL_POST {
        table.push(Endpoint::only(path, POST, post(model_endpoint)));
    }
    for path in MODEL_GET {
        table.push(Endpoint::only(path, GET, get(model_endpoint)));
    }
    table.extend([
        Endpoint::only(
            "/v1/audio/voices",
            &["GET", "HEAD", "POST"],
            get(model_endpoint).post(model_endpoint),
        ),
        Endpoint::any("/upstream/{*path}", any(upstream_endpoint)),
        Endpoint::any("/comfyui", any(comfyui::redirect)),
        Endpoint::any("/comfyui/", any(comfyui::endpoint)),
        Endpoint::any("/comfyui/{*path}", any(comfyui::endpoint)),
        Endpoint::only("/v1/models", GET, get(info::models)),
        Endpoint::only("/models", GET, get(info::models)),
        Endpoint::only("/running", GET, get(info::running)),
        Endpoint::only("/health", GET, get(info::health)),
        Endpoint::only("/wol-health", GET, get(info::health)),
        Endpoint::only("/", GET, get(info::root_redirect)),
        Endpoint::only("/upstream", GET, get(info::upstream_redirect)),
        Endpoint::only("/api/queue", GET, get(info::queue)),
        Endpoint::only("/api/profiles", GET, get(profiles::list_profiles)),
        Endpoint::only(
            "/api/profiles/active",
            &["PUT"],
            put(profiles::set_active_profile),
        ),
        Endpoint::only("/metrics", GET, get(metrics::metrics)),
        Endpoint::only("/unload", GET, get(info::unload_all_text)),
        Endpoint::only("/api/models/unload", POST, post(info::unload_all)),
        Endpoint::only("/api/models/unload/{*model}", POST, post(info::unload_one)),
        Endpoint::only("/logs", GET, get(logs::history)),
        Endpoint::only("/logs/stream", GET, get(logs::stream_all)),
        Endpoint::only("/logs/stream/{*model}", GET, get(logs::stream_one)),
        Endpoint::only("/api/events", GET, get(events::events)),
        Endpoint::only("/api/activity", GET, get(activity::recent)),
        Endpoint::only("/api/metrics/activity", GET, get(activity::history)),
        Endpoint::only("/api/metrics/stats", GET, get(activity::stats)),
        Endpoint::only("/api/captures/{id}", GET, get(activity::capture)),
        Endpoint::only("/api/inflight/{id}/cancel", POST, post(activity::cancel)),
        Endpoint::only("/api/version", GET, get(info::version)),
        Endpoint::only("/api/hardware", GET, get(info::hardware)),
        Endpoint::only("/api/performance", GET, get(info::performance)),
        Endpoint::only("/api/models/load/{*model}", POST, post(activity::load)),
        Endpoint::only("/api/loadtest", POST, post(loadtest::loadtest)),
        Endpoint::only(
            "/api/models/config/{*model}",
            GET,
            get(model_config::model_config),
        ),
        Endpoint::only("/ui", GET, get(ui::index)),
        Endpoint::only("/ui/", GET, get(ui::index)),
        Endpoint::only("/ui/{*path}", GET, get(ui::file)),
        Endpoint::only("/favicon.ico", GET, get(ui::favicon)),
    ]);
    table
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A path pattern of the endpoint table in the API's doc: `<name>` stands
    /// for one or more segments, `...` for anything below.
    struct Documented {
        /// `None`: any method.
        methods: Option<Vec<String>>,
        path: String,
    }

    impl Documented {
        fn pattern(&self) -> regex::Regex {
            let mut pattern = String::from("^");
            let mut rest = self.path.as_str();
            while !rest.is_empty() {
                if let Some(after) = rest.strip_prefix("...") {
                    pattern.push_str(".*");
                    rest = after;
                } else if let Some(after) = rest.strip_prefix('<') {
                    let end = after.find('>').expect("a closed <placeholder>");
                    pattern.push_str(".+");
                    rest = &after[end + 1..];
                } else {
                    let c = rest.chars().next().expect("not empty");
                    pattern.push_str(&regex::escape(&c.to_string()));
                    rest = &rest[c.len_utf8()..];
                }
            }
            pattern.push('$');
            regex::Regex::new(&pattern).expect("a valid pattern")
        }
    }

    /// `a[/b]` is `a` and `a/b`; a bracketed query (`[?limit=N]`) is dropped.
    fn expand(path: &str) -> Vec<String> {
        let Some(open) = path.find('[') else {
            return vec![path.to_owned()];
        };
        let close = open + path[open..].find(']').expect("a closed [option]");
        let (head, optional, tail) = (&path[..open], &path[open + 1..close], &path[close + 1..]);
        let mut paths = expand(&format!("{head}{tail}"));
        if !optional.starts_with('?') {
            paths.extend(expand(&format!("{head}{optional}{tail}")));
        }
        paths
    }

    /// The first column of the table under `# Endpoints` in `api/mod.rs`.
    fn documented() -> Vec<Documented> {
        let doc = include_str!("mod.rs");
        let table = doc
            .lines()
            .skip_while(|line| *line != "//! # Endpoints")
            .skip_while(|line| !line.starts_with("//! |---"))
            .skip(1)
            .take_while(|line| line.starts_with("//! |"));
        let mut found = Vec::new();
        for row in table {
            let cell = row.trim_start_matches("//! |").split(" | ").next().unwrap();
            let mut methods = cell.trim().starts_with("any method").then_some(None);
            for (i, token) in cell.split('`').enumerate() {
                if i % 2 == 0 {
                    continue;
                }
                let path = match token.split_once(' ') {
                    Some((named, path)) => {
                        let named = named.split('/').map(str::to_owned).collect();
                        methods = Some(Some(named));
                        path
                    }
                    None => token,
                };
                if !path.starts_with('/') {
                    continue;
                }
                let methods = methods.clone().expect("a method before the first path");
                for path in expand(path) {
                    found.push(Documented {
                        methods: methods.clone(),
                        path,
                    });
                }
            }
        }
        found
    }

    /// A concrete path the route `path` answers: each `{*rest}` two segments.
    fn sample(path: &str) -> String {
        let wildcard = regex::Regex::new(r"\{\*?[a-z]+\}").unwrap();
        wildcard.replace_all(path, "x/y").into_owned()
    }

    #[test]
    fn every_route_is_in_the_documented_endpoint_table_and_every_documented_endpoint_is_routed() {
        let documented = documented();
        let routes = endpoints();
        assert!(
            documented.len() > 40,
            "the table was read: {}",
            documented.len()
        );

        for route in &routes {
            let path = sample(route.path);
            assert!(
                documented.iter().any(|d| d.pattern().is_match(&path)),
                "{} is routed but not in the endpoint table of api/mod.rs",
                route.path
            );
        }
        for doc in &documented {
            let pattern = doc.pattern();
            let matching: Vec<&Endpoint> = routes
                .iter()
                .filter(|r| pattern.is_match(&sample(r.path)))
                .collect();
            assert!(
                !matching.is_empty(),
                "{} is in the endpoint table but not routed",
                doc.path
            );
            for route in matching {
                let allowed = match (&doc.methods, route.allow) {
                    (None, allow) => allow.is_none(),
                    (Some(_), None) => true,
                    (Some(methods), Some(allow)) => {
                        methods.iter().all(|m| allow.contains(&m.as_str()))
                    }
                };
                assert!(
                    allowed,
                    "{} {:?} is documented, the route takes {:?}",
                    doc.path, doc.methods, route.allow
                );
            }
        }
    }

    #[test]
    fn optional_parts_of_a_documented_path_give_both_paths() {
        assert_eq!(expand("/a[/<b>]"), ["/a", "/a/<b>"]);
        assert_eq!(expand("/a[?limit=N]"), ["/a"]);
    }
}
