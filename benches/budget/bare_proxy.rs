//! `bare-hyper-proxy`: the benchmark's floor for a hyper-based proxy.
//!
//! `bare-hyper-proxy --listen ADDR --upstream HOST:PORT` forwards every request
//! to one upstream with nothing of llama-swap-server's own work: no routing,
//! no scheduler, no JSON, no logs, no metrics. Each request's body is
//! collected (as the server collects it to read the model), then method,
//! path and query, headers and body go to the upstream through hyper-util's
//! pooled client, and the upstream's response streams back; 502 when the
//! upstream cannot be reached. Its hyper settings, allocator and release
//! profile are the server's, so what the benchmark measures between the two
//! is the server's per-request work, not the build or the HTTP stack.
//!
//! It prints `listening on http://ADDR` (the address bound, so `--listen
//! 127.0.0.1:0` works) as its first stdout line, like mockswap and the server,
//! and exits on SIGTERM or ctrl-c.

/// The server's allocator (see `server/src/main.rs`), so that allocation costs
/// the same on both sides of the comparison.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::convert::Infallible;
use std::io::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;

use bytes::Bytes;
use clap::Parser;
use http::header::{self, HeaderMap, HeaderName};
use http::uri::{Authority, Scheme};
use http::{Request, Response, StatusCode, Uri};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};
use tokio::task::JoinSet;

/// A bare hyper reverse proxy to one upstream (a benchmark reference).
#[derive(Parser)]
#[command(name = "bare-hyper-proxy")]
struct Cli {
    /// Address to listen on (port 0: any free port, printed on stdout).
    #[arg(long)]
    listen: SocketAddr,
    /// The upstream, as `host:port` (plain HTTP).
    #[arg(long)]
    upstream: Authority,
}

type Upstream = Client<HttpConnector, Full<Bytes>>;
type Body = BoxBody<Bytes, hyper::Error>;

/// Headers that describe one connection, not the message (RFC 9110 section
/// 7.6.1), plus `Host`, which the client sets from the upstream's address.
const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::HOST,
];

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The server's runtime: multi-threaded, one worker per core.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("bare-hyper-proxy: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("bare-hyper-proxy: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<(), String> {
    let listener = TcpListener::bind(cli.listen)
        .await
        .map_err(|err| format!("cannot listen on {}: {err}", cli.listen))?;
    let bound = listener
        .local_addr()
        .map_err(|err| format!("cannot read the bound address: {err}"))?;
    let mut terminate =
        signal(SignalKind::terminate()).map_err(|err| format!("cannot handle SIGTERM: {err}"))?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening on http://{bound}")
            .and_then(|()| out.flush())
            .map_err(|err| format!("cannot write to stdout: {err}"))?;
    }

    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    // The server's pool settings: hyper-util's defaults plus the timer its idle
    // timeout needs.
    let client: Upstream = Client::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .build(connector);

    // Owns every connection's task: they end with the process's shutdown below.
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    // Without TCP_NODELAY a response's last segment waits for the
                    // peer's delayed ACK: tens of milliseconds per request.
                    let _ = stream.set_nodelay(true);
                    connections.spawn(connection(stream, client.clone(), cli.upstream.clone()));
                }
                // Out of descriptors or a connection reset before accept: keep serving.
                Err(err) => eprintln!("bare-hyper-proxy: accept failed: {err}"),
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            _ = terminate.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    connections.shutdown().await;
    Ok(())
}

/// Serves one client connection with the server's hyper options.
async fn connection(stream: tokio::net::TcpStream, client: Upstream, upstream: Authority) {
    let service = service_fn(move |request: Request<Incoming>| {
        forward(request, client.clone(), upstream.clone())
    });
    // A client that goes away mid-request is not this tool's concern.
    let _ = http1::Builder::new()
        .timer(TokioTimer::new())
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

/// Forwards one request to `upstream` and streams its answer back.
async fn forward(
    request: Request<Incoming>,
    client: Upstream,
    upstream: Authority,
) -> Result<Response<Body>, Infallible> {
    let (mut parts, body) = request.into_parts();
    let body = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => return Ok(status(StatusCode::BAD_REQUEST)),
    };
    let mut uri = Uri::builder().scheme(Scheme::HTTP).authority(upstream);
    if let Some(path_and_query) = parts.uri.path_and_query() {
        uri = uri.path_and_query(path_and_query.clone());
    }
    parts.uri = match uri.build() {
        Ok(uri) => uri,
        Err(_) => return Ok(status(StatusCode::BAD_REQUEST)),
    };
    parts.version = http::Version::HTTP_11;
    strip_hop_by_hop(&mut parts.headers);
    match client
        .request(Request::from_parts(parts, Full::new(body)))
        .await
    {
        Ok(response) => {
            let (mut parts, body) = response.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            Ok(Response::from_parts(parts, body.boxed()))
        }
        Err(_) => Ok(status(StatusCode::BAD_GATEWAY)),
    }
}

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    for name in &HOP_BY_HOP {
        headers.remove(name);
    }
}

/// An empty response with `code`.
fn status(code: StatusCode) -> Response<Body> {
    let mut response = Response::new(
        Full::new(Bytes::new())
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = code;
    response
}
