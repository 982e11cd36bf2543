//! Stdout lines written off the request path.
//!
//! A request's access line must not wait for a `write(2)` (nor for the other
//! threads' lines on stdout's lock): lines are appended to a buffer and one
//! writer thread writes what has gathered in one go. Under load a write
//! carries many lines, and a handler only wakes the writer when it is idle.
//! [`StdoutWriter::flush`] writes what is left (the binary calls it before it
//! exits); a line written after that goes straight to stdout.

use std::io::Write as _;
use std::sync::{Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the writer lets lines gather after a write: a log line may show up
/// this much later, and a busy server makes one write per interval.
const GATHER: Duration = Duration::from_millis(2);
/// Most bytes queued while stdout does not drain (nobody reads the pipe);
/// lines beyond are dropped and counted, rather than held in memory or made
/// to block the requests that log them.
const MAX_PENDING: usize = 16 << 20;

/// Lines waiting for the writer thread.
#[derive(Debug, Default)]
struct Pending {
    bytes: Vec<u8>,
    /// The writer is waiting for lines (so the next line must wake it).
    idle: bool,
    /// Flushed: no thread any more, lines go straight to stdout.
    closed: bool,
    /// Lines dropped since the last write because `bytes` was full.
    dropped: u64,
}

#[derive(Debug, Default)]
struct Shared {
    pending: Mutex<Pending>,
    wake: Condvar,
}

/// Stdout with a writer thread (see the module docs).
#[derive(Debug)]
pub(super) struct StdoutWriter {
    shared: std::sync::Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl StdoutWriter {
    /// Starts the writer thread; without one (the thread could not start)
    /// every line is written at once.
    pub(super) fn start() -> Self {
        let shared = std::sync::Arc::new(Shared::default());
        let for_thread = std::sync::Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("stdout-log".into())
            .spawn(move || write_loop(&for_thread))
            .ok();
        if thread.is_none() {
            shared
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .closed = true;
        }
        Self {
            shared,
            thread: Mutex::new(thread),
        }
    }

    /// Queues `line` (a newline is added).
    pub(super) fn write_line(&self, line: &str) {
        self.write_parts(&[line]);
    }

    /// Queues the line made of `parts` (a newline is added): a line that
    /// differs from the history's only in places (colours) is copied from
    /// the history's text and the differing pieces, never built on its own.
    pub(super) fn write_parts(&self, parts: &[&str]) {
        let mut pending = self
            .shared
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if pending.closed {
            drop(pending);
            let mut out = std::io::stdout().lock();
            // A closed stdout must not take the server down.
            for part in parts {
                let _ = out.write_all(part.as_bytes());
            }
            let _ = out.write_all(b"\n");
            return;
        }
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if pending.bytes.len() + len >= MAX_PENDING {
            pending.dropped += 1;
            return;
        }
        for part in parts {
            pending.bytes.extend_from_slice(part.as_bytes());
        }
        pending.bytes.push(b'\n');
        if pending.idle {
            pending.idle = false;
            drop(pending);
            self.shared.wake.notify_one();
        }
    }

    /// Writes every queued line and stops the thread; later lines are written
    /// at once. Idempotent.
    pub(super) fn flush(&self) {
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        {
            let mut pending = self
                .shared
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            pending.closed = true;
        }
        self.shared.wake.notify_one();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
impl StdoutWriter {
    /// A writer without its thread: lines stay queued, for a test to read.
    pub(super) fn unstarted() -> Self {
        Self {
            shared: std::sync::Arc::new(Shared::default()),
            thread: Mutex::new(None),
        }
    }

    /// The lines queued so far.
    pub(super) fn queued(&self) -> String {
        let pending = self.shared.pending.lock().unwrap();
        String::from_utf8(pending.bytes.clone()).unwrap()
    }
}

fn write_loop(shared: &Shared) {
    let mut batch = Vec::new();
    loop {
        let closed = {
            let mut pending = shared
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            while pending.bytes.is_empty() && !pending.closed {
                pending.idle = true;
                pending = shared
                    .wake
                    .wait(pending)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            pending.idle = false;
            std::mem::swap(&mut batch, &mut pending.bytes);
            if pending.dropped > 0 {
                let note = format!(
                    "[WARN] {} log lines dropped: stdout did not drain\n",
                    pending.dropped
                );
                batch.extend_from_slice(note.as_bytes());
                pending.dropped = 0;
            }
            pending.closed
        };
        if !batch.is_empty() {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(&batch);
            let _ = out.flush();
            batch.clear();
        }
        if closed {
            return;
        }
        // Pacing, not synchronisation: lines that arrive meanwhile are queued
        // and written together, without waking this thread once per line.
        #[allow(clippy::disallowed_methods)]
        std::thread::sleep(GATHER);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_queued_before_a_flush_are_written_and_later_ones_go_straight_out() {
        let writer = StdoutWriter::start();
        writer.write_line("one");
        writer.write_line("two");
        writer.flush();
        let pending = writer
            .shared
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        assert!(pending.bytes.is_empty(), "everything was written");
        assert!(pending.closed);
        drop(pending);
        // After the flush: written at once, nothing queued.
        writer.write_line("three");
        assert!(writer.shared.pending.lock().unwrap().bytes.is_empty());
        writer.flush();
    }

    #[test]
    fn parts_are_queued_as_one_line() {
        let writer = StdoutWriter::unstarted();
        writer.write_parts(&["[", "\x1b[32m", "INFO", "\x1b[0m", "] served"]);
        writer.write_line("next");
        assert_eq!(writer.queued(), "[\x1b[32mINFO\x1b[0m] served\nnext\n");
    }
}
