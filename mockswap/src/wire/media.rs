//! The media endpoints, answered with small deterministic fakes: images
//! (`/v1/images/*`: PNGs, base64 in `b64_json`), speech (`/v1/audio/speech`: a
//! WAV tone as long as the text), voices (`/v1/audio/voices`) and
//! transcriptions (`/v1/audio/transcriptions`: what the upload was, as text).
//! Same request, same bytes, so tests can compare answers.

use serde_json::{Value, json};

use super::shape::{CREATED, Ids};

/// The voices `/v1/audio/voices` lists (OpenAI's names).
pub(crate) const VOICES: &[&str] = &[
    "alloy", "ash", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer",
];

/// The most images one request gets.
const MAX_IMAGES: u64 = 10;
/// The pictures are this many times smaller than the size asked for, so a
/// 1024x1024 image is a 16x16 PNG of a few hundred bytes.
const SCALE: u32 = 64;
/// Sample rate of the speech WAV (8 kHz, 16-bit mono).
const RATE: u32 = 8_000;

fn fnv(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// `POST /v1/images/generations` (and edits): `n` PNGs (1 to 10, default 1)
/// of `size` (`WxH`, default 1024x1024) scaled down [`SCALE`] times, each a
/// colour of its own derived from the prompt; `revised_prompt` is the reply's
/// text (the echo, or a scripted text).
pub(crate) fn images(ids: Ids<'_>, text: &str, body: Option<&Value>) -> Value {
    let body = body.unwrap_or(&Value::Null);
    let n = body
        .get("n")
        .and_then(Value::as_u64)
        .unwrap_or(1)
        .clamp(1, MAX_IMAGES);
    let (width, height) = body
        .get("size")
        .and_then(Value::as_str)
        .and_then(parse_size)
        .unwrap_or((1024, 1024));
    let prompt = body.get("prompt").and_then(Value::as_str).unwrap_or("");
    let data: Vec<Value> = (0..n)
        .map(|i| {
            let hash = fnv(format!("{}\u{0}{prompt}\u{0}{i}", ids.model).as_bytes());
            let colour = [(hash >> 16) as u8, (hash >> 8) as u8, hash as u8];
            let png = png(
                (width / SCALE).clamp(1, 64),
                (height / SCALE).clamp(1, 64),
                colour,
            );
            json!({"b64_json": base64(&png), "revised_prompt": text})
        })
        .collect();
    json!({"created": CREATED, "data": data})
}

fn parse_size(size: &str) -> Option<(u32, u32)> {
    let (w, h) = size.split_once(['x', 'X'])?;
    Some((w.trim().parse().ok()?, h.trim().parse().ok()?))
}

/// `GET /v1/audio/voices`: the [`VOICES`].
pub(crate) fn voices(model: &str) -> Value {
    json!({"model": model, "voices": VOICES})
}

/// `POST /v1/audio/speech`: a mono 16-bit WAV, 80 ms per word of `text`
/// (from 0.2 to 3 s), a tone whose pitch comes from the voice. Always WAV,
/// whatever `response_format` asks for.
pub(crate) fn speech(text: &str, voice: &str) -> Vec<u8> {
    let words = u32::try_from(text.split_whitespace().count()).unwrap_or(u32::MAX);
    let millis = words.saturating_mul(80).clamp(200, 3_000);
    let samples = RATE * millis / 1_000;
    let pitch = 200.0 + f64::from(u32::try_from(fnv(voice.as_bytes()) % 600).unwrap_or(0));
    let mut pcm = Vec::with_capacity(samples as usize * 2);
    for i in 0..samples {
        let t = f64::from(i) / f64::from(RATE);
        let value = (t * pitch * std::f64::consts::TAU).sin() * 8_000.0;
        // Within i16 by construction (|value| <= 8000).
        #[allow(clippy::cast_possible_truncation)]
        pcm.extend_from_slice(&(value as i16).to_le_bytes());
    }
    wav(&pcm)
}

fn wav(pcm: &[u8]) -> Vec<u8> {
    let len = u32::try_from(pcm.len()).unwrap_or(u32::MAX);
    let mut out = Vec::with_capacity(pcm.len() + 44);
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + len).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes()); // PCM
    out.extend_from_slice(&1u16.to_le_bytes()); // mono
    out.extend_from_slice(&RATE.to_le_bytes());
    out.extend_from_slice(&(RATE * 2).to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(pcm);
    out
}

/// What a transcription "hears" in a multipart upload: the file's name, size
/// and type (`heard note.wav (44 bytes of audio/wav)`), and the form's
/// `language` and `response_format`.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Upload {
    pub(crate) heard: String,
    pub(crate) language: Option<String>,
    pub(crate) text_format: bool,
}

/// Reads the upload of a transcription request (`content_type` is its header).
pub(crate) fn upload(body: &[u8], content_type: Option<&str>) -> Upload {
    let Some(boundary) = content_type.and_then(boundary) else {
        return Upload {
            heard: "no multipart upload".to_owned(),
            ..Upload::default()
        };
    };
    let delimiter = format!("--{boundary}");
    let mut out = Upload {
        heard: "no file".to_owned(),
        ..Upload::default()
    };
    for part in split(body, delimiter.as_bytes()) {
        let Some(part) = part.strip_prefix(b"\r\n") else {
            continue;
        };
        let Some(split_at) = find(part, b"\r\n\r\n") else {
            continue;
        };
        let headers = String::from_utf8_lossy(&part[..split_at]);
        let value = &part[split_at + 4..];
        let value = value.strip_suffix(b"\r\n").unwrap_or(value);
        let param = |name: &str| {
            headers.lines().find_map(|line| {
                line.to_ascii_lowercase()
                    .starts_with("content-disposition:")
                    .then(|| {
                        line.split(';').find_map(|p| {
                            let (k, v) = p.trim().split_once('=')?;
                            (k == name).then(|| v.trim_matches('"').to_owned())
                        })
                    })
                    .flatten()
            })
        };
        let kind = headers.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case("content-type")
                .then(|| v.trim().to_owned())
        });
        match param("name").as_deref() {
            Some("file") => {
                out.heard = format!(
                    "heard {} ({} bytes of {})",
                    param("filename").unwrap_or_else(|| "a file".to_owned()),
                    value.len(),
                    kind.unwrap_or_else(|| "an unknown type".to_owned()),
                );
            }
            Some("language") => {
                out.language = Some(String::from_utf8_lossy(value).trim().to_owned())
                    .filter(|l| !l.is_empty());
            }
            Some("response_format") => out.text_format = value == b"text",
            _ => {}
        }
    }
    out
}

/// The JSON of `POST /v1/audio/transcriptions`: `text` (the reply's text),
/// and `language` when the form named one.
pub(crate) fn transcription(text: &str, language: Option<&str>) -> Value {
    let mut out = json!({"text": text});
    if let Some(language) = language {
        out["language"] = json!(language);
    }
    out
}

fn boundary(content_type: &str) -> Option<String> {
    content_type.split(';').skip(1).find_map(|param| {
        let (key, value) = param.split_once('=')?;
        key.trim().eq_ignore_ascii_case("boundary").then(|| {
            let value = value.trim();
            value
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(value)
                .to_owned()
        })
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn split<'a>(mut body: &'a [u8], delimiter: &[u8]) -> Vec<&'a [u8]> {
    let mut parts = Vec::new();
    while let Some(at) = find(body, delimiter) {
        parts.push(&body[..at]);
        body = &body[at + delimiter.len()..];
    }
    parts.push(body);
    parts
}

/// A `width` x `height` RGB PNG of one colour, with a lighter diagonal, in
/// stored (uncompressed) deflate blocks: no compression library needed.
fn png(width: u32, height: u32, colour: [u8; 3]) -> Vec<u8> {
    let mut raw = Vec::with_capacity(((width * 3 + 1) * height) as usize);
    for y in 0..height {
        raw.push(0); // filter: none
        for x in 0..width {
            let pixel = if x == y {
                colour.map(|c| c.saturating_add(96))
            } else {
                colour
            };
            raw.extend_from_slice(&pixel);
        }
    }
    let mut zlib = vec![0x78, 0x01];
    let mut blocks = raw.chunks(0xffff).peekable();
    while let Some(block) = blocks.next() {
        zlib.push(u8::from(blocks.peek().is_none()));
        let len = u16::try_from(block.len()).unwrap_or(u16::MAX);
        zlib.extend_from_slice(&len.to_le_bytes());
        zlib.extend_from_slice(&(!len).to_le_bytes());
        zlib.extend_from_slice(block);
    }
    zlib.extend_from_slice(&adler32(&raw).to_be_bytes());
    let mut ihdr = Vec::with_capacity(13);
    ihdr.extend_from_slice(&width.to_be_bytes());
    ihdr.extend_from_slice(&height.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]); // 8-bit RGB, no interlace
    let mut out = vec![0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];
    chunk(&mut out, b"IHDR", &ihdr);
    chunk(&mut out, b"IDAT", &zlib);
    chunk(&mut out, b"IEND", &[]);
    out
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&u32::try_from(data.len()).unwrap_or(u32::MAX).to_be_bytes());
    let start = out.len();
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let crc = crc32(&out[start..]);
    out.extend_from_slice(&crc.to_be_bytes());
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xffff_ffffu32;
    for b in bytes {
        crc ^= u32::from(*b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn adler32(bytes: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in bytes.chunks(5552) {
        for x in chunk {
            a += u32::from(*x);
            b += a;
        }
        a %= 65_521;
        b %= 65_521;
    }
    (b << 16) | a
}

/// Standard base64 with padding.
pub(crate) fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for group in bytes.chunks(3) {
        let n = group
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= group.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 0x3f) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_rfc_4648_examples() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(plain.as_bytes()), encoded);
        }
    }

    #[test]
    fn checksums_match_known_values() {
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(adler32(b"Wikipedia"), 0x11e6_0398);
    }

    #[test]
    fn a_png_has_its_signature_size_and_chunks() {
        let png = png(16, 8, [10, 20, 30]);
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        assert_eq!(&png[12..16], b"IHDR");
        assert_eq!(u32::from_be_bytes(png[16..20].try_into().unwrap()), 16);
        assert_eq!(u32::from_be_bytes(png[20..24].try_into().unwrap()), 8);
        assert!(png.ends_with(&[0, 0, 0, 0, b'I', b'E', b'N', b'D', 0xae, 0x42, 0x60, 0x82]));
    }

    #[test]
    fn speech_is_a_wav_as_long_as_its_words() {
        let short = speech("hi", "alloy");
        assert_eq!(&short[..4], b"RIFF");
        assert_eq!(&short[8..16], b"WAVEfmt ");
        // 0.2 s minimum at 8 kHz, 2 bytes a sample, 44 bytes of header.
        assert_eq!(short.len(), 44 + 1_600 * 2);
        let long = speech(&"word ".repeat(10), "alloy");
        assert_eq!(long.len(), 44 + 6_400 * 2);
        assert_eq!(speech("hi", "alloy"), short);
        assert_ne!(speech("hi", "onyx"), short);
    }

    #[test]
    fn an_upload_is_described_by_its_file_and_fields() {
        let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper\r\n\
--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"note.wav\"\r\nContent-Type: audio/wav\r\n\r\nRIFF\x00\x01\r\n\
--XyZ\r\nContent-Disposition: form-data; name=\"language\"\r\n\r\nen\r\n--XyZ--\r\n";
        let got = upload(body, Some("multipart/form-data; boundary=XyZ"));
        assert_eq!(got.heard, "heard note.wav (6 bytes of audio/wav)");
        assert_eq!(got.language.as_deref(), Some("en"));
        assert!(!got.text_format);
        assert_eq!(
            upload(b"{}", Some("application/json")).heard,
            "no multipart upload"
        );
    }
}
