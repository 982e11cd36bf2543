//! Stream shaping: how the SSE events of a response become timed byte chunks.
//!
//! The events are rendered to bytes, paced (time to first token, tokens per second),
//! then cut into chunks (one per frame, fixed-size, or split inside a multi-byte
//! character) so client parsers meet the boundaries real networks produce. All waiting
//! uses tokio time, so paused-clock tests run instantly.

use std::io;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::stream;
use tokio_util::sync::CancellationToken;

use crate::body::ChunkStream;
use crate::wire::SseEvent;

/// How a stream is cut into body chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Chunking {
    /// One chunk per SSE frame (the default).
    #[default]
    PerFrame,
    /// Chunks of exactly this many bytes (the last may be shorter), regardless of frame
    /// boundaries; bytes wait for the frame that completes their chunk.
    FixedBytes(usize),
    /// Every frame in two chunks, cut after the first byte of its first multi-byte UTF-8
    /// character (or in the middle, when the frame is ASCII).
    SplitUtf8,
}

/// The line terminator of the SSE framing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum LineEnding {
    /// `\n` (the default).
    #[default]
    Lf,
    /// `\r\n`.
    CrLf,
}

impl LineEnding {
    fn as_str(self) -> &'static str {
        match self {
            Self::Lf => "\n",
            Self::CrLf => "\r\n",
        }
    }
}

/// The shape of every streamed response: pacing, chunking and framing options.
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct StreamShape {
    pub(crate) time_to_first_token: Duration,
    pub(crate) tokens_per_second: Option<f64>,
    pub(crate) chunking: Chunking,
    pub(crate) line_ending: LineEnding,
    pub(crate) keep_alive: bool,
    pub(crate) usage: bool,
    pub(crate) done: bool,
    pub(crate) loading_state: bool,
}

impl Default for StreamShape {
    fn default() -> Self {
        Self {
            time_to_first_token: Duration::ZERO,
            tokens_per_second: None,
            chunking: Chunking::PerFrame,
            line_ending: LineEnding::Lf,
            keep_alive: false,
            usage: true,
            done: true,
            loading_state: false,
        }
    }
}

impl StreamShape {
    /// The default shape: no delays, one chunk per frame, LF, no keep-alive comments,
    /// usage and `[DONE]` on.
    pub fn new() -> Self {
        Self::default()
    }

    /// Delay before the first frame. Default: none.
    pub fn time_to_first_token(mut self, delay: Duration) -> Self {
        self.time_to_first_token = delay;
        self
    }

    /// Pace token frames at this rate (one token per frame). Default: unpaced. Values
    /// that are not finite and positive mean unpaced.
    pub fn tokens_per_second(mut self, rate: f64) -> Self {
        self.tokens_per_second = (rate.is_finite() && rate > 0.0).then_some(rate);
        self
    }

    /// How frames are cut into chunks. Default: [`Chunking::PerFrame`].
    pub fn chunking(mut self, chunking: Chunking) -> Self {
        self.chunking = chunking;
        self
    }

    /// The line terminator. Default: [`LineEnding::Lf`].
    pub fn line_ending(mut self, line_ending: LineEnding) -> Self {
        self.line_ending = line_ending;
        self
    }

    /// Send a `: keep-alive` comment before every frame. Default: off.
    pub fn keep_alive(mut self, on: bool) -> Self {
        self.keep_alive = on;
        self
    }

    /// Report usage in OpenAI streams: on the finish chunk (llama.cpp's way), or in a
    /// separate last chunk with empty `choices` when the request sets
    /// `stream_options.include_usage` (OpenAI's way). Default: on.
    pub fn usage(mut self, on: bool) -> Self {
        self.usage = on;
        self
    }

    /// End OpenAI streams with `data: [DONE]`. Default: on.
    pub fn done(mut self, on: bool) -> Self {
        self.done = on;
        self
    }

    /// Open chat streams with the proxy's loading frames, as it sends them with
    /// `sendLoadingState`: `chat.completion.chunk`s whose `reasoning_content` carries
    /// llama-swap's text and whose top-level `llamaswap` object says `waiting`,
    /// `loading`, then `ready` (with `waited_ms`). Default: off.
    pub fn loading_state(mut self, on: bool) -> Self {
        self.loading_state = on;
        self
    }

    fn token_gap(&self) -> Duration {
        self.tokens_per_second
            .map_or(Duration::ZERO, |rate| Duration::from_secs_f64(1.0 / rate))
    }
}

/// How a planned stream ends after its last chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StreamEnd {
    /// The body ends normally.
    Finish,
    /// The connection is aborted (the client sees an incomplete body).
    Abort,
    /// Nothing more is sent, and the body never ends (until the mock stops).
    Stall,
    /// The process-level crash hook fires, then the body stalls until the mock dies.
    Crash,
}

/// One timed chunk.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Step {
    pub(crate) delay: Duration,
    pub(crate) bytes: Bytes,
}

/// Renders events into timed chunks following `shape`.
pub(crate) fn plan(events: &[SseEvent], shape: &StreamShape) -> Vec<Step> {
    let le = shape.line_ending.as_str();
    let gap = shape.token_gap();
    let mut framed: Vec<Step> = Vec::new();
    for (i, event) in events.iter().enumerate() {
        let delay = if i == 0 {
            shape.time_to_first_token
        } else if event.token {
            gap
        } else {
            Duration::ZERO
        };
        if shape.keep_alive {
            framed.push(Step {
                delay: Duration::ZERO,
                bytes: Bytes::from(format!(": keep-alive{le}{le}")),
            });
        }
        let mut text = String::new();
        if let Some(name) = event.event {
            text.push_str("event: ");
            text.push_str(name);
            text.push_str(le);
        }
        text.push_str("data: ");
        text.push_str(&event.data);
        text.push_str(le);
        text.push_str(le);
        framed.push(Step {
            delay,
            bytes: Bytes::from(text),
        });
    }
    match shape.chunking {
        Chunking::PerFrame => framed,
        Chunking::FixedBytes(size) => fixed_bytes(framed, size.max(1)),
        Chunking::SplitUtf8 => framed.into_iter().flat_map(split_utf8).collect(),
    }
}

fn fixed_bytes(framed: Vec<Step>, size: usize) -> Vec<Step> {
    let mut out = Vec::new();
    let mut buffer = BytesMut::new();
    let mut pending = Duration::ZERO;
    for step in framed {
        pending += step.delay;
        buffer.extend_from_slice(&step.bytes);
        while buffer.len() >= size {
            out.push(Step {
                delay: std::mem::take(&mut pending),
                bytes: buffer.split_to(size).freeze(),
            });
        }
    }
    if !buffer.is_empty() {
        out.push(Step {
            delay: pending,
            bytes: buffer.freeze(),
        });
    }
    out
}

fn split_utf8(step: Step) -> Vec<Step> {
    let bytes = step.bytes;
    let cut = bytes
        .iter()
        .position(|b| *b >= 0xC0)
        .map_or(bytes.len() / 2, |lead| lead + 1);
    if cut == 0 || cut >= bytes.len() {
        return vec![Step {
            delay: step.delay,
            bytes,
        }];
    }
    vec![
        Step {
            delay: step.delay,
            bytes: bytes.slice(..cut),
        },
        Step {
            delay: Duration::ZERO,
            bytes: bytes.slice(cut..),
        },
    ]
}

/// Plays planned steps as a body stream. `stop` ends every wait (the mock is stopping);
/// `on_crash` runs when a [`StreamEnd::Crash`] is reached.
pub(crate) fn play(
    steps: Vec<Step>,
    end: StreamEnd,
    stop: CancellationToken,
    on_crash: Box<dyn FnOnce() + Send>,
) -> ChunkStream {
    struct State {
        steps: std::vec::IntoIter<Step>,
        end: Option<StreamEnd>,
        stop: CancellationToken,
        on_crash: Option<Box<dyn FnOnce() + Send>>,
    }
    let state = State {
        steps: steps.into_iter(),
        end: Some(end),
        stop,
        on_crash: Some(on_crash),
    };
    Box::pin(stream::unfold(state, |mut st| async move {
        if let Some(step) = st.steps.next() {
            if !step.delay.is_zero() {
                tokio::select! {
                    () = tokio::time::sleep(step.delay) => {}
                    () = st.stop.cancelled() => {
                        st.end = None;
                        st.steps = Vec::new().into_iter();
                        return Some((Err(aborted("mockswap stopped mid-stream")), st));
                    }
                }
            }
            return Some((Ok(step.bytes), st));
        }
        match st.end.take()? {
            StreamEnd::Finish => None,
            StreamEnd::Abort => {
                // Let hyper flush the frames already produced: it only flushes once the
                // body is pending, and an error drops whatever is still buffered.
                tokio::task::yield_now().await;
                Some((Err(aborted("mockswap fault: stream cut")), st))
            }
            StreamEnd::Stall => {
                st.stop.cancelled().await;
                Some((Err(aborted("mockswap stopped a stalled stream")), st))
            }
            StreamEnd::Crash => {
                // As for Abort: yielding once gets the frames already produced onto the
                // socket before the crash hook (which may end the process) runs.
                tokio::task::yield_now().await;
                if let Some(crash) = st.on_crash.take() {
                    crash();
                }
                st.stop.cancelled().await;
                Some((Err(aborted("mockswap crashed mid-stream")), st))
            }
        }
    }))
}

fn aborted(message: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionAborted, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(datas: &[&str]) -> Vec<SseEvent> {
        datas
            .iter()
            .map(|d| SseEvent::raw((*d).to_owned()))
            .collect()
    }

    fn concat(steps: &[Step]) -> Vec<u8> {
        steps.iter().flat_map(|s| s.bytes.to_vec()).collect()
    }

    #[test]
    fn per_frame_chunking_gives_one_chunk_per_frame_with_crlf() {
        let shape = StreamShape::new().line_ending(LineEnding::CrLf);
        let steps = plan(&events(&["a", "b"]), &shape);
        assert_eq!(steps.len(), 2);
        assert_eq!(steps[0].bytes, "data: a\r\n\r\n");
    }

    #[test]
    fn fixed_bytes_chunking_crosses_frame_boundaries_and_keeps_every_byte() {
        let shape = StreamShape::new().chunking(Chunking::FixedBytes(5));
        let per_frame = plan(&events(&["hello", "world"]), &StreamShape::new());
        let steps = plan(&events(&["hello", "world"]), &shape);
        assert!(steps[..steps.len() - 1].iter().all(|s| s.bytes.len() == 5));
        assert_eq!(concat(&steps), concat(&per_frame));
    }

    #[test]
    fn utf8_split_cuts_inside_the_first_multibyte_character() {
        let shape = StreamShape::new().chunking(Chunking::SplitUtf8);
        let steps = plan(&events(&["é!"]), &shape);
        assert_eq!(steps.len(), 2);
        assert!(std::str::from_utf8(&steps[0].bytes).is_err());
        assert_eq!(concat(&steps), "data: é!\n\n".as_bytes());
    }

    #[test]
    fn pacing_puts_ttft_first_and_token_gaps_between_tokens() {
        let shape = StreamShape::new()
            .time_to_first_token(Duration::from_millis(300))
            .tokens_per_second(10.0);
        let steps = plan(&events(&["a", "b", "c"]), &shape);
        let delays: Vec<_> = steps.iter().map(|s| s.delay).collect();
        assert_eq!(
            delays,
            [
                Duration::from_millis(300),
                Duration::from_millis(100),
                Duration::from_millis(100)
            ]
        );
    }

    #[test]
    fn keep_alive_comments_precede_every_frame() {
        let shape = StreamShape::new().keep_alive(true);
        let steps = plan(&events(&["a"]), &shape);
        assert_eq!(concat(&steps), b": keep-alive\n\ndata: a\n\n");
    }

    #[tokio::test(start_paused = true)]
    async fn play_waits_ttft_then_token_gaps_on_the_tokio_clock() {
        use futures_util::StreamExt;
        let shape = StreamShape::new()
            .time_to_first_token(Duration::from_millis(300))
            .tokens_per_second(10.0);
        let steps = plan(&events(&["a", "b", "c"]), &shape);
        let start = tokio::time::Instant::now();
        let mut body = play(
            steps,
            StreamEnd::Finish,
            CancellationToken::new(),
            Box::new(|| {}),
        );
        let mut at = Vec::new();
        while let Some(chunk) = body.next().await {
            chunk.unwrap();
            at.push(start.elapsed());
        }
        let ms = Duration::from_millis;
        assert_eq!(at, [ms(300), ms(400), ms(500)]);
    }

    #[tokio::test(start_paused = true)]
    async fn stalled_stream_ends_with_an_error_when_stopped() {
        use futures_util::StreamExt;
        let stop = CancellationToken::new();
        let mut body = play(Vec::new(), StreamEnd::Stall, stop.clone(), Box::new(|| {}));
        let next = tokio::time::timeout(Duration::from_secs(3600), body.next()).await;
        assert!(next.is_err(), "a stalled stream yields nothing");
        stop.cancel();
        assert!(body.next().await.unwrap().is_err());
        assert!(body.next().await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn crash_end_runs_the_hook_after_the_frames() {
        use futures_util::StreamExt;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        let steps = plan(&events(&["a"]), &StreamShape::new());
        let hook_stop = stop.clone();
        let mut body = play(
            steps,
            StreamEnd::Crash,
            stop,
            Box::new(move || {
                tx.send(()).unwrap();
                hook_stop.cancel();
            }),
        );
        assert_eq!(body.next().await.unwrap().unwrap(), "data: a\n\n");
        assert!(rx.try_recv().is_err(), "no crash before the frames are out");
        assert!(body.next().await.unwrap().is_err());
        assert!(rx.try_recv().is_ok());
    }
}
