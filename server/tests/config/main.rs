//! Configuration: llama-swap's `config.yaml` loaded from fixtures, its errors
//! with key paths, the `priority:` section, the mapping onto scheduler settings
//! and process specs, the loader under random input, and `--check-config`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli;
mod compat;
mod errors;
mod filters;
mod llama_swap;
mod load;
mod mapping;
mod matrix;
mod memory;
mod messages;
mod names;
mod operations;
mod parallel;
mod peers;
mod ports;
mod robustness;
mod scale;
mod selectors;
mod support;
mod transport;
mod trust;
mod websockets;
