//! The proxied response body, which owns the request's lease on its model.
//!
//! The lease is released when the body ends, fails, or is dropped because the
//! client went away — never when the handler returns, which happens as soon as
//! the response headers are ready.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use super::error::{BoxError, ProxyError, StreamErrorFrames};

pin_project_lite::pin_project! {
    /// A response body that holds `lease` until the upstream body ends.
    ///
    /// For a `text/event-stream` response, an upstream failure mid-stream becomes
    /// the final SSE frames of `sse` (the error envelope and `data: [DONE]`), so a
    /// client parsing events sees why the stream stopped; any other body fails,
    /// which aborts the response.
    pub struct LeasedBody<B, L> {
        #[pin]
        inner: B,
        lease: Option<L>,
        model: String,
        sse: Option<StreamErrorFrames>,
        done: bool,
    }
}

impl<B, L> LeasedBody<B, L> {
    /// Wraps `inner`, holding `lease` until it ends. `sse`, for an event
    /// stream, renders a failure as in-band frames; `model` names the model in
    /// that error.
    pub fn new(inner: B, lease: L, model: String, sse: Option<StreamErrorFrames>) -> Self {
        Self {
            inner,
            lease: Some(lease),
            model,
            sse,
            done: false,
        }
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
        match ready!(this.inner.poll_frame(cx)) {
            Some(Ok(frame)) => Poll::Ready(Some(Ok(frame))),
            Some(Err(error)) => {
                *this.done = true;
                this.lease.take();
                let error: BoxError = error.into();
                tracing::info!(model = %this.model, %error, "upstream response body failed mid-stream");
                if let Some(frames) = this.sse {
                    let failure = ProxyError::Unreachable {
                        model: this.model.clone(),
                    };
                    Poll::Ready(Some(Ok(Frame::data(frames(&failure)))))
                } else {
                    Poll::Ready(Some(Err(error)))
                }
            }
            None => {
                *this.done = true;
                this.lease.take();
                Poll::Ready(None)
            }
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
}
