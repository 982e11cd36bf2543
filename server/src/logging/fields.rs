//! How the proxy's log renders tracing fields: each visitor writes straight
//! into the line being built, so a field costs no `String` of its own.
//!
//! Values are cut: a message at [`MAX_MESSAGE_BYTES`], any other field at
//! [`MAX_VALUE_BYTES`], with the number of bytes left out in their place. A
//! client chooses some of what is logged (a request's path may be 64 KiB, and
//! is logged for refused requests too), and a line must not cost the history
//! more than a line's worth.

use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};

use super::inline::InlineText;

/// Longest message kept in a line of the proxy's log. Messages are the
/// server's own text; the longest are a refused reload's list of problems.
pub(crate) const MAX_MESSAGE_BYTES: usize = 64 * 1024;
/// Longest value of any other field kept in a line (a path, an error, an id).
pub(crate) const MAX_VALUE_BYTES: usize = 1024;

/// A writer that passes on the first `left` bytes (cut at a character
/// boundary) and counts the rest.
struct Capped<'a, W: fmt::Write> {
    out: &'a mut W,
    left: usize,
    cut: usize,
}

impl<W: fmt::Write> fmt::Write for Capped<'_, W> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if s.len() <= self.left {
            self.left -= s.len();
            return self.out.write_str(s);
        }
        let mut end = self.left;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.left = 0;
        self.cut += s.len() - end;
        self.out.write_str(&s[..end])
    }
}

/// Writes what `write` writes into `out`, at most `limit` bytes of it, then
/// says how many bytes were left out.
fn capped<W: fmt::Write>(
    out: &mut W,
    limit: usize,
    write: impl FnOnce(&mut Capped<'_, W>) -> fmt::Result,
) -> fmt::Result {
    let mut capped = Capped {
        out,
        left: limit,
        cut: 0,
    };
    write(&mut capped)?;
    let cut = capped.cut;
    if cut > 0 {
        write!(out, "...[{cut} more bytes]")?;
    }
    Ok(())
}

/// Writes an event's message (the `message` field) into a line.
pub(super) struct Message<'a>(pub(super) &'a mut String);

impl Visit for Message<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            // Writing into a `String` cannot fail.
            let _ = capped(self.0, MAX_MESSAGE_BYTES, |w| w.write_str(value));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            let _ = capped(self.0, MAX_MESSAGE_BYTES, |w| write!(w, "{value:?}"));
        }
    }
}

/// Writes an event's or span's fields but the message into a line as
/// ` key=value`: a string quoted (escaped) when it is empty or has
/// whitespace, except `model`; anything else as its `Debug` text.
pub(super) struct Pairs<'a, W: fmt::Write>(pub(super) &'a mut W);

// Writing into a `String` or `SpanFields` cannot fail: results are ignored.
impl<W: fmt::Write> Pairs<'_, W> {
    fn key(&mut self, field: &Field) {
        let _ = write!(self.0, " {}=", field.name());
    }
}

impl<W: fmt::Write> Visit for Pairs<'_, W> {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => {}
            "model" => {
                self.key(field);
                let _ = capped(self.0, MAX_VALUE_BYTES, |w| w.write_str(value));
            }
            _ => {
                self.key(field);
                let _ = capped(self.0, MAX_VALUE_BYTES, |w| {
                    if value.is_empty() || value.contains(char::is_whitespace) {
                        write!(w, "{value:?}")
                    } else {
                        w.write_str(value)
                    }
                });
            }
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.key(field);
        let _ = write!(self.0, "{value}");
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.key(field);
        let _ = write!(self.0, "{value}");
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.key(field);
        // `Debug`, not `Display`: `1.0` stays `1.0`, as tracing renders it.
        let _ = write!(self.0, "{value:?}");
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.key(field);
        let _ = self.0.write_str(if value { "true" } else { "false" });
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() != "message" {
            self.key(field);
            let _ = capped(self.0, MAX_VALUE_BYTES, |w| write!(w, "{value:?}"));
        }
    }
}

/// A span's fields, rendered once as ` key=value` pairs. Inline up to 64
/// bytes: the request span's ` request_id=<16 hex digits> seq=<n>` fits, so
/// that its fields cost no allocation beyond the extension that holds them.
pub(super) type SpanFields = InlineText<64>;

/// Writes an upstream event's `model` field into a line: its text, or its
/// `Debug` text without surrounding quotes; the last one when repeated.
pub(super) struct Model<'a> {
    line: &'a mut String,
    start: usize,
    /// Whether the event had the field (it may be empty).
    pub(super) seen: bool,
}

impl<'a> Model<'a> {
    pub(super) fn new(line: &'a mut String) -> Self {
        let start = line.len();
        Self {
            line,
            start,
            seen: false,
        }
    }
}

impl Visit for Model<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "model" {
            self.seen = true;
            self.line.truncate(self.start);
            self.line.push_str(value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() != "model" {
            return;
        }
        self.seen = true;
        self.line.truncate(self.start);
        let _ = write!(self.line, "{value:?}");
        let written = &self.line[self.start..];
        let kept = written.trim_matches('"').len();
        let leading = written.len() - written.trim_start_matches('"').len();
        self.line.truncate(self.start + leading + kept);
        self.line.drain(self.start..self.start + leading);
    }
}
