//! A connection's socket that notes since when its writes have been blocked,
//! so that a shutdown does not wait the whole drain deadline for a peer that
//! stopped reading: a UI tab on a laptop that went to sleep keeps its event
//! stream's socket full, and an ended stream cannot close until its last
//! bytes are written.
//!
//! Only a write that finds the socket full takes the time; one that gets
//! through clears it with a relaxed load and, after a blocked one, a store.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// How long the writes of a draining connection may stay blocked before it is
/// closed.
pub(super) const STALLED_AFTER: Duration = Duration::from_secs(5);

/// Since when a connection's writes have been blocked.
#[derive(Debug)]
pub(super) struct Blocked {
    origin: Instant,
    /// Milliseconds from `origin` to the first write that found the socket
    /// full since the last one that got through, plus 1; 0 when none.
    since: AtomicU64,
}

impl Blocked {
    pub(super) fn new() -> Arc<Self> {
        Arc::new(Self {
            origin: Instant::now(),
            since: AtomicU64::new(0),
        })
    }

    fn note<T>(&self, poll: &Poll<T>) {
        if poll.is_pending() {
            if self.since.load(Ordering::Relaxed) == 0 {
                let at = millis(self.origin.elapsed()).saturating_add(1);
                self.since.store(at, Ordering::Relaxed);
            }
        } else if self.since.load(Ordering::Relaxed) != 0 {
            self.since.store(0, Ordering::Relaxed);
        }
    }

    /// How long writes have been blocked; `None` while they get through.
    fn blocked_for(&self) -> Option<Duration> {
        let since = self.since.load(Ordering::Relaxed);
        let since = Duration::from_millis(since.checked_sub(1)?);
        Some(self.origin.elapsed().saturating_sub(since))
    }

    /// Resolves once no write has got through for `limit` (looked at again
    /// at most a second after it could be).
    pub(super) async fn stalled(&self, limit: Duration) {
        loop {
            let wait = match self.blocked_for() {
                Some(blocked) if blocked >= limit => return,
                Some(blocked) => limit - blocked,
                None => limit.min(Duration::from_secs(1)),
            };
            tokio::time::sleep(wait).await;
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// `io`, noting in `blocked` when its writes are held back.
pub(super) struct Watched<I> {
    io: I,
    blocked: Arc<Blocked>,
}

impl<I> Watched<I> {
    pub(super) fn new(io: I, blocked: Arc<Blocked>) -> Self {
        Self { io, blocked }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Watched<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Watched<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.io).poll_write(cx, buf);
        self.blocked.note(&poll);
        poll
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.blocked.note(&poll);
        poll
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.io).poll_flush(cx);
        self.blocked.note(&poll);
        poll
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.io).poll_shutdown(cx);
        self.blocked.note(&poll);
        poll
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test(start_paused = true)]
    async fn a_write_that_gets_through_clears_the_block_and_stalled_waits_for_the_limit() {
        // A pipe with a 16-byte buffer that nobody reads: the second write blocks.
        let (writer, mut reader) = tokio::io::duplex(16);
        let blocked = Blocked::new();
        let mut io = Watched::new(writer, Arc::clone(&blocked));
        io.write_all(&[0; 16]).await.unwrap();
        assert_eq!(blocked.blocked_for(), None);
        let mut write = Box::pin(io.write_all(&[1; 8]));
        assert!(futures_util::poll!(write.as_mut()).is_pending());
        assert_eq!(blocked.blocked_for(), Some(Duration::ZERO));
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(blocked.blocked_for(), Some(Duration::from_secs(2)));
        // Not yet stalled for 5 s: `stalled` resolves 3 s later, not before.
        let stalled = blocked.stalled(Duration::from_secs(5));
        tokio::pin!(stalled);
        assert!(futures_util::poll!(stalled.as_mut()).is_pending());
        tokio::time::advance(Duration::from_millis(2_990)).await;
        assert!(futures_util::poll!(stalled.as_mut()).is_pending());
        tokio::time::advance(Duration::from_millis(10)).await;
        assert!(futures_util::poll!(stalled.as_mut()).is_ready());
        // The reader takes some: the write gets through and the block is gone.
        let mut taken = [0; 16];
        tokio::io::AsyncReadExt::read_exact(&mut reader, &mut taken)
            .await
            .unwrap();
        write.await.unwrap();
        assert_eq!(blocked.blocked_for(), None);
    }
}
