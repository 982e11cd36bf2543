//! The web UI: `/ui` and everything under it, and `/favicon.ico`.
//!
//! The page is plain HTML, CSS and JavaScript modules from `server/ui/`
//! (with pinned, vendored libraries under `server/ui/vendor/`), embedded in
//! the binary at compile time by the list `server/build.rs` writes: no Node
//! toolchain, nothing fetched from elsewhere (the content security policy
//! allows this origin only). A `/ui/...` path outside the asset folders that
//! names no file is a deep link into the page (`/ui/queue`,
//! `/ui/models/qwen2.5-7b`) and gets `index.html`. These paths need no API
//! key: they hold no data; the page asks for the key and sends it with its
//! API calls.

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

/// Every file of `server/ui/`, listed by the build script (`server/build.rs`).
const ASSETS: &[Asset] = include!(concat!(env!("OUT_DIR"), "/ui_assets.rs"));

/// Folders of static files: a missing file under them is a 404, not a deep link.
const ASSET_FOLDERS: &[&str] = &["js", "css", "vendor"];

/// What the page may load and contact: this origin only.
///
/// `blob:` media is the playground's synthesised speech (an object URL of the
/// answer); `data:` images are generated images and chat attachments. Inline
/// styles stay refused: the page styles with classes and the CSSOM.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
     media-src 'self' blob:; connect-src 'self'; manifest-src 'self'; base-uri 'none'; \
     form-action 'self'; frame-ancestors 'none'";

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

/// `GET /ui/<path>`: a file, or the page for a deep link (`/ui/models/qwen2.5`:
/// any path outside the asset folders that is not a top-level file name).
pub(crate) async fn file(Path(path): Path<String>, headers: HeaderMap) -> Response {
    if find(&path).is_some() {
        serve(&path, &headers)
    } else if is_deep_link(&path) {
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

/// True for a path the page routes itself (a view, a model's page, a tab).
fn is_deep_link(path: &str) -> bool {
    match path.split_once('/') {
        Some((first, _)) => !ASSET_FOLDERS.contains(&first),
        None => !path.contains('.'),
    }
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
        assert!(find("index.html").is_some() && find("js/app.js").is_some());
    }

    #[test]
    fn files_are_served_with_the_type_of_their_kind() {
        for asset in ASSETS {
            let expected = match asset.path.rsplit_once('.').map(|(_, e)| e) {
                Some("js") => "text/javascript; charset=utf-8",
                Some("css") => "text/css; charset=utf-8",
                Some("html") => "text/html; charset=utf-8",
                Some("ico") => "image/x-icon",
                Some("md") => "text/markdown; charset=utf-8",
                _ => "text/plain; charset=utf-8",
            };
            assert_eq!(asset.content_type, expected, "{}", asset.path);
        }
    }

    #[test]
    fn deep_links_reach_the_page_and_missing_assets_do_not() {
        for link in [
            "models",
            "models/qwen2.5-7b",
            "models/org%2Fm",
            "playground/chat",
            "queue",
        ] {
            assert!(is_deep_link(link), "{link}");
        }
        for missing in ["js/nope.js", "css/x.css", "vendor/x/y.js", "robots.txt"] {
            assert!(!is_deep_link(missing), "{missing}");
        }
    }

    /// Our own files load nothing from elsewhere (the vendored libraries
    /// mention addresses in their comments and licences; the content
    /// security policy and the browser tests keep them from being fetched).
    #[test]
    fn the_page_loads_nothing_from_elsewhere() {
        for asset in ASSETS
            .iter()
            .filter(|a| !a.path.ends_with(".ico") && !a.path.starts_with("vendor/"))
        {
            let text = std::str::from_utf8(asset.bytes).unwrap();
            let text = text.replace("http://www.w3.org/2000/svg", "");
            for needle in ["http://", "https://", "//cdn", "@import", "fonts.g"] {
                assert!(
                    !text.contains(needle),
                    "{} mentions {needle}: assets must come from this server",
                    asset.path
                );
            }
        }
    }

    #[test]
    fn every_vendored_library_has_its_licence() {
        let folders: std::collections::BTreeSet<&str> = ASSETS
            .iter()
            .filter_map(|a| a.path.strip_prefix("vendor/"))
            .filter_map(|p| p.split_once('/').map(|(folder, _)| folder))
            .collect();
        assert!(!folders.is_empty());
        for folder in folders {
            assert!(
                find(&format!("vendor/{folder}/LICENSE")).is_some(),
                "server/ui/vendor/{folder} has no LICENSE"
            );
        }
    }
}
