//! Calling the model with a prepared request: its priority, the router's
//! grant (its fast path, or a ticket to wait on, streaming the loading state
//! when asked), then the proxy, with the lease moved into the response body.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use tokio_util::task::task_tracker::TaskTrackerToken;
use tracing::Instrument;

use super::cancel::{cut_on_cancel, or_cancelled};
use super::loading::{LoadingTarget, Progress, loading_response};
use super::names::hold_until_body_ends;
use super::peer;
use super::prepare::{Forward, Prepared};
use super::queue_wait::{self, InvalidQueueTimeout, QUEUE_TIMEOUT_HEADER};
use super::record::describe_client;
use super::websockets;
use crate::activity::Tracked;
use crate::api::error::ApiError;
use crate::api::front::request_id;
use crate::api::front::scopes::KeyPermit;
use crate::api::paths::is_metered;
use crate::api::state::{AppState, ModelEntry};
use crate::metrics::RequestOutcome;
use crate::priority::{HeaderPriority, KeyIndex, Priority};
use crate::proxy::{Outbound, SendError};
use crate::router::{Lease, Submit, Ticket, WaitStatus};
use crate::upstream::ProcessState;

/// One model request from its arrival: its priority, parsed once, and the
/// record of how it ends.
pub(super) struct Call {
    priority: Priority,
    outcome: RequestOutcome,
    /// The API key the request came with, by its index in `apiKeys`.
    key: Option<KeyIndex>,
    /// Its `X-Queue-Timeout` (checked before it is scheduled).
    queue_timeout: Result<Option<Duration>, InvalidQueueTimeout>,
    /// It keeps a history row ([`is_metered`]).
    metered: bool,
}

impl Call {
    /// Parses `X-Priority` (counting a bad one), applies the trust caps of the
    /// API key the auth layer found, and starts the outcome record.
    pub(super) fn begin(state: &AppState, request: &Request) -> Self {
        let header = HeaderPriority::from_headers(request.headers());
        if header.is_malformed() {
            tracing::debug!(?header, "malformed X-Priority served at 0");
        }
        state.inner.metrics.header(header);
        let key = request.extensions().get::<KeyIndex>().copied();
        Self {
            priority: state.inner.trust.cap(header.value(), key),
            outcome: state.inner.metrics.request(header.value()),
            key,
            queue_timeout: queue_wait::requested(request.headers()),
            // A websocket to a model is model work too (llama-swap keeps no
            // row for one; ours is a superset).
            metered: is_metered(request.method(), request.uri().path())
                || crate::proxy::is_websocket_upgrade(request.method(), request.headers()),
        }
    }

    /// Serves what the endpoint prepared; a request refused before scheduling
    /// (bad input, unknown model) or answered without a model is recorded so.
    pub(super) async fn run(
        self,
        state: AppState,
        prepared: Result<Prepared, ApiError>,
    ) -> Response {
        // The key's `maxConcurrent`: counted until the response body ends.
        let permit = match &prepared {
            Ok(Prepared::Forward(_) | Prepared::Peer(_)) => {
                match state.inner.key_rules.admit(self.key) {
                    Ok(permit) => permit,
                    Err(error) => {
                        self.outcome.rejected(error.kind().code);
                        return error.into_response();
                    }
                }
            }
            _ => None,
        };
        self.dispatch(state, prepared, permit).await
    }

    /// Serves what was prepared; `permit` (the key's `maxConcurrent` count)
    /// is held until the response body ends, or a websocket until it closes.
    async fn dispatch(
        self,
        state: AppState,
        prepared: Result<Prepared, ApiError>,
        permit: Option<KeyPermit>,
    ) -> Response {
        match prepared {
            Ok(Prepared::Forward(mut forward)) => {
                // A hint for this proxy's queue, not for the model server.
                forward.outbound.headers.remove(QUEUE_TIMEOUT_HEADER);
                if let Err(InvalidQueueTimeout { value }) = &self.queue_timeout {
                    let error = ApiError::InvalidQueueTimeout {
                        value: value.clone(),
                    };
                    self.outcome.rejected(error.kind().code);
                    return error.into_response();
                }
                let hold = forward.hold.take();
                let upgrade = forward.upgrade.take();
                let model = Arc::clone(&forward.model);
                if model.config.ignore_websockets
                    && let Some(client) = upgrade
                {
                    drop(hold);
                    let Forward { outbound, .. } = Forward::unboxed(forward);
                    return Box::pin(websockets::serve_ignored(
                        state,
                        model,
                        outbound,
                        client,
                        self.outcome,
                        permit,
                    ))
                    .await;
                }
                match self.serve(state.clone(), forward).await {
                    Ok(response) => {
                        // Moved into the body, which a websocket's pipe holds
                        // until the socket closes.
                        let held = (hold.is_some() || permit.is_some()).then_some((hold, permit));
                        let response = hold_until_body_ends(response, held);
                        match upgrade {
                            Some(client) => websockets::open(&state, &model, response, client),
                            None => response,
                        }
                    }
                    Err(error) => error.into_response(),
                }
            }
            Ok(Prepared::Peer(mut forward)) => {
                let hold = forward.hold.take();
                let served = peer::serve(
                    &state,
                    self.priority,
                    self.key,
                    self.metered,
                    self.outcome,
                    *forward,
                    permit,
                );
                match Box::pin(served).await {
                    Ok(response) => hold_until_body_ends(response, hold),
                    Err(error) => error.into_response(),
                }
            }
            Ok(Prepared::Answer(response)) => {
                self.outcome.discard();
                response
            }
            // The client went away mid-upload: nobody reads this answer.
            Err(error @ ApiError::BodyIncomplete) => {
                self.outcome.cancelled();
                error.into_response()
            }
            Err(error) => {
                self.outcome.rejected(error.kind().code);
                error.into_response()
            }
        }
    }

    /// Submits the request, waits for its turn and forwards it.
    async fn serve(self, state: AppState, forward: Box<Forward>) -> Result<Response, ApiError> {
        let Self {
            priority,
            outcome,
            key,
            queue_timeout,
            metered,
        } = self;
        // Unboxed here, so the box is freed before the wait.
        let Forward {
            model,
            outbound,
            loading,
            selector,
            hold: _,
            upgrade: _,
        } = Forward::unboxed(forward);
        // Counted until the response body ends, so a drain can wait for it.
        let token = state.track();
        let mut tracked = begin_activity(&state, &model.config.id, &outbound, priority, key);
        if !metered {
            tracked.unmetered();
        }
        if let Some(selector) = selector {
            tracked.selector(selector);
        }
        let asked = matches!(queue_timeout, Ok(Some(_)));
        let wait = queue_wait::bound(queue_timeout.ok().flatten(), model.config.max_queue_wait);
        let deadline = wait.map(|wait| Deadline {
            at: tokio::time::Instant::now() + wait,
            wait,
            asked,
        });
        let mut pending = Box::new(Pending {
            outbound,
            tracked,
            outcome,
            token,
            deadline,
        });
        if priority.is_capped() {
            state.inner.metrics.capped();
            tracing::debug!(
                model = %model.config.id,
                requested = priority.requested(),
                capped = priority.capped(),
                "X-Priority capped"
            );
        }
        // A ready model with nothing waiting: granted without the router's round trip.
        let turn = match state.inner.router.try_fast(&model.config.id, priority) {
            Some(lease) => {
                pending.admitted(lease.id().0, lease.effective_priority());
                pending.list();
                Turn::Granted(lease)
            }
            None => match Self::submit(&state, &model, priority, &mut pending, loading).await {
                Ok(Queued::Turn(turn)) => turn,
                Ok(Queued::Loading(target, status, ticket)) => {
                    let entry = pending.tracked.in_flight().cloned();
                    let work = async move {
                        grant_and_forward(&state, &model, pending, Turn::Waiting(ticket)).await
                    }
                    .in_current_span();
                    // A cancel drops the loading stream, and the wait with it.
                    let response = loading_response(target, status, describe, work);
                    return Ok(cut_on_cancel(response, entry));
                }
                Err(error) => return Err(pending.refused(error)),
            },
        };
        let entry = pending.tracked.in_flight().cloned();
        // One call site: each would take its own room in this future.
        let work = grant_and_forward(&state, &model, pending, turn);
        let response = or_cancelled(entry.as_ref(), work).await?;
        Ok(cut_on_cancel(response, entry))
    }

    /// Submits to the router; a request that must wait gets its own copy of
    /// its headers and, when it asked for the loading state, what streaming it
    /// needs.
    async fn submit(
        state: &AppState,
        model: &ModelEntry,
        priority: Priority,
        pending: &mut Pending,
        loading: bool,
    ) -> Result<Queued, ApiError> {
        let submitted = state
            .inner
            .router
            .submit(Submit {
                model: model.config.id.clone(),
                priority,
            })
            .await;
        let ticket = submitted?;
        pending.admitted(ticket.id().0, ticket.effective_priority());
        let status = ticket.status();
        let granted_at_once = matches!(*status.borrow(), WaitStatus::Granted);
        if granted_at_once {
            pending.list();
            return Ok(Queued::Turn(Turn::Waiting(ticket)));
        }
        // It may wait long, beside thousands of others: its own copy of the
        // headers lets the connection's read buffer go (listed after, so
        // its in-flight entry holds that copy too).
        let headers = std::mem::take(&mut pending.outbound.headers);
        pending.outbound.headers = detached(headers);
        pending.list();
        if !loading {
            return Ok(Queued::Turn(Turn::Waiting(ticket)));
        }
        let target = LoadingTarget {
            model: model.config.id.clone(),
            request_id: request_id::of(&pending.outbound.headers).to_owned(),
        };
        Ok(Queued::Loading(target, status, ticket))
    }
}

/// A request the router admitted: its turn, or, for a request that streams
/// the loading state while it waits, what the stream needs.
enum Queued {
    Turn(Turn),
    Loading(
        LoadingTarget,
        tokio::sync::watch::Receiver<WaitStatus>,
        Ticket,
    ),
}

/// What a request carries from its admission to its answer. Boxed once, so
/// that the futures waiting with it (there may be thousands) hold a pointer
/// rather than each its own copy of a few hundred bytes.
struct Pending {
    outbound: Outbound,
    tracked: Tracked,
    outcome: RequestOutcome,
    /// Counted until the response body ends, so a drain can wait for it.
    token: TaskTrackerToken,
    /// When it stops waiting for its turn, if it set a bound.
    deadline: Option<Deadline>,
}

/// The end of a bounded wait.
#[derive(Debug, Clone, Copy)]
struct Deadline {
    /// When the request leaves the queue.
    at: tokio::time::Instant,
    /// The bound it was given (the Retry-After of its 503).
    wait: Duration,
    /// The request asked for a bound itself (`X-Queue-Timeout`).
    asked: bool,
}

impl Pending {
    /// Records the router's admission: the request's sequence number and
    /// effective priority.
    fn admitted(&mut self, seq: u64, effective_priority: i32) {
        self.outcome.set_priority(effective_priority);
        self.tracked.admitted(seq, effective_priority);
        tracing::Span::current().record("seq", seq);
    }

    /// Lists the request in flight, where it can be seen and cancelled.
    fn list(&mut self) {
        let outbound = &self.outbound;
        self.tracked
            .listed(&outbound.method, outbound.client_ip, &outbound.headers);
    }

    /// Records a refusal before the request was admitted.
    fn refused(mut self: Box<Self>, error: ApiError) -> ApiError {
        self.outcome.rejected(error.kind().code);
        self.tracked.failed(error.status(), error.kind().code);
        error
    }
}

/// The same headers, each value copied out of the buffer it was parsed from.
///
/// hyper parses a request's header values as slices of the connection's read
/// buffer (8 KiB or more), so a request that keeps its headers keeps that buffer
/// alive, and the connection allocates a second one for its next read. A
/// request about to wait for its turn is worth the copy (a few hundred bytes);
/// one granted at once is not.
fn detached(headers: http::HeaderMap) -> http::HeaderMap {
    let mut owned = http::HeaderMap::with_capacity(headers.len());
    let mut last = None;
    for (name, value) in headers {
        // `None`: another value of the previous name.
        if let Some(name) = name {
            last = Some(name);
        }
        let Some(name) = &last else { continue };
        let mut copy =
            http::HeaderValue::from_bytes(value.as_bytes()).unwrap_or_else(|_| value.clone());
        copy.set_sensitive(value.is_sensitive());
        owned.append(name.clone(), copy);
    }
    owned
}

/// Where a request stands when it is forwarded: waiting for its grant, or
/// granted already (the router's fast path).
enum Turn {
    Waiting(Ticket),
    Granted(Lease),
}

/// Starts the activity record of a request for `model` (see [`crate::activity`]).
fn begin_activity(
    state: &AppState,
    model: &str,
    outbound: &Outbound,
    priority: Priority,
    key: Option<KeyIndex>,
) -> Tracked {
    let request_id = request_id::of(&outbound.headers);
    let mut tracked =
        state
            .inner
            .activity
            .begin(model, &outbound.path_and_query, request_id, priority);
    describe_request(state, &mut tracked, outbound, key);
    tracked
}

/// Fills in what the activity record knows of the request before it is
/// scheduled: its API key's name, its session, and its capture.
pub(super) fn describe_request(
    state: &AppState,
    tracked: &mut Tracked,
    outbound: &Outbound,
    key: Option<KeyIndex>,
) {
    describe_client(state, tracked, &outbound.headers, key);
    tracked.capture_request(&outbound.headers, outbound.body.buffered());
}

/// Records how a request that was admitted ended.
fn record(outcome: RequestOutcome, result: &Result<Response, ApiError>) {
    match result {
        Ok(_) => outcome.served(),
        Err(ApiError::BodyIncomplete) => outcome.cancelled(),
        Err(error) => outcome.error(error.kind().code),
    }
}

/// Waits for the grant and forwards. When the upstream turns out to be gone
/// before the request reached it (it crashed and the router had not heard yet),
/// the lease hands the request back to the router once, which grants it again
/// when the model runs again.
async fn grant_and_forward(
    state: &AppState,
    model: &ModelEntry,
    pending: Box<Pending>,
    turn: Turn,
) -> Result<Response, ApiError> {
    let lease = match turn {
        Turn::Waiting(ticket) => wait_for_grant(state, ticket, pending.deadline).await,
        Turn::Granted(lease) => {
            let metrics = &state.inner.metrics;
            metrics.granted(&model.config.id, lease.effective_priority(), Duration::ZERO);
            Ok(lease)
        }
    };
    let Pending {
        outbound,
        mut tracked,
        outcome,
        token,
        deadline: _,
    } = *pending;
    let result = match lease {
        Ok(lease) => {
            tracked.granted();
            // A reload while it waited may have given the model a new
            // definition (address, filters, timeouts): the grant is for it.
            let latest = state.latest_model(&model.config.id);
            let model = latest.as_deref().unwrap_or(model);
            // Boxed so that a request waiting for its grant does not carry the
            // larger state of the forwarding stage.
            Box::pin(forward_granted(state, model, outbound, lease, token)).await
        }
        Err(error) => Err(error),
    };
    let result = match result {
        // The record ends with the response body.
        Ok(response) => Ok(tracked.respond(response)),
        Err(error) => {
            tracked.failed(error.status(), error.kind().code);
            Err(error)
        }
    };
    record(outcome, &result);
    result
}

/// Forwards a granted request; see [`grant_and_forward`].
async fn forward_granted(
    state: &AppState,
    model: &ModelEntry,
    outbound: Outbound,
    lease: Lease,
    token: TaskTrackerToken,
) -> Result<Response, ApiError> {
    let mut lease = lease;
    let mut latest = None;
    while !upstream_ready(state, &model.config.id) {
        tracing::info!(model = %model.config.id, "granted while its upstream is not ready (an exit or a restart the router has not heard of yet); handing the request back to the router");
        // As for a refused connection: the router grants it again once the
        // model runs again, or fails it after REFUSAL_GRACE if the
        // instance it was granted on does not go away.
        lease = wait_for_grant(state, lease.refused(), None).await?;
        latest = state.latest_model(&model.config.id);
    }
    let model = latest.as_deref().unwrap_or(model);
    let proxy = &model.client;
    match proxy
        .send(
            &model.config.id,
            &model.config.proxy,
            outbound,
            (lease, token),
        )
        .await
    {
        Ok(response) => Ok(response),
        Err(SendError {
            unsent: Some((outbound, (lease, token))),
            ..
        }) => {
            tracing::info!(model = %model.config.id, "the upstream refused the request before it reached it; handing it back to the router");
            // Its turn came already: waiting for the restart is not bounded
            // by its queue timeout.
            let lease = wait_for_grant(state, lease.refused(), None).await?;
            let latest = state.latest_model(&model.config.id);
            let model = latest.as_deref().unwrap_or(model);
            Ok(model
                .client
                .forward(
                    &model.config.id,
                    &model.config.proxy,
                    outbound,
                    (lease, token),
                )
                .await?)
        }
        Err(failed) => Err(failed.error.into()),
    }
}

/// Whether `model`'s process is ready now, as its supervisor sees it (the
/// router hears of an exit or of the health monitor's restart an instant
/// later): a request is never sent to a process that is starting, stopping
/// or gone (issue 31 #10b). A model the supervisor does not run counts as
/// ready.
fn upstream_ready(state: &AppState, model: &str) -> bool {
    let Some(supervisor) = &state.inner.supervisor else {
        return true;
    };
    supervisor
        .status(model)
        .is_none_or(|status| status.state == ProcessState::Ready)
}

/// Resolves at the deadline; never without one.
async fn until(deadline: Option<Deadline>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline.at).await,
        None => std::future::pending().await,
    }
}

/// The answer of a request whose wait ran out.
fn queue_timeout(
    model: &str,
    started: tokio::time::Instant,
    deadline: Option<Deadline>,
) -> ApiError {
    ApiError::QueueTimeout {
        model: model.to_owned(),
        waited: started.elapsed(),
        retry_after: deadline.map_or(Duration::ZERO, |d| d.wait),
        asked: deadline.is_some_and(|d| d.asked),
    }
}

/// Waits for the grant; a server that starts draining answers 503 instead,
/// and so does a request still waiting at its `deadline` (`queue_timeout`).
/// Dropping this future (the client went away) drops the ticket, which
/// withdraws the request before it can cause a model load; the deadline
/// withdraws it the same way.
async fn wait_for_grant(
    state: &AppState,
    ticket: Ticket,
    deadline: Option<Deadline>,
) -> Result<Lease, ApiError> {
    let admitted = tokio::time::Instant::now();
    let (model, priority) = (ticket.model().to_owned(), ticket.effective_priority());
    // A grant that is already there wins over a deadline that passed.
    let lease = tokio::select! {
        biased;
        () = state.inner.draining.cancelled() => Err(ApiError::ShuttingDown),
        granted = ticket.granted() => granted.map_err(ApiError::from),
        () = until(deadline) => {
            state.inner.metrics.queue_timeout(&model, priority);
            tracing::info!(model = %model, "request left the queue at its queue timeout");
            Err(queue_timeout(&model, admitted, deadline))
        }
    }?;
    state
        .inner
        .metrics
        .granted(&model, priority, admitted.elapsed());
    Ok(lease)
}

fn describe(status: &WaitStatus) -> Option<Progress> {
    match status {
        WaitStatus::Queued { position } => Some(Progress::Queued(*position)),
        WaitStatus::Starting => Some(Progress::Loading),
        WaitStatus::Admitted | WaitStatus::Granted => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header;

    /// Starts every model at once without running anything: the router
    /// believes in processes the supervisor does not have.
    struct BelievedReady;

    impl crate::launcher::Launcher for BelievedReady {
        fn ensure_ready(
            &self,
            _: &str,
        ) -> crate::launcher::BoxFuture<'static, Result<(), crate::launcher::LaunchError>> {
            Box::pin(async { Ok(()) })
        }

        fn stop(&self, _: &str, _: Duration) -> crate::launcher::BoxFuture<'static, ()> {
            Box::pin(async {})
        }
    }

    #[tokio::test]
    async fn a_grant_for_a_model_whose_process_is_not_ready_is_handed_back_not_forwarded() {
        // Something listens at the model's address: a forwarded request would connect.
        let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = upstream.local_addr().unwrap().port();
        let yaml = format!(
            "models:\n  a:\n    cmd: model-server --port {port}\n    proxy: http://127.0.0.1:{port}\n"
        );
        let config = crate::config::Config::loader()
            .yaml("test.yaml", &yaml)
            .env(&|_: &str| None)
            .load()
            .unwrap()
            .config;
        // The router grants at once; the supervisor never started the model
        // (Stopped): the state after an exit the router has not heard of.
        let (supervisor, _exits) = crate::upstream::Supervisor::new(config.process_specs(), 10);
        let (_events, events_rx) = tokio::sync::mpsc::channel(1);
        let router = crate::router::Router::spawn(
            config.scheduler_settings(),
            Arc::new(BelievedReady),
            events_rx,
        )
        .unwrap();
        let state = AppState::builder(&config, router)
            .supervisor(Arc::clone(&supervisor))
            .build();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            axum::serve(listener, crate::api::routes::app(state))
                .await
                .unwrap();
        });

        let request = reqwest::Client::new()
            .post(format!("http://{addr}/v1/chat/completions"))
            .json(&serde_json::json!({"model": "a", "messages": []}))
            .send();
        let outcome = tokio::time::timeout(Duration::from_secs(30), async {
            tokio::select! {
                _ = upstream.accept() => None,
                response = request => Some(response.unwrap()),
            }
        })
        .await
        .unwrap();
        let response = outcome.expect("forwarded to a model whose process is not ready");
        // Handed back and held for the exit that never comes here, then
        // failed as a refused connection is (REFUSAL_GRACE).
        assert_eq!(response.status(), 502);
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "upstream_unreachable", "{body}");
        server.abort();
        supervisor.shutdown(Duration::from_secs(1)).await;
    }

    #[test]
    fn detached_headers_keep_every_value_but_not_the_parse_buffer() {
        // Values sliced out of one buffer, as hyper parses them.
        let buffer = bytes::Bytes::from_static(b"application/jsonBearer xfirstsecond");
        let slice = |a: usize, b: usize| {
            http::HeaderValue::from_maybe_shared(buffer.slice(a..b)).expect("valid value")
        };
        let mut headers = http::HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, slice(0, 16));
        let mut secret = slice(16, 24);
        secret.set_sensitive(true);
        headers.insert(header::AUTHORIZATION, secret);
        headers.append("x-tag", slice(24, 29));
        headers.append("x-tag", slice(29, 35));

        let owned = detached(headers.clone());

        assert_eq!(owned, headers);
        let tags: Vec<_> = owned.get_all("x-tag").iter().collect();
        assert_eq!(tags, ["first", "second"]);
        assert!(owned[header::AUTHORIZATION].is_sensitive());
        let range = buffer.as_ptr_range();
        for value in owned.values() {
            assert!(
                !range.contains(&value.as_bytes().as_ptr()),
                "{value:?} still points into the parse buffer"
            );
        }
    }
}
