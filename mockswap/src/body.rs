//! The response body type: a whole buffer (with a known length) or a paced stream of
//! chunks, plus guards that are dropped as soon as the body has ended.
//!
//! The guards carry what must happen "when the response has completed" (the gate
//! releases the next request, `--crash-after` counts), which is later than when the
//! handler returns.

use std::any::Any;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::Stream;
use http_body::{Body, Frame, SizeHint};

/// A boxed stream of body chunks; an `Err` aborts the connection mid-body.
pub(crate) type ChunkStream = Pin<Box<dyn Stream<Item = Result<Bytes, io::Error>> + Send>>;

enum Inner {
    Full(Option<Bytes>),
    Stream(ChunkStream),
}

/// The body of every mock response.
pub(crate) struct MockBody {
    inner: Inner,
    guards: Vec<Box<dyn Any + Send>>,
}

impl std::fmt::Debug for MockBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.inner {
            Inner::Full(_) => "full",
            Inner::Stream(_) => "stream",
        };
        f.debug_struct("MockBody").field("kind", &kind).finish()
    }
}

impl MockBody {
    /// A body sent at once, with `Content-Length`.
    pub(crate) fn full(data: impl Into<Bytes>) -> Self {
        Self {
            inner: Inner::Full(Some(data.into())),
            guards: Vec::new(),
        }
    }

    /// An empty body.
    pub(crate) fn empty() -> Self {
        Self::full(Bytes::new())
    }

    /// A chunked body produced by `stream`.
    pub(crate) fn stream(stream: ChunkStream) -> Self {
        Self {
            inner: Inner::Stream(stream),
            guards: Vec::new(),
        }
    }

    /// Keeps `guard` alive until the body has ended (or is dropped).
    pub(crate) fn with_guard(mut self, guard: impl Any + Send) -> Self {
        self.guards.push(Box::new(guard));
        self
    }

    fn finish(&mut self) {
        self.guards.clear();
    }
}

impl Body for MockBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = self.get_mut();
        let polled = match &mut this.inner {
            Inner::Full(data) => Poll::Ready(data.take().map(|d| Ok(Frame::data(d)))),
            Inner::Stream(stream) => match stream.as_mut().poll_next(cx) {
                Poll::Ready(item) => Poll::Ready(item.map(|r| r.map(Frame::data))),
                Poll::Pending => Poll::Pending,
            },
        };
        if let Poll::Ready(None) = polled {
            this.finish();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.inner, Inner::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Inner::Full(Some(data)) => SizeHint::with_exact(data.len() as u64),
            Inner::Full(None) => SizeHint::with_exact(0),
            Inner::Stream(_) => SizeHint::default(),
        }
    }
}
