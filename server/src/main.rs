//! The `llama-swap-server` binary.

fn main() {}
