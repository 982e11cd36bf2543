//! The library's dependency set: what only the binary needs stays out of it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

#[test]
fn library_without_default_features_does_not_depend_on_the_binarys_crates() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .args([
            "tree",
            "-p",
            "mockswap",
            "--no-default-features",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--offline",
            "--locked",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let tree = String::from_utf8(output.stdout).unwrap();
    assert!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(tree.contains("hyper "), "{tree}");
    for binary_only in ["clap ", "humantime ", "tracing-subscriber "] {
        assert!(
            !tree.lines().any(|l| l.starts_with(binary_only)),
            "{binary_only}is in the library's dependencies:\n{tree}"
        );
    }
}
