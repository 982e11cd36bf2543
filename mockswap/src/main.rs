//! The `mockswap` binary.

fn main() {}
