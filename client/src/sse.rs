//! Server-sent events framing over raw bytes.
//!
//! Bytes arrive in arbitrary pieces: a boundary can fall inside a line, inside a
//! multi-byte UTF-8 character or between the `\r` and `\n` of a CRLF. The decoder
//! keeps undecoded bytes until a line terminator arrives and only then decodes the
//! line, so a split character is never mangled. Memory is bounded: a line or event
//! larger than the configured limit is an error, not a growing buffer.
//!
//! Beyond the SSE specification, a line that starts with `{` is taken as a data line:
//! llama-swap appends a bare JSON error body to a loading stream that already
//! answered 200.

use std::mem;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field, if one was given.
    pub event: Option<String>,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
    /// The `id:` field, if one was given.
    pub id: Option<String>,
}

/// An event or line grew past the decoder's limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge {
    /// The limit in bytes.
    pub limit: usize,
}

/// Incremental SSE decoder: [`push`](SseDecoder::push) bytes, then drain
/// [`next_event`](SseDecoder::next_event) until it returns `None`.
#[derive(Debug)]
pub struct SseDecoder {
    buf: Vec<u8>,
    /// Bytes of `buf` already known to hold no line terminator.
    scanned: usize,
    /// The previous line ended in `\r`; a `\n` at the start of the next piece
    /// belongs to it.
    pending_cr: bool,
    at_start: bool,
    data: String,
    has_data: bool,
    event: Option<String>,
    id: Option<String>,
    limit: usize,
    finished: bool,
}

impl SseDecoder {
    /// A decoder that refuses lines or events over `limit` bytes.
    pub fn new(limit: usize) -> SseDecoder {
        SseDecoder {
            buf: Vec::new(),
            scanned: 0,
            pending_cr: false,
            at_start: true,
            data: String::new(),
            has_data: false,
            event: None,
            id: None,
            limit,
            finished: false,
        }
    }

    /// Appends received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Marks the end of input: a final unterminated line is processed and a pending
    /// event is dispatched.
    pub fn finish(&mut self) {
        self.finished = true;
    }

    /// The next complete event, `None` when more bytes are needed (or, after
    /// [`finish`](SseDecoder::finish), when everything has been returned).
    ///
    /// # Errors
    ///
    /// [`TooLarge`] when a line or an event's data exceeds the limit.
    pub fn next_event(&mut self) -> Result<Option<SseEvent>, TooLarge> {
        loop {
            if self.pending_cr && !self.buf.is_empty() {
                if self.buf[0] == b'\n' {
                    self.consume(1);
                }
                self.pending_cr = false;
            }
            match self.take_line()? {
                Some(line) => {
                    if let Some(event) = self.process_line(&line)? {
                        return Ok(Some(event));
                    }
                }
                None if self.finished => {
                    if !self.buf.is_empty() {
                        let rest = mem::take(&mut self.buf);
                        self.scanned = 0;
                        let line = String::from_utf8_lossy(&rest).into_owned();
                        if let Some(event) = self.process_line(&line)? {
                            return Ok(Some(event));
                        }
                    }
                    return Ok(self.dispatch());
                }
                None => return Ok(None),
            }
        }
    }

    /// Removes and decodes one complete line from the buffer.
    fn take_line(&mut self) -> Result<Option<String>, TooLarge> {
        let found = self.buf[self.scanned..]
            .iter()
            .position(|&b| b == b'\n' || b == b'\r');
        let Some(offset) = found else {
            self.scanned = self.buf.len();
            if self.buf.len() > self.limit {
                return Err(TooLarge { limit: self.limit });
            }
            return Ok(None);
        };
        let end = self.scanned + offset;
        let terminator = self.buf[end];
        let mut consumed = end + 1;
        if terminator == b'\r' {
            match self.buf.get(end + 1) {
                Some(b'\n') => consumed += 1,
                Some(_) => {}
                // The `\n` of a CRLF may be in the next piece.
                None => self.pending_cr = true,
            }
        }
        let line = String::from_utf8_lossy(&self.buf[..end]).into_owned();
        self.consume(consumed);
        Ok(Some(line))
    }

    fn consume(&mut self, n: usize) {
        self.buf.drain(..n);
        self.scanned = 0;
    }

    fn process_line(&mut self, line: &str) -> Result<Option<SseEvent>, TooLarge> {
        let line = if self.at_start {
            self.at_start = false;
            line.strip_prefix('\u{feff}').unwrap_or(line)
        } else {
            line
        };
        if line.is_empty() {
            return Ok(self.dispatch());
        }
        if line.starts_with(':') {
            return Ok(None);
        }
        if line.starts_with('{') {
            self.append_data(line)?;
            return Ok(None);
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "data" => self.append_data(value)?,
            "event" => self.event = Some(value.to_owned()),
            "id" if !value.contains('\0') => self.id = Some(value.to_owned()),
            // `retry` and unknown fields carry nothing a completion client needs.
            _ => {}
        }
        Ok(None)
    }

    fn append_data(&mut self, value: &str) -> Result<(), TooLarge> {
        if self.has_data {
            self.data.push('\n');
        }
        self.data.push_str(value);
        self.has_data = true;
        if self.data.len() > self.limit {
            return Err(TooLarge { limit: self.limit });
        }
        Ok(())
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = self.event.take();
        if !mem::take(&mut self.has_data) {
            // Per the specification, an event without data is not dispatched.
            return None;
        }
        Some(SseEvent {
            event,
            data: mem::take(&mut self.data),
            id: self.id.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const LIMIT: usize = 1 << 20;

    fn decode_pieces(pieces: &[&[u8]]) -> Result<Vec<SseEvent>, TooLarge> {
        let mut decoder = SseDecoder::new(LIMIT);
        let mut events = Vec::new();
        for piece in pieces {
            decoder.push(piece);
            while let Some(ev) = decoder.next_event()? {
                events.push(ev);
            }
        }
        decoder.finish();
        while let Some(ev) = decoder.next_event()? {
            events.push(ev);
        }
        Ok(events)
    }

    fn decode(body: &[u8]) -> Vec<SseEvent> {
        decode_pieces(&[body]).unwrap()
    }

    fn data(text: &str) -> SseEvent {
        SseEvent {
            data: text.to_owned(),
            ..SseEvent::default()
        }
    }

    /// Every feature the stream parser must handle, in one body.
    const MIXED: &str = "\u{feff}: keep-alive comment\r\n\
        data: {\"a\":\"héllo wörld 🦙\"}\r\n\r\n\
        data:{\"no\":\"space\"}\n\n\
        :\n\
        event: error\r\
        data: line one\r\
        data: line two\r\r\
        id: 7\n\
        data:  two spaces keep one\n\n\
        retry: 100\n\
        data\n\n\
        {\"error\":{\"message\":\"bare json\"}}\n\n\
        data: [DONE]\n\n";

    fn mixed_expected() -> Vec<SseEvent> {
        vec![
            data("{\"a\":\"héllo wörld 🦙\"}"),
            data("{\"no\":\"space\"}"),
            SseEvent {
                event: Some("error".into()),
                data: "line one\nline two".into(),
                id: None,
            },
            SseEvent {
                event: None,
                data: " two spaces keep one".into(),
                id: Some("7".into()),
            },
            SseEvent {
                event: None,
                data: String::new(),
                id: Some("7".into()),
            },
            SseEvent {
                event: None,
                data: "{\"error\":{\"message\":\"bare json\"}}".into(),
                id: Some("7".into()),
            },
            SseEvent {
                event: None,
                data: "[DONE]".into(),
                id: Some("7".into()),
            },
        ]
    }

    #[test]
    fn mixed_body_decodes_every_feature() {
        assert_eq!(decode(MIXED.as_bytes()), mixed_expected());
    }

    #[test]
    fn split_at_every_byte_offset_gives_the_same_events() {
        let body = MIXED.as_bytes();
        let expected = mixed_expected();
        for cut in 0..=body.len() {
            let (a, b) = body.split_at(cut);
            assert_eq!(decode_pieces(&[a, b]).unwrap(), expected, "cut at {cut}");
        }
    }

    #[test]
    fn one_byte_at_a_time_gives_the_same_events() {
        let pieces: Vec<&[u8]> = MIXED.as_bytes().chunks(1).collect();
        assert_eq!(decode_pieces(&pieces).unwrap(), mixed_expected());
    }

    #[test]
    fn unterminated_last_event_is_dispatched_at_end_of_input() {
        assert_eq!(decode(b"data: tail"), vec![data("tail")]);
        assert_eq!(decode(b"data: tail\r"), vec![data("tail")]);
    }

    #[test]
    fn events_without_data_are_not_dispatched() {
        assert_eq!(decode(b"event: ping\n\n: comment\n\n"), vec![]);
    }

    #[test]
    fn oversized_line_is_an_error_not_a_growing_buffer() {
        let mut decoder = SseDecoder::new(16);
        decoder.push(&[b'x'; 64]);
        assert_eq!(decoder.next_event(), Err(TooLarge { limit: 16 }));
    }

    #[test]
    fn oversized_event_across_lines_is_an_error() {
        let mut decoder = SseDecoder::new(16);
        decoder.push(b"data: 0123456789\ndata: 0123456789\n");
        assert_eq!(decoder.next_event(), Err(TooLarge { limit: 16 }));
    }

    fn render(events: &[String], ending: &str, space: bool) -> String {
        let mut out = String::new();
        for e in events {
            for line in e.split('\n') {
                out.push_str(if space { "data: " } else { "data:" });
                out.push_str(line);
                out.push_str(ending);
            }
            out.push_str(": keep-alive");
            out.push_str(ending);
            out.push_str(ending);
        }
        out
    }

    proptest! {
        #[test]
        fn random_chunkings_give_the_same_events(
            events in proptest::collection::vec("[a-zé🦙 {}\":,\n]{1,40}", 1..8),
            ending in prop_oneof![Just("\n"), Just("\r\n"), Just("\r")],
            space in any::<bool>(),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
        ) {
            let body = render(&events, ending, space);
            let bytes = body.as_bytes();
            let mut offsets: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
            offsets.sort_unstable();
            let mut pieces = Vec::new();
            let mut start = 0;
            for off in offsets {
                pieces.push(&bytes[start..off]);
                start = off;
            }
            pieces.push(&bytes[start..]);
            let whole = decode(bytes);
            // Written without a space, a value's own leading space is the separator.
            let expected: Vec<SseEvent> = events
                .iter()
                .map(|e| {
                    if space {
                        return data(e);
                    }
                    let lines: Vec<&str> =
                        e.split('\n').map(|l| l.strip_prefix(' ').unwrap_or(l)).collect();
                    data(&lines.join("\n"))
                })
                .collect();
            prop_assert_eq!(&whole, &expected);
            prop_assert_eq!(decode_pieces(&pieces).unwrap(), whole);
        }
    }
}
