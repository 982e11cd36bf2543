//! llama-swap-server: a priority-aware model-swapping proxy.
//!
//! It reads llama-swap's `config.yaml`, starts the upstream model server a request
//! names, stops the ones in the way, and ranks the requests that must wait by
//! priority (`X-Priority` header, floored by the model's configured priority).
//!
//! # Map of the crate
//!
//! | module | owns |
//! |---|---|
//! | [`config`] | llama-swap YAML: parsing, macros, validation, resolved models |
//! | [`scheduler`] | the pure state machine: queue, reservations, swaps, decisions |
//! | [`names`] | profile pins and selectors: the names a request may use beyond models |
//! | [`policy`] | eviction policy: which running models must stop to run another |
//! | [`router`] | the actor that owns the scheduler and turns decisions into effects |
//! | [`upstream`] | one supervisor per model: spawn, health check, stop, logs |
//! | [`priority`] | a request's priority: `X-Priority` parsing, trust caps, the effective value, metric bands |
//! | [`launcher`] | the contract between the router and whatever runs upstream processes |
//! | [`metrics`] | Prometheus metrics with bounded labels (bands, configured models) |
//! | [`activity`] | requests in flight and the ring of finished ones, with usage read from responses |
//! | [`logging`] | the proxy's own log: history for `/logs`, stdout per `logToStdout`, `logLevel`, `logTimeFormat` |
//! | [`api`] | the HTTP surface: model extraction, auth, error envelopes, handlers |
//! | [`filters`] | request body filters: `stripParams`, `setParams`, `setParamsByID` |
//! | [`proxy`] | the streaming reverse proxy; the response body owns the lease |
//! | [`serve`](mod@serve) | the entry point: serve a config on a listener, reload, drain, stop |

pub mod activity;
pub mod api;
pub mod config;
pub mod filters;
pub mod launcher;
pub mod logging;
pub mod metrics;
pub mod names;
pub mod policy;
pub mod priority;
pub mod proxy;
pub mod router;
pub mod scheduler;
pub mod serve;
pub mod upstream;

pub use api::HttpOptions;
pub use serve::{ServeError, ServeOptions, serve, serve_reloading, serve_with};
