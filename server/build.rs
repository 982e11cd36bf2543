//! Lists the web UI's files (`server/ui/`) for `api/manage/ui.rs` to embed: one
//! `include_bytes!` per file with its content type, so a file added to the UI
//! is served without anyone editing a list, and a file of a type the server
//! cannot name fails the build instead of being served wrongly.
//!
//! Also sets the build's commit and date (`GET /api/version`, `-version`):
//! `LLAMA_SWAP_SERVER_COMMIT` and `LLAMA_SWAP_SERVER_BUILD_DATE` when given;
//! else, built from the published package (`cargo install llama-swap-server`),
//! the commit `cargo package` recorded in `.cargo_vcs_info.json`; else, for a
//! release build, the checkout's commit and its date (so the same commit builds
//! the same binary); else `unknown` (a debug build does not rebuild the crate at
//! every commit for it).

use std::error::Error;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() -> Result<(), Box<dyn Error>> {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    build_info(&manifest);
    let ui = manifest.join("ui");
    println!("cargo:rerun-if-changed=ui");
    let mut files = Vec::new();
    walk(&ui, &mut files)?;
    files.sort();
    let mut out = String::from("&[\n");
    for file in &files {
        let relative = file
            .strip_prefix(&ui)?
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/");
        let content_type = content_type(&relative).ok_or_else(|| {
            format!(
                "server/ui/{relative}: no content type for this kind of file (see server/build.rs)"
            )
        })?;
        writeln!(
            out,
            "    Asset {{ path: {relative:?}, content_type: {content_type:?}, bytes: include_bytes!({:?}) }},",
            file.display().to_string()
        )?;
    }
    out.push_str("]\n");
    let dest = PathBuf::from(std::env::var("OUT_DIR")?).join("ui_assets.rs");
    std::fs::write(dest, out)?;
    Ok(())
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), Box<dyn Error>> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            walk(&path, out)?;
        } else {
            out.push(path);
        }
    }
    Ok(())
}

/// The content type of a UI file by its name.
fn content_type(path: &str) -> Option<&'static str> {
    let name = path.rsplit('/').next().unwrap_or(path);
    if name == "LICENSE" || name.starts_with("LICENSE-") {
        return Some("text/plain; charset=utf-8");
    }
    let extension = name.rsplit_once('.')?.1;
    Some(match extension {
        "html" => "text/html; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "ico" => "image/x-icon",
        "png" => "image/png",
        "svg" => "image/svg+xml",
        "json" => "application/json",
        "md" => "text/markdown; charset=utf-8",
        "txt" => "text/plain; charset=utf-8",
        _ => return None,
    })
}

/// The commit and date of the build, as `rustc-env` values.
fn build_info(manifest: &Path) {
    println!("cargo:rerun-if-env-changed=LLAMA_SWAP_SERVER_COMMIT");
    println!("cargo:rerun-if-env-changed=LLAMA_SWAP_SERVER_BUILD_DATE");
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    let git = |args: &[&str]| -> Option<String> {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(manifest)
            .output()
            .ok()?;
        let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
        (out.status.success() && !text.is_empty()).then_some(text)
    };
    // A package has no checkout of its own: git would name whatever repository
    // happens to contain cargo's source directory.
    let packaged = packaged_commit(manifest);
    if release && packaged.is_none() {
        // Rebuilt when the checkout moves to another commit.
        for file in ["HEAD", "logs/HEAD"] {
            if let Some(path) = git(&["rev-parse", "--git-path", file]) {
                let path = manifest.join(path);
                if path.exists() {
                    println!("cargo:rerun-if-changed={}", path.display());
                }
            }
        }
    }
    let from_checkout = release && packaged.is_none();
    let commit = std::env::var("LLAMA_SWAP_SERVER_COMMIT")
        .ok()
        .or(packaged)
        .or_else(|| {
            from_checkout
                .then(|| git(&["rev-parse", "--short=8", "HEAD"]))
                .flatten()
        })
        .unwrap_or_else(|| "unknown".to_owned());
    let date = std::env::var("LLAMA_SWAP_SERVER_BUILD_DATE")
        .ok()
        .or_else(|| {
            from_checkout
                .then(|| git(&["show", "-s", "--format=%cI", "HEAD"]))
                .flatten()
        })
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=LLAMA_SWAP_SERVER_COMMIT={commit}");
    println!("cargo:rustc-env=LLAMA_SWAP_SERVER_BUILD_DATE={date}");
}

/// The commit `cargo package` recorded (`{"git": {"sha1": "<40 hex>"}, ...}`), cut
/// to the 8 characters a checkout build shows; `None` outside a package.
fn packaged_commit(manifest: &Path) -> Option<String> {
    let info = std::fs::read_to_string(manifest.join(".cargo_vcs_info.json")).ok()?;
    let (_, after) = info.split_once("\"sha1\"")?;
    let (_, value) = after.split_once('"')?;
    let sha1: String = value.chars().take_while(char::is_ascii_hexdigit).collect();
    (sha1.len() >= 8).then(|| sha1[..8].to_owned())
}
