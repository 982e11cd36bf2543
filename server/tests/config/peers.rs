//! `peers` in the config: required keys, defaults, the reserved `peer/model`
//! names, selectors and profile pins naming peer models, `--check-config`.

use std::time::Duration;

use llama_swap_server::config::{
    Config, ConfigError, DEFAULT_PEER_CONCURRENCY_LIMIT, Loaded, PEER_RESPONSE_HEADER_TIMEOUT,
    Reason, WarningKind,
};
use llama_swap_server::testing::names::{Lead, PeerRoute};

fn load(yaml: &str) -> Loaded {
    Config::loader()
        .yaml("test.yaml", yaml)
        .env(&|name: &str| (name == "PEER_KEY").then(|| "sk-from-env".to_owned()))
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

const LOCAL: &str = "models:\n  local:\n    cmd: srv --port ${PORT}\n    aliases: [chat]\n";

#[test]
fn peers_load_with_llama_swap_defaults_and_no_not_supported_warning() {
    let Loaded { config, warnings } = load(&format!(
        r#"{LOCAL}
peers:
  zeta:
    proxy: https://openrouter.ai/api
    apiKey: ${{env.PEER_KEY}}
    models: [meta-llama/llama-3.1-8b-instruct, qwen, qwen]
    filters:
      stripParams: "temperature, top_p"
      setParams: {{provider: {{zdr: true}}}}
    timeouts: {{connect: 5}}
  alpha:
    proxy: http://192.168.1.23:8080
    models: [model_a]
"#
    ));
    assert!(warnings.is_empty(), "{warnings:?}");
    let ids: Vec<&str> = config.peers.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["alpha", "zeta"], "sorted by ID");
    let zeta = &config.peers[1];
    assert_eq!(zeta.proxy, "https://openrouter.ai/api");
    assert_eq!(
        zeta.api_key.as_ref().map(|k| k.expose()),
        Some("sk-from-env")
    );
    assert!(!format!("{zeta:?}").contains("sk-from-env"), "key redacted");
    assert_eq!(zeta.models, ["meta-llama/llama-3.1-8b-instruct", "qwen"]);
    assert_eq!(zeta.filters.strip_params().count(), 2);
    assert_eq!(zeta.timeouts.connect, Some(Duration::from_secs(5)));
    assert_eq!(
        zeta.timeouts.response_header,
        Some(PEER_RESPONSE_HEADER_TIMEOUT),
        "a peer's responseHeader defaults to 60 s"
    );
    let alpha = &config.peers[0];
    assert!(alpha.api_key.is_none());
    assert_eq!(
        alpha.timeouts.response_header,
        Some(Duration::from_secs(60))
    );
}

#[test]
fn a_peer_response_header_timeout_of_zero_disables_it() {
    let Loaded { config, .. } = load(&format!(
        "{LOCAL}peers:\n  p:\n    proxy: http://h:1\n    models: [m]\n    timeouts: {{responseHeader: 0}}\n"
    ));
    assert_eq!(config.peers[0].timeouts.response_header, None);
}

#[test]
fn a_peers_concurrency_limit_defaults_to_256_and_zero_keeps_the_default() {
    let Loaded { config, warnings } = load(&format!(
        "{LOCAL}peers:\n  a:\n    proxy: http://h:1\n    models: [m]\n    concurrencyLimit: 3\n  \
         b:\n    proxy: http://h:2\n    models: [n]\n  c:\n    proxy: http://h:3\n    \
         models: [o]\n    concurrencyLimit: 0\n"
    ));
    assert!(warnings.is_empty(), "{warnings:?}");
    let limits: Vec<usize> = config.peers.iter().map(|p| p.concurrency_limit).collect();
    assert_eq!(
        limits,
        [
            3,
            DEFAULT_PEER_CONCURRENCY_LIMIT,
            DEFAULT_PEER_CONCURRENCY_LIMIT
        ]
    );
    assert_eq!(DEFAULT_PEER_CONCURRENCY_LIMIT, 256);
    assert!(
        config
            .summary()
            .to_string()
            .contains("concurrency: 3 requests in flight at most")
    );
    let found = issues(&format!(
        "{LOCAL}peers:\n  a:\n    proxy: http://h:1\n    models: [m]\n    concurrencyLimit: -1\n"
    ));
    assert_eq!(found[0].0, "peers.a.concurrencyLimit", "{found:?}");
}

#[test]
fn proxy_and_models_are_required_and_checked() {
    let found = issues(&format!(
        r#"{LOCAL}
peers:
  no-proxy:
    models: [m]
  no-models:
    proxy: http://h:1
  empty-models:
    proxy: http://h:1
    models: []
  bad-url:
    proxy: ftp://h/
    models: [m]
"#
    ));
    let paths: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
    assert!(
        found.contains(&("peers.no-proxy.proxy".into(), Reason::Missing)),
        "{found:?}"
    );
    assert!(
        found.contains(&("peers.no-models.models".into(), Reason::Missing)),
        "{found:?}"
    );
    assert!(
        found.contains(&("peers.empty-models.models".into(), Reason::Empty)),
        "{found:?}"
    );
    assert!(paths.contains(&"peers.bad-url.proxy"), "{found:?}");
}

#[test]
fn qualified_peer_names_may_not_be_model_ids_aliases_selectors_or_pins() {
    let found = issues(
        r#"
models:
  back/a:
    cmd: srv --port ${PORT}
  local:
    cmd: srv --port ${PORT}
    aliases: [back/b]
peers:
  back:
    proxy: http://h:1
    models: [a, b, c, d]
selectors:
  back/c:
    strategy: pin
    targets: [local]
profiles:
  p:
    pins: {back/d: local}
"#,
    );
    let taken = |i: usize| -> String {
        found
            .iter()
            .find(|(p, _)| *p == format!("peers.back.models[{i}]"))
            .map(|(_, r)| r.to_string())
            .unwrap_or_else(|| panic!("no issue at models[{i}]: {found:?}"))
    };
    assert!(taken(0).contains("a model ID"), "{found:?}");
    assert!(
        taken(1).contains("an alias of model \"local\""),
        "{found:?}"
    );
    assert!(taken(2).contains("a selector"), "{found:?}");
    assert!(taken(3).contains("a pin of profile \"p\""), "{found:?}");
}

#[test]
fn two_peers_spelling_one_qualified_name_are_refused() {
    let found = issues(&format!(
        "{LOCAL}peers:\n  a:\n    proxy: http://h:1\n    models: [b/c]\n  a/b:\n    proxy: http://h:2\n    models: [c]\n"
    ));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, "peers.a/b.models[0]");
    assert!(
        matches!(&found[0].1, Reason::PeerNameAmbiguous { name, .. } if name == "a/b/c"),
        "{found:?}"
    );
}

#[test]
fn a_local_model_shadows_a_bare_peer_name_without_an_error() {
    let Loaded { config, .. } = load(&format!(
        "{LOCAL}peers:\n  back:\n    proxy: http://h:1\n    models: [local, chat]\n"
    ));
    assert_eq!(config.resolve("local"), Some("local"));
    let names = config.names();
    assert_eq!(
        names.lead("local"),
        Some(Lead::Model {
            id: "local",
            index: 0
        })
    );
    assert_eq!(
        names.lead("back/local"),
        Some(Lead::Peer(PeerRoute::Peer {
            peer: 0,
            model: "local"
        }))
    );
}

#[test]
fn selectors_and_pins_may_name_peer_models_but_warm_selectors_may_not() {
    let Loaded { config, .. } = load(&format!(
        r#"{LOCAL}
peers:
  back:
    proxy: http://h:1
    models: [big]
  gpu2:
    proxy: http://h:2
    models: [big]
selectors:
  anything:
    strategy: spillover
    targets: [local, back/big, gpu2/big]
  pool:
    strategy: pin
    targets: [big]
profiles:
  remote:
    pins: {{chat: back/big}}
"#
    ));
    assert_eq!(
        config.selectors[0].target_ids,
        ["local", "back/big", "gpu2/big"]
    );
    assert_eq!(
        config.selectors[1].target_ids,
        ["big"],
        "a pool by its name"
    );
    assert_eq!(
        config.profiles[0].pins[0].target.as_deref(),
        Some("back/big")
    );

    let found = issues(&format!(
        "{LOCAL}peers:\n  back:\n    proxy: http://h:1\n    models: [big]\nselectors:\n  w:\n    strategy: warm\n    targets: [local, back/big]\n"
    ));
    assert_eq!(
        found,
        [(
            "selectors.w.targets[1]".to_owned(),
            Reason::WarmPeerTarget {
                name: "back/big".into()
            }
        )]
    );
}

#[test]
fn a_config_with_only_peers_does_not_warn_about_missing_models() {
    let Loaded { config, warnings } =
        load("peers:\n  back:\n    proxy: http://h:1\n    models: [m]\n");
    assert!(config.models.is_empty());
    assert!(
        !warnings.iter().any(|w| w.kind == WarningKind::NoModels),
        "{warnings:?}"
    );
}

#[test]
fn check_config_shows_every_peer_its_names_and_pools() {
    let Loaded { config, .. } = load(&format!(
        r#"{LOCAL}
peers:
  back:
    proxy: http://10.0.0.2:8080
    apiKey: secret-key-123
    models: [big, local, solo]
  gpu2:
    proxy: http://10.0.0.3:8080
    models: [big]
    timeouts: {{connect: 2}}
"#
    ));
    let text = config.summary().to_string();
    assert!(
        text.contains("peers (2; forwarded, never scheduled here):"),
        "{text}"
    );
    assert!(
        text.contains("  back: http://10.0.0.2:8080 (apiKey set"),
        "{text}"
    );
    assert!(
        text.contains(
            "    models:      back/big (bare name: a pool), back/local (bare name: the local model), back/solo"
        ),
        "{text}"
    );
    assert!(text.contains("connect 2s"), "{text}");
    assert!(text.contains("big -> [back, gpu2]"), "{text}");
    assert!(!text.contains("secret-key-123"), "{text}");
}

#[test]
fn the_readme_two_host_example_loads_without_warnings() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let section = &readme[readme
        .find("### More than one host: `peers`")
        .expect("the README section")..];
    let section = &section[..section.find("\n## ").unwrap()];
    let blocks: Vec<&str> = section
        .split("```yaml\n")
        .skip(1)
        .map(|rest| &rest[..rest.find("```").unwrap()])
        .collect();
    assert_eq!(blocks.len(), 2, "the back host's config and the front's");
    let mut loaded = blocks.iter().map(|yaml| load(yaml));
    let back = loaded.next().unwrap();
    let front = loaded.next().unwrap();
    for config in [&back, &front] {
        assert!(config.warnings.is_empty(), "{:?}", config.warnings);
    }
    let peer = &front.config.peers[0];
    assert_eq!(peer.id, "gpu-b");
    let back_models: Vec<&str> = back.config.models.iter().map(|m| m.id.as_str()).collect();
    let mut listed: Vec<&str> = peer.models.iter().map(String::as_str).collect();
    listed.sort_unstable();
    assert_eq!(listed, back_models, "the front lists what the back serves");
    assert_eq!(peer.timeouts.connect, Some(Duration::from_secs(2)));
    assert!(peer.api_key.is_some());
}
