//! An operator's cancel (`POST /api/inflight/{id}/cancel`) reaching a
//! request: its handler stops waiting (for the grant, or for the upstream's
//! answer) and answers 503 `cancelled`, or its response body is cut. Either
//! way what the request held is dropped at once: a waiting request's ticket
//! (it leaves the queue, as when its client goes away), a running one's
//! lease and upstream connection. An upgraded websocket is closed: its `101`
//! carries the request's entry to the pipe ([`crate::proxy::splice`]), which
//! ends when the entry is cancelled.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::StatusCode;
use http_body::{Frame, SizeHint};

use crate::activity::InFlight;
use crate::api::error::ApiError;
use crate::proxy::Cancelled;

/// Runs `work` until it ends or the request is cancelled.
pub(super) async fn or_cancelled<F>(
    entry: Option<&Arc<InFlight>>,
    work: F,
) -> Result<Response, ApiError>
where
    F: Future<Output = Result<Response, ApiError>>,
{
    let Some(entry) = entry else {
        return work.await;
    };
    tokio::select! {
        biased;
        () = entry.cancelled() => Err(ApiError::Cancelled { id: entry.id }),
        result = work => result,
    }
}

/// `response` with a body that a cancel cuts: an event stream ends with the
/// error's `data:` frame and `data: [DONE]`, any other body is aborted
/// (the client sees it end early). A websocket's `101` keeps its body (the
/// pipe holds it until the socket closes) and carries the entry instead, for
/// [`websocket_cancel`].
pub(super) fn cut_on_cancel(mut response: Response, entry: Option<Arc<InFlight>>) -> Response {
    let Some(entry) = entry else {
        return response;
    };
    if response.status() == StatusCode::SWITCHING_PROTOCOLS {
        response.extensions_mut().insert(Cancellable(entry));
        return response;
    }
    let (parts, body) = response.into_parts();
    let stream = crate::proxy::is_event_stream(&parts.headers);
    let body = Cut {
        inner: Some(body),
        entry,
        stream,
    };
    Response::from_parts(parts, Body::new(body))
}

/// The in-flight entry of a request answered `101`, in the response's
/// extensions from [`cut_on_cancel`] to the pipe.
#[derive(Debug, Clone)]
struct Cancellable(Arc<InFlight>);

/// What closes the websocket of `response` (a `101` that [`cut_on_cancel`]
/// marked) when an operator cancels its request; `None` for a response
/// without an in-flight entry.
pub(super) fn websocket_cancel(response: &mut Response) -> Option<Cancelled> {
    let Cancellable(entry) = response.extensions_mut().remove::<Cancellable>()?;
    Some(Box::pin(async move { entry.cancelled().await }))
}

/// A response body that ends when its request is cancelled.
struct Cut {
    /// `None` once ended or cut.
    inner: Option<Body>,
    entry: Arc<InFlight>,
    /// An event stream: cut with an error frame rather than aborted.
    stream: bool,
}

impl http_body::Body for Cut {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(None);
        };
        if this.entry.poll_cancelled(cx).is_ready() {
            // Dropped here: the lease goes back, the upstream connection closes.
            this.inner = None;
            let error = ApiError::Cancelled { id: this.entry.id };
            return Poll::Ready(Some(if this.stream {
                Ok(Frame::data(error.sse_frames()))
            } else {
                Err(axum::Error::new(error))
            }));
        }
        let polled = Pin::new(inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.entry.sent(data.len());
                }
            }
            Poll::Ready(None) => this.inner = None,
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner
            .as_ref()
            .is_none_or(http_body::Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            // An event stream may get an error frame more than it said.
            Some(inner) if self.stream => {
                let mut hint = SizeHint::new();
                hint.set_lower(inner.size_hint().lower());
                hint
            }
            Some(inner) => inner.size_hint(),
            None => SizeHint::with_exact(0),
        }
    }
}
