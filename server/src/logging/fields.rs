//! How the proxy's log renders tracing fields: each visitor writes straight
//! into the line being built, so a field costs no `String` of its own.

use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};

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
pub(super) struct Pairs<'a>(pub(super) &'a mut String);

impl Pairs<'_> {
    fn key(&mut self, field: &Field) {
        self.0.push(' ');
        self.0.push_str(field.name());
        self.0.push('=');
    }
}

// Writing into a `String` cannot fail: the `write!` results are ignored.
impl Visit for Pairs<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => {}
            "model" => {
                self.key(field);
                self.0.push_str(value);
            }
            _ => {
                self.key(field);
                if value.is_empty() || value.contains(char::is_whitespace) {
                    let _ = write!(self.0, "{value:?}");
                } else {
                    self.0.push_str(value);
                }
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
        self.0.push_str(if value { "true" } else { "false" });
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() != "message" {
            self.key(field);
            let _ = write!(self.0, "{value:?}");
        }
    }
}

/// Writes an upstream event's `model` field into a line: its text, or its
/// `Debug` text without surrounding quotes; the last one when repeated.
pub(super) struct Model<'a> {
    line: &'a mut String,
    start: usize,
}

impl<'a> Model<'a> {
    pub(super) fn new(line: &'a mut String) -> Self {
        let start = line.len();
        Self { line, start }
    }
}

impl Visit for Model<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "model" {
            self.line.truncate(self.start);
            self.line.push_str(value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() != "model" {
            return;
        }
        self.line.truncate(self.start);
        let _ = write!(self.line, "{value:?}");
        let written = &self.line[self.start..];
        let kept = written.trim_matches('"').len();
        let leading = written.len() - written.trim_start_matches('"').len();
        self.line.truncate(self.start + leading + kept);
        self.line.drain(self.start..self.start + leading);
    }
}
