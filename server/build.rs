//! Lists the web UI's files (`server/ui/`) for `api/manage/ui.rs` to embed: one
//! `include_bytes!` per file with its content type, so a file added to the UI
//! is served without anyone editing a list, and a file of a type the server
//! cannot name fails the build instead of being served wrongly.

use std::error::Error;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() -> Result<(), Box<dyn Error>> {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
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
