//! Invalid configurations: one fixture per error class, asserting the exact key path
//! and reason of every problem reported.

use llama_swap_server::config::{Config, ConfigError, KeyPath, Reason};
use llama_swap_server::testing::upstream::CommandError;

use crate::support::fixture;

fn error(name: &str) -> ConfigError {
    match Config::loader()
        .file(fixture(&format!("errors/{name}")))
        .env(&|_| None)
        .load()
    {
        Ok(loaded) => panic!("{name} should fail, loaded {:#?}", loaded.config),
        Err(err) => err,
    }
}

/// Every issue as (`key.path`, reason).
fn issues(name: &str) -> Vec<(String, Reason)> {
    let err = error(name);
    assert!(
        matches!(err, ConfigError::Invalid { .. }),
        "{name}: expected invalid values, got {err}"
    );
    err.issues()
        .iter()
        .map(|i| (i.path.to_string(), i.reason.clone()))
        .collect()
}

fn only_issue(name: &str) -> (String, Reason) {
    let mut all = issues(name);
    assert_eq!(all.len(), 1, "{name}: {all:#?}");
    all.remove(0)
}

#[test]
fn negative_ttl_names_file_path_and_value() {
    let err = error("negative_ttl.yaml");
    let text = err.to_string();
    assert!(
        text.ends_with("negative_ttl.yaml: models.qwen.ttl: must be >= 0, got -5"),
        "{text}"
    );
}

#[test]
fn missing_environment_variable_is_named() {
    let (path, reason) = only_issue("env_not_set.yaml");
    assert_eq!(path, "models.qwen.cmd");
    assert_eq!(
        reason,
        Reason::EnvNotSet {
            name: "MODEL_DIR".into()
        }
    );
    assert!(reason.to_string().contains("MODEL_DIR"));
}

#[test]
fn unknown_macro_is_an_error() {
    assert_eq!(
        only_issue("unknown_macro.yaml"),
        (
            "models.qwen.cmd".into(),
            Reason::UnknownMacro {
                name: "model_path".into()
            }
        )
    );
}

#[test]
fn a_macro_that_uses_one_declared_after_it_is_refused() {
    // a uses b, declared after it (and b uses a): llama-swap expands macros
    // from the last declared to the first, so a's ${b} would stay unexpanded.
    let (path, reason) = only_issue("macro_cycle.yaml");
    assert_eq!(path, "models.qwen.cmd");
    assert_eq!(
        reason,
        Reason::MacroDeclaredLater {
            user: "a".into(),
            name: "b".into()
        }
    );
}

#[test]
fn reserved_and_malformed_macro_definitions_are_refused() {
    assert_eq!(
        issues("reserved_macro.yaml"),
        [
            (
                "macros.PORT".into(),
                Reason::ReservedMacroName {
                    name: "PORT".into()
                }
            ),
            (
                r#"macros."bad name""#.into(),
                Reason::InvalidMacroName {
                    name: "bad name".into()
                }
            ),
            (
                "models.qwen.macros.list".into(),
                Reason::MacroNotScalar { found: "a list" }
            ),
        ]
    );
}

#[test]
fn pid_outside_cmd_stop_is_refused() {
    assert_eq!(
        only_issue("pid_outside_cmd_stop.yaml"),
        (
            "models.qwen.cmd".into(),
            Reason::MacroNotAvailable {
                name: "PID",
                where_available: "in cmdStop"
            }
        )
    );
}

#[test]
fn port_outside_models_is_refused() {
    assert_eq!(
        only_issue("port_outside_models.yaml"),
        (
            "startPort".into(),
            Reason::MacroNotAvailable {
                name: "PORT",
                where_available: "inside models"
            }
        )
    );
}

#[test]
fn port_used_only_in_proxy_is_refused() {
    assert_eq!(
        only_issue("port_only_in_proxy.yaml"),
        ("models.qwen.proxy".into(), Reason::PortOnlyInProxy)
    );
}

#[test]
fn default_proxy_needs_port_in_cmd() {
    assert_eq!(
        only_issue("default_proxy_without_port.yaml"),
        ("models.qwen.proxy".into(), Reason::ProxyNeedsPort)
    );
}

#[test]
fn alias_used_by_two_models_is_refused() {
    assert_eq!(
        only_issue("duplicate_alias.yaml"),
        (
            "models.b.aliases[1]".into(),
            Reason::DuplicateAlias {
                alias: "shared".into(),
                model: "a".into()
            }
        )
    );
}

#[test]
fn alias_equal_to_a_model_id_is_refused() {
    assert_eq!(
        only_issue("alias_is_model_id.yaml"),
        (
            "models.a.aliases[0]".into(),
            Reason::AliasIsModelId { alias: "b".into() }
        )
    );
}

#[test]
fn model_in_two_groups_is_refused_even_through_an_alias() {
    assert_eq!(
        only_issue("model_in_two_groups.yaml"),
        (
            "routing.router.settings.groups.two.members[0]".into(),
            Reason::InTwoGroups {
                model: "a".into(),
                group: "one".into()
            }
        )
    );
}

#[test]
fn priority_for_an_unknown_model_is_refused() {
    assert_eq!(
        only_issue("priority_unknown_key.yaml"),
        (
            "routing.scheduler.settings.fifo.priority.ghost".into(),
            Reason::UnknownModel {
                name: "ghost".into()
            }
        )
    );
}

#[test]
fn fifo_priorities_under_serial_are_refused() {
    assert_eq!(
        only_issue("priority_under_serial.yaml"),
        (
            "routing.scheduler.settings.fifo.priority".into(),
            Reason::PriorityUnderSerial
        )
    );
}

#[test]
fn two_priority_keys_for_one_model_are_refused() {
    assert_eq!(
        only_issue("priority_twice_for_one_model.yaml"),
        (
            "routing.scheduler.settings.fifo.priority.alpha".into(),
            Reason::DuplicatePriority {
                model: "a".into(),
                first_key: "a".into()
            }
        )
    );
}

#[test]
fn priority_beyond_i32_is_refused() {
    assert_eq!(
        only_issue("priority_out_of_range.yaml"),
        (
            "routing.scheduler.settings.fifo.priority.a".into(),
            Reason::OutOfRange {
                min: i64::from(i32::MIN),
                max: i64::from(i32::MAX),
                got: 3_000_000_000
            }
        )
    );
}

#[test]
fn wrong_types_name_what_was_expected_and_found() {
    assert_eq!(
        issues("wrong_types.yaml"),
        [
            (
                "sendLoadingState".into(),
                Reason::WrongType {
                    expected: "true or false",
                    found: "a string"
                }
            ),
            (
                "models.qwen.aliases".into(),
                Reason::WrongType {
                    expected: "a list of strings",
                    found: "a string"
                }
            ),
            (
                "models.qwen.env".into(),
                Reason::WrongType {
                    expected: "a list of strings",
                    found: "a map"
                }
            ),
            (
                "models.qwen.ttl".into(),
                Reason::WrongType {
                    expected: "an integer",
                    found: "a fractional number"
                }
            ),
            (
                "models.qwen.unlisted".into(),
                Reason::WrongType {
                    expected: "true or false",
                    found: "a string"
                }
            ),
        ]
    );
}

#[test]
fn words_outside_their_set_list_the_accepted_ones() {
    let all = issues("not_one_of.yaml");
    let paths: Vec<&str> = all.iter().map(|(p, _)| p.as_str()).collect();
    // An unknown logLevel is only a warning, as llama-swap only falls back to info.
    assert_eq!(paths, ["routing.router.use", "routing.scheduler.use"]);
    assert_eq!(
        all[1].1.to_string(),
        r#"must be one of fifo, serial, got "lifo""#
    );
}

#[test]
fn proxy_that_is_not_an_http_url_is_refused() {
    assert_eq!(
        only_issue("bad_proxy.yaml"),
        (
            "models.a.proxy".into(),
            Reason::InvalidUrl {
                got: "localhost:5800".into()
            }
        )
    );
}

#[test]
fn a_proxy_port_outside_1_to_65535_is_refused_naming_the_model_and_key() {
    let found = issues("proxy_port_out_of_range.yaml");
    assert_eq!(
        found,
        vec![
            (
                "models.a.proxy".into(),
                Reason::InvalidUrlPort {
                    got: "http://127.0.0.1:99999".into(),
                    port: "99999".into(),
                }
            ),
            (
                "models.b.proxy".into(),
                Reason::InvalidUrlPort {
                    got: "http://127.0.0.1:0/v1".into(),
                    port: "0".into(),
                }
            ),
            (
                "peers.p.proxy".into(),
                Reason::InvalidUrlPort {
                    got: "http://[::1]:65536".into(),
                    port: "65536".into(),
                }
            ),
        ]
    );
    let text = error("proxy_port_out_of_range.yaml").to_string();
    assert!(
        text.contains("models.a.proxy") && text.contains("port 99999"),
        "{text}"
    );
}

#[test]
fn env_entries_need_a_name_and_an_equals_sign() {
    assert_eq!(
        issues("bad_env_entry.yaml"),
        [
            ("models.a.env[1]".into(), Reason::InvalidEnvEntry),
            ("models.a.env[2]".into(), Reason::InvalidEnvEntry),
        ]
    );
}

#[test]
fn bad_api_keys_are_reported_without_their_text() {
    let err = error("api_key_whitespace.yaml");
    assert_eq!(
        err.issues()
            .iter()
            .map(|i| (i.path.to_string(), i.reason.clone()))
            .collect::<Vec<_>>(),
        [
            ("apiKeys[2]".into(), Reason::Empty),
            ("apiKeys[1]".into(), Reason::ApiKeyWhitespace),
        ]
    );
    let shown = format!("{err} {err:?}");
    assert!(!shown.contains("secret"), "{shown}");
}

#[test]
fn start_port_must_be_a_tcp_port() {
    assert_eq!(
        only_issue("start_port_out_of_range.yaml"),
        (
            "startPort".into(),
            Reason::OutOfRange {
                min: 1,
                max: 65535,
                got: 70000
            }
        )
    );
}

#[test]
fn running_out_of_ports_is_reported() {
    assert_eq!(
        only_issue("ports_exhausted.yaml"),
        (
            "models.b.cmd".into(),
            Reason::PortsExhausted { start_port: 65535 }
        )
    );
}

#[test]
fn check_endpoint_must_be_a_path_or_none() {
    assert_eq!(
        only_issue("bad_check_endpoint.yaml"),
        (
            "models.a.checkEndpoint".into(),
            Reason::InvalidCheckEndpoint {
                got: "health".into()
            }
        )
    );
}

#[test]
fn unterminated_quote_in_cmd_is_refused() {
    assert_eq!(
        only_issue("unterminated_quote.yaml"),
        (
            "models.a.cmd".into(),
            Reason::InvalidCommand(CommandError::UnterminatedQuote { quote: '\'' })
        )
    );
}

#[test]
fn legacy_groups_next_to_routing_router_are_refused() {
    assert_eq!(
        only_issue("legacy_groups_with_router.yaml"),
        (
            "groups".into(),
            Reason::ConflictsWith {
                other: KeyPath::from_keys(["routing", "router"])
            }
        )
    );
}

#[test]
fn negative_durations_and_limits_are_refused() {
    let all = issues("negative_values.yaml");
    let expected: Vec<(String, Reason)> = [
        ("healthCheckTimeout", -1),
        ("globalTTL", -3),
        ("unloadTimeout", -2),
        ("models.a.unloadTimeout", -1),
        ("models.a.concurrencyLimit", -4),
    ]
    .into_iter()
    .map(|(p, got)| (p.to_owned(), Reason::TooSmall { min: 0, got }))
    .collect();
    assert_eq!(all, expected);
}

#[test]
fn malformed_yaml_is_a_yaml_error_naming_the_file() {
    let err = error("not_yaml.yaml");
    assert!(matches!(err, ConfigError::Yaml { .. }), "{err:?}");
    assert!(err.to_string().contains("not_yaml.yaml"), "{err}");
}

#[test]
fn duplicate_model_ids_are_refused_by_the_parser() {
    let err = error("duplicate_model.yaml");
    assert!(matches!(err, ConfigError::Yaml { .. }), "{err:?}");
}

#[test]
fn models_must_be_a_map() {
    assert_eq!(
        only_issue("models_not_a_map.yaml"),
        (
            "models".into(),
            Reason::WrongType {
                expected: "a map of model IDs to model settings",
                found: "a list"
            }
        )
    );
}
