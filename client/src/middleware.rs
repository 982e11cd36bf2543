//! A hook around every HTTP attempt, for auth refresh, metrics or request tagging
//! without forking the transport.
//!
//! Middlewares run in the order they were added to the
//! [`ClientBuilder`](crate::ClientBuilder), once per attempt (a retried call passes
//! through them again). Each gets the finished `reqwest::Request` (headers, priority
//! and body already set) and a [`Next`] to pass it on; it may change the request,
//! answer without sending it, or call `next` more than once (clone the request with
//! `try_clone`, which always works for the SDK's bodies).
//!
//! The priority header belongs to the call: after the last middleware the SDK writes
//! the call's `X-Priority` again, so a middleware cannot send a different one.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use async_trait::async_trait;
//! use llama_swap_client::{Client, Error, Middleware, Next};
//!
//! /// Counts attempts, as a metrics layer would.
//! #[derive(Default)]
//! struct CountAttempts(AtomicU64);
//!
//! #[async_trait]
//! impl Middleware for CountAttempts {
//!     async fn handle(&self, request: reqwest::Request, next: Next<'_>) -> Result<reqwest::Response, Error> {
//!         self.0.fetch_add(1, Ordering::Relaxed);
//!         next.run(request).await
//!     }
//! }
//!
//! let client = Client::builder()
//!     .base_url("http://127.0.0.1:8080")
//!     .middleware(Arc::new(CountAttempts::default()))
//!     .build()?;
//! # drop(client);
//! # Ok::<(), Error>(())
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::error::{Error, TimeoutPhase};
use crate::priority::{Priority, apply_priority};

/// A layer around each HTTP attempt. See the [module documentation](self).
#[async_trait]
pub trait Middleware: Send + Sync + 'static {
    /// Handles one attempt: usually changes `request` and calls
    /// [`next.run(request)`](Next::run).
    ///
    /// # Errors
    ///
    /// What `next` returns, or the middleware's own failure (for example
    /// [`Error::Middleware`]).
    async fn handle(
        &self,
        request: reqwest::Request,
        next: Next<'_>,
    ) -> Result<reqwest::Response, Error>;
}

/// The rest of the chain, ending in the HTTP client.
#[derive(Clone)]
pub struct Next<'a> {
    pub(crate) http: &'a reqwest::Client,
    pub(crate) chain: &'a [Arc<dyn Middleware>],
    pub(crate) priority: Priority,
    pub(crate) attempt: u32,
    pub(crate) connect_timeout: Duration,
}

impl fmt::Debug for Next<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Next")
            .field("remaining_middlewares", &self.chain.len())
            .field("priority", &self.priority)
            .field("attempt", &self.attempt)
            .finish_non_exhaustive()
    }
}

impl Next<'_> {
    /// Which attempt of the call this is: 1 for the first, 2 for the first retry.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The call's priority (what the SDK sends as `X-Priority`).
    pub fn priority(&self) -> Priority {
        self.priority
    }

    /// Passes `request` to the next middleware, or sends it.
    ///
    /// # Errors
    ///
    /// [`Error::Connect`], [`Error::Transport`] or a connect [`Error::Timeout`] when
    /// sending fails, or whatever a later middleware returns. A non-success status
    /// is not an error here: the response is returned as is.
    pub async fn run(self, mut request: reqwest::Request) -> Result<reqwest::Response, Error> {
        match self.chain.split_first() {
            Some((first, rest)) => {
                let next = Next {
                    chain: rest,
                    ..self
                };
                first.handle(request, next).await
            }
            None => {
                apply_priority(request.headers_mut(), self.priority);
                self.http
                    .execute(request)
                    .await
                    .map_err(|e| map_send_error(e, self.connect_timeout))
            }
        }
    }
}

/// Sorts a failed send into the SDK's variants.
pub(crate) fn map_send_error(e: reqwest::Error, connect_timeout: Duration) -> Error {
    if e.is_connect() && e.is_timeout() {
        Error::Timeout {
            phase: TimeoutPhase::Connect,
            after: connect_timeout,
        }
    } else if e.is_connect() {
        Error::Connect(Box::new(e))
    } else {
        Error::Transport(Box::new(e))
    }
}
