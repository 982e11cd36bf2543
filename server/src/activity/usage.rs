//! Token counts as upstreams report them, read from response bytes as they pass.
//!
//! Every format llama-swap reads is read here, wherever it appears on a line
//! of a JSON body or of SSE `data:` lines:
//!
//! - OpenAI-style `usage` objects (chat, completions, embeddings, and the
//!   nested `response.usage` / `message.usage` of the Responses and Anthropic
//!   APIs): `prompt_tokens`/`input_tokens`, `completion_tokens`/`output_tokens`,
//!   and the cached prompt tokens (`prompt_tokens_details.cached_tokens`,
//!   `input_tokens_details.cached_tokens`, Anthropic's `cache_read_input_tokens`);
//! - llama.cpp's `timings`: `prompt_n`, `predicted_n`, `cache_n`, the two
//!   speeds, `prompt_ms` + `predicted_ms`, and the speculative decoding counts
//!   `draft_n` / `draft_n_accepted`; its counts win over `usage`'s, as in
//!   llama-swap;
//! - vLLM's per-request `metrics`: `speculative_decoding.num_draft_tokens` /
//!   `num_accepted_draft_tokens` (both or neither), `time_to_first_token_ms`
//!   (the prompt speed, over the prompt tokens not cached) and `mean_itl_ms`
//!   (the generation speed).
//!
//! An event stream is read line by line, a JSON body whole
//! ([`UsageScanner::whole_body`]: a pretty-printed one puts `"usage":` and its
//! value on different lines). Only complete lines (or the whole body) are
//! parsed, and only those that mention one of the keys; a line or body
//! longer than [`MAX_LINE`] is not kept whole (its pieces are still
//! scanned), so memory stays bounded whatever the upstream sends.

use std::sync::LazyLock;

use memchr::memmem;
use serde::Deserialize;

/// Longest partial line kept between two chunks.
pub(crate) const MAX_LINE: usize = 256 * 1024;

const USAGE: &[u8] = b"\"usage\"";
const TIMINGS: &[u8] = b"\"timings\"";
const METRICS: &[u8] = b"\"metrics\"";
/// An error envelope sent in place of (or in the middle of) a stream.
const ERROR: &[u8] = b"{\"error\"";

// Searchers built once: building one is a good part of a search's cost on the
// short lines of a small response, which every request passes here.
static USAGE_FINDER: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(USAGE));
static TIMINGS_FINDER: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(TIMINGS));
static METRICS_FINDER: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(METRICS));
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
    /// Prompt tokens served from the upstream's cache (`cached_tokens`,
    /// `cache_read_input_tokens`, llama.cpp `cache_n`).
    pub cached_tokens: Option<u64>,
    /// Tokens drafted by speculative decoding (llama.cpp `draft_n`, vLLM
    /// `num_draft_tokens`).
    pub draft_tokens: Option<u64>,
    /// Drafted tokens the model accepted (llama.cpp `draft_n_accepted`, vLLM
    /// `num_accepted_draft_tokens`).
    pub draft_accepted: Option<u64>,
    /// Generation speed measured by the upstream (llama.cpp
    /// `predicted_per_second`, or 1000 / vLLM `mean_itl_ms`).
    pub tokens_per_second: Option<f64>,
    /// Prompt processing speed measured by the upstream (llama.cpp
    /// `prompt_per_second`, or vLLM's uncached prompt tokens over
    /// `time_to_first_token_ms`).
    pub prompt_per_second: Option<f64>,
    /// The upstream's own time for the request (llama.cpp `prompt_ms` +
    /// `predicted_ms`), in milliseconds.
    pub upstream_ms: Option<u64>,
}

#[derive(Deserialize)]
struct UsageJson {
    #[serde(default, deserialize_with = "count")]
    prompt_tokens: Option<u64>,
    #[serde(default, deserialize_with = "count")]
    completion_tokens: Option<u64>,
    #[serde(default, deserialize_with = "count")]
    input_tokens: Option<u64>,
    #[serde(default, deserialize_with = "count")]
    output_tokens: Option<u64>,
    #[serde(default, deserialize_with = "count")]
    cache_read_input_tokens: Option<u64>,
    prompt_tokens_details: Option<CachedJson>,
    input_tokens_details: Option<CachedJson>,
}

#[derive(Deserialize)]
struct CachedJson {
    #[serde(default, deserialize_with = "count")]
    cached_tokens: Option<u64>,
}

/// A count of `usage` as llama-swap reads one that is there: a whole number,
/// a float (`12.0`: its whole part), or `null` (0). A negative one or
/// anything else counts as absent, without losing the object's other counts.
fn count<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let value = serde_json::Value::deserialize(d)?;
    Ok(match value {
        serde_json::Value::Null => Some(0),
        serde_json::Value::Number(n) => n.as_u64().or_else(|| {
            let f = n.as_f64()?;
            // Saturating float-to-int cast of a finite, non-negative count.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            (f.is_finite() && f >= 0.0).then_some(f as u64)
        }),
        _ => None,
    })
}

#[derive(Deserialize)]
struct TimingsJson {
    prompt_n: Option<u64>,
    predicted_n: Option<u64>,
    cache_n: Option<u64>,
    prompt_per_second: Option<f64>,
    predicted_per_second: Option<f64>,
    prompt_ms: Option<f64>,
    predicted_ms: Option<f64>,
    draft_n: Option<u64>,
    draft_n_accepted: Option<u64>,
}

/// vLLM's per-request `metrics` object.
#[derive(Deserialize)]
struct MetricsJson {
    speculative_decoding: Option<SpeculativeJson>,
    time_to_first_token_ms: Option<f64>,
    mean_itl_ms: Option<f64>,
}

#[derive(Deserialize)]
struct SpeculativeJson {
    num_draft_tokens: Option<u64>,
    num_accepted_draft_tokens: Option<u64>,
}

/// vLLM's timing figures, applied once the token counts are all known.
#[derive(Debug, Clone, Copy, Default)]
struct VllmTimes {
    first_token_ms: Option<f64>,
    mean_itl_ms: Option<f64>,
}

/// Reads `Usage` out of a response body fed chunk by chunk.
#[derive(Debug, Default)]
pub struct UsageScanner {
    /// The unfinished last line of the previous chunks.
    carry: Vec<u8>,
    /// The current line outgrew [`MAX_LINE`]: its pieces are scanned one by one
    /// until its end.
    overlong: bool,
    usage: Usage,
    vllm: VllmTimes,
    error: bool,
    /// The body is one JSON document, not lines of events.
    whole: bool,
}

impl UsageScanner {
    /// A scanner that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// A scanner of a body that is one JSON document (not an event stream),
    /// read as a whole however it is split into lines.
    pub fn whole_body() -> Self {
        Self {
            whole: true,
            ..Self::default()
        }
    }

    /// Scans the next chunk of the body.
    pub fn feed(&mut self, chunk: &[u8]) {
        if self.whole {
            self.carry_piece(chunk);
            return;
        }
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
        if !rest.is_empty() {
            self.carry_piece(rest);
        }
    }

    /// Keeps `piece` of an unfinished line (or body) until it ends; past
    /// [`MAX_LINE`] the pieces are scanned one by one instead.
    fn carry_piece(&mut self, piece: &[u8]) {
        if self.overlong {
            self.scan_line(piece);
        } else if self.carry.len() + piece.len() > MAX_LINE {
            let mut whole = std::mem::take(&mut self.carry);
            whole.extend_from_slice(piece);
            self.scan_line(&whole);
            self.overlong = true;
        } else {
            self.carry.extend_from_slice(piece);
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
        if self.whole {
            self.scan_line(chunk);
            return;
        }
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
        let mut usage = self.usage;
        // Speeds from vLLM's times, computed once every count is known.
        if let Some(ms) = self.vllm.first_token_ms.filter(|ms| *ms > 0.0) {
            let prompt = usage.prompt_tokens.unwrap_or(0);
            let uncached = prompt.saturating_sub(usage.cached_tokens.unwrap_or(0));
            // Token counts are far below 2^53.
            #[allow(clippy::cast_precision_loss)]
            let uncached = uncached as f64;
            usage.prompt_per_second = Some(uncached / (ms / 1000.0));
        }
        if let Some(ms) = self.vllm.mean_itl_ms.filter(|ms| *ms > 0.0) {
            usage.tokens_per_second = Some(1000.0 / ms);
        }
        usage
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
            match parse_one::<Option<UsageJson>>(&line[start..]) {
                Some(Some(u)) => self.usage_object(&u),
                // A JSON answer's `usage: null` is usage reported, as
                // llama-swap reads it (a stream's is skipped).
                Some(None) if self.whole => self.usage_reported(),
                _ => {}
            }
        }
        for start in values_after(line, &TIMINGS_FINDER) {
            if let Some(Some(t)) = parse_one::<Option<TimingsJson>>(&line[start..]) {
                self.timings(&t);
            }
        }
        for start in values_after(line, &METRICS_FINDER) {
            if let Some(Some(m)) = parse_one::<Option<MetricsJson>>(&line[start..]) {
                self.vllm_metrics(&m);
            }
        }
    }

    /// An OpenAI or Anthropic `usage` object. A count of 0 does not replace
    /// one already seen: Anthropic's closing `message_delta` may repeat the
    /// input as 0 after `message_start` gave it.
    fn usage_object(&mut self, u: &UsageJson) {
        let usage = &mut self.usage;
        merge_count(&mut usage.prompt_tokens, u.prompt_tokens.or(u.input_tokens));
        merge_count(
            &mut usage.completion_tokens,
            u.completion_tokens.or(u.output_tokens),
        );
        let cached = u
            .cache_read_input_tokens
            .or_else(|| u.input_tokens_details.as_ref()?.cached_tokens)
            .or_else(|| u.prompt_tokens_details.as_ref()?.cached_tokens);
        if cached.is_some() {
            usage.cached_tokens = cached;
        }
        if self.whole {
            self.usage_reported();
        }
    }

    /// A JSON answer had a `usage`, whatever it held: llama-swap then counts
    /// 0 prompt and generated tokens where it found none, and -1 for the
    /// figures missing (a stream's `usage` without a count is skipped, as
    /// there).
    fn usage_reported(&mut self) {
        self.usage.prompt_tokens.get_or_insert(0);
        self.usage.completion_tokens.get_or_insert(0);
    }

    /// llama.cpp's `timings`: its counts replace what `usage` said.
    fn timings(&mut self, t: &TimingsJson) {
        let u = &mut self.usage;
        u.prompt_tokens = t.prompt_n.or(u.prompt_tokens);
        u.completion_tokens = t.predicted_n.or(u.completion_tokens);
        u.cached_tokens = t.cache_n.or(u.cached_tokens);
        u.prompt_per_second = t.prompt_per_second.or(u.prompt_per_second);
        u.tokens_per_second = t.predicted_per_second.or(u.tokens_per_second);
        if t.prompt_ms.is_some() || t.predicted_ms.is_some() {
            let ms = t.prompt_ms.unwrap_or(0.0) + t.predicted_ms.unwrap_or(0.0);
            // Saturating float-to-int cast; durations are far below u64::MAX ms.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let ms = ms.max(0.0) as u64;
            u.upstream_ms = Some(ms);
        }
        if let (Some(drafted), Some(accepted)) = (t.draft_n, t.draft_n_accepted) {
            u.draft_tokens = Some(drafted);
            u.draft_accepted = Some(accepted);
        }
    }

    /// vLLM's `metrics`: the draft counts only when both are given, so an
    /// acceptance rate is never made of half an object.
    fn vllm_metrics(&mut self, m: &MetricsJson) {
        if let Some(spec) = &m.speculative_decoding
            && let (Some(drafted), Some(accepted)) =
                (spec.num_draft_tokens, spec.num_accepted_draft_tokens)
        {
            self.usage.draft_tokens = Some(drafted);
            self.usage.draft_accepted = Some(accepted);
        }
        if m.time_to_first_token_ms.is_some() {
            self.vllm.first_token_ms = m.time_to_first_token_ms;
        }
        if m.mean_itl_ms.is_some() {
            self.vllm.mean_itl_ms = m.mean_itl_ms;
        }
    }
}

/// A later count replaces an earlier one unless it is 0.
fn merge_count(slot: &mut Option<u64>, new: Option<u64>) {
    match new {
        Some(0) if slot.is_some() => {}
        Some(n) => *slot = Some(n),
        None => {}
    }
}

fn mentions_a_key(bytes: &[u8]) -> bool {
    USAGE_FINDER.find(bytes).is_some()
        || TIMINGS_FINDER.find(bytes).is_some()
        || METRICS_FINDER.find(bytes).is_some()
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
    fn a_pretty_printed_json_body_is_read_whole_however_it_is_split() {
        let body = "{\n  \"choices\": [],\n  \"usage\":\n    {\n      \"prompt_tokens\": 12,\n      \"completion_tokens\": 34\n    }\n}\n";
        let bytes = body.as_bytes();
        for cut in 0..=bytes.len() {
            let mut scanner = UsageScanner::whole_body();
            scanner.feed(&bytes[..cut]);
            scanner.feed_last(&bytes[cut..]);
            let usage = scanner.finish();
            assert_eq!(
                (usage.prompt_tokens, usage.completion_tokens),
                (Some(12), Some(34)),
                "cut at {cut}"
            );
        }
        // Read line by line (an event stream's way), the value is missed.
        assert_eq!(scan(&[bytes]).prompt_tokens, None);
    }

    #[test]
    fn an_answers_usage_without_a_known_count_is_usage_reported_and_a_streams_is_not() {
        for body in [
            &br#"{"usage":null}"#[..],
            br#"{"usage":{"total_tokens":3}}"#,
        ] {
            let mut scanner = UsageScanner::whole_body();
            scanner.feed_last(body);
            let usage = scanner.finish();
            assert_eq!(
                (
                    usage.prompt_tokens,
                    usage.completion_tokens,
                    usage.cached_tokens
                ),
                (Some(0), Some(0), None),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        let usage =
            scan(&[b"data: {\"usage\":{\"total_tokens\":3}}\n\ndata: {\"usage\":null}\n\n"]);
        assert_eq!(usage, Usage::default());
    }

    #[test]
    fn counts_are_read_as_llama_swap_reads_them_floats_and_nulls_included() {
        let mut scanner = UsageScanner::whole_body();
        scanner.feed_last(
            br#"{"usage":{"prompt_tokens":12.0,"completion_tokens":34,"prompt_tokens_details":{"cached_tokens":null}}}"#,
        );
        let usage = scanner.finish();
        assert_eq!(
            (
                usage.prompt_tokens,
                usage.completion_tokens,
                usage.cached_tokens
            ),
            (Some(12), Some(34), Some(0))
        );
        // A count that is no number leaves the others.
        let usage = scan(&[
            br#"data: {"usage":{"prompt_tokens":"x","completion_tokens":-1,"output_tokens":5}}"#,
        ]);
        assert_eq!(
            (usage.prompt_tokens, usage.completion_tokens),
            (None, Some(5))
        );
    }

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
    fn openai_cached_prompt_tokens_are_read() {
        let body = br#"{"usage":{"prompt_tokens":100,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":80}}}"#;
        let usage = scan(&[body]);
        assert_eq!(
            (
                usage.prompt_tokens,
                usage.completion_tokens,
                usage.cached_tokens
            ),
            (Some(100), Some(5), Some(80))
        );
        let responses = br#"data: {"type":"response.completed","response":{"usage":{"input_tokens":9,"output_tokens":1,"input_tokens_details":{"cached_tokens":4}}}}"#;
        assert_eq!(scan(&[responses]).cached_tokens, Some(4));
    }

    #[test]
    fn anthropic_cache_reads_are_cached_tokens_and_a_closing_zero_keeps_the_input() {
        let stream = concat!(
            "event: message_start\n",
            "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":11,\"cache_read_input_tokens\":7,\"output_tokens\":1}}}\n\n",
            "event: message_delta\n",
            "data: {\"type\":\"message_delta\",\"usage\":{\"input_tokens\":0,\"output_tokens\":25}}\n\n",
        );
        let usage = scan(&[stream.as_bytes()]);
        assert_eq!(
            (
                usage.prompt_tokens,
                usage.completion_tokens,
                usage.cached_tokens
            ),
            (Some(11), Some(25), Some(7))
        );
    }

    #[test]
    fn llama_cpp_timings_give_cache_draft_speeds_and_time() {
        let frame = br#"data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1},"timings":{"cache_n":30,"prompt_n":12,"prompt_ms":40.5,"prompt_per_second":296.3,"predicted_n":64,"predicted_ms":1000.2,"predicted_per_second":63.98,"draft_n":40,"draft_n_accepted":31}}"#;
        let usage = scan(&[frame, b"\n\n"]);
        assert_eq!(usage.prompt_tokens, Some(12), "timings win over usage");
        assert_eq!(usage.completion_tokens, Some(64));
        assert_eq!(usage.cached_tokens, Some(30));
        assert_eq!(
            (usage.draft_tokens, usage.draft_accepted),
            (Some(40), Some(31))
        );
        assert_eq!(usage.prompt_per_second, Some(296.3));
        assert_eq!(usage.tokens_per_second, Some(63.98));
        assert_eq!(usage.upstream_ms, Some(1040));
    }

    #[test]
    fn a_half_draft_count_is_not_kept() {
        let usage = scan(&[br#"{"timings":{"predicted_n":3,"draft_n":9}}"#]);
        assert_eq!((usage.draft_tokens, usage.draft_accepted), (None, None));
        let usage = scan(&[br#"{"metrics":{"speculative_decoding":{"num_draft_tokens":9}}}"#]);
        assert_eq!((usage.draft_tokens, usage.draft_accepted), (None, None));
    }

    #[test]
    fn vllm_metrics_give_draft_counts_and_speeds() {
        let body = br#"{"usage":{"prompt_tokens":120,"completion_tokens":50,"prompt_tokens_details":{"cached_tokens":20}},"metrics":{"speculative_decoding":{"num_draft_tokens":30,"num_accepted_draft_tokens":21},"time_to_first_token_ms":200.0,"mean_itl_ms":20.0}}"#;
        let usage = scan(&[body]);
        assert_eq!(
            (usage.draft_tokens, usage.draft_accepted),
            (Some(30), Some(21))
        );
        // (120 - 20) uncached prompt tokens in 0.2 s; one token per 20 ms.
        assert_eq!(usage.prompt_per_second, Some(500.0));
        assert_eq!(usage.tokens_per_second, Some(50.0));
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
