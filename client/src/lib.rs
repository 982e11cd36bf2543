//! llama-swap-client: the SDK for llama-swap style proxies, with per-call priority.
