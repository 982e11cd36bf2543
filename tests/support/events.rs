//! Waiting on the server's own change notifications (`GET /api/events`)
//! instead of probing it on a timer.
//!
//! The server publishes every change of its queue, of a model's state, of the
//! requests in flight and of the activity log on that stream. A wait subscribes
//! first, then evaluates its probe once, then again after every chunk the stream
//! delivers: a change that happens after the subscription always produces a
//! chunk, so no change can slip between two evaluations, and nothing is probed
//! while nothing changes.

use std::future::Future;

use tokio::time::Instant;

use crate::harness::LIMIT;

/// A subscription to a server's `/api/events`, renewed when the stream ends,
/// as the web UI does: a reload ends the streams of the state it replaces.
pub struct ServerEvents {
    http: reqwest::Client,
    url: String,
    key: Option<String>,
    response: reqwest::Response,
}

impl ServerEvents {
    /// Subscribes to `<base>/api/events`, with `key` as the bearer token when the
    /// server has `apiKeys`.
    pub async fn subscribe(http: &reqwest::Client, base: &str, key: Option<&str>) -> Self {
        let url = format!("{base}/api/events");
        let response = connect(http, &url, key).await;
        ServerEvents {
            http: http.clone(),
            url,
            key: key.map(str::to_owned),
            response,
        }
    }

    /// Waits for the next chunk of the stream (one or more events, or a renewed
    /// subscription, whose snapshot may differ) until `deadline`; `false` when
    /// the deadline passed first.
    pub async fn changed(&mut self, deadline: Instant) -> bool {
        match tokio::time::timeout_at(deadline, self.response.chunk()).await {
            Err(_) => false,
            Ok(Ok(Some(_))) => true,
            Ok(Ok(None) | Err(_)) => {
                self.response = connect(&self.http, &self.url, self.key.as_deref()).await;
                true
            }
        }
    }

    /// Evaluates `probe` now and after every change until it yields a value;
    /// panics naming `what` after [`LIMIT`].
    pub async fn until<T, F, Fut>(&mut self, what: &str, probe: F) -> T
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Option<T>>,
    {
        let deadline = Instant::now() + LIMIT;
        loop {
            if let Some(value) = probe().await {
                return value;
            }
            assert!(self.changed(deadline).await, "waited {LIMIT:?} for {what}");
        }
    }
}

async fn connect(http: &reqwest::Client, url: &str, key: Option<&str>) -> reqwest::Response {
    let mut request = http.get(url);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = tokio::time::timeout(LIMIT, request.send())
        .await
        .unwrap_or_else(|_| panic!("GET {url}: no answer within {LIMIT:?}"))
        .unwrap_or_else(|e| panic!("GET {url}: {e} (did the server shut down?)"));
    assert_eq!(
        response.status(),
        200,
        "GET {url}: the event stream needs the server's API key"
    );
    response
}
