//! How the proxy's log renders tracing fields: each visitor writes straight
//! into the line being built, so a field costs no `String` of its own.

use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};

use super::inline::InlineText;

/// Writes an event's message (the `message` field) into a line.
pub(super) struct Message<'a>(pub(super) &'a mut String);

impl Visit for Message<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0.push_str(value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            // Writing into a `String` cannot fail.
            let _ = write!(self.0, "{value:?}");
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
                let _ = self.0.write_str(value);
            }
            _ => {
                self.key(field);
                let _ = if value.is_empty() || value.contains(char::is_whitespace) {
                    write!(self.0, "{value:?}")
                } else {
                    self.0.write_str(value)
                };
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
            let _ = write!(self.0, "{value:?}");
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
