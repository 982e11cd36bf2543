//! The web UI: `/ui` and everything under it, and `/favicon.ico`.
//!
//! The page is plain HTML, CSS and JavaScript modules from `server/ui/`,
//! embedded in the binary at compile time (no build step, nothing fetched from
//! elsewhere: the content security policy allows this origin only). Any
//! `/ui/...` path without a file extension is a deep link into the page
//! (`/ui/queue`) and gets `index.html`. These paths need no API key: they hold
//! no data; the page asks for the key and sends it with its API calls.

use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::sync::LazyLock;

use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, StatusCode, header};

use crate::api::error::ApiError;

/// One embedded file.
struct Asset {
    /// Path under `server/ui/`.
    path: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
}

macro_rules! asset {
    ($path:literal, $content_type:literal) => {
        Asset {
            path: $path,
            content_type: $content_type,
            bytes: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/ui/", $path)),
        }
    };
}

/// Every file of `server/ui/` (a test checks that none is missing).
const ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("app.css", "text/css; charset=utf-8"),
    asset!("favicon.ico", "image/x-icon"),
    asset!("js/app.js", "text/javascript; charset=utf-8"),
    asset!("js/api.js", "text/javascript; charset=utf-8"),
    asset!("js/dom.js", "text/javascript; charset=utf-8"),
    asset!("js/store.js", "text/javascript; charset=utf-8"),
    asset!("js/views/models.js", "text/javascript; charset=utf-8"),
    asset!("js/views/queue.js", "text/javascript; charset=utf-8"),
    asset!("js/views/activity.js", "text/javascript; charset=utf-8"),
    asset!("js/views/logs.js", "text/javascript; charset=utf-8"),
    asset!("js/views/playground.js", "text/javascript; charset=utf-8"),
];

/// What the page may load and contact: this origin only.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
     connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Strong validators, one per asset, computed once.
static ETAGS: LazyLock<Vec<HeaderValue>> = LazyLock::new(|| {
    let hasher = BuildHasherDefault::<DefaultHasher>::default();
    ASSETS
        .iter()
        .map(|a| {
            let tag = format!("\"{:016x}-{:x}\"", hasher.hash_one(a.bytes), a.bytes.len());
            HeaderValue::from_str(&tag).unwrap_or_else(|_| HeaderValue::from_static("\"0\""))
        })
        .collect()
});

/// `GET /ui`, `/ui/`: the page.
pub(crate) async fn index(headers: HeaderMap) -> Response {
    serve("index.html", &headers)
}

/// `GET /ui/<path>`: a file, or the page for a deep link.
pub(crate) async fn file(Path(path): Path<String>, headers: HeaderMap) -> Response {
    let last = path.rsplit('/').next().unwrap_or_default();
    if find(&path).is_some() {
        serve(&path, &headers)
    } else if path.is_empty() || !last.contains('.') {
        serve("index.html", &headers)
    } else {
        ApiError::NotFound {
            path: format!("/ui/{path}"),
        }
        .into_response()
    }
}

/// `GET /favicon.ico`.
pub(crate) async fn favicon(headers: HeaderMap) -> Response {
    serve("favicon.ico", &headers)
}

fn find(path: &str) -> Option<usize> {
    ASSETS.iter().position(|a| a.path == path)
}

fn serve(path: &str, request: &HeaderMap) -> Response {
    let Some(index) = find(path) else {
        return ApiError::NotFound {
            path: format!("/ui/{path}"),
        }
        .into_response();
    };
    let asset = &ASSETS[index];
    let etag = ETAGS.get(index).cloned();
    let fresh = etag.as_ref().is_some_and(|etag| {
        request
            .get_all(header::IF_NONE_MATCH)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|candidate| candidate.trim() == etag.to_str().unwrap_or_default())
    });
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        asset.bytes.into_response()
    };
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    // Revalidated on every load, so a new binary's page is never mixed with an old one's.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Some(etag) = etag {
        headers.insert(header::ETAG, etag);
    }
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    if asset.content_type.starts_with("text/html") {
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        );
        headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files_under(dir: &std::path::Path, prefix: &str, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = format!("{prefix}{name}");
            if entry.file_type().unwrap().is_dir() {
                files_under(&entry.path(), &format!("{path}/"), out);
            } else {
                out.push(path);
            }
        }
    }

    #[test]
    fn every_file_of_the_ui_directory_is_embedded() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("ui");
        let mut files = Vec::new();
        files_under(&dir, "", &mut files);
        for file in &files {
            assert!(find(file).is_some(), "server/ui/{file} is not in ASSETS");
        }
        assert_eq!(
            files.len(),
            ASSETS.len(),
            "ASSETS lists a file that is gone"
        );
    }

    #[test]
    fn scripts_are_served_as_javascript() {
        for asset in ASSETS.iter().filter(|a| a.path.ends_with(".js")) {
            assert_eq!(
                asset.content_type, "text/javascript; charset=utf-8",
                "{}",
                asset.path
            );
        }
    }

    #[test]
    fn the_page_loads_nothing_from_elsewhere() {
        for asset in ASSETS.iter().filter(|a| !a.path.ends_with(".ico")) {
            let text = std::str::from_utf8(asset.bytes).unwrap();
            for needle in ["http://", "https://", "//cdn", "@import", "fonts.g"] {
                assert!(
                    !text.contains(needle),
                    "{} mentions {needle}: assets must come from this server",
                    asset.path
                );
            }
        }
    }
}
