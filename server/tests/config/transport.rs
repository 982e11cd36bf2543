//! A model's `timeouts` and the top-level `upstream` section (`ignorePaths`,
//! `caFile`).

use std::io::Write as _;
use std::time::Duration;

use llama_swap_server::config::{
    Config, ConfigError, DEFAULT_IGNORE_PATH, Loaded, Reason, WarningKind,
};
use llama_swap_server::testing::proxy::{DEFAULT_RESPONSE_HEADER, Timeouts};

fn load(yaml: &str) -> Loaded {
    Config::loader()
        .yaml("test.yaml", yaml)
        .env(&|_: &str| None)
        .load()
        .unwrap_or_else(|e| panic!("should load:\n{e}\n{yaml}"))
}

fn issues(yaml: &str) -> Vec<(String, Reason)> {
    match Config::loader()
        .yaml("test.yaml", yaml)
        .env(&|_: &str| None)
        .load()
    {
        Err(ConfigError::Invalid { issues, .. }) => issues
            .into_iter()
            .map(|i| (i.path.to_string(), i.reason))
            .collect(),
        other => panic!("expected invalid, got {other:?}"),
    }
}

const MODEL: &str = "models:\n  a:\n    cmd: srv --port ${PORT}\n";

#[test]
fn timeouts_default_to_llama_swaps_and_zero_disables_one() {
    let Loaded { config, warnings } = load(&format!(
        "{MODEL}    timeouts:\n      connect: 5\n      responseHeader: 600\n      idleConn: 0\n  b:\n    cmd: srv --port ${{PORT}}\n  c:\n    cmd: srv --port ${{PORT}}\n    timeouts: {{responseHeader: 0}}\n"
    ));
    assert!(warnings.is_empty(), "{warnings:?}");
    let a = config.model("a").unwrap().timeouts;
    assert_eq!(a.connect, Some(Duration::from_secs(5)));
    assert_eq!(a.response_header, Some(Duration::from_secs(600)));
    assert_eq!(a.idle_conn, None);
    assert_eq!(a.keepalive, Some(Duration::from_secs(30)));
    assert_eq!(a.tls_handshake, Some(Duration::from_secs(10)));
    assert_eq!(a.expect_continue, Some(Duration::from_secs(1)));
    let b = config.model("b").unwrap().timeouts;
    assert_eq!(b, Timeouts::default());
    assert_eq!(b.connect, Some(Duration::from_secs(30)));
    // Unlike llama-swap, a hung upstream frees its slot eventually by default.
    assert_eq!(b.response_header, Some(DEFAULT_RESPONSE_HEADER));
    assert_eq!(b.response_header, Some(Duration::from_secs(1800)));
    let c = config.model("c").unwrap().timeouts;
    assert_eq!(c.response_header, None, "0 disables it");
    assert_eq!(b.idle_conn, Some(Duration::from_secs(90)));
}

#[test]
fn bad_timeouts_name_their_key() {
    let found = issues(&format!(
        "{MODEL}    timeouts:\n      connect: -1\n      tlsHandshake: soon\n"
    ));
    let paths: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
    assert!(paths.contains(&"models.a.timeouts.connect"), "{found:?}");
    assert!(
        paths.contains(&"models.a.timeouts.tlsHandshake"),
        "{found:?}"
    );
    let Loaded { warnings, .. } = load(&format!("{MODEL}    timeouts:\n      conect: 1\n"));
    assert!(
        warnings
            .iter()
            .any(|w| w.path.to_string() == "models.a.timeouts.conect"
                && w.kind == WarningKind::UnknownKey),
        "{warnings:?}"
    );
}

#[test]
fn ignore_paths_default_to_static_assets_and_a_list_replaces_them() {
    let Loaded { config, .. } = load(MODEL);
    let paths = &config.upstream.ignore_paths;
    assert_eq!(paths.patterns().collect::<Vec<_>>(), [DEFAULT_IGNORE_PATH]);
    assert!(paths.matches("/static/app.js"));
    assert!(paths.matches("/favicon.ico"));
    assert!(!paths.matches("/v1/chat/completions"));
    assert!(!paths.matches("/app.js/run"));

    let Loaded { config, warnings } = load(&format!(
        "upstream:\n  ignorePaths: ['^/ui/', '\\.map$']\n{MODEL}"
    ));
    assert!(warnings.is_empty(), "{warnings:?}");
    let paths = &config.upstream.ignore_paths;
    assert!(paths.matches("/ui/index.html"));
    assert!(paths.matches("/x.js.map"));
    assert!(!paths.matches("/app.js"), "the default was not replaced");

    // An empty list keeps the default, as in llama-swap.
    let Loaded { config, .. } = load(&format!("upstream:\n  ignorePaths: []\n{MODEL}"));
    assert!(config.upstream.ignore_paths.matches("/app.js"));
}

#[test]
fn an_invalid_ignore_path_regex_is_an_error() {
    let found = issues(&format!("upstream:\n  ignorePaths: ['(unclosed']\n{MODEL}"));
    assert!(
        found
            .iter()
            .any(|(path, reason)| path == "upstream.ignorePaths[0]"
                && matches!(reason, Reason::InvalidRegex { .. })),
        "{found:?}"
    );
}

#[test]
fn a_ca_file_is_read_at_load_and_bad_ones_are_errors() {
    let ca = rcgen::CertificateParams::new(Vec::<String>::new())
        .unwrap()
        .self_signed(&rcgen::KeyPair::generate().unwrap())
        .unwrap();
    let mut good = tempfile::NamedTempFile::new().unwrap();
    good.write_all(ca.pem().as_bytes()).unwrap();
    let Loaded { config, warnings } = load(&format!(
        "upstream:\n  caFile: {}\n{MODEL}",
        good.path().display()
    ));
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(config.upstream.ca_certificates.der, [ca.der().to_vec()]);
    assert!(config.upstream_tls().unwrap().is_some());

    let mut not_pem = tempfile::NamedTempFile::new().unwrap();
    not_pem.write_all(b"hello").unwrap();
    for file in [
        not_pem.path().display().to_string(),
        "/nonexistent/ca.pem".to_owned(),
    ] {
        let found = issues(&format!("upstream:\n  caFile: {file}\n{MODEL}"));
        assert!(
            found.iter().any(|(path, reason)| path == "upstream.caFile"
                && matches!(reason, Reason::CaFile { .. })),
            "{file}: {found:?}"
        );
    }
}

#[test]
fn no_tls_client_is_built_without_https_upstreams_or_a_ca_file() {
    let Loaded { config, .. } = load(MODEL);
    assert!(config.upstream_tls().unwrap().is_none());
}

#[test]
fn check_config_shows_filters_timeouts_and_the_upstream_section() {
    let Loaded { config, .. } = load(&format!(
        "upstream:\n  ignorePaths: ['^/ui/']\n{MODEL}    timeouts: {{responseHeader: 60}}\n    filters: {{stripParams: seed}}\n"
    ));
    let text = config.summary().to_string();
    assert!(text.contains("responseHeader 60s"), "{text}");
    assert!(text.contains("filters:     strip [seed]"), "{text}");
    assert!(
        text.contains("upstream: ignorePaths [^/ui/]; caFile none"),
        "{text}"
    );
}
