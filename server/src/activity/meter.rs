//! The response body of a tracked request: passes every frame through
//! unchanged, scans it for usage, and ends the request's record with the body.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use axum::response::Response;
use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};

use super::{Tracked, UsageScanner};

pin_project_lite::pin_project! {
    /// A body that ends `tracked` when it ends (or is dropped).
    pub struct MeteredBody<B> {
        #[pin]
        inner: B,
        scanner: Option<UsageScanner>,
        tracked: Option<Tracked>,
    }
}

impl<B: Body> MeteredBody<B> {
    /// Wraps the body of a response whose `headers` say what it carries: event
    /// streams and JSON are scanned for usage, anything else only timed.
    pub fn new(inner: B, headers: &HeaderMap, tracked: Tracked) -> Self {
        let scan = headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(is_scanned);
        let mut body = Self {
            scanner: scan.then(UsageScanner::new),
            tracked: Some(tracked),
            inner,
        };
        // Nothing will be polled from an empty body.
        if body.inner.is_end_stream() {
            end(&mut body.tracked, body.scanner.as_mut());
        }
        body
    }
}

/// Ends the record with what the scanner found.
impl Tracked {
    /// Moves the record into `response`'s body, where it ends when the body
    /// ends (with the usage the body reported) or is dropped.
    pub fn respond(mut self, response: Response) -> Response {
        let (parts, body) = response.into_parts();
        self.answered(parts.status, crate::proxy::is_event_stream(&parts.headers));
        let body = MeteredBody::new(body, &parts.headers, self);
        Response::from_parts(parts, axum::body::Body::new(body))
    }
}

fn end(tracked: &mut Option<Tracked>, scanner: Option<&mut UsageScanner>) {
    let Some(mut tracked) = tracked.take() else {
        return;
    };
    let (usage, error) = scanner
        .map(|s| (s.finish(), s.saw_error()))
        .unwrap_or_default();
    if error {
        tracked.broke();
    }
    tracked.completed(usage);
}

fn is_scanned(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or_default().trim();
    let suffix = essence
        .len()
        .checked_sub(5)
        .and_then(|at| essence.get(at..));
    essence.eq_ignore_ascii_case("text/event-stream")
        || essence.eq_ignore_ascii_case("application/json")
        || suffix.is_some_and(|s| s.eq_ignore_ascii_case("+json"))
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
                if let (Some(scanner), Some(data)) = (this.scanner.as_mut(), frame.data_ref()) {
                    if last {
                        scanner.feed_last(data);
                    } else {
                        scanner.feed(data);
                    }
                }
                last
            }
            Some(Err(_)) => {
                if let Some(mut tracked) = this.tracked.take() {
                    tracked.broke();
                }
                false
            }
            None => true,
        };
        if ended {
            end(this.tracked, this.scanner.as_mut());
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
    use super::is_scanned;

    #[test]
    fn json_and_event_streams_are_scanned_whatever_their_case_and_parameters() {
        for scanned in [
            "text/event-stream",
            "Text/Event-Stream; charset=utf-8",
            "application/json",
            " APPLICATION/JSON ;charset=utf-8",
            "application/problem+json",
            "application/vnd.api+JSON",
        ] {
            assert!(is_scanned(scanned), "{scanned}");
        }
        for skipped in [
            "text/plain",
            "application/octet-stream",
            "json",
            "+jso",
            "",
            "éjson",
        ] {
            assert!(!is_scanned(skipped), "{skipped}");
        }
    }
}
