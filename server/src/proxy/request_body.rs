//! Wrappers around the body sent upstream that carry two timeouts:
//! `responseHeader` starts once the body has been handed over in full
//! ([`SentSignal`]), and `expectContinue` holds the body back until the
//! upstream's `100 Continue` or the timeout ([`ExpectGate`]).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use futures_util::task::AtomicWaker;
use http_body::{Body, Frame, SizeHint};
use tokio::sync::Notify;
use tokio::time::Sleep;

use super::BoxError;

/// When the connection took a request's whole body: set once, by [`SentSignal`].
#[derive(Debug, Default)]
pub(crate) struct Sent {
    at: std::sync::OnceLock<tokio::time::Instant>,
    notify: Notify,
}

impl Sent {
    fn fire(&self) {
        if self.at.set(tokio::time::Instant::now()).is_ok() {
            // A stored permit: a waiter may start waiting after this.
            self.notify.notify_one();
        }
    }

    /// Resolves once `after` has passed since the body was sent.
    ///
    /// The timer is armed at once and checked when it runs out, rather than
    /// armed when the body is sent: a buffered body is sent at once, and this
    /// way sending it wakes nobody (every proxied request passes here). When the
    /// timer runs out first with the body still going, it waits for the body,
    /// then for what is left of `after` past that moment.
    pub(crate) async fn elapsed(&self, after: Duration) {
        let mut deadline = later(tokio::time::Instant::now(), after);
        loop {
            tokio::time::sleep_until(deadline).await;
            match self.at.get() {
                Some(at) => {
                    let due = later(*at, after);
                    if due <= tokio::time::Instant::now() {
                        return;
                    }
                    deadline = due;
                }
                None => self.notify.notified().await,
            }
        }
    }
}

/// `from + after`, or about thirty years on when that does not fit (a
/// configured timeout may be huge), like tokio's own `sleep`.
fn later(from: tokio::time::Instant, after: Duration) -> tokio::time::Instant {
    from.checked_add(after)
        .unwrap_or_else(|| from + Duration::from_secs(86_400 * 365 * 30))
}

pin_project_lite::pin_project! {
    /// Records in [`Sent`] when the connection has taken the whole body.
    pub(crate) struct SentSignal<B> {
        #[pin]
        inner: B,
        sent: Arc<Sent>,
    }
}

impl<B: Body> SentSignal<B> {
    pub(crate) fn new(inner: B, sent: Arc<Sent>) -> Self {
        Self { inner, sent }
    }
}

impl<B> Body for SentSignal<B>
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
        let frame = ready!(this.inner.poll_frame(cx));
        if frame.is_none() {
            this.sent.fire();
        }
        Poll::Ready(frame.map(|f| f.map_err(Into::into)))
    }

    fn is_end_stream(&self) -> bool {
        // hyper asks this instead of polling again after the last frame, and
        // before polling at all for an empty body.
        let end = self.inner.is_end_stream();
        if end {
            self.sent.fire();
        }
        end
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Opened by the `100 Continue` callback.
#[derive(Debug, Default)]
pub(crate) struct ContinueLatch {
    open: AtomicBool,
    waker: AtomicWaker,
}

impl ContinueLatch {
    pub(crate) fn open(&self) {
        self.open.store(true, Ordering::Release);
        self.waker.wake();
    }

    fn is_open(&self) -> bool {
        self.open.load(Ordering::Acquire)
    }
}

pin_project_lite::pin_project! {
    /// Yields no frame until the latch opens or `wait` has passed since the
    /// connection first asked for the body (right after the headers went out).
    pub(crate) struct ExpectGate<B> {
        #[pin]
        inner: B,
        latch: Arc<ContinueLatch>,
        wait: Duration,
        timer: Option<Pin<Box<Sleep>>>,
        through: bool,
    }
}

impl<B> ExpectGate<B> {
    pub(crate) fn new(inner: B, latch: Arc<ContinueLatch>, wait: Duration) -> Self {
        Self {
            inner,
            latch,
            wait,
            timer: None,
            through: false,
        }
    }
}

impl<B> Body for ExpectGate<B>
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
        if !*this.through {
            this.latch.waker.register(cx.waker());
            let timer = this
                .timer
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(*this.wait)));
            if !this.latch.is_open() && timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            *this.through = true;
        }
        this.inner
            .poll_frame(cx)
            .map(|frame| frame.map(|f| f.map_err(Into::into)))
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
    use http_body_util::{BodyExt, Empty, Full};

    #[tokio::test]
    async fn sent_signal_fires_after_the_last_frame() {
        let sent = Arc::new(Sent::default());
        let mut body = SentSignal::new(Full::new(Bytes::from_static(b"abc")), sent.clone());
        let frame = body.frame().await.unwrap().unwrap();
        assert_eq!(frame.into_data().unwrap(), "abc");
        assert!(sent.at.get().is_none(), "fired before the body was taken");
        // Either the end poll or is_end_stream fires it; here the end poll.
        assert!(body.frame().await.is_none());
        assert!(
            sent.at.get().is_some(),
            "no signal after the whole body was taken"
        );
    }

    #[tokio::test]
    async fn sent_signal_fires_for_an_empty_body_without_a_poll() {
        let sent = Arc::new(Sent::default());
        let body = SentSignal::new(Empty::<Bytes>::new(), sent.clone());
        assert!(body.is_end_stream());
        assert!(sent.at.get().is_some(), "no signal for an empty body");
    }

    #[tokio::test(start_paused = true)]
    async fn the_time_runs_from_the_end_of_the_body_not_from_the_request() {
        let sent = Arc::new(Sent::default());
        let started = tokio::time::Instant::now();
        let after = Duration::from_secs(10);
        let timer = tokio::spawn({
            let sent = sent.clone();
            async move { sent.elapsed(after).await }
        });
        // The body takes 25 s to go out: longer than `after` itself.
        tokio::time::sleep(Duration::from_secs(25)).await;
        assert!(
            !timer.is_finished(),
            "ran out while the body was still going"
        );
        sent.fire();
        tokio::time::sleep(Duration::from_secs(9)).await;
        assert!(
            !timer.is_finished(),
            "ran out before `after` past the body's end"
        );
        timer.await.unwrap();
        assert_eq!(started.elapsed(), Duration::from_secs(35));
    }

    #[tokio::test(start_paused = true)]
    async fn a_timeout_too_large_for_the_clock_does_not_panic() {
        let sent = Arc::new(Sent::default());
        sent.fire();
        let waited =
            tokio::time::timeout(Duration::from_secs(3600), sent.elapsed(Duration::MAX)).await;
        assert!(waited.is_err(), "a Duration::MAX timeout ran out");
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_sent_at_once_runs_out_after_exactly_after() {
        let sent = Arc::new(Sent::default());
        let started = tokio::time::Instant::now();
        sent.fire();
        sent.elapsed(Duration::from_secs(3)).await;
        assert_eq!(started.elapsed(), Duration::from_secs(3));
    }

    #[tokio::test(start_paused = true)]
    async fn expect_gate_holds_the_body_until_continue() {
        let latch = Arc::new(ContinueLatch::default());
        let mut body = ExpectGate::new(
            Full::new(Bytes::from_static(b"x")),
            latch.clone(),
            Duration::from_secs(60),
        );
        let waiting = tokio::time::timeout(Duration::from_secs(1), body.frame()).await;
        assert!(waiting.is_err(), "the body went out before 100 Continue");
        latch.open();
        let frame = body.frame().await.unwrap().unwrap();
        assert_eq!(frame.into_data().unwrap(), "x");
    }

    #[tokio::test(start_paused = true)]
    async fn expect_gate_sends_the_body_when_the_wait_is_over() {
        let latch = Arc::new(ContinueLatch::default());
        let mut body = ExpectGate::new(
            Full::new(Bytes::from_static(b"x")),
            latch,
            Duration::from_secs(1),
        );
        let started = tokio::time::Instant::now();
        let frame = body.frame().await.unwrap().unwrap();
        assert_eq!(frame.into_data().unwrap(), "x");
        assert_eq!(started.elapsed(), Duration::from_secs(1));
    }
}
