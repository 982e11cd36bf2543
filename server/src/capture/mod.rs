//! Captures: the request and response of each finished model request
//! (headers and bodies), kept zstd-compressed in a buffer of `captureBuffer`
//! megabytes that drops the oldest, and served by `GET /api/captures/{id}`.
//!
//! | file | concern |
//! |---|---|
//! | `mod` | [`Captures`]: the buffer, its compressing thread, the JSON answer |
//! | `recorder` | [`Recorder`]: what one request collects while it runs |
//!
//! On the request path a capture costs a copy of the request's headers (its
//! body is a shared `Bytes`) and, for each response chunk, a reference to it
//! (or a copy of its decoded bytes when the upstream encoded it). Everything
//! else happens on one thread the buffer owns: secrets are redacted
//! (`Authorization`, `Proxy-Authorization`, `Cookie`, `Set-Cookie`,
//! `X-Api-Key`, and any value of `apiKeys` wherever it appears), the capture
//! is serialised and compressed, and the oldest captures are dropped until
//! the buffer fits its budget. A capture larger than the whole budget
//! (uncompressed while it is collected, compressed when it is stored) is not
//! kept. As in llama-swap, routes that carry audio or images keep only some
//! parts (see [`Parts::for_path`]).

mod recorder;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use base64::Engine as _;
use memchr::memmem;
use serde::Serialize;
use tokio::sync::watch;

#[cfg(test)]
use recorder::Parts;
pub(crate) use recorder::Recorder;

/// llama-swap's default `captureBuffer`: 5 MB.
pub(crate) const DEFAULT_BUFFER_BYTES: usize = 5 * 1024 * 1024;

/// Captures waiting to be compressed at most; more are dropped.
const QUEUE: usize = 4096;
/// How long `GET /api/captures/{id}` waits for captures handed over before it.
const CATCH_UP: Duration = Duration::from_secs(2);
/// zstd's level: llama-swap uses a better-than-default level; 3 is zstd's
/// default, a fair trade on the shared CPU.
const LEVEL: i32 = 3;
/// What a redacted value reads.
const REDACTED: &str = "[REDACTED]";

/// Headers whose values are never kept.
const SECRET_HEADERS: [&str; 5] = [
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "x-api-key",
];

/// The capture buffer of a server (kept across reloads).
#[derive(Debug)]
pub struct Captures {
    budget: usize,
    kept: Arc<Mutex<Kept>>,
    jobs: SyncSender<Job>,
    worker: Mutex<Option<JoinHandle<()>>>,
    /// `apiKeys` values, redacted wherever they appear (replaced on reload).
    secrets: Arc<RwLock<Arc<Vec<String>>>>,
    sent: AtomicU64,
    dropped: Arc<AtomicU64>,
    done: watch::Receiver<u64>,
}

#[derive(Debug, Default)]
struct Kept {
    by_id: BTreeMap<u64, Box<[u8]>>,
    bytes: usize,
}

enum Job {
    Capture(u64, Box<Recorder>),
    Close,
}

impl Captures {
    /// A buffer of `budget` bytes of compressed captures; `None` for 0 (off).
    pub fn new(budget: usize) -> Option<Arc<Self>> {
        if budget == 0 {
            return None;
        }
        let (jobs, inbox) = std::sync::mpsc::sync_channel(QUEUE);
        let kept = Arc::new(Mutex::new(Kept::default()));
        let secrets = Arc::new(RwLock::new(Arc::new(Vec::new())));
        let dropped = Arc::new(AtomicU64::new(0));
        let (done_tx, done) = watch::channel(0);
        let worker = Worker {
            budget,
            kept: Arc::clone(&kept),
            secrets: Arc::clone(&secrets),
            dropped: Arc::clone(&dropped),
            done: done_tx,
        };
        let worker = match std::thread::Builder::new()
            .name("captures".into())
            .spawn(move || worker.run(&inbox))
        {
            Ok(handle) => handle,
            Err(error) => {
                tracing::error!(%error, "captures are off: their thread could not start");
                return None;
            }
        };
        Some(Arc::new(Self {
            budget,
            kept,
            jobs,
            worker: Mutex::new(Some(worker)),
            secrets,
            sent: AtomicU64::new(0),
            dropped,
            done,
        }))
    }

    /// The buffer's size in bytes.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// The most a request collects before its capture is given up.
    pub fn collect_limit(&self) -> usize {
        self.budget
    }

    /// Redacts `keys` (the `apiKeys` values) from captures made from now on.
    pub fn set_secrets(&self, keys: Vec<String>) {
        let keys: Vec<String> = keys.into_iter().filter(|k| !k.is_empty()).collect();
        *self.secrets.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(keys);
    }

    /// Hands the capture of finished request `id` over; false when it is not
    /// kept (too large, or the compressing thread is far behind).
    pub fn submit(&self, id: u64, recorder: Box<Recorder>) -> bool {
        if recorder.overflowed() {
            tracing::debug!(
                id,
                limit = self.budget,
                "capture larger than the buffer: not kept"
            );
            return false;
        }
        self.sent.fetch_add(1, Ordering::Relaxed);
        match self.jobs.try_send(Job::Capture(id, recorder)) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                if dropped % 1000 == 1 {
                    tracing::warn!(
                        dropped,
                        "captures dropped: the compressing thread is behind"
                    );
                }
                false
            }
        }
    }

    /// Whether capture `id` is kept.
    pub fn contains(&self, id: u64) -> bool {
        self.lock().by_id.contains_key(&id)
    }

    /// Compressed bytes held now.
    pub fn held_bytes(&self) -> usize {
        self.lock().bytes
    }

    /// Captures held now.
    pub fn len(&self) -> usize {
        self.lock().by_id.len()
    }

    /// Whether no capture is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits (a bounded time) until the captures handed over before this
    /// call are stored.
    pub async fn caught_up(&self) {
        let target = self.sent.load(Ordering::Relaxed);
        let mut done = self.done.clone();
        let dropped = || self.dropped.load(Ordering::Relaxed);
        let wait = done.wait_for(|handled| handled + dropped() >= target);
        let _ = tokio::time::timeout(CATCH_UP, wait).await;
    }

    /// Capture `id`, decompressed, as `GET /api/captures/{id}` answers it.
    pub fn get(&self, id: u64) -> Option<Capture> {
        let compressed = self.lock().by_id.get(&id)?.clone();
        let raw = match zstd::bulk::decompress(&compressed, 1 << 30) {
            Ok(raw) => raw,
            Err(error) => {
                tracing::warn!(id, %error, "a capture could not be decompressed");
                return None;
            }
        };
        Capture::decode(id, &raw)
    }

    /// Stores what is waiting and stops the compressing thread.
    pub fn close(&self) {
        let handle = self
            .worker
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(handle) = handle {
            let _ = self.jobs.send(Job::Close);
            if handle.join().is_err() {
                tracing::error!("the capture thread panicked");
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        // Every critical section is an insert, a removal or a copy.
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Captures {
    fn drop(&mut self) {
        self.close();
    }
}

/// The thread that redacts, compresses and stores captures.
struct Worker {
    budget: usize,
    kept: Arc<Mutex<Kept>>,
    secrets: Arc<RwLock<Arc<Vec<String>>>>,
    dropped: Arc<AtomicU64>,
    done: watch::Sender<u64>,
}

impl Worker {
    fn run(self, inbox: &Receiver<Job>) {
        let mut compressor = zstd::bulk::Compressor::new(LEVEL).ok();
        let mut handled = 0u64;
        let mut raw = Vec::new();
        while let Ok(Job::Capture(id, recorder)) = inbox.recv() {
            let secrets = Arc::clone(&self.secrets.read().unwrap_or_else(PoisonError::into_inner));
            raw.clear();
            recorder.encode(&mut raw, &secrets);
            drop(recorder);
            let compressed = compressor
                .as_mut()
                .and_then(|c| c.compress(&raw).ok())
                .map(Vec::into_boxed_slice);
            match compressed {
                Some(bytes) if bytes.len() <= self.budget => {
                    self.store(id, bytes);
                    handled += 1;
                    self.done.send_replace(handled);
                }
                Some(bytes) => {
                    tracing::debug!(
                        id,
                        size = bytes.len(),
                        "capture larger than the buffer: not kept"
                    );
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                    self.done.send_modify(|_| {});
                }
                None => {
                    tracing::warn!(id, "a capture could not be compressed");
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                    self.done.send_modify(|_| {});
                }
            }
        }
    }

    fn store(&self, id: u64, bytes: Box<[u8]>) {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        kept.bytes += bytes.len();
        if let Some(old) = kept.by_id.insert(id, bytes) {
            kept.bytes -= old.len();
        }
        while kept.bytes > self.budget {
            let Some((_, oldest)) = kept.by_id.pop_first() else {
                break;
            };
            kept.bytes -= oldest.len();
        }
    }
}

/// A capture as `GET /api/captures/{id}` answers it: llama-swap's
/// `ReqRespCapture` (header names in canonical form, each with its first
/// value; bodies base64-encoded).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Capture {
    /// The activity row's id.
    pub id: u64,
    /// The path forwarded upstream.
    pub req_path: String,
    /// The request's headers, secrets redacted.
    pub req_headers: BTreeMap<String, String>,
    /// The request's body.
    #[serde(serialize_with = "base64")]
    pub req_body: Vec<u8>,
    /// The response's headers, secrets redacted.
    pub resp_headers: BTreeMap<String, String>,
    /// The response's body as sent (decoded when the upstream encoded it).
    #[serde(serialize_with = "base64")]
    pub resp_body: Vec<u8>,
}

fn base64<S: serde::Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
}

impl Capture {
    fn decode(id: u64, raw: &[u8]) -> Option<Self> {
        let mut fields = Fields(raw);
        let req_path = String::from_utf8_lossy(fields.next()?).into_owned();
        let req_headers = headers(fields.next()?);
        let req_body = fields.next()?.to_vec();
        let resp_headers = headers(fields.next()?);
        let resp_body = fields.next()?.to_vec();
        Some(Self {
            id,
            req_path,
            req_headers,
            req_body,
            resp_headers,
            resp_body,
        })
    }
}

/// Length-prefixed fields of an encoded capture.
struct Fields<'a>(&'a [u8]);

impl<'a> Iterator for Fields<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let (len, rest) = self.0.split_first_chunk::<4>()?;
        let len = usize::try_from(u32::from_le_bytes(*len)).ok()?;
        let field = rest.get(..len)?;
        self.0 = &rest[len..];
        Some(field)
    }
}

/// Appends a length-prefixed field.
fn put(out: &mut Vec<u8>, field: &[u8]) {
    let len = u32::try_from(field.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&field[..usize::try_from(len).unwrap_or(0).min(field.len())]);
}

/// NUL-separated `name, value` pairs into a map of canonical names to their
/// first value.
fn headers(encoded: &[u8]) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    let mut parts = encoded.split(|b| *b == 0);
    while let (Some(name), Some(value)) = (parts.next(), parts.next()) {
        if name.is_empty() {
            continue;
        }
        map.entry(canonical(&String::from_utf8_lossy(name)))
            .or_insert_with(|| String::from_utf8_lossy(value).into_owned());
    }
    map
}

/// A header name as Go writes it (`content-type` → `Content-Type`), which
/// is how llama-swap's captures name them.
fn canonical(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = true;
    for c in name.chars() {
        if upper {
            out.extend(c.to_uppercase());
        } else {
            out.extend(c.to_lowercase());
        }
        upper = c == '-';
    }
    out
}

/// `headers` as llama-swap shows them (in-flight entries): canonical names,
/// each with its first value, secret headers' values `[REDACTED]`.
pub(crate) fn redacted_headers(headers: &http::HeaderMap) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for (name, value) in headers {
        map.entry(canonical(name.as_str())).or_insert_with(|| {
            if is_secret_header(name.as_str()) {
                REDACTED.to_owned()
            } else {
                String::from_utf8_lossy(value.as_bytes()).into_owned()
            }
        });
    }
    map
}

/// Whether a header's value is never kept.
fn is_secret_header(name: &str) -> bool {
    SECRET_HEADERS.iter().any(|s| s.eq_ignore_ascii_case(name))
}

/// `bytes` with every occurrence of a secret replaced by `[REDACTED]`.
fn redact(bytes: &[u8], secrets: &[String], out: &mut Vec<u8>) {
    let mut rest = bytes;
    'outer: while !rest.is_empty() {
        let next = secrets
            .iter()
            .filter_map(|s| memmem::find(rest, s.as_bytes()).map(|at| (at, s.len())))
            .min();
        match next {
            Some((at, len)) => {
                out.extend_from_slice(&rest[..at]);
                out.extend_from_slice(REDACTED.as_bytes());
                rest = &rest[at + len..];
            }
            None => break 'outer,
        }
    }
    out.extend_from_slice(rest);
}

#[cfg(test)]
mod tests;
