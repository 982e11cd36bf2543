//! The README's shell example, run as written against the built binary, so what the
//! README promises a shell test is what the binary does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

fn shell_example(readme: &str) -> String {
    let start = readme.find("## The same check from a shell").unwrap();
    let block = &readme[start..];
    let open = block.find("```sh\n").unwrap() + "```sh\n".len();
    let close = open + block[open..].find("```").unwrap();
    block[open..close].to_owned()
}

#[test]
fn readme_shell_example_mounts_an_expectation_verifies_and_resets() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let script = shell_example(&readme);
    let dir = tempfile::tempdir().unwrap();
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_mockswap")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = Command::new("bash")
        .args(["-e", "-c", &script])
        .current_dir(dir.path())
        .env("PATH", path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the README's shell example failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    for wanted in [
        r#"{"id":1}"#,
        r#""content":"[qwen] hi""#,
        r#"{"ok":true}"#,
        r#"{"reset":true}"#,
    ] {
        assert!(stdout.contains(wanted), "{wanted} not in:\n{stdout}");
    }
}
