//! The contract between the router actor and whatever runs upstream processes.
//!
//! The router decides *when* a model starts or stops; a [`Launcher`] does it. The
//! real implementation is the process supervisor in [`crate::upstream`]; tests use
//! channel-driven fakes. A launcher never makes policy decisions: it is told to
//! make a model ready or to stop it, and it reports exits it did not cause through
//! [`UpstreamEvent`]s sent on a channel the router listens to.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// A boxed, sendable future, as returned by [`Launcher`] methods.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Starts and stops upstream model servers on the router's behalf.
///
/// Both methods return futures that own everything they need (`'static`), so the
/// router can run them on tasks it owns and keep serving events meanwhile.
pub trait Launcher: Send + Sync + 'static {
    /// Brings `model` to the ready state.
    ///
    /// Resolves at once if it is already ready; starts it if stopped; if a stop is
    /// in progress, waits for the stop to finish and then starts it (never decides
    /// from a stale state snapshot). Resolves when the health check passes.
    ///
    /// # Errors
    ///
    /// A [`LaunchError`] saying why the model could not be made ready.
    fn ensure_ready(&self, model: &str) -> BoxFuture<'static, Result<(), LaunchError>>;

    /// As [`ensure_ready`](Self::ensure_ready), for a model the memory router
    /// placed on the GPUs with these ids: a process started now gets them
    /// (`${GPU}`, `CUDA_VISIBLE_DEVICES`, `HIP_VISIBLE_DEVICES`); one already
    /// running keeps its own. The default ignores the GPUs.
    ///
    /// # Errors
    ///
    /// As [`ensure_ready`](Self::ensure_ready).
    fn ensure_ready_on(
        &self,
        model: &str,
        gpus: &[u32],
    ) -> BoxFuture<'static, Result<(), LaunchError>> {
        let _ = gpus;
        self.ensure_ready(model)
    }

    /// Stops `model`: graceful stop first, forced kill after `grace`, always reaped.
    ///
    /// Resolves once the process is gone. A model that is not running resolves at once.
    fn stop(&self, model: &str, grace: Duration) -> BoxFuture<'static, ()>;

    /// Frees the memory of `model` for a swap: a model with a sleep mode is
    /// put to sleep (its process kept, woken by the next
    /// [`ensure_ready`](Self::ensure_ready)); any other, and one whose sleep
    /// call fails, is stopped as by [`stop`](Self::stop), which is the default.
    ///
    /// Resolves once it sleeps or is gone, saying which: the router counts a
    /// model as sleeping only when it slept.
    fn release(&self, model: &str, grace: Duration) -> BoxFuture<'static, Released> {
        let stop = self.stop(model, grace);
        Box::pin(async move {
            stop.await;
            Released::Stopped
        })
    }

    /// How many requests the ready upstream of `model` serves at once, if it
    /// says (llama.cpp's `llama-server`: `total_slots` in `GET /props`).
    ///
    /// The router asks once after each start of a model configured with
    /// `parallel: auto`, before granting anything. `None` (the default, for
    /// launchers that cannot tell) means no limit.
    fn slots(&self, model: &str) -> BoxFuture<'static, Option<usize>> {
        let _ = model;
        Box::pin(async { None })
    }

    /// The GPU memory the ready process of `model` (with its descendants)
    /// uses now, in bytes over all its GPUs, as the GPU's own tool reports it
    /// (`nvidia-smi`, `rocm-smi`).
    ///
    /// The memory router asks once after each start and from then on counts
    /// the larger of this and the model's configured `memory`. `None` (the
    /// default, for launchers that cannot tell) keeps the configured size.
    fn gpu_memory(&self, model: &str) -> BoxFuture<'static, Option<u64>> {
        let _ = model;
        Box::pin(async { None })
    }
}

/// How [`Launcher::release`] freed a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Released {
    /// It is asleep: its process is kept and the next start wakes it.
    Slept,
    /// It is stopped: it had no sleep mode, its sleep call failed, it was not
    /// running, or its process exited.
    Stopped,
}

/// Why a model could not be made ready.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// The model is not one the launcher knows.
    #[error("model {model} has no upstream process configured")]
    UnknownModel {
        /// The model ID.
        model: String,
    },
    /// The command could not be spawned (bad command line, missing binary, ...).
    #[error("failed to start upstream for {model}: {reason}")]
    SpawnFailed {
        /// The model ID.
        model: String,
        /// What went wrong, with the command that was tried.
        reason: String,
    },
    /// Something already holds the model's port (another server listens
    /// there, or it is the local end of a connection), so the model's own
    /// server could not bind it and whatever answered there would not be it.
    #[error("cannot start {model}: {reason}")]
    PortInUse {
        /// The model ID.
        model: String,
        /// The port in use.
        port: u16,
        /// What holds it.
        holder: PortHolder,
        /// The address found bound, what holds it, and what to do.
        reason: String,
    },
    /// The process exited before it became healthy.
    #[error("upstream for {model} exited while starting ({status}); last output:\n{last_output}")]
    ExitedDuringStart {
        /// The model ID.
        model: String,
        /// The exit status, as text (`exit status: 1`, `signal: 9`).
        status: String,
        /// The last lines the process wrote, for the operator.
        last_output: String,
    },
    /// The health check did not pass within `healthCheckTimeout`.
    #[error("upstream for {model} did not become healthy within {timeout:?}")]
    HealthCheckTimeout {
        /// The model ID.
        model: String,
        /// The configured timeout.
        timeout: Duration,
    },
    /// The model failed `failures` times within its `restartWindow` (failed
    /// starts; for a monitored model also exits and failed health checks):
    /// starts are refused until that long has passed since the last failure,
    /// or an explicit load.
    #[error("model {model} failed {failures} times within {window:?}; last output:\n{last_output}")]
    Failed {
        /// The model ID.
        model: String,
        /// Failures within the window.
        failures: u32,
        /// `restartWindow`.
        window: Duration,
        /// The last lines its process wrote (the model's `env` values blanked out).
        last_output: String,
    },
    /// The start was aborted because the model was stopped or unloaded meanwhile.
    #[error("start of {model} was aborted by a stop")]
    Aborted {
        /// The model ID.
        model: String,
    },
    /// The server is shutting down.
    #[error("the server is shutting down")]
    ShuttingDown,
}

/// What holds a port a model's server should listen on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PortHolder {
    /// A listening socket: another server (one this supervisor does not run).
    Listener,
    /// No listener: the port is the local end of a connection, usually an
    /// outgoing one the system gave a port of its ephemeral range.
    Connection,
    /// The system's socket tables did not say.
    Unknown,
}

impl LaunchError {
    /// The model the failure is about (`None` for a shutdown, which is about all of them).
    pub fn model(&self) -> Option<&str> {
        match self {
            Self::UnknownModel { model }
            | Self::SpawnFailed { model, .. }
            | Self::PortInUse { model, .. }
            | Self::ExitedDuringStart { model, .. }
            | Self::HealthCheckTimeout { model, .. }
            | Self::Failed { model, .. }
            | Self::Aborted { model } => Some(model),
            Self::ShuttingDown => None,
        }
    }
}

/// Something the launcher tells the router on its own initiative.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum UpstreamEvent {
    /// A ready model's process exited without being asked to; it is now stopped and
    /// the next request for it starts it again.
    Exited {
        /// The model ID.
        model: String,
        /// The exit status, as text.
        status: String,
    },
}
