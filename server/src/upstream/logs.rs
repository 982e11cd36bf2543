//! What upstream processes write: bounded per-model history plus live subscription.
//!
//! The drain of a child's pipes must never block on a slow reader (llama-swap issue
//! 875: a blocked log consumer stalled the model), so history is a ring behind a std
//! mutex held only for a push or a copy of its pointers, and live subscribers get a
//! `tokio::sync::broadcast` receiver that drops lines (and says how many) when it lags.
//!
//! Memory is bounded three ways: a ring keeps at most its number of lines and
//! [`DEFAULT_RING_BYTES`] of text (whichever comes first), a line is at most
//! [`MAX_LINE_BYTES`], and lines are shared (`Arc`): a history handed to a
//! reader, and a line sent to every live subscriber, are pointers to the ring's
//! own lines, not copies. A ring that nobody follows and no process writes to
//! costs a few hundred bytes: its buffer grows with its lines, and its live
//! channel is made by the first subscriber.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::broadcast;

/// Longest line kept as one entry; longer output is cut into several entries so a
/// process that never writes a newline cannot grow memory without bound.
pub(crate) const MAX_LINE_BYTES: usize = 16 * 1024;

/// Most bytes of text one ring keeps (1 MiB): the oldest lines go first when a
/// new one would pass it, as they do past the ring's line count. llama-swap keeps
/// 100 KB per process; lines here are kept whole, so a little more.
pub(crate) const DEFAULT_RING_BYTES: usize = 1024 * 1024;

/// What a line costs beyond its text: the shared allocation holding it and its
/// slot in the ring, counted against the byte bound so that many empty lines
/// cannot pass it either.
const LINE_OVERHEAD: usize = std::mem::size_of::<LogLine>() + 24;

/// Granularity of the buffers [`LogRing::record_copy`] allocates.
const SLACK: usize = 64;

/// Slots of the live channels; a subscriber further behind than this loses lines and
/// receives `RecvError::Lagged` with the count.
const LIVE_CAPACITY: usize = 1024;

/// Which pipe a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LogStream {
    /// The process's standard output.
    Stdout,
    /// The process's standard error.
    Stderr,
}

impl LogStream {
    fn as_str(self) -> &'static str {
        match self {
            LogStream::Stdout => "stdout",
            LogStream::Stderr => "stderr",
        }
    }
}

/// One line of upstream output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// The model whose process wrote it.
    pub model: Arc<str>,
    /// Position in the process-wide order of lines (increasing), which lets a
    /// reader merge histories and skip lines it has already seen.
    pub seq: u64,
    /// The pipe it came from.
    pub stream: LogStream,
    /// The text, without the line terminator; invalid UTF-8 is replaced.
    pub text: String,
}

impl LogLine {
    /// What the line counts against a ring's byte bound.
    fn cost(&self) -> usize {
        self.text.capacity() + LINE_OVERHEAD
    }
}

/// A line as rings keep and hand it out: shared, never copied per reader.
pub(crate) type SharedLine = Arc<LogLine>;

/// A consistent starting point for following a model's output: nothing between the
/// history and the first live line is lost or repeated.
#[derive(Debug)]
pub struct LogSubscription {
    /// Lines already in the ring when the subscription was taken, oldest first.
    pub history: Vec<SharedLine>,
    /// Lines written afterwards.
    pub live: broadcast::Receiver<SharedLine>,
}

/// How much one ring keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogLimits {
    /// Most lines.
    pub lines: usize,
    /// Most bytes of text (plus a small per-line overhead); the newest line is
    /// kept even when it alone is larger.
    pub bytes: usize,
}

impl LogLimits {
    /// `lines` lines and at most [`DEFAULT_RING_BYTES`].
    #[must_use]
    pub fn lines(lines: usize) -> Self {
        Self {
            lines,
            bytes: DEFAULT_RING_BYTES,
        }
    }
}

/// The lines of a ring and what they cost, under one lock.
#[derive(Debug, Default)]
struct Lines {
    lines: VecDeque<SharedLine>,
    bytes: usize,
    /// Made by the first subscriber: most rings are never followed.
    live: Option<broadcast::Sender<SharedLine>>,
}

/// The bounded output history of one model.
#[derive(Debug)]
pub struct LogRing {
    model: Arc<str>,
    limits: LogLimits,
    lines: Mutex<Lines>,
    /// The hub's feed of every model, if the ring is part of one.
    hub_live: Option<broadcast::Sender<SharedLine>>,
}

/// The order of every log line in the process (all hubs, the proxy's log), so
/// histories from different rings merge in the order they were written.
static LOG_SEQ: AtomicU64 = AtomicU64::new(0);

impl LogRing {
    fn new(
        model: Arc<str>,
        limits: LogLimits,
        hub_live: Option<broadcast::Sender<SharedLine>>,
    ) -> Self {
        Self {
            model,
            limits,
            lines: Mutex::new(Lines::default()),
            hub_live,
        }
    }

    /// The model this ring belongs to.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// A ring of its own (not part of a hub), e.g. for the proxy's log, keeping
    /// at most `capacity` lines and [`DEFAULT_RING_BYTES`]. Its lines share the
    /// process-wide `seq` order with every hub's.
    pub fn standalone(name: &str, capacity: usize) -> Self {
        Self::with_limits(name, LogLimits::lines(capacity))
    }

    /// A ring of its own keeping what `limits` allow.
    pub fn with_limits(name: &str, limits: LogLimits) -> Self {
        Self::new(Arc::from(name), limits, None)
    }

    /// Appends a line, evicting the oldest when full, and publishes it to live
    /// subscribers and to the server's log (which prints it per `logToStdout`).
    pub fn push(&self, stream: LogStream, text: String) {
        tracing::info!(target: "upstream_output", model = %self.model, stream = stream.as_str(), "{text}");
        self.record(stream, text);
    }

    /// [`push`](Self::push) of a copy of `text` (see [`record_copy`](Self::record_copy)).
    pub fn push_copy(&self, stream: LogStream, text: &str) {
        tracing::info!(target: "upstream_output", model = %self.model, stream = stream.as_str(), "{text}");
        self.record_copy(stream, text);
    }

    /// Appends a line and publishes it to live subscribers, without echoing it
    /// to the server's log.
    pub fn record(&self, stream: LogStream, text: String) {
        let mut lines = self.lock();
        let line = Arc::new(LogLine {
            model: Arc::clone(&self.model),
            seq: 0,
            stream,
            text,
        });
        self.append(&mut lines, line);
    }

    /// [`record`](Self::record) of a copy of `text`. When the line evicts one
    /// that no reader holds any more, the copy goes into that line's
    /// allocation and buffer when it fits, so a steady stream of lines (the
    /// access log) allocates nothing for them.
    pub fn record_copy(&self, stream: LogStream, text: &str) {
        let mut lines = self.lock();
        let cost = text.len().next_multiple_of(SLACK) + LINE_OVERHEAD;
        let evicted = self.make_room(&mut lines, cost);
        let reused = evicted.and_then(|mut old| {
            let line = Arc::get_mut(&mut old)?;
            // Not a much larger buffer, so a long line's does not stay in use
            // for short ones.
            if !(text.len()..=2 * text.len() + SLACK).contains(&line.text.capacity()) {
                return None;
            }
            line.text.clear();
            line.text.push_str(text);
            line.stream = stream;
            Some(old)
        });
        let line = reused.unwrap_or_else(|| {
            // Rounded up, so that a later line of about the same length fits
            // in this buffer when it is evicted.
            let mut buffer = String::with_capacity(text.len().next_multiple_of(SLACK));
            buffer.push_str(text);
            Arc::new(LogLine {
                model: Arc::clone(&self.model),
                seq: 0,
                stream,
                text: buffer,
            })
        });
        self.append(&mut lines, line);
    }

    /// Evicts the oldest lines until one costing `cost` fits; returns the last
    /// one evicted (its allocation may be reused).
    fn make_room(&self, lines: &mut Lines, cost: usize) -> Option<SharedLine> {
        let mut evicted = None;
        while !lines.lines.is_empty()
            && (lines.lines.len() >= self.limits.lines || lines.bytes + cost > self.limits.bytes)
        {
            if let Some(old) = lines.lines.pop_front() {
                lines.bytes -= old.cost();
                evicted = Some(old);
            }
        }
        evicted
    }

    fn append(&self, lines: &mut Lines, mut line: SharedLine) {
        // Taken under the lock so that this ring's lines are in `seq` order.
        let seq = LOG_SEQ.fetch_add(1, Ordering::Relaxed);
        match Arc::get_mut(&mut line) {
            Some(unique) => unique.seq = seq,
            // Only a line just made or reused (unique) reaches here.
            None => return,
        }
        // Sent under the lock so a concurrent `subscribe` sees each line exactly once:
        // either in its history or on its receiver. A channel nobody follows gets
        // nothing (most of the time nobody does); a send error only means the last
        // receiver went meanwhile.
        if let Some(live) = &lines.live
            && live.receiver_count() > 0
        {
            let _ = live.send(Arc::clone(&line));
        }
        if let Some(hub) = &self.hub_live
            && hub.receiver_count() > 0
        {
            let _ = hub.send(Arc::clone(&line));
        }
        if self.limits.lines == 0 {
            return;
        }
        let cost = line.cost();
        // `record_copy` made room already; `record` of a line it was handed does it here.
        self.make_room(lines, cost);
        lines.bytes += cost;
        lines.lines.push_back(line);
    }

    /// The history, oldest first (the lines are shared, not copied).
    pub fn history(&self) -> Vec<SharedLine> {
        self.lock().lines.iter().cloned().collect()
    }

    /// The bytes the history counts against its bound now.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    /// The last `n` lines with `seq >= since`, oldest first.
    pub fn tail_since(&self, since: u64, n: usize) -> Vec<SharedLine> {
        let lines = self.lock();
        let mut tail: Vec<SharedLine> = lines
            .lines
            .iter()
            .rev()
            .take_while(|l| l.seq >= since)
            .take(n)
            .cloned()
            .collect();
        tail.reverse();
        tail
    }

    /// The `seq` the next pushed line will have at the earliest.
    pub fn next_seq(&self) -> u64 {
        LOG_SEQ.load(Ordering::Relaxed)
    }

    /// History plus a receiver for what follows, taken atomically.
    pub fn subscribe(&self) -> LogSubscription {
        let mut lines = self.lock();
        let live = lines
            .live
            .get_or_insert_with(|| broadcast::channel(LIVE_CAPACITY).0)
            .subscribe();
        LogSubscription {
            history: lines.lines.iter().cloned().collect(),
            live,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Lines> {
        // A panic while holding this lock cannot leave the deque inconsistent.
        self.lines.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The output of every configured model: one [`LogRing`] each, plus a live feed of
/// all of them.
#[derive(Debug)]
pub struct LogHub {
    /// Grows when a reload adds a model (a removed model's history stays).
    rings: RwLock<BTreeMap<String, Arc<LogRing>>>,
    live: broadcast::Sender<SharedLine>,
    limits: LogLimits,
}

impl LogHub {
    /// A hub with an empty ring of `capacity` lines (and at most
    /// [`DEFAULT_RING_BYTES`]) for each of `models`.
    pub fn new<I, S>(models: I, capacity: usize) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::with_limits(models, LogLimits::lines(capacity))
    }

    /// A hub with an empty ring keeping what `limits` allow for each of `models`.
    pub fn with_limits<I, S>(models: I, limits: LogLimits) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let (live, _) = broadcast::channel(LIVE_CAPACITY);
        let hub = Self {
            rings: RwLock::new(BTreeMap::new()),
            live,
            limits,
        };
        for model in models {
            hub.add(model.into());
        }
        hub
    }

    /// The ring of `model`, made empty if it has none yet.
    pub(crate) fn add(&self, model: String) -> Arc<LogRing> {
        let mut rings = self.rings.write().unwrap_or_else(PoisonError::into_inner);
        let ring = rings.entry(model).or_insert_with_key(|model| {
            Arc::new(LogRing::new(
                Arc::from(model.as_str()),
                self.limits,
                Some(self.live.clone()),
            ))
        });
        Arc::clone(ring)
    }

    fn rings(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<LogRing>>> {
        // Insertions cannot leave the map inconsistent if they panic.
        self.rings.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The ring of `model`, if it is (or was) configured.
    pub fn ring(&self, model: &str) -> Option<Arc<LogRing>> {
        self.rings().get(model).cloned()
    }

    /// The models with a ring, sorted: every configured one, and those a
    /// reload removed (their history stays).
    pub fn models(&self) -> Vec<String> {
        self.rings().keys().cloned().collect()
    }

    /// `model`'s history, oldest first; `None` for an unknown model.
    pub fn history(&self, model: &str) -> Option<Vec<SharedLine>> {
        self.ring(model).map(|r| r.history())
    }

    /// Every model's history merged in the order the lines were written.
    pub fn history_all(&self) -> Vec<SharedLine> {
        let rings: Vec<Arc<LogRing>> = self.rings().values().cloned().collect();
        let mut all: Vec<SharedLine> = rings.iter().flat_map(|r| r.history()).collect();
        all.sort_by_key(|l| l.seq);
        all
    }

    /// Follows `model`'s output; `None` for an unknown model.
    pub fn subscribe(&self, model: &str) -> Option<LogSubscription> {
        self.ring(model).map(|r| r.subscribe())
    }

    /// Follows the output of every model. Lines already written are in
    /// [`history_all`](Self::history_all); use `seq` to drop the overlap.
    pub fn subscribe_all(&self) -> broadcast::Receiver<SharedLine> {
        self.live.subscribe()
    }
}

/// Reads `reader` to its end, pushing each line into `ring`. Lines longer than
/// [`MAX_LINE_BYTES`] are split; a trailing `\r` is dropped; a read error ends the
/// pump like end of file does (the pipe is gone either way).
pub(crate) async fn pump_lines<R>(reader: R, ring: &LogRing, stream: LogStream)
where
    R: AsyncRead + Unpin,
{
    let mut reader = BufReader::new(reader);
    let mut line: Vec<u8> = Vec::new();
    // Set when a line was cut at the size limit, so that a newline right after the cut
    // does not produce an extra empty entry.
    let mut just_cut = false;
    loop {
        let buf = match reader.fill_buf().await {
            Ok([]) | Err(_) => break,
            Ok(buf) => buf,
        };
        let (chunk_len, has_newline) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (buf.len(), false),
        };
        let take = chunk_len.min(MAX_LINE_BYTES - line.len());
        line.extend_from_slice(&buf[..take]);
        let line_ended = has_newline && take == chunk_len;
        reader.consume(if line_ended { take + 1 } else { take });
        if line_ended && line.is_empty() && just_cut {
            just_cut = false;
        } else if line_ended || line.len() >= MAX_LINE_BYTES {
            just_cut = !line_ended;
            emit(&mut line, ring, stream);
        } else if take > 0 {
            just_cut = false;
        }
    }
    if !line.is_empty() {
        emit(&mut line, ring, stream);
    }
}

fn emit(line: &mut Vec<u8>, ring: &LogRing, stream: LogStream) {
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    ring.push_copy(stream, &String::from_utf8_lossy(line));
    line.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(lines: &[SharedLine]) -> Vec<&str> {
        lines.iter().map(|l| l.text.as_str()).collect()
    }

    #[test]
    fn ring_keeps_only_the_newest_lines_up_to_capacity() {
        let hub = LogHub::new(["a"], 3);
        let ring = hub.ring("a").unwrap();
        for i in 0..5 {
            ring.push(LogStream::Stdout, format!("line {i}"));
        }
        assert_eq!(
            texts(&hub.history("a").unwrap()),
            ["line 2", "line 3", "line 4"]
        );
    }

    #[test]
    fn a_full_ring_copies_a_line_into_the_buffer_it_evicts() {
        let ring = LogRing::standalone("proxy", 2);
        ring.record_copy(LogStream::Stdout, "first line");
        ring.record_copy(LogStream::Stdout, "second line");
        let oldest = ring.lock().lines.front().map(|l| l.text.as_ptr()).unwrap();
        ring.record_copy(LogStream::Stdout, "third line");
        assert_eq!(texts(&ring.history()), ["second line", "third line"]);
        let newest = ring.lock().lines.back().map(|l| l.text.as_ptr()).unwrap();
        assert_eq!(
            newest, oldest,
            "the evicted line's buffer holds the new one"
        );
        // A line longer than the evicted buffer gets a buffer of its own.
        let long = "y".repeat(3 * SLACK);
        ring.record_copy(LogStream::Stdout, &long);
        assert_eq!(texts(&ring.history()), ["third line", long.as_str()]);
    }

    #[test]
    fn the_history_is_bounded_in_bytes_as_well_as_in_lines() {
        let limits = LogLimits {
            lines: 2000,
            bytes: 64 * 1024,
        };
        let ring = LogRing::with_limits("proxy", limits);
        let long = "p".repeat(MAX_LINE_BYTES);
        for _ in 0..100 {
            ring.record_copy(LogStream::Stdout, &long);
            ring.record(LogStream::Stdout, long.clone());
        }
        let history = ring.history();
        let kept: usize = history.iter().map(|l| l.cost()).sum();
        assert!(kept <= limits.bytes, "{kept} bytes kept");
        assert_eq!(kept, ring.bytes());
        assert_eq!(history.len(), 3, "the newest lines that fit");
        // Short lines are bounded by the line count, and their overhead counts.
        let ring = LogRing::with_limits(
            "proxy",
            LogLimits {
                lines: 10,
                bytes: 10 * LINE_OVERHEAD,
            },
        );
        for i in 0..50 {
            ring.record(LogStream::Stdout, String::new());
            ring.record_copy(LogStream::Stdout, &i.to_string());
        }
        assert!(ring.history().len() < 10);
        assert!(ring.bytes() <= 10 * LINE_OVERHEAD);
        // One line larger than the bound alone is still kept, as the newest.
        let ring = LogRing::with_limits(
            "proxy",
            LogLimits {
                lines: 10,
                bytes: 100,
            },
        );
        ring.record_copy(LogStream::Stdout, "first");
        ring.record_copy(LogStream::Stdout, &long);
        assert_eq!(texts(&ring.history()), [long.as_str()]);
    }

    #[test]
    fn readers_share_the_rings_lines_instead_of_copying_them() {
        let hub = LogHub::new(["a"], 10);
        let ring = hub.ring("a").unwrap();
        ring.record_copy(LogStream::Stdout, "kept once");
        let mut first = hub.subscribe("a").unwrap();
        let mut all = hub.subscribe_all();
        let second = hub.subscribe("a").unwrap();
        assert!(Arc::ptr_eq(&first.history[0], &second.history[0]));
        assert!(Arc::ptr_eq(&first.history[0], &hub.history_all()[0]));
        ring.record_copy(LogStream::Stdout, "sent once");
        let live = first.live.try_recv().unwrap();
        assert!(Arc::ptr_eq(&live, &all.try_recv().unwrap()));
        assert!(Arc::ptr_eq(&live, ring.history().last().unwrap()));
    }

    #[test]
    fn a_ring_nobody_follows_and_nothing_wrote_to_holds_no_buffers() {
        let hub = LogHub::new(["a"], 2000);
        let ring = hub.ring("a").unwrap();
        {
            let lines = ring.lock();
            assert_eq!(lines.lines.capacity(), 0);
            assert!(
                lines.live.is_none(),
                "the live channel waits for a subscriber"
            );
        }
        drop(hub.subscribe("a"));
        assert!(ring.lock().live.is_some());
    }

    #[test]
    fn a_line_some_reader_still_holds_is_not_reused_for_the_next() {
        let ring = LogRing::standalone("proxy", 1);
        ring.record_copy(LogStream::Stdout, "held line");
        let held = ring.history();
        ring.record_copy(LogStream::Stdout, "next line");
        assert_eq!(held[0].text, "held line");
        assert_eq!(texts(&ring.history()), ["next line"]);
    }

    #[test]
    fn a_ring_nobody_follows_still_feeds_later_subscribers() {
        let hub = LogHub::new(["a"], 10);
        let ring = hub.ring("a").unwrap();
        ring.record(LogStream::Stdout, "unfollowed".into());
        let mut all = hub.subscribe_all();
        let mut one = hub.subscribe("a").unwrap();
        ring.record_copy(LogStream::Stdout, "followed");
        assert_eq!(texts(&one.history), ["unfollowed"]);
        assert_eq!(one.live.try_recv().unwrap().text, "followed");
        assert_eq!(all.try_recv().unwrap().text, "followed");
        assert_eq!(texts(&hub.history_all()), ["unfollowed", "followed"]);
    }

    #[test]
    fn unknown_model_has_no_history() {
        let hub = LogHub::new(["a"], 3);
        assert!(hub.history("b").is_none());
        assert!(hub.subscribe("b").is_none());
    }

    #[test]
    fn subscription_sees_each_line_once_across_history_and_live() {
        let hub = LogHub::new(["a"], 10);
        let ring = hub.ring("a").unwrap();
        ring.push(LogStream::Stdout, "before".into());
        let mut sub = hub.subscribe("a").unwrap();
        ring.push(LogStream::Stderr, "after".into());
        assert_eq!(texts(&sub.history), ["before"]);
        let live = sub.live.try_recv().unwrap();
        assert_eq!(live.text, "after");
        assert_eq!(live.stream, LogStream::Stderr);
        assert!(sub.live.try_recv().is_err());
    }

    #[test]
    fn hub_history_merges_models_in_write_order() {
        let hub = LogHub::new(["a", "b"], 10);
        hub.ring("b").unwrap().push(LogStream::Stdout, "1".into());
        hub.ring("a").unwrap().push(LogStream::Stdout, "2".into());
        hub.ring("b").unwrap().push(LogStream::Stdout, "3".into());
        let all = hub.history_all();
        assert_eq!(texts(&all), ["1", "2", "3"]);
        assert_eq!(&*all[1].model, "a");
    }

    #[test]
    fn hub_live_feed_carries_every_model() {
        let hub = LogHub::new(["a", "b"], 10);
        let mut live = hub.subscribe_all();
        hub.ring("a").unwrap().push(LogStream::Stdout, "x".into());
        hub.ring("b").unwrap().push(LogStream::Stdout, "y".into());
        assert_eq!(&*live.try_recv().unwrap().model, "a");
        assert_eq!(&*live.try_recv().unwrap().model, "b");
    }

    #[test]
    fn tail_since_returns_only_recent_lines_after_the_mark() {
        let hub = LogHub::new(["a"], 10);
        let ring = hub.ring("a").unwrap();
        ring.push(LogStream::Stdout, "old run".into());
        let mark = ring.next_seq();
        for t in ["x", "y", "z"] {
            ring.push(LogStream::Stdout, t.into());
        }
        assert_eq!(texts(&ring.tail_since(mark, 2)), ["y", "z"]);
        assert_eq!(texts(&ring.tail_since(mark, 10)), ["x", "y", "z"]);
    }

    #[test]
    fn lagging_subscriber_is_told_how_many_lines_it_lost() {
        let hub = LogHub::new(["a"], 1);
        let ring = hub.ring("a").unwrap();
        let mut sub = hub.subscribe("a").unwrap();
        for i in 0..(LIVE_CAPACITY + 5) {
            ring.push(LogStream::Stdout, i.to_string());
        }
        assert_eq!(
            sub.live.try_recv(),
            Err(broadcast::error::TryRecvError::Lagged(5))
        );
    }

    #[tokio::test]
    async fn pump_splits_lines_and_strips_terminators() {
        let hub = LogHub::new(["a"], 10);
        let ring = hub.ring("a").unwrap();
        let input: &[u8] = b"one\r\ntwo\n\nthree without newline";
        pump_lines(input, &ring, LogStream::Stdout).await;
        assert_eq!(
            texts(&ring.history()),
            ["one", "two", "", "three without newline"]
        );
    }

    #[tokio::test]
    async fn pump_cuts_overlong_lines_into_bounded_entries() {
        let hub = LogHub::new(["a"], 10);
        let ring = hub.ring("a").unwrap();
        let mut input = vec![b'x'; MAX_LINE_BYTES * 2 + 10];
        input.extend_from_slice(b"\nnext\n");
        pump_lines(input.as_slice(), &ring, LogStream::Stderr).await;
        let lens: Vec<usize> = ring.history().iter().map(|l| l.text.len()).collect();
        assert_eq!(lens, [MAX_LINE_BYTES, MAX_LINE_BYTES, 10, 4]);
    }

    #[tokio::test]
    async fn pump_adds_no_empty_entry_when_a_cut_falls_on_the_newline() {
        let hub = LogHub::new(["a"], 10);
        let ring = hub.ring("a").unwrap();
        let mut input = vec![b'x'; MAX_LINE_BYTES];
        input.extend_from_slice(
            b"

z
",
        );
        pump_lines(input.as_slice(), &ring, LogStream::Stdout).await;
        let lens: Vec<usize> = ring.history().iter().map(|l| l.text.len()).collect();
        assert_eq!(lens, [MAX_LINE_BYTES, 0, 1]);
    }

    #[tokio::test]
    async fn pump_replaces_invalid_utf8() {
        let hub = LogHub::new(["a"], 10);
        let ring = hub.ring("a").unwrap();
        let input: &[u8] = b"ok \xff end\n";
        pump_lines(input, &ring, LogStream::Stdout).await;
        assert_eq!(texts(&ring.history()), ["ok \u{fffd} end"]);
    }
}
