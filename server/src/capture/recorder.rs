//! What one request collects for its capture while it runs.

use bytes::Bytes;
use http::HeaderMap;

use super::{Fields, REDACTED, is_secret_header, put, redact};

/// A request body this large or larger is kept by reference, not copied:
/// copying it would cost the request path about a microsecond per 8 KiB and
/// hold it twice while it is forwarded. A smaller one is copied: it may share
/// the connection's read buffer, which holding it would keep the server from
/// reusing.
const SHARED_BODY: usize = 16 * 1024;

/// Which parts of a request and its response a capture keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Parts {
    /// The request's headers.
    pub req_headers: bool,
    /// The request's body.
    pub req_body: bool,
    /// The response's headers.
    pub resp_headers: bool,
    /// The response's body.
    pub resp_body: bool,
}

impl Parts {
    /// Everything.
    pub(crate) const ALL: Self = Self {
        req_headers: true,
        req_body: true,
        resp_headers: true,
        resp_body: true,
    };

    /// What llama-swap keeps for `path`: routes that carry audio or images
    /// leave out those bodies; every other route keeps everything.
    pub(crate) fn for_path(path: &str) -> Self {
        let (req_headers, req_body, resp_headers, resp_body) = match path {
            "/v1/audio/speech" | "/v1/images/generations" | "/sdapi/v1/txt2img" => {
                (true, true, true, false)
            }
            "/v1/audio/voices" => (true, false, true, true),
            "/v1/audio/transcriptions" => (true, false, true, true),
            "/v1/images/edits" | "/sdapi/v1/img2img" => (true, false, true, false),
            _ => return Self::ALL,
        };
        Self {
            req_headers,
            req_body,
            resp_headers,
            resp_body,
        }
    }
}

/// The capture of one request, filled in as it goes.
///
/// It is kept as it will be stored: one buffer of length-prefixed fields
/// (the path, the request's headers and body, the response's headers and
/// body), so that handing it over costs no copy per field and a recorder
/// can be used again, buffer and all ([`Recorder::restart`]): the capture
/// buffer keeps a few spare ones, and a busy server captures without
/// allocating.
#[derive(Debug)]
pub struct Recorder {
    parts: Parts,
    limit: usize,
    overflowed: bool,
    /// The fields written so far; the response body's length prefix is
    /// written when the body ends ([`Recorder::finish`]).
    buf: Vec<u8>,
    /// Where the response's body starts, once its headers are written.
    body_at: Option<usize>,
    /// A request body of [`SHARED_BODY`] bytes or more, kept by reference
    /// rather than copied into `buf` on the request path: the capture
    /// thread splices it in at `shared_at` ([`Recorder::encode`]).
    shared_body: Option<Bytes>,
    /// Where in `buf` the request body's field belongs.
    shared_at: usize,
}

impl Recorder {
    /// Starts the capture of a request to `path` (without its query) with
    /// `headers` and, when it was read whole, `body`; a capture that grows
    /// past `limit` bytes is given up.
    pub fn new(path: &str, headers: &HeaderMap, body: Option<&Bytes>, limit: usize) -> Self {
        let mut recorder = Self::empty();
        recorder.restart(path, headers, body, limit);
        recorder
    }

    /// A recorder with nothing in it, to be [`restart`](Self::restart)ed.
    pub(super) fn empty() -> Self {
        Self {
            parts: Parts::ALL,
            limit: 0,
            overflowed: false,
            buf: Vec::new(),
            body_at: None,
            shared_body: None,
            shared_at: 0,
        }
    }

    /// Starts over, as [`Recorder::new`] does, keeping the buffer's room.
    pub(super) fn restart(
        &mut self,
        path: &str,
        headers: &HeaderMap,
        body: Option<&Bytes>,
        limit: usize,
    ) {
        let path = path.split('?').next().unwrap_or_default();
        self.parts = Parts::for_path(path);
        self.limit = limit;
        self.overflowed = false;
        self.body_at = None;
        self.shared_body = None;
        self.buf.clear();
        let body = body.filter(|b| self.parts.req_body && !b.is_empty());
        let shared = body.is_some_and(|b| b.len() >= SHARED_BODY);
        // The path, the body when it is copied and three length prefixes;
        // the headers reserve their own room.
        let copied = body.filter(|_| !shared).map_or(0, Bytes::len);
        self.buf.reserve(12 + path.len() + copied.min(limit));
        put(&mut self.buf, path.as_bytes());
        let at = self.open_field();
        if self.parts.req_headers {
            encode_headers(headers, None, &mut self.buf);
        }
        self.close_field(at);
        let len = body.map_or(0, Bytes::len);
        if self.buf.len().saturating_add(4 + len) > limit {
            // Given up without copying a body that cannot fit.
            self.overflow();
            return;
        }
        match body {
            Some(body) if shared => {
                self.shared_at = self.buf.len();
                self.shared_body = Some(body.clone());
            }
            _ => put(&mut self.buf, body.map(Bytes::as_ref).unwrap_or_default()),
        }
    }

    /// The response's headers; `decoded` when its body is kept decoded (the
    /// `Content-Encoding` then no longer applies and is left out).
    pub fn response_headers(&mut self, headers: &HeaderMap, decoded: bool) {
        if self.overflowed || self.body_at.is_some() {
            return;
        }
        let at = self.open_field();
        if self.parts.resp_headers {
            let skip = decoded.then_some(http::header::CONTENT_ENCODING);
            encode_headers(headers, skip.as_ref(), &mut self.buf);
        }
        self.close_field(at);
        self.start_body();
        self.check();
    }

    /// Whether the response's body is kept.
    pub fn wants_body(&self) -> bool {
        self.parts.resp_body && !self.overflowed
    }

    /// A chunk of the response's body as sent (copied).
    pub fn body(&mut self, chunk: &Bytes) {
        self.body_decoded(chunk);
    }

    /// A chunk of the response's decoded body (copied).
    pub fn body_decoded(&mut self, chunk: &[u8]) {
        if !self.wants_body() || chunk.is_empty() {
            return;
        }
        if self.body_at.is_none() {
            // A body before any headers: they are empty.
            put(&mut self.buf, b"");
            self.start_body();
        }
        if self.len().saturating_add(chunk.len()) > self.limit {
            self.overflow();
            return;
        }
        self.buf.extend_from_slice(chunk);
    }

    /// The capture grew past its limit and will not be kept.
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// Completes the fields (the response's headers and body, empty when
    /// they never came). Called once, when the capture is handed over.
    pub(super) fn finish(&mut self) {
        if self.overflowed {
            return;
        }
        if self.body_at.is_none() {
            put(&mut self.buf, b"");
            self.start_body();
        }
        if let Some(at) = self.body_at {
            self.close_field(at - 4);
        }
    }

    /// Room its buffer holds.
    pub(super) fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// The capture's size so far: its buffer and the request body it holds
    /// by reference with that field's length prefix.
    fn len(&self) -> usize {
        self.buf.len() + self.shared_body.as_ref().map_or(0, |b| 4 + b.len())
    }

    /// Appends the finished capture to `out` with every occurrence of a
    /// secret in any field redacted; then lets go of a request body held by
    /// reference (the recorder may be kept for reuse).
    pub(super) fn encode(&mut self, out: &mut Vec<u8>, secrets: &[String]) {
        let shared = self.shared_body.take();
        let (before, after) = match &shared {
            Some(_) => self.buf.split_at(self.shared_at.min(self.buf.len())),
            None => (self.buf.as_slice(), &[][..]),
        };
        if secrets.is_empty() {
            out.extend_from_slice(before);
            if let Some(body) = &shared {
                put(out, body);
            }
            out.extend_from_slice(after);
            return;
        }
        let fields = Fields(before).chain(shared.as_deref()).chain(Fields(after));
        let mut scratch = Vec::new();
        for field in fields {
            scratch.clear();
            redact(field, secrets, &mut scratch);
            put(out, &scratch);
        }
    }

    /// Reserves a field's length prefix; returns where it is.
    fn open_field(&mut self) -> usize {
        let at = self.buf.len();
        self.buf.extend_from_slice(&[0; 4]);
        at
    }

    /// Writes the length of the field whose prefix is at `at`.
    fn close_field(&mut self, at: usize) {
        let len = self.buf.len() - at - 4;
        let len = u32::try_from(len).unwrap_or(u32::MAX).to_le_bytes();
        if let Some(prefix) = self.buf.get_mut(at..at + 4) {
            prefix.copy_from_slice(&len);
        }
    }

    fn start_body(&mut self) {
        self.open_field();
        self.body_at = Some(self.buf.len());
    }

    fn check(&mut self) {
        if self.len() > self.limit {
            self.overflow();
        }
    }

    fn overflow(&mut self) {
        self.overflowed = true;
        // Nothing of it will be kept: let go of what it holds.
        self.buf = Vec::new();
        self.body_at = None;
        self.shared_body = None;
    }
}

/// `name\0value\0` for every header but `skip`, secret ones redacted.
fn encode_headers(headers: &HeaderMap, skip: Option<&http::HeaderName>, out: &mut Vec<u8>) {
    // Room for all of them at once (a redacted value may need more: then
    // the buffer grows as usual), rather than growing as they come.
    let room: usize = headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 2)
        .sum();
    out.reserve(room);
    for (name, value) in headers {
        if skip == Some(name) {
            continue;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.push(0);
        if is_secret_header(name) {
            out.extend_from_slice(REDACTED.as_bytes());
        } else {
            out.extend_from_slice(value.as_bytes());
        }
        out.push(0);
    }
}
