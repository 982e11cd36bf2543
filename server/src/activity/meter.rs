//! The response body of a tracked request: passes every frame through
//! unchanged, scans it for usage, and ends the request's record with the body.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use axum::response::Response;
use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};

use super::decode::{Decoder, Encoding};
use super::{Tracked, UsageScanner};
use crate::capture::Recorder;

/// Bytes of a failed answer's body kept to find its error message in.
const ERROR_BODY: usize = 64 * 1024;

/// Longest `error_msg` kept (llama-swap's bound), in characters.
const ERROR_MSG: usize = 500;

pin_project_lite::pin_project! {
    /// A body that ends `tracked` when it ends (or is dropped).
    pub struct MeteredBody<B> {
        #[pin]
        inner: B,
        watch: Watch,
        tracked: Option<Tracked>,
    }

    impl<B> PinnedDrop for MeteredBody<B> {
        fn drop(this: Pin<&mut Self>) {
            // Dropped before its end (the client left): the record ends now,
            // with what the capture collected so far.
            let this = this.project();
            if let Some(tracked) = this.tracked.as_mut() {
                tracked.capture = this.watch.capture.take();
            }
        }
    }
}

/// What is read from the bytes as they pass.
#[derive(Debug, Default)]
struct Watch {
    scanner: Option<UsageScanner>,
    /// Set for an encoded body: the scanner (and the error body) see its
    /// decoded bytes.
    decoder: Option<Decoder>,
    /// The start of a failed answer's body (decoded), for its error message.
    error_body: Option<Vec<u8>>,
    /// The status, for an error message made of it.
    status: u16,
    /// The capture, collecting the body as sent (decoded when encoded).
    capture: Option<Recorder>,
}

impl Watch {
    fn feed(&mut self, data: &Bytes, last: bool) {
        let Self {
            scanner,
            decoder,
            error_body,
            capture,
            ..
        } = self;
        if let Some(decoder) = decoder {
            let mut sink = |plain: &[u8]| {
                see(scanner.as_mut(), error_body.as_mut(), plain, false);
                if let Some(capture) = capture.as_mut() {
                    capture.body_decoded(plain);
                }
            };
            decoder.feed(data, &mut sink);
            if last {
                decoder.finish(&mut sink);
            }
            return;
        }
        see(scanner.as_mut(), error_body.as_mut(), data, last);
        if let Some(capture) = capture.as_mut() {
            capture.body(data);
        }
    }
}

fn see(
    scanner: Option<&mut UsageScanner>,
    error_body: Option<&mut Vec<u8>>,
    plain: &[u8],
    last: bool,
) {
    if let Some(scanner) = scanner {
        if last {
            scanner.feed_last(plain);
        } else {
            scanner.feed(plain);
        }
    }
    if let Some(kept) = error_body {
        let room = ERROR_BODY.saturating_sub(kept.len());
        kept.extend_from_slice(&plain[..plain.len().min(room)]);
    }
}

impl<B: Body> MeteredBody<B> {
    /// Wraps the body of a response whose `headers` say what it carries: event
    /// streams and JSON are scanned for usage (decoded first when they come
    /// gzip-, deflate-, br- or zstd-encoded), anything else only timed; a
    /// failed answer's error message is read from its body.
    pub fn new(inner: B, headers: &HeaderMap, mut tracked: Tracked) -> Self {
        let scan = scanned_as(
            headers
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok()),
        );
        let status = tracked.status();
        let failed = status >= 400;
        let decoder = if scan.is_some() || failed {
            match Encoding::of(headers) {
                Ok(encoding) => encoding.map(Decoder::new),
                Err(why) => {
                    tracing::debug!(%why, "response body not scanned");
                    None
                }
            }
        } else {
            None
        };
        let undecodable = headers.contains_key(http::header::CONTENT_ENCODING) && decoder.is_none();
        let mut capture = tracked.capture.take();
        if let Some(capture) = capture.as_mut() {
            capture.response_headers(headers, decoder.is_some());
        }
        let decoder = match decoder {
            // The capture keeps the body readable even when it is not scanned.
            None if capture.as_ref().is_some_and(|c| c.wants_body()) => {
                Encoding::of(headers).ok().flatten().map(Decoder::new)
            }
            decoder => decoder,
        };
        let mut body = Self {
            watch: Watch {
                scanner: scan.filter(|_| !undecodable).map(|lines| {
                    if lines {
                        UsageScanner::new()
                    } else {
                        UsageScanner::whole_body()
                    }
                }),
                decoder,
                error_body: (failed && !undecodable).then(Vec::new),
                status,
                capture,
            },
            tracked: Some(tracked),
            inner,
        };
        // Nothing will be polled from an empty body: a server does not poll
        // one that says it holds no bytes (an upstream's `Content-Length: 0`).
        // A switch of protocols (a websocket) lasts as long as the connection
        // does, and so does its record.
        let empty = body.inner.is_end_stream() || body.inner.size_hint().exact() == Some(0);
        if empty && status != 101 {
            end(&mut body.tracked, &mut body.watch);
        }
        body
    }
}

impl Tracked {
    /// Moves the record into `response`'s body, where it ends when the body
    /// ends (with the usage the body reported) or is dropped.
    pub fn respond(mut self, response: Response) -> Response {
        let (parts, body) = response.into_parts();
        self.answered(parts.status, crate::proxy::is_event_stream(&parts.headers));
        self.response_headers(&parts.headers);
        if let Some(value) = parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
        {
            self.content_type(value);
        }
        let body = MeteredBody::new(body, &parts.headers, self);
        Response::from_parts(parts, axum::body::Body::new(body))
    }
}

/// Ends the record with what was read from the body.
fn end(tracked: &mut Option<Tracked>, watch: &mut Watch) {
    let Some(mut tracked) = tracked.take() else {
        return;
    };
    if let Some(decoder) = watch.decoder.as_mut() {
        // A body that ended without its last frame being marked so.
        let Watch {
            scanner,
            error_body,
            capture,
            ..
        } = watch;
        decoder.finish(&mut |plain: &[u8]| {
            see(scanner.as_mut(), error_body.as_mut(), plain, false);
            if let Some(capture) = capture.as_mut() {
                capture.body_decoded(plain);
            }
        });
    }
    tracked.capture = watch.capture.take();
    let (usage, error) = watch
        .scanner
        .as_mut()
        .map(|s| (s.finish(), s.saw_error()))
        .unwrap_or_default();
    if let Some(failure) = watch.decoder.as_ref().and_then(Decoder::failure) {
        // llama-swap's words, by where it fails: decompressing a 200's body
        // for its usage, or decoding a failed answer's for its message.
        let doing = if watch.status == 200 {
            "decompression"
        } else {
            "decode"
        };
        tracked.error_message(format!("response {doing} failed: {failure}").into());
    }
    if let Some(kept) = watch.error_body.take() {
        tracked.error_message(error_message(watch.status, &kept));
    }
    if error {
        tracked.broke();
    }
    tracked.completed(usage);
}

/// A failed answer's message, as llama-swap finds it: the first string of
/// `error.message`, `error`, `message` or `detail` in a JSON body, else the
/// status and its reason.
fn error_message(status: u16, body: &[u8]) -> Box<str> {
    let found = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|json| {
            [
                json.pointer("/error/message"),
                json.get("error"),
                json.get("message"),
                json.get("detail"),
            ]
            .into_iter()
            .flatten()
            .find_map(|v| {
                v.as_str()
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
            })
        });
    match found {
        Some(message) if message.chars().count() > ERROR_MSG => {
            let cut: String = message.chars().take(ERROR_MSG).collect();
            format!("{cut}...").into()
        }
        Some(message) => message.into(),
        None => match reason(status) {
            Some(reason) => format!("{status} {reason}").into(),
            None => format!("HTTP {status}").into(),
        },
    }
}

/// The reason phrase of `status` as llama-swap names it (Go's, where it
/// differs from the `http` crate's).
fn reason(status: u16) -> Option<&'static str> {
    match status {
        413 => Some("Request Entity Too Large"),
        414 => Some("Request URI Too Long"),
        416 => Some("Requested Range Not Satisfiable"),
        _ => http::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason()),
    }
}

/// How a body of `content_type` is scanned for usage: `Some(true)` line by
/// line (an event stream), `Some(false)` as one JSON document (JSON, and as
/// llama-swap also reads them, plain text and a body without a type), `None`
/// not at all (audio, images, other binary answers).
fn scanned_as(content_type: Option<&str>) -> Option<bool> {
    let Some(content_type) = content_type else {
        return Some(false);
    };
    let essence = content_type.split(';').next().unwrap_or_default().trim();
    let suffix = essence
        .len()
        .checked_sub(5)
        .and_then(|at| essence.get(at..));
    if essence.eq_ignore_ascii_case("text/event-stream") {
        Some(true)
    } else if essence.eq_ignore_ascii_case("application/json")
        || essence.eq_ignore_ascii_case("text/plain")
        || essence.is_empty()
        || suffix.is_some_and(|s| s.eq_ignore_ascii_case("+json"))
    {
        Some(false)
    } else {
        None
    }
}

impl<B> Body for MeteredBody<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let mut this = self.project();
        let polled = ready!(this.inner.as_mut().poll_frame(cx));
        let ended = match &polled {
            Some(Ok(frame)) => {
                // A server may stop polling once the body says it has ended.
                let last = this.inner.is_end_stream() || this.inner.size_hint().exact() == Some(0);
                if let Some(data) = frame.data_ref() {
                    this.watch.feed(data, last);
                }
                last
            }
            Some(Err(_)) => {
                if let Some(mut tracked) = this.tracked.take() {
                    tracked.capture = this.watch.capture.take();
                    tracked.broke();
                }
                false
            }
            None => true,
        };
        if ended {
            end(this.tracked, this.watch);
        }
        Poll::Ready(polled)
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
    use super::{error_message, scanned_as};

    #[test]
    fn error_messages_are_found_where_llama_swap_looks() {
        let cases: [(&[u8], &str); 6] = [
            (
                br#"{"error":{"message":"model exploded","type":"x"}}"#,
                "model exploded",
            ),
            (br#"{"error":"plain string"}"#, "plain string"),
            (br#"{"message":"top-level"}"#, "top-level"),
            (br#"{"detail":"fastapi style"}"#, "fastapi style"),
            (b"<html>bad gateway</html>", "502 Bad Gateway"),
            (br#"{"error":{"message":"   "}}"#, "502 Bad Gateway"),
        ];
        for (body, expected) in cases {
            assert_eq!(&*error_message(502, body), expected);
        }
        let long = format!(r#"{{"error":"{}"}}"#, "é".repeat(600));
        let message = error_message(500, long.as_bytes());
        assert_eq!(message.chars().count(), 503);
        assert!(message.ends_with("..."));
        assert_eq!(&*error_message(599, b""), "HTTP 599");
        // Go's reason phrases where the `http` crate's differ.
        for (status, said) in [
            (413, "413 Request Entity Too Large"),
            (414, "414 Request URI Too Long"),
            (416, "416 Requested Range Not Satisfiable"),
            (502, "502 Bad Gateway"),
        ] {
            assert_eq!(&*error_message(status, b"<html>"), said);
        }
    }

    #[test]
    fn event_streams_json_and_plain_text_are_scanned_whatever_their_case_and_parameters() {
        for lines in ["text/event-stream", "Text/Event-Stream; charset=utf-8"] {
            assert_eq!(scanned_as(Some(lines)), Some(true), "{lines}");
        }
        for whole in [
            "application/json",
            " APPLICATION/JSON ;charset=utf-8",
            "application/problem+json",
            "application/vnd.api+JSON",
            "text/plain; charset=utf-8",
            "",
        ] {
            assert_eq!(scanned_as(Some(whole)), Some(false), "{whole}");
        }
        assert_eq!(scanned_as(None), Some(false), "no content type");
        for skipped in [
            "application/octet-stream",
            "audio/mpeg",
            "image/png",
            "json",
            "+jso",
            "éjson",
        ] {
            assert_eq!(scanned_as(Some(skipped)), None, "{skipped}");
        }
    }
}
