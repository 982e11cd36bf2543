//! `compat.ignoreWebsockets` and the fixed settings of `comfyui_auto`.

use llama_swap_server::config::{
    COMFYUI_MIN_CONCURRENCY, COMFYUI_MODEL_ID, Config, Loaded, WarningKind,
};

fn load(yaml: &str) -> Loaded {
    Config::loader()
        .yaml("test.yaml", yaml)
        .env(&|_: &str| None)
        .load()
        .unwrap_or_else(|e| panic!("should load:\n{e}\n{yaml}"))
}

fn comfyui(extra: &str) -> String {
    format!("models:\n  comfyui_auto:\n    cmd: comfy --port ${{PORT}}\n{extra}")
}

#[test]
fn ignore_websockets_is_off_by_default_and_loads_without_a_warning_when_set() {
    let Loaded { config, warnings } = load(
        "models:\n  a:\n    cmd: srv --port ${PORT}\n    compat:\n      ignoreWebsockets: true\n  b:\n    cmd: srv --port ${PORT}\n",
    );
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(config.model("a").unwrap().ignore_websockets);
    assert!(!config.model("b").unwrap().ignore_websockets);
    let summary = config.summary().to_string();
    assert_eq!(
        summary.matches("websockets:  ignored").count(),
        1,
        "{summary}"
    );
}

#[test]
fn unknown_keys_under_compat_warn_as_unknown() {
    let Loaded { warnings, .. } = load(
        "models:\n  a:\n    cmd: srv --port ${PORT}\n    compat:\n      ignoreWebsocket: true\n",
    );
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(
        warnings[0].path.to_string(),
        "models.a.compat.ignoreWebsocket"
    );
    assert_eq!(warnings[0].kind, WarningKind::UnknownKey);
}

#[test]
fn comfyui_auto_ignores_websockets_and_admits_at_least_fifty_requests() {
    let Loaded { config, warnings } = load(&comfyui(""));
    assert!(warnings.is_empty(), "{warnings:?}");
    let model = config.model(COMFYUI_MODEL_ID).unwrap();
    assert!(model.ignore_websockets);
    assert_eq!(model.concurrency_limit, COMFYUI_MIN_CONCURRENCY);
    assert_eq!(
        config.scheduler_settings().models[0].concurrency_limit,
        COMFYUI_MIN_CONCURRENCY
    );
}

#[test]
fn a_lower_comfyui_concurrency_limit_is_raised_with_a_warning_and_a_higher_one_kept() {
    let Loaded { config, warnings } = load(&comfyui("    concurrencyLimit: 10\n"));
    assert_eq!(
        config.model(COMFYUI_MODEL_ID).unwrap().concurrency_limit,
        50
    );
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(
        warnings[0].path.to_string(),
        "models.comfyui_auto.concurrencyLimit"
    );
    assert_eq!(warnings[0].kind, WarningKind::Raised { got: 10, used: 50 });

    let Loaded { config, warnings } = load(&comfyui("    concurrencyLimit: 60\n"));
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(
        config.model(COMFYUI_MODEL_ID).unwrap().concurrency_limit,
        60
    );
}

#[test]
fn comfyui_websockets_stay_ignored_when_the_config_says_false() {
    let Loaded { config, warnings } =
        load(&comfyui("    compat:\n      ignoreWebsockets: false\n"));
    assert!(config.model(COMFYUI_MODEL_ID).unwrap().ignore_websockets);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(
        warnings[0].path.to_string(),
        "models.comfyui_auto.compat.ignoreWebsockets"
    );
    assert!(matches!(warnings[0].kind, WarningKind::NoEffect { .. }));
}

#[test]
fn other_models_keep_their_own_concurrency_limit() {
    let Loaded { config, .. } =
        load("models:\n  comfyui:\n    cmd: comfy --port ${PORT}\n    concurrencyLimit: 3\n");
    let model = config.model("comfyui").unwrap();
    assert_eq!(model.concurrency_limit, 3);
    assert!(!model.ignore_websockets);
}
