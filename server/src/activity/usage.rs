//! Token counts as upstreams report them, read from response bytes as they pass.
//!
//! OpenAI-style `usage` objects (chat, completions, embeddings, and the nested
//! `response.usage` / `message.usage` of the Responses and Anthropic APIs) and
//! llama.cpp's `timings` are found by key wherever they appear on a line, in a
//! JSON body or in SSE `data:` lines. Only complete lines are parsed, and only
//! lines that mention one of the keys; a line longer than [`MAX_LINE`] is not
//! kept whole (its pieces are still scanned), so memory stays bounded whatever
//! the upstream sends.

use std::sync::LazyLock;

use memchr::memmem;
use serde::Deserialize;

/// Longest partial line kept between two chunks.
pub const MAX_LINE: usize = 256 * 1024;

const USAGE: &[u8] = b"\"usage\"";
const TIMINGS: &[u8] = b"\"timings\"";
/// An error envelope sent in place of (or in the middle of) a stream.
const ERROR: &[u8] = b"{\"error\"";

// Searchers built once: building one is a good part of a search's cost on the
// short lines of a small response, which every request passes here.
static USAGE_FINDER: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(USAGE));
static TIMINGS_FINDER: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(TIMINGS));
static ERROR_FINDER: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(ERROR));

/// What the upstream reported about the work it did; every part is optional.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[non_exhaustive]
pub struct Usage {
    /// Tokens of the prompt (`prompt_tokens`, `input_tokens`, llama.cpp `prompt_n`).
    pub prompt_tokens: Option<u64>,
    /// Tokens generated (`completion_tokens`, `output_tokens`, llama.cpp `predicted_n`).
    pub completion_tokens: Option<u64>,
    /// Generation speed measured by the upstream (llama.cpp `predicted_per_second`).
    pub tokens_per_second: Option<f64>,
    /// Prompt processing speed measured by the upstream (llama.cpp `prompt_per_second`).
    pub prompt_per_second: Option<f64>,
}

#[derive(Deserialize)]
struct UsageJson {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct TimingsJson {
    prompt_n: Option<u64>,
    predicted_n: Option<u64>,
    prompt_per_second: Option<f64>,
    predicted_per_second: Option<f64>,
}

/// Reads [`Usage`] out of a response body fed chunk by chunk.
#[derive(Debug, Default)]
pub struct UsageScanner {
    /// The unfinished last line of the previous chunks.
    carry: Vec<u8>,
    /// The current line outgrew [`MAX_LINE`]: its pieces are scanned one by one
    /// until its end.
    overlong: bool,
    usage: Usage,
    error: bool,
}

impl UsageScanner {
    /// A scanner that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Scans the next chunk of the body.
    pub fn feed(&mut self, chunk: &[u8]) {
        // The common case of a stream: whole lines, none of them about usage.
        if self.carry.is_empty()
            && !self.overlong
            && chunk.last() == Some(&b'\n')
            && !mentions_a_key(chunk)
        {
            return;
        }
        let mut rest = chunk;
        while let Some(end) = memchr::memchr(b'\n', rest) {
            let (line, tail) = rest.split_at(end);
            rest = &tail[1..];
            if self.overlong {
                self.overlong = false;
                self.scan_line(line);
            } else if self.carry.is_empty() {
                self.scan_line(line);
            } else {
                let mut whole = std::mem::take(&mut self.carry);
                whole.extend_from_slice(line);
                self.scan_line(&whole);
                // Keep the allocation for the next split line.
                whole.clear();
                self.carry = whole;
            }
        }
        if rest.is_empty() {
            return;
        }
        if self.overlong {
            self.scan_line(rest);
        } else if self.carry.len() + rest.len() > MAX_LINE {
            let mut piece = std::mem::take(&mut self.carry);
            piece.extend_from_slice(rest);
            self.scan_line(&piece);
            self.overlong = true;
        } else {
            self.carry.extend_from_slice(rest);
        }
    }

    /// Scans the body's last chunk: what [`feed`](Self::feed) then
    /// [`finish`](Self::finish) would find, without copying the chunk's
    /// unfinished end (a JSON body's only line) when nothing is carried.
    pub fn feed_last(&mut self, chunk: &[u8]) {
        if !self.carry.is_empty() {
            self.feed(chunk);
            return;
        }
        // The end of an overlong line is one more of its pieces, scanned alone
        // like the others.
        self.overlong = false;
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', chunk) {
            self.scan_line(&chunk[start..end]);
            start = end + 1;
        }
        self.scan_line(&chunk[start..]);
    }

    /// What was found so far, including the last line when it had no newline.
    pub fn finish(&mut self) -> Usage {
        if !self.carry.is_empty() {
            let last = std::mem::take(&mut self.carry);
            self.scan_line(&last);
        }
        self.usage
    }

    /// True when a line carried an error envelope (`data: {"error": ...}`),
    /// which is how a stream that fails after its status line ends.
    pub fn saw_error(&self) -> bool {
        self.error
    }

    fn scan_line(&mut self, line: &[u8]) {
        // No prefilter: the searches for the keys' values are the same
        // searches, and the error envelope is only looked for at the start.
        let payload = line
            .strip_prefix(b"data:")
            .unwrap_or(line)
            .trim_ascii_start();
        if payload.starts_with(ERROR) {
            self.error = true;
        }
        for start in values_after(line, &USAGE_FINDER) {
            if let Some(Some(u)) = parse_one::<Option<UsageJson>>(&line[start..]) {
                let prompt = u.prompt_tokens.or(u.input_tokens);
                let completion = u.completion_tokens.or(u.output_tokens);
                self.usage.prompt_tokens = prompt.or(self.usage.prompt_tokens);
                self.usage.completion_tokens = completion.or(self.usage.completion_tokens);
            }
        }
        for start in values_after(line, &TIMINGS_FINDER) {
            if let Some(Some(t)) = parse_one::<Option<TimingsJson>>(&line[start..]) {
                let u = &mut self.usage;
                u.prompt_tokens = t.prompt_n.or(u.prompt_tokens);
                u.completion_tokens = t.predicted_n.or(u.completion_tokens);
                u.prompt_per_second = t.prompt_per_second.or(u.prompt_per_second);
                u.tokens_per_second = t.predicted_per_second.or(u.tokens_per_second);
            }
        }
    }
}

fn mentions_a_key(bytes: &[u8]) -> bool {
    USAGE_FINDER.find(bytes).is_some()
        || TIMINGS_FINDER.find(bytes).is_some()
        || ERROR_FINDER.find(bytes).is_some()
}

/// Where the value of each `"key":` on the line starts.
fn values_after<'a>(
    line: &'a [u8],
    key: &'a memmem::Finder<'static>,
) -> impl Iterator<Item = usize> + 'a {
    key.find_iter(line).filter_map(move |at| {
        let mut i = at + key.needle().len();
        while line.get(i).is_some_and(u8::is_ascii_whitespace) {
            i += 1;
        }
        if line.get(i) != Some(&b':') {
            return None;
        }
        Some(i + 1)
    })
}

/// The first JSON value of `bytes` (what follows it is ignored).
fn parse_one<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Option<T> {
    serde_json::Deserializer::from_slice(bytes)
        .into_iter::<T>()
        .next()
        .and_then(Result::ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(chunks: &[&[u8]]) -> Usage {
        let mut scanner = UsageScanner::new();
        for chunk in chunks {
            scanner.feed(chunk);
        }
        scanner.finish()
    }

    const OPENAI_STREAM: &str = concat!(
        "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":34,\"total_tokens\":46}}\n\n",
        "data: [DONE]\n\n",
    );

    #[test]
    fn openai_stream_usage_frame_is_read() {
        let usage = scan(&[OPENAI_STREAM.as_bytes()]);
        assert_eq!(usage.prompt_tokens, Some(12));
        assert_eq!(usage.completion_tokens, Some(34));
    }

    #[test]
    fn usage_split_across_chunks_at_every_offset_is_read() {
        let bytes = OPENAI_STREAM.as_bytes();
        for cut in 0..=bytes.len() {
            let usage = scan(&[&bytes[..cut], &bytes[cut..]]);
            assert_eq!(usage.completion_tokens, Some(34), "cut at {cut}");
            assert_eq!(usage.prompt_tokens, Some(12), "cut at {cut}");
        }
    }

    #[test]
    fn json_body_usage_is_read_without_a_trailing_newline() {
        let body = br#"{"id":"x","choices":[{"message":{"content":"the \"usage\": word"}}],"usage": {"prompt_tokens":5,"completion_tokens":7}}"#;
        let usage = scan(&[&body[..20], &body[20..]]);
        assert_eq!(usage.prompt_tokens, Some(5));
        assert_eq!(usage.completion_tokens, Some(7));
    }

    #[test]
    fn llama_cpp_timings_give_counts_and_speed() {
        let frame = b"data: {\"content\":\"\",\"stop\":true,\"timings\":{\"prompt_n\":9,\"prompt_per_second\":300.5,\"predicted_n\":40,\"predicted_per_second\":21.25}}\n\n";
        let usage = scan(&[frame]);
        assert_eq!(usage.prompt_tokens, Some(9));
        assert_eq!(usage.completion_tokens, Some(40));
        assert_eq!(usage.tokens_per_second, Some(21.25));
        assert_eq!(usage.prompt_per_second, Some(300.5));
    }

    #[test]
    fn anthropic_input_and_output_tokens_are_merged_across_events() {
        let stream = concat!(
            "event: message_start\n",
            "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":11,\"output_tokens\":1}}}\n\n",
            "event: message_delta\n",
            "data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":25}}\n\n",
        );
        let usage = scan(&[stream.as_bytes()]);
        assert_eq!(usage.prompt_tokens, Some(11));
        assert_eq!(usage.completion_tokens, Some(25));
    }

    #[test]
    fn responses_api_nested_usage_is_read() {
        let frame = b"data: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":3,\"output_tokens\":4}}}\n\n";
        let usage = scan(&[frame]);
        assert_eq!(
            (usage.prompt_tokens, usage.completion_tokens),
            (Some(3), Some(4))
        );
    }

    #[test]
    fn a_stream_without_usage_reports_nothing() {
        let usage = scan(&[
            b"data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n",
            b"data: [DONE]\n\n",
        ]);
        assert_eq!(usage, Usage::default());
    }

    #[test]
    fn an_error_frame_in_a_stream_is_noticed() {
        let mut scanner = UsageScanner::new();
        scanner.feed(b"data: {\"choices\":[]}\n\n");
        assert!(!scanner.saw_error());
        scanner.feed(b"data: {\"error\":{\"message\":\"boom\"}}\n\ndata: [DONE]\n\n");
        assert!(scanner.saw_error());
    }

    #[test]
    fn malformed_usage_is_ignored() {
        let usage = scan(&[
            b"data: {\"usage\": {\"prompt_tokens\": \"many\"}}\n",
            b"{\"usage\" 5}\n",
        ]);
        assert_eq!(usage, Usage::default());
    }

    #[test]
    fn a_last_chunk_is_scanned_without_being_kept() {
        let mut scanner = UsageScanner::new();
        scanner.feed_last(br#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7}}"#);
        assert_eq!(scanner.carry.capacity(), 0, "the chunk was copied");
        let usage = scanner.finish();
        assert_eq!(
            (usage.prompt_tokens, usage.completion_tokens),
            (Some(5), Some(7))
        );
    }

    #[test]
    fn a_last_chunk_completes_the_carried_line() {
        let body: &[u8] = br#"{"usage":{"prompt_tokens":5,"completion_tokens":7}}"#;
        for cut in 0..body.len() {
            let mut scanner = UsageScanner::new();
            scanner.feed(&body[..cut]);
            scanner.feed_last(&body[cut..]);
            assert_eq!(scanner.finish().completion_tokens, Some(7), "cut at {cut}");
        }
    }

    #[test]
    fn an_overlong_line_is_not_kept_but_usage_in_its_last_chunk_is_found() {
        let mut scanner = UsageScanner::new();
        scanner.feed(b"{\"data\":[");
        let filler = vec![b'1'; 64 * 1024];
        for _ in 0..(MAX_LINE / filler.len() + 2) {
            scanner.feed(&filler);
            assert!(
                scanner.carry.len() <= MAX_LINE,
                "carry grew to {}",
                scanner.carry.len()
            );
        }
        scanner.feed(b"],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":0}}");
        let usage = scanner.finish();
        assert_eq!(usage.prompt_tokens, Some(8));
    }
}
