//! Every whole-configuration case of llama-swap's own config tests, as our
//! fixtures (`tests/fixtures/llama-swap/`), run through
//! `llama-swap-server --check-config`: the outcome must be llama-swap's, loads
//! where it loads, fails where it fails.
//!
//! A fixture is a `.yaml` file, or a `dir_*` directory (an `expect` file, an
//! optional `config.yaml` for `--config`, and `conf.d/` for `--config-dir`).
//! Header comments say what llama-swap does and what to run with:
//! `# llama-swap: loads|fails`, `# env: NAME=value` (`\n`, `\r`, `\\`
//! escapes), `# config: <relative path>` (directories; `# config:` alone
//! means no `--config`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Fixtures whose outcome still differs from llama-swap's, each with why. The
/// test fails when one of them starts to match (remove it here then) or when
/// any other fixture differs.
const KNOWN_DIFFERENCES: &[(&str, &str)] = &[];

#[derive(Debug)]
struct Case {
    name: String,
    loads: bool,
    env: Vec<(String, String)>,
    config: Option<PathBuf>,
    dir: Option<PathBuf>,
}

fn unescape(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

fn header(text: &str) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in text.lines().take_while(|l| l.starts_with('#')) {
        if let Some((key, value)) = line.trim_start_matches('#').split_once(':') {
            out.entry(key.trim().to_owned())
                .or_default()
                .push(value.trim().to_owned());
        }
    }
    out
}

fn case(path: &Path) -> Case {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let (text, config, dir) = if path.is_dir() {
        let text = std::fs::read_to_string(path.join("expect")).unwrap();
        let config = header(&text)
            .get("config")
            .and_then(|v| v.first().cloned())
            .filter(|v| !v.is_empty())
            .map(|rel| path.join(rel));
        (text, config, Some(path.join("conf.d")))
    } else {
        (
            std::fs::read_to_string(path).unwrap(),
            Some(path.to_owned()),
            None,
        )
    };
    let header = header(&text);
    let outcome = header
        .get("llama-swap")
        .and_then(|v| v.first())
        .unwrap_or_else(|| panic!("{name}: no '# llama-swap: loads|fails' line"));
    let loads = match outcome.as_str() {
        "loads" => true,
        "fails" => false,
        other => panic!("{name}: unknown outcome {other:?}"),
    };
    let env = header
        .get("env")
        .into_iter()
        .flatten()
        .map(|entry| {
            let (k, v) = entry.split_once('=').unwrap();
            (k.to_owned(), unescape(v))
        })
        .collect();
    Case {
        name,
        loads,
        env,
        config,
        dir,
    }
}

/// Runs `--check-config`; `Ok` when it loaded, `Err(stderr)` when refused.
fn check(case: &Case) -> Result<(), String> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_llama-swap-server"));
    // Only the variables the case names: its `${env.X}` must not be satisfied
    // (or broken) by the machine's environment.
    cmd.env_clear().arg("--check-config");
    if let Some(path) = std::env::var_os("PATH") {
        cmd.env("PATH", path);
    }
    for (k, v) in &case.env {
        cmd.env(k, v);
    }
    if let Some(config) = &case.config {
        cmd.arg("--config").arg(config);
    }
    if let Some(dir) = &case.dir {
        cmd.arg("--config-dir").arg(dir);
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{}: {stderr}", case.name);
    match out.status.code() {
        Some(0) => Ok(()),
        Some(1) => Err(stderr),
        other => panic!("{}: exit {other:?}: {stderr}", case.name),
    }
}

#[test]
fn every_llama_swap_fixture_has_llama_swaps_outcome() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/llama-swap");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() || p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    paths.sort();
    assert!(paths.len() > 100, "only {} fixtures", paths.len());
    let mut wrong = Vec::new();
    let mut still_different = Vec::new();
    for path in &paths {
        let case = case(path);
        let result = check(&case);
        let matches = result.is_ok() == case.loads;
        let known = KNOWN_DIFFERENCES.iter().any(|(n, _)| *n == case.name);
        match (matches, known) {
            (true, true) => still_different.push(format!("{} now matches: remove it", case.name)),
            (false, false) => wrong.push(format!(
                "{}: llama-swap {}, we {}",
                case.name,
                if case.loads { "loads it" } else { "refuses it" },
                match &result {
                    Ok(()) => "load it".to_owned(),
                    Err(e) => format!("refuse it:\n{e}"),
                }
            )),
            _ => {}
        }
    }
    assert!(
        wrong.is_empty() && still_different.is_empty(),
        "{}",
        [wrong, still_different].concat().join("\n")
    );
}
