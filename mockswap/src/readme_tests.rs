//! The README's `Cargo.toml` lines name a version of this crate that it is (what
//! `cargo package` ships is what the README tells a user to add).

/// The version requirement of every `<krate> = ...` line of `readme`'s TOML blocks.
pub(crate) fn dependency_versions<'a>(readme: &'a str, krate: &str) -> Vec<&'a str> {
    let mut in_toml = false;
    let mut found = Vec::new();
    for line in readme.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            in_toml = trimmed == "```toml";
            continue;
        }
        let Some(value) = in_toml
            .then(|| trimmed.strip_prefix(krate))
            .flatten()
            .and_then(|rest| rest.trim_start().strip_prefix('='))
        else {
            continue;
        };
        let value = value.trim();
        let quoted = value
            .strip_prefix('{')
            .and_then(|table| table.split_once("version"))
            .map_or(value, |(_, rest)| {
                rest.trim_start().trim_start_matches('=').trim()
            });
        if let Some(version) = quoted.strip_prefix('"').and_then(|v| v.split('"').next()) {
            found.push(version);
        }
    }
    found
}

/// Whether `requirement` ("0.1", "0.1.0") names `version`: its parts are the
/// version's leading parts.
pub(crate) fn names(requirement: &str, version: &str) -> bool {
    let wanted: Vec<&str> = requirement.split('.').collect();
    let have: Vec<&str> = version.split('.').collect();
    wanted.len() <= have.len() && wanted.iter().zip(&have).all(|(w, h)| w == h)
}

#[test]
fn the_readme_dependency_lines_name_this_version() {
    let readme = include_str!("../README.md");
    let versions = dependency_versions(readme, "mockswap");
    assert!(!versions.is_empty(), "the README shows no dependency line");
    for version in versions {
        assert!(
            names(version, env!("CARGO_PKG_VERSION")),
            "README says mockswap = {version:?}, the crate is {}",
            env!("CARGO_PKG_VERSION")
        );
    }
}

#[test]
fn the_readme_names_the_client_of_the_same_release() {
    // The workspace releases llama-swap-client and mockswap at one version.
    let readme = include_str!("../README.md");
    let versions = dependency_versions(readme, "llama-swap-client");
    assert!(
        !versions.is_empty(),
        "the README shows no llama-swap-client line"
    );
    for version in versions {
        assert!(
            names(version, env!("CARGO_PKG_VERSION")),
            "README says llama-swap-client = {version:?}, this release is {}",
            env!("CARGO_PKG_VERSION")
        );
    }
}

#[test]
fn dependency_lines_are_read_in_both_forms_and_only_in_toml_blocks() {
    let readme = "```toml\nx = \"0.1\"\nx-y = \"9\"\nx = { version = \"0.2\", features = [] }\n```\n```sh\nx = \"7\"\n```\n";
    assert_eq!(dependency_versions(readme, "x"), ["0.1", "0.2"]);
    assert!(names("0.1", "0.1.3"));
    assert!(names("0.1.3", "0.1.3"));
    assert!(!names("0.2", "0.1.3"));
    assert!(!names("0.1.3.4", "0.1.3"));
}
