//! The proxied response body, which owns the request's lease on its model.
//!
//! The lease is released when the body ends, fails, or is dropped because the
//! client went away — never when the handler returns, which happens as soon as
//! the response headers are ready.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

use super::error::{BoxError, ProxyError, StreamErrorFrames, TimeoutPhase};

pin_project_lite::pin_project! {
    /// A response body that holds `lease` until the upstream body ends.
    ///
    /// For a `text/event-stream` response, an upstream failure mid-stream becomes
    /// the final SSE frames of `sse` (the error envelope and `data: [DONE]`), so a
    /// client parsing events sees why the stream stopped; any other body fails,
    /// which aborts the response. An upstream silent for longer than the idle
    /// timeout fails the same way (`timeouts.bodyIdle`).
    pub struct LeasedBody<B, L> {
        #[pin]
        inner: B,
        lease: Option<L>,
        model: String,
        sse: Option<StreamErrorFrames>,
        done: bool,
        idle: Option<Duration>,
        // Armed the first time the upstream has nothing to give, so a body read
        // in one go never touches the timer wheel.
        timer: Option<Pin<Box<Sleep>>>,
        // A frame arrived since the timer was last set: push its deadline back
        // the next time the upstream has nothing (one clock read per wait, none
        // per frame).
        progressed: bool,
    }
}

impl<B, L> LeasedBody<B, L> {
    /// Wraps `inner`, holding `lease` until it ends. `sse`, for an event
    /// stream, renders a failure as in-band frames; `model` names the model in
    /// that error.
    pub(crate) fn new(inner: B, lease: L, model: String, sse: Option<StreamErrorFrames>) -> Self {
        Self {
            inner,
            lease: Some(lease),
            model,
            sse,
            done: false,
            idle: None,
            timer: None,
            progressed: false,
        }
    }

    /// Ends the body when the upstream sends nothing for `idle` (`None`: waits
    /// as long as the client does).
    #[must_use]
    pub(crate) fn idle_timeout(mut self, idle: Option<Duration>) -> Self {
        self.idle = idle;
        self
    }
}

impl<B, L> Body for LeasedBody<B, L>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.project();
        if *this.done {
            return Poll::Ready(None);
        }
        let polled = this.inner.poll_frame(cx);
        let (failure, error) = match polled {
            Poll::Ready(Some(Ok(frame))) => {
                *this.progressed = true;
                return Poll::Ready(Some(Ok(frame)));
            }
            Poll::Ready(Some(Err(error))) => {
                let error: BoxError = error.into();
                tracing::info!(model = %this.model, %error, "upstream response body failed mid-stream");
                (
                    ProxyError::Unreachable {
                        model: this.model.clone(),
                    },
                    error,
                )
            }
            Poll::Ready(None) => {
                *this.done = true;
                this.lease.take();
                return Poll::Ready(None);
            }
            Poll::Pending => {
                let Some(idle) = *this.idle else {
                    return Poll::Pending;
                };
                let timer = match this.timer {
                    Some(timer) => {
                        if std::mem::take(this.progressed) {
                            timer.as_mut().reset(Instant::now() + idle);
                        }
                        timer
                    }
                    None => {
                        *this.progressed = false;
                        this.timer.insert(Box::pin(tokio::time::sleep(idle)))
                    }
                };
                ready!(timer.as_mut().poll(cx));
                tracing::warn!(model = %this.model, ?idle, "upstream sent nothing more of its response within timeouts.bodyIdle; ending it");
                let failure = ProxyError::Timeout {
                    model: this.model.clone(),
                    phase: TimeoutPhase::BodyIdle,
                    after: idle,
                };
                let error = BoxError::from(failure.clone());
                (failure, error)
            }
        };
        *this.done = true;
        this.lease.take();
        this.timer.take();
        match this.sse {
            Some(frames) => Poll::Ready(Some(Ok(Frame::data(frames(&failure))))),
            None => Poll::Ready(Some(Err(error))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }

    fn size_hint(&self) -> SizeHint {
        if self.sse.is_some() {
            // An error frame may be appended.
            SizeHint::default()
        } else {
            self.inner.size_hint()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;
    use futures_util::stream;
    use http_body_util::{BodyExt, StreamBody};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    struct Flag(Arc<AtomicBool>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    fn chunks(
        items: Vec<Result<&'static str, &'static str>>,
    ) -> StreamBody<impl futures_util::Stream<Item = Result<Frame<Bytes>, BoxError>>> {
        StreamBody::new(stream::iter(items.into_iter().map(|item| {
            item.map(|s| Frame::data(Bytes::from_static(s.as_bytes())))
                .map_err(BoxError::from)
        })))
    }

    #[tokio::test]
    async fn lease_is_held_until_the_last_frame_then_released() {
        let released = Arc::new(AtomicBool::new(false));
        let mut body = LeasedBody::new(
            chunks(vec![Ok("a"), Ok("b")]),
            Flag(released.clone()),
            "m".into(),
            None,
        );
        body.frame().await.unwrap().unwrap();
        body.frame().await.unwrap().unwrap();
        assert!(!released.load(Ordering::SeqCst));
        assert!(body.frame().await.is_none());
        assert!(
            released.load(Ordering::SeqCst),
            "lease kept after end of body"
        );
        drop(body);
    }

    #[tokio::test]
    async fn dropping_the_body_mid_stream_releases_the_lease() {
        let released = Arc::new(AtomicBool::new(false));
        let mut body = LeasedBody::new(
            chunks(vec![Ok("a"), Ok("b")]),
            Flag(released.clone()),
            "m".into(),
            Some(crate::api::stream_error_frames),
        );
        body.frame().await.unwrap().unwrap();
        assert!(!released.load(Ordering::SeqCst));
        drop(body);
        assert!(released.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn sse_failure_ends_with_an_error_frame_and_done() {
        let released = Arc::new(AtomicBool::new(false));
        let body = LeasedBody::new(
            chunks(vec![Ok("data: {}\n\n"), Err("reset")]),
            Flag(released.clone()),
            "m".into(),
            Some(crate::api::stream_error_frames),
        );
        let text = body.collect().await.unwrap().to_bytes();
        let text = std::str::from_utf8(&text).unwrap();
        assert!(text.starts_with("data: {}\n\ndata: {\"error\""), "{text}");
        assert!(text.contains("upstream_unreachable"), "{text}");
        assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
        assert!(released.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn non_sse_failure_fails_the_body() {
        let released = Arc::new(AtomicBool::new(false));
        let body = LeasedBody::new(
            chunks(vec![Ok("{"), Err("reset")]),
            Flag(released.clone()),
            "m".into(),
            None,
        );
        assert!(body.collect().await.is_err());
        assert!(released.load(Ordering::SeqCst));
    }

    /// A body that sends `first`, then each of `later` after its delay, then
    /// never ends.
    fn paced(
        first: &'static str,
        later: Vec<(Duration, &'static str)>,
    ) -> StreamBody<impl futures_util::Stream<Item = Result<Frame<Bytes>, BoxError>>> {
        let head = stream::iter([Ok(Frame::data(Bytes::from_static(first.as_bytes())))]);
        let tail = stream::iter(later).then(|(delay, text)| async move {
            tokio::time::sleep(delay).await;
            Ok(Frame::data(Bytes::from_static(text.as_bytes())))
        });
        StreamBody::new(head.chain(tail).chain(stream::pending()).boxed())
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_silent_past_body_idle_ends_with_a_timeout_frame_and_releases_the_lease() {
        let released = Arc::new(AtomicBool::new(false));
        let body = LeasedBody::new(
            paced("data: {}\n\n", Vec::new()),
            Flag(released.clone()),
            "m".into(),
            Some(crate::api::stream_error_frames),
        )
        .idle_timeout(Some(Duration::from_secs(60)));
        let started = tokio::time::Instant::now();
        let text = body.collect().await.unwrap().to_bytes();
        let text = std::str::from_utf8(&text).unwrap();
        assert_eq!(started.elapsed(), Duration::from_secs(60));
        assert!(text.starts_with("data: {}\n\ndata: {\"error\""), "{text}");
        assert!(text.contains("upstream_timeout"), "{text}");
        assert!(text.contains("timeouts.bodyIdle"), "{text}");
        assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
        assert!(released.load(Ordering::SeqCst));
    }

    #[tokio::test(start_paused = true)]
    async fn body_idle_counts_silence_from_the_last_frame_not_from_the_start() {
        let released = Arc::new(AtomicBool::new(false));
        let mut body = LeasedBody::new(
            paced(
                "a",
                vec![
                    (Duration::from_secs(40), "b"),
                    (Duration::from_secs(40), "c"),
                ],
            ),
            Flag(released.clone()),
            "m".into(),
            None,
        )
        .idle_timeout(Some(Duration::from_secs(60)));
        let started = tokio::time::Instant::now();
        for want in ["a", "b", "c"] {
            let frame = body.frame().await.unwrap().unwrap();
            assert_eq!(frame.into_data().unwrap(), want);
        }
        assert!(!released.load(Ordering::SeqCst));
        assert!(body.frame().await.unwrap().is_err(), "silence after c");
        assert_eq!(started.elapsed(), Duration::from_secs(140));
        assert!(released.load(Ordering::SeqCst));
    }

    #[tokio::test(start_paused = true)]
    async fn without_body_idle_a_silent_stream_keeps_its_lease() {
        let released = Arc::new(AtomicBool::new(false));
        let mut body = LeasedBody::new(
            paced("a", Vec::new()),
            Flag(released.clone()),
            "m".into(),
            None,
        );
        body.frame().await.unwrap().unwrap();
        let waited = tokio::time::timeout(Duration::from_secs(3600), body.frame()).await;
        assert!(waited.is_err(), "the body ended: {waited:?}");
        assert!(!released.load(Ordering::SeqCst));
    }
}
