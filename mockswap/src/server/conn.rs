//! The accept loop and one connection: hyper serving the router, with per-connection
//! control so a fault can reset the connection.

use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::handler;
use super::shared::{ConnControl, Shared};

/// A TCP stream that, when its connection was reset on purpose, closes with
/// `SO_LINGER` 0 so the peer gets an RST.
struct ResettableStream {
    inner: TcpStream,
    reset: CancellationToken,
}

impl Drop for ResettableStream {
    fn drop(&mut self) {
        if self.reset.is_cancelled() {
            // Best effort: if it fails the client sees a close instead of a reset.
            let _ = self.inner.set_zero_linger();
        }
    }
}

impl AsyncRead for ResettableStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for ResettableStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Runs the accept loop on `tracker` until the mock stops.
pub(crate) fn spawn_accept_loop(listener: TcpListener, shared: Arc<Shared>, tracker: &TaskTracker) {
    let conn_tracker = tracker.clone();
    tracker.spawn(async move {
        loop {
            let accepted = tokio::select! {
                () = shared.life.shutdown.cancelled() => break,
                accepted = listener.accept() => accepted,
            };
            match accepted {
                Ok((stream, _peer)) => {
                    conn_tracker.spawn(serve_connection(stream, Arc::clone(&shared)));
                }
                Err(err) => {
                    // Per-connection errors (the peer went away before accept) are
                    // harmless; running out of descriptors is retried after a pause so
                    // the loop does not spin.
                    tracing::warn!(error = %err, "accept failed");
                    tokio::select! {
                        () = shared.life.shutdown.cancelled() => break,
                        () = tokio::time::sleep(Duration::from_millis(10)) => {}
                    }
                }
            }
        }
    });
}

async fn serve_connection(stream: TcpStream, shared: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    let reset = CancellationToken::new();
    let control = ConnControl::new(reset.clone());
    let io = TokioIo::new(ResettableStream {
        inner: stream,
        reset: reset.clone(),
    });
    let handler_shared = Arc::clone(&shared);
    let service = service_fn(move |request| {
        let shared = Arc::clone(&handler_shared);
        let control = control.clone();
        async move { Ok::<_, Infallible>(handler::handle(shared, control, request).await) }
    });
    // No header-read timeout: under a paused tokio clock it would fire at once and
    // close idle keep-alive connections of downstream paused-clock tests.
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(None)
        .serve_connection(io, service)
        .with_upgrades();
    tokio::pin!(connection);
    let mut graceful = false;
    loop {
        tokio::select! {
            _ = connection.as_mut() => break,
            () = reset.cancelled() => break,
            () = shared.life.kill.cancelled() => break,
            () = shared.life.shutdown.cancelled(), if !graceful => {
                connection.as_mut().graceful_shutdown();
                graceful = true;
            }
        }
    }
}
