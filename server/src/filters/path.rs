//! Key paths of `stripParams`, `setParams` and `setParamsByID`, in the dotted
//! syntax llama-swap's configs use (tidwall's sjson).
//!
//! - `a.b.c` walks into objects; `\` makes the next character literal, so
//!   `fav\.movie` is the single key `fav.movie`.
//! - A segment of digits is an array index where the value there is an array
//!   (`messages.0.content`) and an object key elsewhere; `-1` is "append" when
//!   setting and "the last element" when deleting.
//! - A leading `:` forces an object key (`users.:2313` is the key `2313`).
//! - Where nothing exists yet, a numeric segment creates an array and any other
//!   segment an object.

use std::fmt;

/// One step of a [`ParamPath`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Segment {
    /// The key text, escapes removed.
    pub(crate) text: String,
    /// Written with a leading `:`: always an object key.
    pub(crate) forced_key: bool,
}

/// What a segment means inside an array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ArrayStep {
    /// `-1`.
    Last,
    /// A decimal index.
    Index(usize),
    /// Not an index (a name, or a `:`-forced key).
    NotAnIndex,
}

impl Segment {
    pub(crate) fn array_step(&self) -> ArrayStep {
        if self.forced_key {
            return ArrayStep::NotAnIndex;
        }
        if self.text == "-1" {
            return ArrayStep::Last;
        }
        if !self.text.is_empty() && self.text.bytes().all(|b| b.is_ascii_digit()) {
            // An index too large for memory is not one we could ever pad up to.
            return self
                .text
                .parse()
                .map_or(ArrayStep::NotAnIndex, ArrayStep::Index);
        }
        ArrayStep::NotAnIndex
    }
}

/// A parsed key path; `Display` gives back the text it was written as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ParamPath {
    raw: String,
    segments: Vec<Segment>,
}

impl ParamPath {
    /// Parses `raw` (never fails: every text is some path).
    pub(crate) fn parse(raw: &str) -> Self {
        let mut segments = Vec::new();
        let mut text = String::new();
        let mut forced_key = false;
        let mut at_start = true;
        let mut chars = raw.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => {
                    if let Some(next) = chars.next() {
                        text.push(next);
                    }
                    at_start = false;
                }
                '.' => {
                    segments.push(Segment {
                        text: std::mem::take(&mut text),
                        forced_key,
                    });
                    forced_key = false;
                    at_start = true;
                }
                ':' if at_start => {
                    forced_key = true;
                    at_start = false;
                }
                c => {
                    text.push(c);
                    at_start = false;
                }
            }
        }
        segments.push(Segment { text, forced_key });
        Self {
            raw: raw.to_owned(),
            segments,
        }
    }

    pub(crate) fn segments(&self) -> &[Segment] {
        &self.segments
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.raw
    }
}

impl fmt::Display for ParamPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(path: &str) -> Vec<(String, bool)> {
        ParamPath::parse(path)
            .segments()
            .iter()
            .map(|s| (s.text.clone(), s.forced_key))
            .collect()
    }

    #[test]
    fn dots_separate_segments_and_backslash_escapes() {
        assert_eq!(
            texts("a.b.c"),
            [
                ("a".into(), false),
                ("b".into(), false),
                ("c".into(), false)
            ]
        );
        assert_eq!(texts(r"fav\.movie"), [("fav.movie".into(), false)]);
        assert_eq!(
            texts(r"a\\.b"),
            [(r"a\".into(), false), ("b".into(), false)]
        );
    }

    #[test]
    fn a_leading_colon_forces_an_object_key() {
        assert_eq!(
            texts("users.:2313.name"),
            [
                ("users".into(), false),
                ("2313".into(), true),
                ("name".into(), false)
            ]
        );
        assert_eq!(texts(r"\:5"), [(":5".into(), false)]);
        assert_eq!(texts("a:b"), [("a:b".into(), false)]);
    }

    #[test]
    fn numeric_segments_are_indexes_only_when_not_forced() {
        let p = ParamPath::parse("a.0.-1.:3.x");
        let steps: Vec<ArrayStep> = p.segments().iter().map(Segment::array_step).collect();
        assert_eq!(
            steps,
            [
                ArrayStep::NotAnIndex,
                ArrayStep::Index(0),
                ArrayStep::Last,
                ArrayStep::NotAnIndex,
                ArrayStep::NotAnIndex
            ]
        );
    }

    #[test]
    fn display_is_the_text_as_written() {
        assert_eq!(ParamPath::parse(r"a\.b.:1").to_string(), r"a\.b.:1");
    }
}
