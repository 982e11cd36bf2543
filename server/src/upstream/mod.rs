//! Upstream process supervision.
