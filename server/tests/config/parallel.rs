//! The per-model `parallel` key: a positive integer or `auto`; anything else is
//! an error naming the key; values that cannot limit anything are warnings.

use llama_swap_server::config::{Config, ConfigError, Loaded, Reason, WarningKind};
use llama_swap_server::testing::scheduler::Parallel;

fn yaml(parallel: &str, extra: &str) -> String {
    format!(
        "models:\n  qwen:\n    cmd: llama-server --port ${{PORT}}\n    {parallel}\n  other:\n    cmd: llama-server --port ${{PORT}}\n{extra}"
    )
}

fn load(parallel: &str, extra: &str) -> Result<Loaded, ConfigError> {
    Config::loader()
        .yaml("config.yaml", &yaml(parallel, extra))
        .env(&|_: &str| None)
        .load()
}

fn parallel_of(loaded: &Loaded, model: &str) -> Parallel {
    loaded.config.model(model).unwrap().parallel
}

#[test]
fn parallel_takes_a_positive_integer_and_maps_onto_the_scheduler() {
    let loaded = load("parallel: 2", "").unwrap();
    assert_eq!(parallel_of(&loaded, "qwen"), Parallel::limit(2).unwrap());
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let settings = loaded.config.scheduler_settings();
    let qwen = settings.models.iter().find(|m| m.id == "qwen").unwrap();
    assert_eq!(qwen.parallel, Parallel::limit(2).unwrap());
}

#[test]
fn without_parallel_a_model_has_no_limit() {
    let loaded = load("ttl: 0", "").unwrap();
    assert_eq!(parallel_of(&loaded, "qwen"), Parallel::Unlimited);
    assert_eq!(parallel_of(&loaded, "other"), Parallel::Unlimited);
}

#[test]
fn parallel_auto_asks_the_upstream() {
    let loaded = load("parallel: auto", "").unwrap();
    assert_eq!(parallel_of(&loaded, "qwen"), Parallel::Auto);
}

#[test]
fn a_bad_parallel_value_is_a_load_error_naming_the_key() {
    for (value, got) in [
        ("0", "0"),
        ("-1", "-1"),
        ("many", "many"),
        ("1.5", "1.5"),
        ("true", "true"),
        ("[2]", "a list"),
    ] {
        let error = load(&format!("parallel: {value}"), "").unwrap_err();
        let ConfigError::Invalid { issues, .. } = &error else {
            panic!("{value}: {error}");
        };
        assert_eq!(issues.len(), 1, "{value}: {error}");
        assert_eq!(issues[0].path.to_string(), "models.qwen.parallel");
        assert_eq!(
            issues[0].reason,
            Reason::InvalidParallel { got: got.into() },
            "{value}"
        );
        let text = error.to_string();
        assert!(
            text.contains("models.qwen.parallel: must be a positive integer"),
            "{text}"
        );
    }
}

#[test]
fn parallel_that_cannot_limit_anything_is_warned_about() {
    let at_limit = load("parallel: 4\n    concurrencyLimit: 4", "").unwrap();
    assert_eq!(at_limit.warnings.len(), 1, "{:?}", at_limit.warnings);
    assert_eq!(
        at_limit.warnings[0].path.to_string(),
        "models.qwen.parallel"
    );
    assert!(matches!(
        at_limit.warnings[0].kind,
        WarningKind::NoEffect { .. }
    ));

    let serial = load("parallel: 2", "routing:\n  scheduler:\n    use: serial\n").unwrap();
    assert_eq!(serial.warnings.len(), 1, "{:?}", serial.warnings);
    assert!(
        serial.warnings[0].to_string().contains("serial"),
        "{}",
        serial.warnings[0]
    );
    // Below the limit there is nothing to say.
    assert!(
        load("parallel: 3\n    concurrencyLimit: 4", "")
            .unwrap()
            .warnings
            .is_empty()
    );
}

#[test]
fn check_config_summary_shows_the_parallel_limit() {
    let loaded = load("parallel: 2", "").unwrap();
    let text = loaded.config.summary().to_string();
    assert!(
        text.contains("    parallel:    2 in flight at most"),
        "{text}"
    );
    let auto = load("parallel: auto", "").unwrap();
    assert!(
        auto.config
            .summary()
            .to_string()
            .contains("    parallel:    auto"),
    );
    // A model without the key prints no parallel line (the output is unchanged).
    let none = load("ttl: 0", "").unwrap();
    assert!(!none.config.summary().to_string().contains("parallel:"));
}

#[test]
fn the_readme_parallel_example_loads_with_a_limit_and_auto() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let section = &readme[readme
        .find("### Priority for the same model: `parallel`")
        .expect("the README section")..];
    let start = section.find("```yaml\n").unwrap() + "```yaml\n".len();
    let yaml = &section[start..start + section[start..].find("```").unwrap()];
    let loaded = Config::loader()
        .yaml("README.md", yaml)
        .env(&|_: &str| None)
        .load()
        .unwrap();
    assert_eq!(parallel_of(&loaded, "qwen"), Parallel::limit(2).unwrap());
    assert_eq!(parallel_of(&loaded, "gemma"), Parallel::Auto);
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
}
