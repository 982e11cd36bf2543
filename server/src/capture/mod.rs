//! Captures: the request and response of each finished model request
//! (headers and bodies), kept zstd-compressed in a buffer of `captureBuffer`
//! megabytes that drops the oldest, and served by `GET /api/captures/{id}`.
//!
//! | file | concern |
//! |---|---|
//! | `mod` | [`Captures`]: the buffer, its compressing thread, the JSON answer |
//! | `recorder` | [`Recorder`]: what one request collects while it runs |
//!
//! On the request path a capture costs a copy of the request's headers and
//! body and of the response's headers and body (decoded when the upstream
//! encoded it), into one buffer already in the stored form (a request body
//! of 16 KiB or more is held by reference instead, and spliced in on the
//! capture thread); recorders come
//! back from the compressing thread to be used again ([`SPARE_BYTES`]), so a busy
//! server captures without allocating. Everything else happens on one
//! thread the buffer owns: secrets are redacted
//! (`Authorization`, `Proxy-Authorization`, `Cookie`, `Set-Cookie`,
//! `X-Api-Key`, and any value of `apiKeys` wherever it appears), the capture
//! is serialised and compressed, and the oldest captures are dropped until
//! the buffer fits its budget. A capture larger than the whole budget
//! (uncompressed while it is collected, compressed when it is stored) is not
//! kept.
//!
//! Captures are compressed a batch at a time: once one arrives the thread
//! lets those of the next [`LINGER`] join it, and compresses them together
//! into segments of up to [`SEGMENT`] bytes (less for a small buffer). One
//! zstd frame for a hundred captures costs a fraction of one frame each
//! (zstd's tables are built once, and captures of the same API repeat each
//! other), and a thread woken once per batch costs the senders no wake-up
//! per capture. What waits meanwhile is the captures of one [`LINGER`]. The buffer drops the oldest segment when it is full; reading
//! a capture decompresses its segment. What a capture costs the budget is
//! its share of its segment's compressed bytes plus [`ENTRY_COST`] for its
//! place in the index, so the budget bounds the memory held. As in llama-swap, routes that carry audio or images keep only some
//! parts (see [`Parts::for_path`]).

mod recorder;

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use base64::Engine as _;
use memchr::memmem;
use serde::Serialize;
use tokio::sync::watch;

use recorder::Parts;
pub(crate) use recorder::Recorder;

/// llama-swap's default `captureBuffer`: 5 MB.
pub(crate) const DEFAULT_BUFFER_BYTES: usize = 5 * 1024 * 1024;

/// Captures waiting to be compressed at most; more are dropped.
const QUEUE: usize = 8192;
/// Captures taken in one batch at most.
const MAX_BATCH: usize = 4096;
/// How long the thread waits after a capture arrives for more to join it.
const LINGER: Duration = Duration::from_millis(20);
/// Uncompressed bytes of captures compressed together at most (a single
/// larger capture is compressed alone); an eighth of a smaller buffer.
const SEGMENT: usize = 64 * 1024;
/// What a capture's place in the index costs the budget, in bytes: its id,
/// offset and length in its segment, and its entry in the id map.
const ENTRY_COST: usize = 64;
/// How long `GET /api/captures/{id}` waits for captures handed over before it.
const CATCH_UP: Duration = Duration::from_secs(2);
/// zstd's level. Captures compressed together repeat each other, so zstd's
/// fastest regular level already squeezes them tens of times (a chat
/// completion's capture of ~500 bytes to ~10), at under a microsecond each.
const LEVEL: i32 = 1;
/// The room (bytes of buffer) the recorders kept for reuse hold at most:
/// the memory they hold beside the captures.
const SPARE_BYTES: usize = 1024 * 1024;
/// The most room a recorder kept for reuse may hold (a larger one is freed).
const SPARE_ROOM: usize = 8 * 1024;
/// What a redacted value reads.
const REDACTED: &str = "[REDACTED]";

/// The one header outside the standard ones whose value is never kept
/// (see [`is_secret_header`]).
const X_API_KEY: &str = "x-api-key";

/// The capture buffer of a server (kept across reloads).
#[derive(Debug)]
pub struct Captures {
    budget: usize,
    kept: Arc<Mutex<Kept>>,
    jobs: SyncSender<Job>,
    worker: Mutex<Option<JoinHandle<()>>>,
    /// The compressing thread, woken when someone waits for its captures.
    worker_thread: std::thread::Thread,
    /// `apiKeys` values, redacted wherever they appear (replaced on reload).
    secrets: Arc<RwLock<Arc<Vec<String>>>>,
    /// Recorders handed back by the compressing thread, to be used again.
    spare: Arc<Mutex<Spare>>,
    sent: AtomicU64,
    dropped: Arc<AtomicU64>,
    done: watch::Receiver<u64>,
}

/// The captures kept: segments, oldest first, and where each capture is.
#[derive(Debug, Default)]
struct Kept {
    segments: VecDeque<Segment>,
    /// The number of the front segment (they are numbered as they come).
    first: u64,
    /// Each capture's segment, by number.
    by_id: BTreeMap<u64, u64>,
    /// What the segments cost the budget ([`Segment::cost`]).
    bytes: usize,
}

/// Captures compressed together.
#[derive(Debug)]
struct Segment {
    /// One zstd frame: the captures' encodings one after another.
    data: Arc<[u8]>,
    /// The frame's size decompressed.
    raw_len: usize,
    /// Each capture's id and where its encoding lies in the decompressed frame.
    entries: Box<[(u64, usize, usize)]>,
}

impl Segment {
    fn cost(&self) -> usize {
        self.data.len() + self.entries.len() * ENTRY_COST
    }
}

impl Kept {
    /// Adds `segment`, then drops the oldest until the budget holds.
    fn add(&mut self, segment: Segment, budget: usize) {
        let number = self.first + self.segments.len() as u64;
        for (id, _, _) in &segment.entries {
            // A capture handed over again replaces the earlier one.
            self.by_id.insert(*id, number);
        }
        self.bytes += segment.cost();
        self.segments.push_back(segment);
        while self.bytes > budget {
            let Some(oldest) = self.segments.pop_front() else {
                break;
            };
            for (id, _, _) in &oldest.entries {
                if self.by_id.get(id) == Some(&self.first) {
                    self.by_id.remove(id);
                }
            }
            self.first += 1;
            self.bytes -= oldest.cost();
        }
    }

    /// Capture `id`'s segment (shared) and where it lies in it.
    fn find(&self, id: u64) -> Option<(Arc<[u8]>, usize, usize, usize)> {
        let number = *self.by_id.get(&id)?;
        let segment = self
            .segments
            .get(usize::try_from(number.checked_sub(self.first)?).ok()?)?;
        let (_, start, len) = segment.entries.iter().rev().find(|e| e.0 == id)?;
        Some((Arc::clone(&segment.data), segment.raw_len, *start, *len))
    }
}

enum Job {
    Capture(u64, Recorder),
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
        let spare = Arc::new(Mutex::new(Spare::default()));
        let worker = Worker {
            budget,
            spare: Arc::clone(&spare),
            segment: SEGMENT.min(budget / 8).max(1),
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
            worker_thread: worker.thread().clone(),
            worker: Mutex::new(Some(worker)),
            secrets,
            spare,
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

    /// Starts the capture of a request, as [`Recorder::new`] does, in a
    /// recorder used before when one is spare.
    pub fn recorder(
        &self,
        path: &str,
        headers: &http::HeaderMap,
        body: Option<&bytes::Bytes>,
    ) -> Recorder {
        let spare = lock(&self.spare).take();
        let mut recorder = spare.unwrap_or_else(Recorder::empty);
        recorder.restart(path, headers, body, self.collect_limit());
        recorder
    }

    /// Hands the capture of finished request `id` over; false when it is not
    /// kept (too large, or the compressing thread is far behind).
    pub fn submit(&self, id: u64, recorder: Recorder) -> bool {
        if recorder.overflowed() {
            tracing::debug!(
                id,
                limit = self.budget,
                "capture larger than the buffer: not kept"
            );
            give_back(&self.spare, vec![recorder]);
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

    /// What the captures held now cost the budget: their compressed bytes
    /// and their places in the index.
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
        // The thread may be letting a batch gather: compress it now.
        self.worker_thread.unpark();
        let wait = done.wait_for(|handled| handled + dropped() >= target);
        let _ = tokio::time::timeout(CATCH_UP, wait).await;
    }

    /// Capture `id`, decompressed, as `GET /api/captures/{id}` answers it.
    pub fn get(&self, id: u64) -> Option<Capture> {
        let (compressed, raw_len, start, len) = self.lock().find(id)?;
        let raw = match zstd::bulk::decompress(&compressed, raw_len) {
            Ok(raw) => raw,
            Err(error) => {
                tracing::warn!(id, %error, "a capture could not be decompressed");
                return None;
            }
        };
        Capture::decode(id, raw.get(start..start.checked_add(len)?)?)
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
            handle.thread().unpark();
            if handle.join().is_err() {
                tracing::error!("the capture thread panicked");
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        lock(&self.kept)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every critical section is an insert, a removal or a copy.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Recorders kept for reuse, and the room their buffers hold.
#[derive(Debug, Default)]
struct Spare {
    recorders: Vec<Recorder>,
    room: usize,
}

impl Spare {
    fn take(&mut self) -> Option<Recorder> {
        let recorder = self.recorders.pop()?;
        self.room -= recorder.capacity();
        Some(recorder)
    }

    /// Keeps `recorder` unless its room would pass the bound; gives it back
    /// otherwise.
    fn keep(&mut self, recorder: Recorder) -> Option<Recorder> {
        let room = recorder.capacity();
        if room > SPARE_ROOM || self.room + room > SPARE_BYTES {
            return Some(recorder);
        }
        self.room += room;
        self.recorders.push(recorder);
        None
    }
}

/// Keeps `used` recorders for reuse, as many as there is room for; the
/// others (and any holding more than [`SPARE_ROOM`]) are freed.
fn give_back(spare: &Mutex<Spare>, used: impl IntoIterator<Item = Recorder>) {
    let mut spare = lock(spare);
    let used: Vec<Recorder> = used.into_iter().filter_map(|r| spare.keep(r)).collect();
    drop(spare);
    // The rest is freed here, outside the lock.
    drop(used);
}

impl Drop for Captures {
    fn drop(&mut self) {
        self.close();
    }
}

/// The thread that redacts, compresses and stores captures.
struct Worker {
    budget: usize,
    /// Uncompressed bytes compressed together at most.
    segment: usize,
    kept: Arc<Mutex<Kept>>,
    secrets: Arc<RwLock<Arc<Vec<String>>>>,
    /// Where used recorders go back to.
    spare: Arc<Mutex<Spare>>,
    dropped: Arc<AtomicU64>,
    done: watch::Sender<u64>,
}

/// A segment being filled: the captures' encodings and where each lies,
/// and the buffer it is compressed into (both kept from one segment to the
/// next).
#[derive(Default)]
struct Filling {
    raw: Vec<u8>,
    entries: Vec<(u64, usize, usize)>,
    compressed: Vec<u8>,
    /// Recorders whose captures were copied, to go back at the batch's end.
    used: Vec<Recorder>,
}

impl Worker {
    fn run(self, inbox: &Receiver<Job>) {
        let mut compressor = zstd::bulk::Compressor::new(LEVEL).ok();
        let mut filling = Filling::default();
        let mut handled = 0u64;
        // The last batch was full: more captures are waiting, go on at once.
        let mut behind = false;
        let mut closing = false;
        while !closing {
            let first = match inbox.recv() {
                Ok(Job::Capture(id, recorder)) => (id, recorder),
                Ok(Job::Close) | Err(_) => break,
            };
            if !behind {
                // Parked, not waiting in `recv`: the captures sent meanwhile
                // wake nobody. Woken early by a reader, or by `close`.
                std::thread::park_timeout(LINGER);
            }
            let secrets = Arc::clone(&self.secrets.read().unwrap_or_else(PoisonError::into_inner));
            let mut taken = 1;
            handled += self.add(&mut compressor, &mut filling, first, &secrets);
            while taken < MAX_BATCH {
                match inbox.try_recv() {
                    Ok(Job::Capture(id, recorder)) => {
                        taken += 1;
                        handled +=
                            self.add(&mut compressor, &mut filling, (id, recorder), &secrets);
                    }
                    Ok(Job::Close) => {
                        closing = true;
                        break;
                    }
                    Err(_) => break,
                }
            }
            behind = taken >= MAX_BATCH;
            give_back(&self.spare, filling.used.drain(..));
            handled += self.seal(&mut compressor, &mut filling);
            self.done.send_replace(handled);
        }
    }

    /// Adds a capture to the segment being filled, sealing it when full;
    /// returns how many captures were stored.
    fn add(
        &self,
        compressor: &mut Option<zstd::bulk::Compressor<'static>>,
        filling: &mut Filling,
        (id, mut recorder): (u64, Recorder),
        secrets: &[String],
    ) -> u64 {
        let mut stored = 0;
        let start = filling.raw.len();
        recorder.finish();
        recorder.encode(&mut filling.raw, secrets);
        filling.used.push(recorder);
        let len = filling.raw.len() - start;
        if start > 0 && filling.raw.len() > self.segment {
            // Too much to join the others: they go first.
            let tail = filling.raw.split_off(start);
            stored += self.seal(compressor, filling);
            filling.raw = tail;
        }
        let start = filling.raw.len() - len;
        filling.entries.push((id, start, len));
        if filling.raw.len() >= self.segment {
            stored += self.seal(compressor, filling);
        }
        stored
    }

    /// Compresses what `filling` holds into a segment, keeps it and empties
    /// `filling`; returns how many captures it holds, 0 when it is not kept
    /// (counted as dropped).
    fn seal(
        &self,
        compressor: &mut Option<zstd::bulk::Compressor<'static>>,
        filling: &mut Filling,
    ) -> u64 {
        let count = filling.entries.len() as u64;
        if count == 0 {
            return 0;
        }
        let out = &mut filling.compressed;
        out.clear();
        out.reserve(zstd::zstd_safe::compress_bound(filling.raw.len()));
        let compressed = compressor
            .as_mut()
            .and_then(|c| c.compress_to_buffer(&filling.raw, out).ok());
        let segment = compressed.map(|_| Segment {
            data: Arc::from(out.as_slice()),
            raw_len: filling.raw.len(),
            entries: filling.entries.as_slice().into(),
        });
        filling.raw.clear();
        filling.entries.clear();
        // A capture far larger than a segment does not keep its room.
        if filling.raw.capacity() > 4 * self.segment {
            filling.raw = Vec::new();
            filling.compressed = Vec::new();
        }
        let Some(segment) = segment else {
            tracing::warn!(captures = count, "captures could not be compressed");
            self.dropped.fetch_add(count, Ordering::Relaxed);
            return 0;
        };
        if segment.cost() > self.budget {
            tracing::debug!(
                captures = count,
                size = segment.data.len(),
                "capture larger than the buffer: not kept"
            );
            self.dropped.fetch_add(count, Ordering::Relaxed);
            return 0;
        }
        self.kept
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .add(segment, self.budget);
        count
    }
}

/// A capture as `GET /api/captures/{id}` answers it: llama-swap's
/// `ReqRespCapture` (header names in canonical form, each with its first
/// value; bodies base64-encoded, `null` for a body the route's captures
/// leave out, as llama-swap's: see [`Parts::for_path`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capture {
    /// The activity row's id.
    pub id: u64,
    /// The path forwarded upstream.
    pub req_path: String,
    /// The request's headers, secrets redacted.
    pub req_headers: BTreeMap<String, String>,
    /// The request's body.
    pub req_body: Vec<u8>,
    /// The response's headers, secrets redacted.
    pub resp_headers: BTreeMap<String, String>,
    /// The response's body as sent (decoded when the upstream encoded it).
    pub resp_body: Vec<u8>,
}

impl Serialize for Capture {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let parts = Parts::for_path(&self.req_path);
        let mut out = serializer.serialize_struct("Capture", 6)?;
        out.serialize_field("id", &self.id)?;
        out.serialize_field("req_path", &self.req_path)?;
        out.serialize_field("req_headers", &self.req_headers)?;
        out.serialize_field(
            "req_body",
            &parts.req_body.then_some(Base64(&self.req_body)),
        )?;
        out.serialize_field("resp_headers", &self.resp_headers)?;
        out.serialize_field(
            "resp_body",
            &parts.resp_body.then_some(Base64(&self.resp_body)),
        )?;
        out.end()
    }
}

/// Bytes as a base64 string.
struct Base64<'a>(&'a [u8]);

impl Serialize for Base64<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&base64::engine::general_purpose::STANDARD.encode(self.0))
    }
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
            if is_secret_header(name) {
                REDACTED.to_owned()
            } else {
                String::from_utf8_lossy(value.as_bytes()).into_owned()
            }
        });
    }
    map
}

/// Whether a header's value is never kept: `Authorization`,
/// `Proxy-Authorization`, `Cookie`, `Set-Cookie`, `X-Api-Key`. A `HeaderName`
/// is lowercase, and the standard ones compare as a tag, not as a string.
fn is_secret_header(name: &http::HeaderName) -> bool {
    use http::header::{AUTHORIZATION, COOKIE, PROXY_AUTHORIZATION, SET_COOKIE};
    *name == AUTHORIZATION
        || *name == PROXY_AUTHORIZATION
        || *name == COOKIE
        || *name == SET_COOKIE
        || name.as_str() == X_API_KEY
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
