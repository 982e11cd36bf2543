//! Finding the model a request names, and rewriting it (`useModelName`).
//!
//! The body is read once into memory (bounded by the body limit), inspected
//! without decoding the values it does not need, and forwarded as the same bytes,
//! with at most the `model` value spliced in place.
//!
//! Where the model comes from, by request shape:
//! - `multipart/form-data`: the `model` form field;
//! - `application/x-www-form-urlencoded`: the `model` field (unless the body
//!   opens like a JSON object: `curl -d` sends JSON with this type);
//! - any other non-empty body: a JSON object's `"model"` string (and `"stream"`);
//! - `?model=` in the query when the body names none (always for an empty body).

use std::fmt;
use std::ops::Range;

use bytes::{Bytes, BytesMut};
use serde::Deserialize;
use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::api::error::ApiError;

/// The model a request names and where it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequestModel {
    /// The model name as the client sent it (ID or alias).
    pub name: String,
    /// True when the client asked for a streamed answer (`"stream": true` in a
    /// JSON body, or `stream=true` in the query).
    pub stream: bool,
    /// True when the body was read as a JSON object (so body filters apply).
    pub json_body: bool,
    location: Location,
}

/// Where in the request the model name sits, for rewriting.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Location {
    /// The byte range of the JSON string (quotes included) in the body.
    Json(Range<usize>),
    /// The byte range of the form field's value in the body.
    Multipart(Range<usize>),
    /// A url-encoded form field or the query string: not rewritten.
    Elsewhere,
}

impl RequestModel {
    /// Finds the model in a request.
    ///
    /// `content_type` is the request's `Content-Type`, `query` its raw query
    /// string, `body` the whole body.
    ///
    /// # Errors
    ///
    /// [`ApiError::InvalidJson`] for a JSON body that does not parse;
    /// [`ApiError::DuplicateField`] for a body naming `model` (or, in JSON,
    /// `stream`) twice; [`ApiError::ModelMissing`] when no model is named anywhere.
    pub(crate) fn extract(
        content_type: Option<&str>,
        query: Option<&str>,
        body: &[u8],
    ) -> Result<Self, ApiError> {
        let query_stream =
            query.is_some_and(|q| query_param(q, "stream").as_deref() == Some("true"));
        let mut json_body = false;
        let from_body = if body.is_empty() {
            None
        } else {
            let mime = content_type
                .and_then(|ct| ct.split(';').next())
                .map(|m| m.trim().to_ascii_lowercase());
            match mime.as_deref() {
                Some("multipart/form-data") => {
                    let boundary = content_type.and_then(multipart_boundary);
                    let mut fields = boundary
                        .map(|b| multipart_fields(body, b.as_bytes(), "model"))
                        .unwrap_or_default();
                    if fields.len() > 1 {
                        return Err(ApiError::DuplicateField { field: "model" });
                    }
                    fields.pop().map(|(name, range)| Self {
                        name,
                        stream: query_stream,
                        json_body: false,
                        location: Location::Multipart(range),
                    })
                }
                // `curl -d '{...}'` labels JSON as a form; a body that opens
                // like a JSON object is read as one.
                Some("application/x-www-form-urlencoded") if !looks_like_json(body) => {
                    let mut models = form_urlencoded::parse(body).filter(|(k, _)| k == "model");
                    let first = models.next();
                    if models.next().is_some() {
                        return Err(ApiError::DuplicateField { field: "model" });
                    }
                    first.map(|(_, v)| Self {
                        name: v.into_owned(),
                        stream: query_stream,
                        json_body: false,
                        location: Location::Elsewhere,
                    })
                }
                _ => {
                    json_body = true;
                    json_model(body, query_stream)?
                }
            }
        };
        if let Some(found) = from_body.filter(|m| !m.name.is_empty()) {
            return Ok(found);
        }
        query
            .and_then(|q| query_param(q, "model"))
            .filter(|m| !m.is_empty())
            .map(|name| Self {
                name,
                stream: query_stream,
                json_body,
                location: Location::Elsewhere,
            })
            .ok_or(ApiError::ModelMissing)
    }

    /// The body with the model replaced by `new_name` (`useModelName`).
    ///
    /// JSON bodies get a new JSON string in place of the old one and multipart
    /// bodies a new field value; every other byte is kept. A model named by a
    /// url-encoded form or the query is left as is (llama-swap does the same).
    pub(crate) fn rewrite(&self, body: Bytes, new_name: &str) -> Bytes {
        let (range, replacement) = match &self.location {
            Location::Json(range) => {
                let Ok(json) = serde_json::to_string(new_name) else {
                    return body;
                };
                (range.clone(), json)
            }
            Location::Multipart(range) => (range.clone(), new_name.to_owned()),
            Location::Elsewhere => return body,
        };
        if range.end > body.len() {
            return body;
        }
        let mut out = BytesMut::with_capacity(body.len() + replacement.len());
        out.extend_from_slice(&body[..range.start]);
        out.extend_from_slice(replacement.as_bytes());
        out.extend_from_slice(&body[range.end..]);
        out.freeze()
    }
}

fn looks_like_json(body: &[u8]) -> bool {
    body.trim_ascii_start().starts_with(b"{")
}

fn query_param(query: &str, name: &str) -> Option<String> {
    form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

// === JSON ===

/// The two top-level fields of a JSON body we look at; the other values are
/// skipped without being decoded.
struct JsonProbe<'a> {
    model: Option<&'a RawValue>,
    stream: Option<&'a RawValue>,
    /// The first of the two fields that appeared more than once: routing by one
    /// occurrence while the upstream reads the other would split the request.
    duplicate: Option<&'static str>,
}

impl<'de> Deserialize<'de> for JsonProbe<'de> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ProbeVisitor;
        impl<'de> Visitor<'de> for ProbeVisitor {
            type Value = JsonProbe<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut probe = JsonProbe {
                    model: None,
                    stream: None,
                    duplicate: None,
                };
                while let Some(key) = map.next_key::<ProbeKey>()? {
                    match key {
                        ProbeKey::Model => {
                            let value = map.next_value()?;
                            if probe.model.replace(value).is_some() {
                                probe.duplicate.get_or_insert("model");
                            }
                        }
                        ProbeKey::Stream => {
                            let value = map.next_value()?;
                            if probe.stream.replace(value).is_some() {
                                probe.duplicate.get_or_insert("stream");
                            }
                        }
                        ProbeKey::Other => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(probe)
            }
        }
        deserializer.deserialize_map(ProbeVisitor)
    }
}

/// A top-level key of a JSON body, told apart without copying it (serde's
/// `Cow<str>` always allocates, and a body has a key per field).
enum ProbeKey {
    Model,
    Stream,
    Other,
}

impl<'de> Deserialize<'de> for ProbeKey {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = ProbeKey;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            // Keys with escapes arrive here unescaped (`"mod\u0065l"` is `model`).
            fn visit_str<E: de::Error>(self, key: &str) -> Result<ProbeKey, E> {
                Ok(match key {
                    "model" => ProbeKey::Model,
                    "stream" => ProbeKey::Stream,
                    _ => ProbeKey::Other,
                })
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

fn json_model(body: &[u8], query_stream: bool) -> Result<Option<RequestModel>, ApiError> {
    let probe: JsonProbe<'_> =
        serde_json::from_slice(body).map_err(|source| ApiError::InvalidJson { source })?;
    if let Some(field) = probe.duplicate {
        return Err(ApiError::DuplicateField { field });
    }
    let stream = query_stream || probe.stream.is_some_and(|raw| raw.get().trim() == "true");
    let Some(raw) = probe.model else {
        return Ok(None);
    };
    let Ok(name) = serde_json::from_str::<String>(raw.get()) else {
        // `"model": 5` or `null` names no model.
        return Ok(None);
    };
    // The raw value borrows from `body`, so its offset is its address minus the
    // body's; that range is what a rewrite replaces.
    let start = (raw.get().as_ptr() as usize).wrapping_sub(body.as_ptr() as usize);
    let range = start..start + raw.get().len();
    let location = if range.end <= body.len() {
        Location::Json(range)
    } else {
        Location::Elsewhere
    };
    Ok(Some(RequestModel {
        name,
        stream,
        json_body: true,
        location,
    }))
}

// === multipart/form-data ===

fn multipart_boundary(content_type: &str) -> Option<String> {
    content_type.split(';').skip(1).find_map(|param| {
        let (key, value) = param.split_once('=')?;
        if !key.trim().eq_ignore_ascii_case("boundary") {
            return None;
        }
        let value = value.trim();
        let value = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(value);
        (!value.is_empty()).then(|| value.to_owned())
    })
}

/// Every non-file form field named `field` (at most two are looked for): its
/// value and the value's byte range in the body.
fn multipart_fields(body: &[u8], boundary: &[u8], field: &str) -> Vec<(String, Range<usize>)> {
    let mut found = Vec::new();
    let mut from = 0;
    while found.len() < 2 {
        let Some((value, range, next)) = multipart_field(body, boundary, field, from) else {
            break;
        };
        found.push((value, range));
        from = next;
    }
    found
}

/// The first non-file form field named `field` in a part starting at or after
/// `from`; returns its value, the value's byte range in the body, and where to
/// look for the next one.
fn multipart_field(
    body: &[u8],
    boundary: &[u8],
    field: &str,
    from: usize,
) -> Option<(String, Range<usize>, usize)> {
    let mut delimiter = Vec::with_capacity(boundary.len() + 4);
    delimiter.extend_from_slice(b"\r\n--");
    delimiter.extend_from_slice(boundary);
    // The first delimiter may open the body without the leading CRLF.
    let mut pos = if from > 0 {
        from
    } else if body.starts_with(&delimiter[2..]) {
        delimiter.len() - 2
    } else {
        find(body, &delimiter, 0)? + delimiter.len()
    };
    loop {
        if body[pos..].starts_with(b"--") {
            return None;
        }
        let line_end = find(body, b"\r\n", pos)?;
        let part_start = line_end + 2;
        let part_end = find(body, &delimiter, part_start)?;
        let part = &body[part_start..part_end];
        let headers_end = find(part, b"\r\n\r\n", 0)
            .map(|i| (i, i + 4))
            .or_else(|| part.starts_with(b"\r\n").then_some((0, 2)))?;
        let headers = std::str::from_utf8(&part[..headers_end.0]).ok()?;
        if field_name(headers).as_deref() == Some(field) {
            let value_start = part_start + headers_end.1;
            let value = std::str::from_utf8(&body[value_start..part_end]).ok()?;
            return Some((
                value.to_owned(),
                value_start..part_end,
                part_end + delimiter.len(),
            ));
        }
        pos = part_end + delimiter.len();
    }
}

/// The `name` of a form-data part that is not a file upload.
fn field_name(headers: &str) -> Option<String> {
    let disposition = headers.split("\r\n").find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("content-disposition")
            .then_some(value)
    })?;
    let mut name = None;
    for param in disposition.split(';').skip(1) {
        let Some((key, value)) = param.split_once('=') else {
            continue;
        };
        let value = value.trim();
        let value = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(value);
        match key.trim().to_ascii_lowercase().as_str() {
            "filename" | "filename*" => return None,
            "name" => name = Some(value.to_owned()),
            _ => {}
        }
    }
    name
}

fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if from > haystack.len() || needle.is_empty() {
        return None;
    }
    haystack[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|i| i + from)
}

#[cfg(test)]
mod tests {
    use super::*;

    const JSON: Option<&str> = Some("application/json");

    #[test]
    fn escaped_keys_are_read_unescaped() {
        let body = br#"{"mod\u0065l":"qwen","str\u0065am":true,"model_x":"no"}"#;
        let found = RequestModel::extract(JSON, None, body).unwrap();
        assert_eq!(found.name, "qwen");
        assert!(found.stream);
        let twice = br#"{"model":"a","mod\u0065l":"b"}"#;
        assert!(matches!(
            RequestModel::extract(JSON, None, twice),
            Err(ApiError::DuplicateField { field: "model" })
        ));
    }

    #[test]
    fn json_body_names_model_and_stream() {
        let body = br#"{"messages":[{"role":"user","content":"hi"}],"model":"qwen","stream":true}"#;
        let found = RequestModel::extract(JSON, None, body).unwrap();
        assert_eq!(found.name, "qwen");
        assert!(found.stream);
    }

    #[test]
    fn json_without_content_type_is_still_json() {
        let found = RequestModel::extract(None, None, br#"{"model":"a"}"#).unwrap();
        assert_eq!(found.name, "a");
        assert!(!found.stream);
    }

    #[test]
    fn malformed_json_is_invalid_json() {
        for body in [
            &b"{\"model\":"[..],
            b"not json",
            b"[1,2]",
            b"{\"model\":\"a\"} trailing",
        ] {
            let err = RequestModel::extract(JSON, None, body).unwrap_err();
            assert!(
                matches!(err, ApiError::InvalidJson { .. }),
                "{}: {err:?}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn missing_empty_or_non_string_model_is_model_missing() {
        for body in [
            &br#"{"messages":[]}"#[..],
            br#"{"model":""}"#,
            br#"{"model":5}"#,
            br#"{"model":null}"#,
            b"",
        ] {
            let err = RequestModel::extract(JSON, None, body).unwrap_err();
            assert!(
                matches!(err, ApiError::ModelMissing),
                "{}: {err:?}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn query_model_is_used_when_the_body_names_none() {
        let found = RequestModel::extract(None, Some("model=a%2Fb&stream=true"), b"").unwrap();
        assert_eq!(found.name, "a/b");
        assert!(found.stream);
        let found = RequestModel::extract(JSON, Some("model=q"), br#"{"input":"x"}"#).unwrap();
        assert_eq!(found.name, "q");
        assert!(found.json_body, "a JSON body still gets body filters");
        let found = RequestModel::extract(None, Some("model=q"), b"").unwrap();
        assert!(!found.json_body);
    }

    #[test]
    fn body_model_wins_over_query() {
        let found = RequestModel::extract(JSON, Some("model=q"), br#"{"model":"b"}"#).unwrap();
        assert_eq!(found.name, "b");
    }

    #[test]
    fn json_rewrite_replaces_only_the_model_value() {
        let body = Bytes::from_static(
            br#"{ "z": 1, "model" : "alias\u0041", "messages": [{"model":"inner"}] }"#,
        );
        let found = RequestModel::extract(JSON, None, &body).unwrap();
        assert_eq!(found.name, "aliasA");
        let out = found.rewrite(body, "org/real \"model\"");
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            r#"{ "z": 1, "model" : "org/real \"model\"", "messages": [{"model":"inner"}] }"#
        );
    }

    fn multipart_body() -> (String, Bytes) {
        let boundary = "XyZ123";
        let body = format!(
            "--{boundary}\r\n\
             Content-Disposition: form-data; name=\"file\"; filename=\"model\"\r\n\
             Content-Type: audio/wav\r\n\r\n\
             RIFF..model..\r\n\
             --{boundary}\r\n\
             Content-Disposition: form-data; name=\"model\"\r\n\r\n\
             whisper\r\n\
             --{boundary}\r\n\
             Content-Disposition: form-data; name=\"language\"\r\n\r\n\
             en\r\n\
             --{boundary}--\r\n"
        );
        (
            format!("multipart/form-data; boundary=\"{boundary}\""),
            Bytes::from(body),
        )
    }

    #[test]
    fn multipart_model_field_is_found_and_files_are_skipped() {
        let (ct, body) = multipart_body();
        let found = RequestModel::extract(Some(&ct), None, &body).unwrap();
        assert_eq!(found.name, "whisper");
    }

    #[test]
    fn multipart_rewrite_keeps_the_rest_of_the_form() {
        let (ct, body) = multipart_body();
        let found = RequestModel::extract(Some(&ct), None, &body).unwrap();
        let out = found.rewrite(body.clone(), "whisper-large-v3");
        let expected = String::from_utf8(body.to_vec())
            .unwrap()
            .replace("\r\n\r\nwhisper\r\n", "\r\n\r\nwhisper-large-v3\r\n");
        assert_eq!(std::str::from_utf8(&out).unwrap(), expected);
        let again = RequestModel::extract(Some(&ct), None, &out).unwrap();
        assert_eq!(again.name, "whisper-large-v3");
    }

    #[test]
    fn multipart_without_model_or_boundary_is_model_missing() {
        let (_, body) = multipart_body();
        let err = RequestModel::extract(Some("multipart/form-data"), None, &body).unwrap_err();
        assert!(matches!(err, ApiError::ModelMissing));
        let err = RequestModel::extract(Some("multipart/form-data; boundary=other"), None, &body)
            .unwrap_err();
        assert!(matches!(err, ApiError::ModelMissing));
    }

    #[test]
    fn json_sent_with_curls_default_form_content_type_is_read_as_json() {
        let found = RequestModel::extract(
            Some("application/x-www-form-urlencoded"),
            None,
            br#" {"model":"a","stream":true}"#,
        )
        .unwrap();
        assert_eq!(found.name, "a");
        assert!(found.stream);
    }

    #[test]
    fn a_json_body_naming_model_or_stream_twice_is_refused() {
        for body in [
            &br#"{"model":"a","messages":[],"model":"b"}"#[..],
            br#"{"model":"a","mo\u0064el":"b"}"#,
            br#"{"model":"a","model":"a"}"#,
            br#"{"model":"a","stream":false,"stream":true}"#,
        ] {
            let err = RequestModel::extract(JSON, None, body).unwrap_err();
            assert!(
                matches!(err, ApiError::DuplicateField { .. }),
                "{}: {err:?}",
                String::from_utf8_lossy(body)
            );
        }
        // Nested objects may use the names freely.
        let found = RequestModel::extract(
            JSON,
            None,
            br#"{"model":"a","x":{"model":"b","model":"c"}}"#,
        )
        .unwrap();
        assert_eq!(found.name, "a");
    }

    #[test]
    fn a_form_naming_model_twice_is_refused() {
        let err = RequestModel::extract(
            Some("application/x-www-form-urlencoded"),
            None,
            b"model=a&prompt=hi&model=b",
        )
        .unwrap_err();
        assert!(matches!(err, ApiError::DuplicateField { field: "model" }));
        let (ct, body) = multipart_body();
        let text = String::from_utf8(body.to_vec()).unwrap().replace(
            "--XyZ123--",
            "--XyZ123\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nother\r\n--XyZ123--",
        );
        let err = RequestModel::extract(Some(&ct), None, text.as_bytes()).unwrap_err();
        assert!(
            matches!(err, ApiError::DuplicateField { field: "model" }),
            "{err:?}"
        );
    }

    #[test]
    fn urlencoded_form_field_names_the_model() {
        let found = RequestModel::extract(
            Some("application/x-www-form-urlencoded"),
            None,
            b"prompt=hi&model=tts%20one",
        )
        .unwrap();
        assert_eq!(found.name, "tts one");
        let body = Bytes::from_static(b"model=a");
        assert_eq!(found.rewrite(body.clone(), "b"), body);
    }
}
