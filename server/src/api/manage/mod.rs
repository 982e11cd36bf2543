//! The management surface: what an operator, a script or the web UI asks the
//! server about itself, and the few controls it offers. None of it is on a
//! model request's path.
//!
//! - [`info`]: `/v1/models`, `/running`, `/api/queue`, `/health`, unloading,
//!   llama-swap's redirects to the UI;
//! - [`profiles`]: `/api/profiles` and the selector and pin rows of `/v1/models`;
//! - [`logs`]: `/logs` and its streams;
//! - [`events`]: `/api/events`, the UI's live feed;
//! - [`activity`]: `/api/activity` and `/api/models/load/<model>`;
//! - [`loadtest`]: `POST /api/loadtest`, the web UI's load test run by the server;
//! - [`metrics`]: `GET /metrics`;
//! - [`model_config`]: `/api/models/config/<model>`, a model's resolved configuration;
//! - [`ui`]: the embedded web UI.

pub(super) mod activity;
pub(super) mod events;
pub(super) mod info;
pub(super) mod loadtest;
pub(super) mod logs;
pub(super) mod metrics;
pub(super) mod model_config;
mod params;
pub(super) mod profiles;
pub(super) mod ui;
