//! Reading request bodies so that a slow or hostile client costs little.
//!
//! - Frames are copied into one growing buffer as they arrive. hyper hands each
//!   read over as a slice of its (kilobytes large) read buffer; keeping the
//!   slices, as collecting the frames would, keeps every buffer alive, so a body
//!   sent one byte per TCP segment cost thousands of bytes per byte received.
//! - A body must arrive within `requestBodyTimeout` of the request (408, and the
//!   connection is closed); a streamed `/upstream` body is cut at the same
//!   deadline.
//! - The bytes of all bodies being read at once are capped ([`BodyBudget`]):
//!   beyond it a request is refused with 503 rather than the server growing.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::body::Body;
use bytes::{Bytes, BytesMut};
use http::HeaderMap;
use http_body::{Frame, SizeHint};
use http_body_util::BodyExt;
use tokio::time::{Instant, Sleep, sleep_until, timeout_at};

use crate::api::error::ApiError;
use crate::proxy::RequestBodyError;

/// Default of [`HttpOptions::max_body_bytes_in_flight`](crate::api::HttpOptions).
pub(crate) const DEFAULT_MAX_BODY_BYTES_IN_FLIGHT: usize = 256 * 1024 * 1024;

/// Largest buffer reserved up front from a declared `Content-Length`: a client
/// may declare far more than it ever sends.
const INITIAL_CAPACITY: usize = 16 * 1024;

/// The bytes of request bodies being read, across requests, and their cap.
#[derive(Debug)]
pub(crate) struct BodyBudget {
    limit: usize,
    used: AtomicUsize,
}

impl BodyBudget {
    /// A budget of `limit` bytes.
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            limit,
            used: AtomicUsize::new(0),
        }
    }

    /// The cap in bytes.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes held by bodies being read now.
    #[cfg(test)]
    pub(crate) fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    fn try_take(&self, bytes: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|total| *total <= self.limit)
            })
            .is_ok()
    }
}

/// Bytes taken from a [`BodyBudget`], given back when dropped.
struct Reservation {
    budget: Arc<BodyBudget>,
    held: usize,
}

impl Reservation {
    fn grow(&mut self, bytes: usize) -> bool {
        let ok = self.budget.try_take(bytes);
        if ok {
            self.held += bytes;
        }
        ok
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.held, Ordering::AcqRel);
    }
}

/// How request bodies are read: size limit, deadline, shared budget.
#[derive(Debug, Clone)]
pub(crate) struct BodyLimits {
    pub(crate) max_bytes: usize,
    /// `None`: no deadline.
    pub(crate) timeout: Option<Duration>,
    pub(crate) budget: Arc<BodyBudget>,
}

/// Reads the whole body into one buffer, within the limits.
///
/// # Errors
///
/// [`ApiError::BodyTooLarge`] past `max_bytes` (also when declared so),
/// [`ApiError::BodyTimeout`] when the deadline passes,
/// [`ApiError::BodiesOverCapacity`] when the shared budget is spent,
/// [`ApiError::BodyIncomplete`] when the client aborts or garbles it.
pub(crate) async fn read_body(
    headers: &HeaderMap,
    mut body: Body,
    limits: &BodyLimits,
) -> Result<Bytes, ApiError> {
    let limit = limits.max_bytes;
    let declared = declared_length(headers);
    if declared.is_some_and(|len| len > limit) {
        return Err(ApiError::BodyTooLarge { limit });
    }
    let deadline = limits.timeout.map(|t| Instant::now() + t);
    let mut buffer = BytesMut::with_capacity(declared.unwrap_or(0).min(INITIAL_CAPACITY));
    let mut reservation = Reservation {
        budget: Arc::clone(&limits.budget),
        held: 0,
    };
    loop {
        let next = match deadline {
            Some(at) => timeout_at(at, body.frame())
                .await
                .map_err(|_| ApiError::BodyTimeout {
                    timeout: limits.timeout.unwrap_or_default(),
                })?,
            None => body.frame().await,
        };
        let frame = match next {
            None => break,
            Some(Ok(frame)) => frame,
            Some(Err(error)) => {
                tracing::debug!(%error, "reading the request body failed");
                return Err(ApiError::BodyIncomplete);
            }
        };
        let Ok(data) = frame.into_data() else {
            // Trailers carry nothing the proxy forwards from a buffered body.
            continue;
        };
        if buffer.len() + data.len() > limit {
            return Err(ApiError::BodyTooLarge { limit });
        }
        if !reservation.grow(data.len()) {
            return Err(ApiError::BodiesOverCapacity {
                limit: limits.budget.limit(),
            });
        }
        // Copied, so the frame (and hyper's read buffer behind it) is freed now.
        buffer.extend_from_slice(&data);
    }
    Ok(buffer.freeze())
}

/// The declared `Content-Length`, if any.
pub(crate) fn declared_length(headers: &HeaderMap) -> Option<usize> {
    headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

/// A body streamed to an upstream as it arrives, cut with a
/// [`RequestBodyError`] past `max_bytes` or the deadline, or when the client
/// aborts it (so the proxy can tell the three apart).
pub(crate) struct GuardedBody {
    inner: Body,
    remaining: usize,
    limit: usize,
    timeout: Duration,
    deadline: Option<Pin<Box<Sleep>>>,
}

impl GuardedBody {
    pub(crate) fn new(inner: Body, limits: &BodyLimits) -> Self {
        Self {
            inner,
            remaining: limits.max_bytes,
            limit: limits.max_bytes,
            timeout: limits.timeout.unwrap_or_default(),
            deadline: limits
                .timeout
                .map(|t| Box::pin(sleep_until(Instant::now() + t))),
        }
    }
}

impl http_body::Body for GuardedBody {
    type Data = Bytes;
    type Error = RequestBodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, RequestBodyError>>> {
        let this = &mut *self;
        if let Some(deadline) = this.deadline.as_mut()
            && deadline.as_mut().poll(cx).is_ready()
        {
            return Poll::Ready(Some(Err(RequestBodyError::TimedOut {
                timeout: this.timeout,
            })));
        }
        let frame = ready!(Pin::new(&mut this.inner).poll_frame(cx));
        Poll::Ready(match frame {
            None => None,
            Some(Err(_)) => Some(Err(RequestBodyError::Aborted)),
            Some(Ok(frame)) => {
                let len = frame.data_ref().map_or(0, Bytes::len);
                if len > this.remaining {
                    Some(Err(RequestBodyError::TooLarge { limit: this.limit }))
                } else {
                    this.remaining -= len;
                    Some(Ok(frame))
                }
            }
        })
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::stream;

    fn limits(max: usize, timeout: Option<Duration>, budget: usize) -> BodyLimits {
        BodyLimits {
            max_bytes: max,
            timeout,
            budget: Arc::new(BodyBudget::new(budget)),
        }
    }

    /// A body fed frame by frame through a channel, like a client sending slowly.
    fn channel_body() -> (tokio::sync::mpsc::Sender<Bytes>, Body) {
        let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(16);
        let frames = stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|b| (Ok::<_, std::io::Error>(b), rx))
        });
        (tx, Body::from_stream(frames))
    }

    #[tokio::test]
    async fn frames_are_copied_so_the_buffers_behind_them_are_freed_while_reading() {
        let (tx, body) = channel_body();
        let limits = limits(1 << 20, None, 1 << 20);
        let read = tokio::spawn(async move { read_body(&HeaderMap::new(), body, &limits).await });
        // Each frame is one byte of an 8 KiB buffer, as hyper hands reads over.
        let mut buffers = Vec::new();
        for i in 0..50u8 {
            let buffer = Bytes::from(vec![i; 8192]);
            tx.send(buffer.slice(0..1)).await.unwrap();
            buffers.push(buffer);
        }
        // The reader has taken every frame once the channel has room again...
        let _ = tx.reserve_many(16).await.unwrap();
        // ...and kept none of the buffers alive (the test holds the only handle).
        tokio::task::yield_now().await;
        let held: Vec<bool> = buffers.iter_mut().map(|b| !b.is_unique()).collect();
        assert!(
            held.iter().all(|h| !h),
            "frames retained while the body is still being read: {held:?}"
        );
        drop(tx);
        let body = read.await.unwrap().unwrap();
        assert_eq!(body.len(), 50);
        assert_eq!(body[49], 49);
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_does_not_arrive_in_time_is_a_timeout() {
        let (tx, body) = channel_body();
        let limits = limits(1 << 20, Some(Duration::from_secs(30)), 1 << 20);
        let read = tokio::spawn(async move { read_body(&HeaderMap::new(), body, &limits).await });
        tx.send(Bytes::from_static(b"{\"model\":")).await.unwrap();
        tokio::time::advance(Duration::from_secs(29)).await;
        tx.send(Bytes::from_static(b" \"a\"")).await.unwrap();
        tokio::time::advance(Duration::from_secs(2)).await;
        let err = read.await.unwrap().unwrap_err();
        assert!(matches!(err, ApiError::BodyTimeout { .. }), "{err:?}");
        assert_eq!(err.status(), http::StatusCode::REQUEST_TIMEOUT);
        drop(tx);
    }

    #[tokio::test]
    async fn bodies_read_at_once_share_one_budget_and_give_it_back() {
        let budget = 1000;
        let limits = limits(1 << 20, None, budget);
        let (tx1, first) = channel_body();
        let l1 = limits.clone();
        let first = tokio::spawn(async move { read_body(&HeaderMap::new(), first, &l1).await });
        tx1.send(Bytes::from(vec![b'a'; 800])).await.unwrap();
        let _ = tx1.reserve_many(16).await.unwrap();
        while limits.budget.used() < 800 {
            tokio::task::yield_now().await;
        }
        // A second body that would pass the cap is refused.
        let second = Body::from(vec![b'b'; 300]);
        let err = read_body(&HeaderMap::new(), second, &limits)
            .await
            .unwrap_err();
        assert!(
            matches!(err, ApiError::BodiesOverCapacity { limit: 1000 }),
            "{err:?}"
        );
        assert_eq!(err.status(), http::StatusCode::SERVICE_UNAVAILABLE);
        drop(tx1);
        assert_eq!(first.await.unwrap().unwrap().len(), 800);
        // Once read, the first body's bytes are given back.
        assert_eq!(limits.budget.used(), 0);
        let third = Body::from(vec![b'c'; 300]);
        assert!(read_body(&HeaderMap::new(), third, &limits).await.is_ok());
    }

    #[tokio::test]
    async fn a_client_that_aborts_its_upload_is_an_incomplete_body() {
        let frames = stream::iter(vec![
            Ok(Bytes::from_static(b"{\"model\"")),
            Err(std::io::Error::from(std::io::ErrorKind::ConnectionReset)),
        ]);
        let err = read_body(
            &HeaderMap::new(),
            Body::from_stream(frames),
            &limits(1 << 20, None, 1 << 20),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, ApiError::BodyIncomplete), "{err:?}");
    }

    #[tokio::test]
    async fn a_declared_or_sent_body_over_the_limit_is_too_large() {
        let mut headers = HeaderMap::new();
        headers.insert(http::header::CONTENT_LENGTH, "2000".parse().unwrap());
        let l = limits(1000, None, 1 << 20);
        let err = read_body(&headers, Body::empty(), &l).await.unwrap_err();
        assert!(matches!(err, ApiError::BodyTooLarge { limit: 1000 }));
        let err = read_body(&HeaderMap::new(), Body::from(vec![0u8; 1001]), &l)
            .await
            .unwrap_err();
        assert!(matches!(err, ApiError::BodyTooLarge { limit: 1000 }));
    }
}
