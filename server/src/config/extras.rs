//! Top-level sections of llama-swap's with a few keys each: `performance`
//! (the sampling of the host gauges), `store` (the history database) and
//! `ui` (the session headers of activity rows).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::store::StoreSettings;

use super::document::error::{KeyPath, Reason};
use super::document::fields::{Diagnostics, Fields};
use super::document::node::Node;
use super::resolved::types::PerformanceConfig;

/// llama-swap's shortest sampling interval.
const MIN_EVERY: Duration = Duration::from_secs(5);

/// Reads `performance`: `disabled` (default false) and `every` (a Go duration
/// such as `30s` or `1m30s`, at least 5 s, default 5 s).
pub(crate) fn read_performance(
    node: &Node,
    path: KeyPath,
    cx: &mut Diagnostics,
) -> PerformanceConfig {
    let mut out = PerformanceConfig::default();
    let Some(mut fields) = Fields::new(node, path, cx) else {
        return out;
    };
    if let Some((n, p)) = fields.take("disabled")
        && let Some(disabled) = cx.bool(n, &p)
    {
        out.disabled = disabled;
    }
    if let Some((n, p)) = fields.take("every")
        && let Some(text) = cx.string(n, &p)
    {
        match parse_go_duration(&text) {
            Some(every) if every >= MIN_EVERY => out.every = every,
            Some(_) => cx.error(
                p,
                Reason::TooShort {
                    min: "5s",
                    got: text,
                },
            ),
            None => cx.error(p, Reason::InvalidDuration { got: text }),
        }
    }
    fields.finish(cx);
    out
}

/// Go's `time.ParseDuration`: one or more `<number><unit>` with units ns, us
/// (µs), ms, s, m, h; a bare `0` is zero.
pub(crate) fn parse_go_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    if text == "0" {
        return Some(Duration::ZERO);
    }
    let mut rest = text;
    let mut total = 0f64;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..number_len].parse().ok()?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += number * seconds;
    }
    Duration::try_from_secs_f64(total).ok()
}

/// Reads `store`: `path` must be a file that can be written, or a new file
/// in a directory that can be written (llama-swap's check; the database is
/// opened when the server starts); this server's `maxRows` (rows kept,
/// default 1,000,000, 0 = no bound) and `maxAge` (a Go duration, rows older
/// are deleted; default none) bound it.
pub(crate) fn read_store(node: &Node, path: KeyPath, cx: &mut Diagnostics) -> StoreSettings {
    let mut out = StoreSettings::default();
    let Some(mut fields) = Fields::new(node, path.clone(), cx) else {
        return out;
    };
    if let Some((n, p)) = fields.take("path")
        && let Some(text) = cx.string(n, &p)
    {
        match check_store_path(text.trim()) {
            Ok(()) => out.path = Some(PathBuf::from(text.trim())),
            Err(why) => cx.error(p, Reason::StorePath { why }),
        }
    } else {
        cx.error(path.key("path"), Reason::Empty);
    }
    if let Some((n, p)) = fields.take("maxRows")
        && let Some(rows) = cx.int_min(n, &p, 0)
    {
        out.retention.max_rows = u64::try_from(rows).unwrap_or(0);
    }
    if let Some((n, p)) = fields.take("maxAge")
        && let Some(text) = cx.string(n, &p)
    {
        match parse_go_duration(&text) {
            Some(age) if age.is_zero() => out.retention.max_age = None,
            Some(age) => out.retention.max_age = Some(age),
            None => cx.error(p, Reason::InvalidDuration { got: text }),
        }
    }
    fields.finish(cx);
    out
}

/// Reads `ui`: `activity.session_id`, a list of header names (trimmed,
/// duplicates ignored whatever their case, as llama-swap does).
pub(crate) fn read_ui(node: &Node, path: KeyPath, cx: &mut Diagnostics) -> Option<Vec<String>> {
    let mut fields = Fields::new(node, path, cx)?;
    let mut headers = None;
    if let Some((activity, activity_path)) = fields.take("activity")
        && let Some(mut activity_fields) = Fields::new(activity, activity_path, cx)
    {
        if let Some((n, p)) = activity_fields.take("session_id") {
            // Empty names are dropped, as llama-swap drops them.
            if let Node::Seq(items) = n {
                let mut seen = std::collections::HashSet::new();
                let mut names = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    if let Some(name) = cx.string(item, &p.index(i)) {
                        let name = name.trim().to_owned();
                        if !name.is_empty() && seen.insert(name.to_ascii_lowercase()) {
                            names.push(name);
                        }
                    }
                }
                headers = Some(names);
            } else {
                cx.wrong_type::<()>(&p, "a list of strings", n);
            }
        }
        activity_fields.finish(cx);
    }
    fields.finish(cx);
    headers
}

/// Whether a file can be written at `path`: opened for writing (not
/// truncated) when it exists; for a directory, a probe file is created in it
/// and removed again, as llama-swap does where access checks are unreliable.
fn writable(path: &Path) -> bool {
    if path.is_dir() {
        let probe = path.join(format!(".llama-swap-server-probe-{}", std::process::id()));
        let created = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&probe)
            .is_ok();
        if created {
            let _ = std::fs::remove_file(&probe);
        }
        return created;
    }
    std::fs::OpenOptions::new().write(true).open(path).is_ok()
}

fn check_store_path(text: &str) -> Result<(), String> {
    if text.is_empty() {
        return Err("must not be empty".to_owned());
    }
    let path = Path::new(text);
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Err(format!("{text} is a directory, not a file")),
        Ok(_) if writable(path) => Ok(()),
        Ok(_) => Err(format!("{text} is not writable")),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let dir = path
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            if writable(dir) {
                Ok(())
            } else {
                Err(format!("directory {} is not writable", dir.display()))
            }
        }
        Err(error) => Err(error.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse_like_go() {
        assert_eq!(parse_go_duration("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse_go_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_go_duration("1.5h"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_go_duration("0"), Some(Duration::ZERO));
        for bad in ["", "5", "5 s", "s", "1d"] {
            assert_eq!(parse_go_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_store_path_needs_a_writable_place() {
        let dir = tempfile::tempdir().unwrap();
        let new_file = dir.path().join("activity.db");
        assert!(check_store_path(new_file.to_str().unwrap()).is_ok());
        assert!(check_store_path(dir.path().to_str().unwrap()).is_err());
        assert!(check_store_path("/no/such/dir/activity.db").is_err());
        assert!(check_store_path("").is_err());
    }
}
