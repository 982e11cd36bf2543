//! End-to-end tests of the HTTP surface: a real server on a loopback socket,
//! real `mockswap` upstream processes, and a harness that shuts everything down
//! and checks that no process is left; and the `llama-swap-server` binary itself.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bad_input;
mod capabilities;
mod captures;
mod cli;
mod credentials;
mod errors;
mod event_shapes;
mod filters;
mod health_monitoring;
mod history;
mod history_reload;
mod host_metrics;
mod inflight;
mod keys;
mod launch;
mod lifecycle;
mod listings;
mod logs;
mod loops;
mod matrix;
mod measure;
mod memory;
mod observability;
mod on_idle;
mod openai_client;
mod orphans;
mod parallel;
mod peer_bounds;
mod peers;
mod priority;
mod profiles;
mod queue_timeout;
mod reload;
mod residency;
mod selectors;
mod sleep;
mod slow_bodies;
mod support;
mod system;
mod tls_upstream;
mod transport;
mod trust;
mod ui;
mod websockets;
