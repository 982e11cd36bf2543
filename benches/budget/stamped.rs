//! A paced SSE upstream that stamps every event with the wall-clock time it was handed
//! to the connection. Reading the stamp on arrival gives each event's delivery delay
//! directly, so the delay a proxy adds per chunk is measured without the cost of
//! forwarding the request (which a comparison of arrival times would include).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{Request, Response, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::Res;

/// Events per stream.
pub(crate) const EVENTS: usize = 40;
/// Gap between events.
pub(crate) const GAP: Duration = Duration::from_millis(5);

/// Nanoseconds since the epoch, the clock every process on the host shares.
pub(crate) fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// The running upstream; its tasks end when it is dropped.
pub(crate) struct Stamped {
    addr: SocketAddr,
    _tasks: JoinSet<()>,
}

impl Stamped {
    /// Binds `127.0.0.1:0` and serves: `GET /health` → 200, anything else → the stream.
    pub(crate) async fn start() -> Res<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let mut tasks = JoinSet::new();
        tasks.spawn(async move {
            let mut connections = JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                connections.spawn(async move {
                    let service = hyper::service::service_fn(respond);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
                // Reap finished connections so the set does not grow without bound.
                while connections.try_join_next().is_some() {}
            }
        });
        Ok(Self {
            addr,
            _tasks: tasks,
        })
    }

    /// Where it listens.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }
}

type Body = BoxBody<Bytes, Infallible>;

async fn respond(request: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    if request.uri().path() == "/health" {
        return Ok(Response::new(
            Full::new(Bytes::from_static(b"{\"status\":\"ok\"}")).boxed(),
        ));
    }
    // Read the request body fully first, like a model server would.
    let _ = request.into_body().collect().await;
    let start = tokio::time::Instant::now();
    // The stamp is taken when hyper polls for the next frame, right before writing it.
    let stream = futures::stream::unfold(0u32, move |i| async move {
        let events = u32::try_from(EVENTS).unwrap_or(u32::MAX);
        if i > events {
            return None;
        }
        if i == events {
            let done = Frame::data(Bytes::from_static(b"data: [DONE]\n\n"));
            return Some((Ok::<_, Infallible>(done), i + 1));
        }
        tokio::time::sleep_until(start + GAP * (i + 1)).await;
        let event = format!(
            "data: {{\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\" w\"}}}}],\"stamp_ns\":{}}}\n\n",
            now_ns()
        );
        Some((Ok(Frame::data(Bytes::from(event))), i + 1))
    });
    let mut response = Response::new(StreamBody::new(stream).boxed());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/event-stream"),
    );
    Ok(response)
}
