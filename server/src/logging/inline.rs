//! Short text made for every request (a span's fields, the path its access
//! line names) kept inline, so that it costs no allocation of its own.

use std::fmt;

/// Text of up to `N` bytes (at most 255) kept inline; longer text moves to
/// the heap.
#[derive(Clone)]
pub(crate) enum InlineText<const N: usize> {
    /// The first `len` bytes of `bytes`.
    Inline { len: u8, bytes: [u8; N] },
    /// Text that outgrew the inline room.
    Heap(String),
}

impl<const N: usize> InlineText<N> {
    /// Refuses, at compile time, a room the `u8` length cannot count.
    const FITS: () = assert!(
        N <= u8::MAX as usize,
        "InlineText holds at most 255 bytes inline"
    );

    /// Empty text.
    pub(crate) const fn new() -> Self {
        let () = Self::FITS;
        Self::Inline {
            len: 0,
            bytes: [0; N],
        }
    }

    /// The text.
    pub(crate) fn as_str(&self) -> &str {
        match self {
            // Only whole `str`s are copied in, so the bytes are text.
            Self::Inline { len, bytes } => {
                std::str::from_utf8(&bytes[..usize::from(*len)]).unwrap_or_default()
            }
            Self::Heap(text) => text,
        }
    }

    /// Appends `text`.
    pub(crate) fn push_str(&mut self, text: &str) {
        match self {
            Self::Inline { len, bytes } => {
                let start = usize::from(*len);
                let end = start + text.len();
                if let (Some(room), Ok(end)) = (bytes.get_mut(start..end), u8::try_from(end)) {
                    room.copy_from_slice(text.as_bytes());
                    *len = end;
                    return;
                }
                let mut heap = String::with_capacity(2 * end);
                heap.push_str(self.as_str());
                heap.push_str(text);
                *self = Self::Heap(heap);
            }
            Self::Heap(heap) => heap.push_str(text),
        }
    }
}

impl<const N: usize> Default for InlineText<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> From<&str> for InlineText<N> {
    fn from(text: &str) -> Self {
        let mut inline = Self::new();
        inline.push_str(text);
        inline
    }
}

impl<const N: usize> fmt::Write for InlineText<N> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        self.push_str(text);
        Ok(())
    }
}

impl<const N: usize> fmt::Debug for InlineText<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use std::fmt::Write as _;

    use super::*;

    #[test]
    fn text_past_the_inline_room_keeps_every_byte() {
        let mut text = InlineText::<64>::new();
        let _ = write!(text, " request_id={}", "x".repeat(40));
        assert!(
            matches!(text, InlineText::Inline { len: 52, .. }),
            "inline so far"
        );
        let _ = write!(text, " seq=1234567890 extra=é");
        let expected = format!(" request_id={} seq=1234567890 extra=é", "x".repeat(40));
        assert!(matches!(text, InlineText::Heap(_)));
        assert_eq!(text.as_str(), expected);
        text.push_str(" more=1");
        assert_eq!(text.as_str(), format!("{expected} more=1"));
    }

    #[test]
    fn text_that_fills_the_room_exactly_stays_inline() {
        let text = InlineText::<4>::from("abcd");
        assert!(matches!(text, InlineText::Inline { len: 4, .. }));
        assert_eq!(text.as_str(), "abcd");
        assert_eq!(InlineText::<4>::from("abcde").as_str(), "abcde");
        assert_eq!(InlineText::<4>::new().as_str(), "");
    }

    #[test]
    fn a_room_of_255_bytes_is_counted_by_its_length() {
        let long = "y".repeat(255);
        let text = InlineText::<255>::from(long.as_str());
        assert!(matches!(text, InlineText::Inline { len: 255, .. }));
        assert_eq!(text.as_str(), long);
    }
}
