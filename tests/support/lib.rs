//! Shared helpers for the root examples and the cross-crate end-to-end suite.
