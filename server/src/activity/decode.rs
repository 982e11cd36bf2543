//! Response bodies sent with a `Content-Encoding` (gzip, deflate, br, zstd),
//! decoded as they pass so their usage can be counted and their capture is
//! readable. The client still gets the encoded bytes unchanged: only a copy
//! is decoded, and only for bodies that are encoded (the common case, a plain
//! body, costs nothing here).
//!
//! Decoding runs in slices of [`SLICE`] input bytes, the output drained after
//! each, so a highly compressed body never expands in memory all at once. A
//! body that fails to decode stops being decoded (its usage is then unknown);
//! the failure is kept for the record's `error_msg`.

use std::io::Write;

use http::HeaderMap;

/// Input bytes decoded at a time.
const SLICE: usize = 4096;

/// The encodings a body can be decoded from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// `gzip` (or `x-gzip`).
    Gzip,
    /// `deflate`: zlib-wrapped as the HTTP specification says, or raw
    /// deflate as some servers send (told apart by the first two bytes).
    Deflate,
    /// `br`.
    Brotli,
    /// `zstd`.
    Zstd,
}

impl Encoding {
    /// The encoding a response's headers announce; `None` for an identity
    /// body, and `Err` naming an encoding (or a chain of them) that cannot be
    /// decoded.
    pub(crate) fn of(headers: &HeaderMap) -> Result<Option<Self>, String> {
        let Some(value) = headers.get(http::header::CONTENT_ENCODING) else {
            return Ok(None);
        };
        let text = value
            .to_str()
            .map_err(|_| "unreadable Content-Encoding".to_owned())?;
        let mut codings = text
            .split(',')
            .map(str::trim)
            .filter(|c| !c.is_empty() && !c.eq_ignore_ascii_case("identity"));
        let Some(first) = codings.next() else {
            return Ok(None);
        };
        if codings.next().is_some() {
            return Err(format!("stacked Content-Encoding {text:?} is not decoded"));
        }
        match first.to_ascii_lowercase().as_str() {
            "gzip" | "x-gzip" => Ok(Some(Self::Gzip)),
            "deflate" => Ok(Some(Self::Deflate)),
            "br" => Ok(Some(Self::Brotli)),
            "zstd" => Ok(Some(Self::Zstd)),
            other => Err(format!("Content-Encoding {other:?} is not decoded")),
        }
    }
}

/// A streaming decoder writing into a buffer the caller drains.
enum Inner {
    Gzip(flate2::write::MultiGzDecoder<Vec<u8>>),
    Zlib(flate2::write::ZlibDecoder<Vec<u8>>),
    Raw(flate2::write::DeflateDecoder<Vec<u8>>),
    Brotli(Box<brotli_decompressor::DecompressorWriter<Vec<u8>>>),
    Zstd(zstd::stream::write::Decoder<'static, Vec<u8>>),
    /// `deflate` before its first two bytes say which kind it is.
    Undecided(Vec<u8>),
}

/// Decodes one body chunk by chunk.
pub(crate) struct Decoder {
    inner: Option<Inner>,
    failed: Option<String>,
}

impl std::fmt::Debug for Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoder")
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl Decoder {
    /// A decoder for `encoding`.
    pub(crate) fn new(encoding: Encoding) -> Self {
        let inner = match encoding {
            Encoding::Gzip => Ok(Inner::Gzip(flate2::write::MultiGzDecoder::new(Vec::new()))),
            Encoding::Deflate => Ok(Inner::Undecided(Vec::new())),
            Encoding::Brotli => Ok(Inner::Brotli(Box::new(
                brotli_decompressor::DecompressorWriter::new(Vec::new(), SLICE),
            ))),
            Encoding::Zstd => zstd::stream::write::Decoder::new(Vec::new())
                .map(Inner::Zstd)
                .map_err(|e| format!("zstd: {e}")),
        };
        match inner {
            Ok(inner) => Self {
                inner: Some(inner),
                failed: None,
            },
            Err(why) => Self {
                inner: None,
                failed: Some(why),
            },
        }
    }

    /// Decodes `chunk`, handing each piece of output to `sink`.
    pub(crate) fn feed(&mut self, chunk: &[u8], sink: &mut dyn FnMut(&[u8])) {
        for slice in chunk.chunks(SLICE) {
            let Some(inner) = self.inner.as_mut() else {
                return;
            };
            if let Inner::Undecided(head) = inner {
                head.extend_from_slice(slice);
                if head.len() < 2 {
                    continue;
                }
                let head = std::mem::take(head);
                *inner = if is_zlib(&head) {
                    Inner::Zlib(flate2::write::ZlibDecoder::new(Vec::new()))
                } else {
                    Inner::Raw(flate2::write::DeflateDecoder::new(Vec::new()))
                };
                self.write(&head, sink);
                continue;
            }
            self.write(slice, sink);
        }
    }

    /// The body ended: flushes what the decoder still holds.
    pub(crate) fn finish(&mut self, sink: &mut dyn FnMut(&[u8])) {
        if let Some(Inner::Undecided(head)) = self.inner.as_mut() {
            let head = std::mem::take(head);
            self.inner = Some(Inner::Raw(flate2::write::DeflateDecoder::new(Vec::new())));
            self.write(&head, sink);
        }
        let Some(inner) = self.inner.as_mut() else {
            return;
        };
        let result = match inner {
            Inner::Gzip(d) => d.try_finish(),
            Inner::Zlib(d) => d.try_finish(),
            Inner::Raw(d) => d.try_finish(),
            Inner::Brotli(d) => d.flush(),
            Inner::Zstd(d) => d.flush(),
            Inner::Undecided(_) => Ok(()),
        };
        self.drain(sink);
        if let Err(error) = result {
            self.fail(&error);
        }
        self.inner = None;
    }

    /// Why decoding stopped (the decoder's error), if it did.
    pub(crate) fn failure(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    fn write(&mut self, bytes: &[u8], sink: &mut dyn FnMut(&[u8])) {
        let Some(inner) = self.inner.as_mut() else {
            return;
        };
        let result = match inner {
            Inner::Gzip(d) => d.write_all(bytes),
            Inner::Zlib(d) => d.write_all(bytes),
            Inner::Raw(d) => d.write_all(bytes),
            Inner::Brotli(d) => d.write_all(bytes),
            Inner::Zstd(d) => d.write_all(bytes),
            Inner::Undecided(head) => {
                head.extend_from_slice(bytes);
                Ok(())
            }
        };
        self.drain(sink);
        if let Err(error) = result {
            self.fail(&error);
        }
    }

    fn drain(&mut self, sink: &mut dyn FnMut(&[u8])) {
        let out = match self.inner.as_mut() {
            Some(Inner::Gzip(d)) => d.get_mut(),
            Some(Inner::Zlib(d)) => d.get_mut(),
            Some(Inner::Raw(d)) => d.get_mut(),
            Some(Inner::Brotli(d)) => d.get_mut(),
            Some(Inner::Zstd(d)) => d.get_mut(),
            Some(Inner::Undecided(_)) | None => return,
        };
        if !out.is_empty() {
            sink(out);
            out.clear();
        }
    }

    fn fail(&mut self, error: &std::io::Error) {
        self.failed.get_or_insert_with(|| error.to_string());
        self.inner = None;
    }
}

/// A zlib header: compression method 8 and a header checksum that holds.
fn is_zlib(head: &[u8]) -> bool {
    match head {
        [cmf, flg, ..] => cmf & 0x0f == 8 && (u16::from(*cmf) * 256 + u16::from(*flg)) % 31 == 0,
        _ => false,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    const TEXT: &[u8] = b"data: {\"usage\":{\"prompt_tokens\":3}}\n\ndata: [DONE]\n\n";

    /// `text` as a brotli stream of one stored (uncompressed) meta-block
    /// (RFC 7932 section 9.2), since no brotli encoder is a dependency.
    pub(crate) fn brotli_stored(text: &[u8]) -> Vec<u8> {
        assert!(!text.is_empty() && text.len() <= 1 << 16);
        let len = u32::try_from(text.len() - 1).unwrap();
        // WBITS=16 (one 0 bit), ISLAST=0, MNIBBLES=4 (00), MLEN-1 in 16 bits,
        // ISUNCOMPRESSED=1: 21 bits, padded to 3 bytes, least significant first.
        let bits: u32 = (len << 4) | (1 << 20);
        let mut out = bits.to_le_bytes()[..3].to_vec();
        out.extend_from_slice(text);
        // ISLAST=1, ISLASTEMPTY=1.
        out.push(0b11);
        out
    }

    fn encode(encoding: Encoding, text: &[u8]) -> Vec<u8> {
        match encoding {
            Encoding::Gzip => {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                e.write_all(text).unwrap();
                e.finish().unwrap()
            }
            Encoding::Deflate => {
                let mut e =
                    flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
                e.write_all(text).unwrap();
                e.finish().unwrap()
            }
            Encoding::Zstd => zstd::bulk::compress(text, 1).unwrap(),
            Encoding::Brotli => panic!("brotli fixtures are literal"),
        }
    }

    fn decode_in_pieces(
        encoding: Encoding,
        body: &[u8],
        piece: usize,
    ) -> (Vec<u8>, Option<String>) {
        let mut out = Vec::new();
        let mut decoder = Decoder::new(encoding);
        for chunk in body.chunks(piece.max(1)) {
            decoder.feed(chunk, &mut |b| out.extend_from_slice(b));
        }
        decoder.finish(&mut |b| out.extend_from_slice(b));
        (out, decoder.failure().map(str::to_owned))
    }

    #[test]
    fn gzip_zlib_and_zstd_bodies_decode_whatever_the_chunking() {
        for encoding in [Encoding::Gzip, Encoding::Deflate, Encoding::Zstd] {
            let body = encode(encoding, TEXT);
            for piece in [1, 2, 7, body.len()] {
                let (out, failed) = decode_in_pieces(encoding, &body, piece);
                assert_eq!(out, TEXT, "{encoding:?} in pieces of {piece}");
                assert_eq!(failed, None);
            }
        }
    }

    #[test]
    fn raw_deflate_is_told_apart_from_zlib() {
        let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(TEXT).unwrap();
        let body = e.finish().unwrap();
        assert!(!is_zlib(&body));
        assert_eq!(decode_in_pieces(Encoding::Deflate, &body, 1).0, TEXT);
    }

    #[test]
    fn brotli_bodies_decode() {
        let body = brotli_stored(TEXT);
        for piece in [1, 3, body.len()] {
            let (out, failed) = decode_in_pieces(Encoding::Brotli, &body, piece);
            assert_eq!(failed, None);
            assert_eq!(out, TEXT, "in pieces of {piece}");
        }
    }

    #[test]
    fn a_corrupt_body_stops_decoding_and_says_why() {
        let (_, failed) = decode_in_pieces(Encoding::Gzip, b"not gzip at all", 4);
        assert!(failed.is_some_and(|f| !f.is_empty()));
    }

    #[test]
    fn encodings_are_read_from_the_headers() {
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(http::header::CONTENT_ENCODING, value.parse().unwrap());
            Encoding::of(&headers)
        };
        assert_eq!(Encoding::of(&HeaderMap::new()), Ok(None));
        assert_eq!(with("GZIP"), Ok(Some(Encoding::Gzip)));
        assert_eq!(with("x-gzip"), Ok(Some(Encoding::Gzip)));
        assert_eq!(with("br"), Ok(Some(Encoding::Brotli)));
        assert_eq!(with("zstd"), Ok(Some(Encoding::Zstd)));
        assert_eq!(with("deflate"), Ok(Some(Encoding::Deflate)));
        assert_eq!(with("identity"), Ok(None));
        assert!(with("gzip, br").is_err());
        assert!(with("compress").is_err());
    }
}
