//! What one request collects for its capture while it runs.

use bytes::Bytes;
use http::HeaderMap;

use super::{REDACTED, is_secret_header, put, redact};

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
#[derive(Debug)]
pub struct Recorder {
    parts: Parts,
    limit: usize,
    size: usize,
    overflowed: bool,
    path: String,
    /// NUL-separated names and values, secret headers already redacted.
    req_headers: Vec<u8>,
    req_body: Option<Bytes>,
    resp_headers: Vec<u8>,
    /// Copied, not shared: a chunk shares the upstream connection's read
    /// buffer, which hyper could not reuse while the capture waits for its
    /// batch to be compressed.
    resp_body: Vec<u8>,
}

impl Recorder {
    /// Starts the capture of a request to `path` (without its query) with
    /// `headers` and, when it was read whole, `body`; a capture that grows
    /// past `limit` bytes is given up.
    pub fn new(path: &str, headers: &HeaderMap, body: Option<&Bytes>, limit: usize) -> Self {
        let path = path.split('?').next().unwrap_or_default();
        let parts = Parts::for_path(path);
        let mut recorder = Self {
            parts,
            limit,
            size: path.len(),
            overflowed: false,
            path: path.to_owned(),
            req_headers: Vec::new(),
            req_body: None,
            resp_headers: Vec::new(),
            resp_body: Vec::new(),
        };
        if parts.req_headers {
            recorder.req_headers = encode_headers(headers);
            recorder.grow(recorder.req_headers.len());
        }
        if parts.req_body
            && let Some(body) = body
        {
            recorder.grow(body.len());
            recorder.req_body = Some(body.clone());
        }
        recorder
    }

    /// The response's headers; `decoded` when its body is kept decoded (the
    /// `Content-Encoding` then no longer applies and is left out).
    pub fn response_headers(&mut self, headers: &HeaderMap, decoded: bool) {
        if !self.parts.resp_headers {
            return;
        }
        let mut encoded = encode_headers(headers);
        if decoded {
            encoded = without(&encoded, "content-encoding");
        }
        self.grow(encoded.len());
        self.resp_headers = encoded;
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
        self.grow(chunk.len());
        if !self.overflowed {
            self.resp_body.extend_from_slice(chunk);
        }
    }

    /// The capture grew past its limit and will not be kept.
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    fn grow(&mut self, by: usize) {
        self.size = self.size.saturating_add(by);
        if self.size > self.limit {
            self.overflowed = true;
            // Nothing of it will be kept: let go of what it holds.
            self.resp_body = Vec::new();
            self.req_body = None;
        }
    }

    /// Serialises the capture with every secret redacted: the path, the
    /// request's headers and body, the response's headers and body, each
    /// length-prefixed.
    pub(super) fn encode(&self, out: &mut Vec<u8>, secrets: &[String]) {
        let mut scratch = Vec::new();
        let mut field = |out: &mut Vec<u8>, bytes: &[u8]| {
            if secrets.is_empty() {
                put(out, bytes);
            } else {
                scratch.clear();
                redact(bytes, secrets, &mut scratch);
                put(out, &scratch);
            }
        };
        field(out, self.path.as_bytes());
        field(out, &self.req_headers);
        field(out, self.req_body.as_deref().unwrap_or_default());
        field(out, &self.resp_headers);
        field(out, &self.resp_body);
    }
}

/// `name\0value\0` for every header, secret ones redacted.
fn encode_headers(headers: &HeaderMap) -> Vec<u8> {
    let mut out = Vec::with_capacity(headers.len() * 32);
    for (name, value) in headers {
        out.extend_from_slice(name.as_str().as_bytes());
        out.push(0);
        if is_secret_header(name.as_str()) {
            out.extend_from_slice(REDACTED.as_bytes());
        } else {
            out.extend_from_slice(value.as_bytes());
        }
        out.push(0);
    }
    out
}

/// Encoded headers without `name`.
fn without(encoded: &[u8], name: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(encoded.len());
    let mut parts = encoded.split(|b| *b == 0);
    while let (Some(n), Some(v)) = (parts.next(), parts.next()) {
        if n.is_empty() || n.eq_ignore_ascii_case(name.as_bytes()) {
            continue;
        }
        out.extend_from_slice(n);
        out.push(0);
        out.extend_from_slice(v);
        out.push(0);
    }
    out
}
