//! Byte-level edits of a JSON document: set or delete the value at a key path
//! while every byte outside the edited span stays as the client sent it.
//!
//! serde_json validates each container it looks into and, through borrowed
//! [`RawValue`]s, tells where each member's value lies; the edit is then one
//! splice. Inserted members go after the last member; deleting a member takes
//! one separating comma with it.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::FilterError;
use super::path::{ArrayStep, ParamPath, Segment};

/// One splice: replace `range` of the document with `bytes`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Edit {
    pub(crate) range: Range<usize>,
    pub(crate) bytes: Vec<u8>,
}

impl Edit {
    pub(crate) fn apply(&self, doc: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(doc.len() - self.range.len() + self.bytes.len());
        out.extend_from_slice(&doc[..self.range.start]);
        out.extend_from_slice(&self.bytes);
        out.extend_from_slice(&doc[self.range.end..]);
        out
    }
}

/// The edit that sets `path` to `value` (serialised JSON), or `None` when the
/// value there is already exactly `value`.
///
/// # Errors
///
/// [`FilterError::NotAnObject`] when `doc` is not one JSON object;
/// [`FilterError::PathConflict`] when the path needs an index into an array and
/// names a key.
pub(crate) fn set(doc: &[u8], path: &ParamPath, value: &[u8]) -> Result<Option<Edit>, FilterError> {
    let root = root_object(doc)?;
    set_in(doc, root, path, path.segments(), value)
}

/// A deletion, and whether the same path may still name something after it
/// (a key repeated in an object) so it is worth asking again.
pub(crate) struct Deletion {
    pub(crate) edit: Edit,
    pub(crate) again: bool,
}

/// The edit that deletes one value at `path`, or `None` when there is nothing
/// there.
///
/// # Errors
///
/// [`FilterError::NotAnObject`] when `doc` is not one JSON object.
pub(crate) fn delete(doc: &[u8], path: &ParamPath) -> Result<Option<Deletion>, FilterError> {
    let root = root_object(doc)?;
    Ok(delete_in(doc, root, path.segments()))
}

/// The span of the top-level object, surrounding whitespace excluded.
fn root_object(doc: &[u8]) -> Result<Range<usize>, FilterError> {
    // Validates the whole document (trailing garbage included) once.
    serde_json::from_slice::<Container<'_>>(doc)
        .map_err(|source| FilterError::NotAnObject { source })
        .and_then(|container| match container {
            Container::Object(_) => Ok(()),
            Container::Array(_) => Err(FilterError::NotAnObject {
                source: de::Error::custom("the body is a JSON array"),
            }),
        })?;
    let start = doc.len() - doc.trim_ascii_start().len();
    let end = doc.trim_ascii_end().len();
    Ok(start..end)
}

fn set_in(
    doc: &[u8],
    span: Range<usize>,
    path: &ParamPath,
    segments: &[Segment],
    value: &[u8],
) -> Result<Option<Edit>, FilterError> {
    let Some((segment, rest)) = segments.split_first() else {
        return Ok((doc[span.clone()] != *value).then(|| Edit {
            range: span,
            bytes: value.to_vec(),
        }));
    };
    match container_at(doc, &span) {
        Some(Located::Object(members)) => {
            // A duplicated key: parsers keep the last one, so that is the one set.
            if let Some(member) = members.iter().rev().find(|m| m.key == segment.text) {
                return set_in(doc, member.value.clone(), path, rest, value);
            }
            let mut bytes = Vec::new();
            if !members.is_empty() {
                bytes.push(b',');
            }
            push_json_string(&mut bytes, &segment.text);
            bytes.push(b':');
            build(&mut bytes, rest, value);
            let at = members.last().map_or(span.end - 1, |last| last.value.end);
            Ok(Some(Edit {
                range: at..at,
                bytes,
            }))
        }
        Some(Located::Array(elements)) => {
            let index = match segment.array_step() {
                ArrayStep::Index(i) if i < elements.len() => {
                    return set_in(doc, elements[i].clone(), path, rest, value);
                }
                ArrayStep::Index(i) => i,
                ArrayStep::Last => elements.len(),
                ArrayStep::NotAnIndex => {
                    return Err(FilterError::PathConflict {
                        key: path.as_str().to_owned(),
                        segment: segment.text.clone(),
                    });
                }
            };
            // Past the end: pad with nulls, as sjson does.
            let mut bytes = Vec::new();
            for n in elements.len()..index {
                if n > 0 {
                    bytes.push(b',');
                }
                bytes.extend_from_slice(b"null");
            }
            if index > 0 {
                bytes.push(b',');
            }
            build(&mut bytes, rest, value);
            let at = elements.last().map_or(span.end - 1, |last| last.end);
            Ok(Some(Edit {
                range: at..at,
                bytes,
            }))
        }
        // A scalar (null included) where the path goes on: the forced value wins.
        None => {
            let mut bytes = Vec::new();
            build(&mut bytes, segments, value);
            Ok(Some(Edit { range: span, bytes }))
        }
    }
}

fn delete_in(doc: &[u8], span: Range<usize>, segments: &[Segment]) -> Option<Deletion> {
    let (segment, rest) = segments.split_first()?;
    match container_at(doc, &span)? {
        Located::Object(members) => {
            if !rest.is_empty() {
                let member = members.iter().rev().find(|m| m.key == segment.text)?;
                return delete_in(doc, member.value.clone(), rest);
            }
            let i = members.iter().position(|m| m.key == segment.text)?;
            let range = if i > 0 {
                members[i - 1].value.end..members[i].value.end
            } else if members.len() > 1 {
                members[0].key_start..members[1].key_start
            } else {
                members[0].key_start..members[0].value.end
            };
            Some(Deletion {
                edit: Edit {
                    range,
                    bytes: Vec::new(),
                },
                again: true,
            })
        }
        Located::Array(elements) => {
            let i = match segment.array_step() {
                ArrayStep::Index(i) if i < elements.len() => i,
                ArrayStep::Last if !elements.is_empty() => elements.len() - 1,
                _ => return None,
            };
            if !rest.is_empty() {
                return delete_in(doc, elements[i].clone(), rest);
            }
            let range = if i > 0 {
                elements[i - 1].end..elements[i].end
            } else if elements.len() > 1 {
                elements[0].start..elements[1].start
            } else {
                elements[0].clone()
            };
            // The next element has moved into this index: it is not a duplicate.
            Some(Deletion {
                edit: Edit {
                    range,
                    bytes: Vec::new(),
                },
                again: false,
            })
        }
    }
}

/// Writes the value that `segments` lead to when nothing exists there yet.
fn build(out: &mut Vec<u8>, segments: &[Segment], value: &[u8]) {
    let Some((segment, rest)) = segments.split_first() else {
        out.extend_from_slice(value);
        return;
    };
    match segment.array_step() {
        ArrayStep::Index(n) => {
            out.push(b'[');
            for _ in 0..n {
                out.extend_from_slice(b"null,");
            }
            build(out, rest, value);
            out.push(b']');
        }
        ArrayStep::Last => {
            out.push(b'[');
            build(out, rest, value);
            out.push(b']');
        }
        ArrayStep::NotAnIndex => {
            out.push(b'{');
            push_json_string(out, &segment.text);
            out.push(b':');
            build(out, rest, value);
            out.push(b'}');
        }
    }
}

fn push_json_string(out: &mut Vec<u8>, text: &str) {
    // Serialising a string cannot fail; the fallback keeps this panic-free.
    match serde_json::to_vec(text) {
        Ok(bytes) => out.extend_from_slice(&bytes),
        Err(_) => out.extend_from_slice(b"\"\""),
    }
}

/// One object member: where its key starts and where its value lies.
struct Member<'a> {
    key: Cow<'a, str>,
    key_start: usize,
    value: Range<usize>,
}

/// The container at `span` of `doc`, with absolute offsets; `None` for a scalar.
fn container_at<'a>(doc: &'a [u8], span: &Range<usize>) -> Option<Located<'a>> {
    let text = &doc[span.clone()];
    let parsed = match text.first() {
        Some(b'{' | b'[') => serde_json::from_slice::<Container<'a>>(text).ok()?,
        _ => return None,
    };
    let base = doc.as_ptr() as usize;
    let offset = |raw: &RawValue| {
        let start = (raw.get().as_ptr() as usize).wrapping_sub(base);
        start..start + raw.get().len()
    };
    Some(match parsed {
        Container::Object(entries) => {
            let mut members = Vec::with_capacity(entries.len());
            // Each key starts at the first non-blank byte after `{` or after the
            // comma that follows the previous value.
            let mut cursor = span.start + 1;
            for (key, raw) in entries {
                let key_start = skip_to_key(doc, cursor);
                let value = offset(raw);
                cursor = value.end;
                members.push(Member {
                    key,
                    key_start,
                    value,
                });
            }
            Located::Object(members)
        }
        Container::Array(items) => Located::Array(items.into_iter().map(offset).collect()),
    })
}

/// The first byte at or after `from` that is neither blank nor a comma.
fn skip_to_key(doc: &[u8], from: usize) -> usize {
    doc[from..]
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r' | b','))
        .map_or(doc.len(), |i| from + i)
}

/// A container of the document with the absolute spans of its parts.
enum Located<'a> {
    Object(Vec<Member<'a>>),
    Array(Vec<Range<usize>>),
}

/// A JSON object or array, its members borrowed from the document.
enum Container<'a> {
    Object(Vec<(Cow<'a, str>, &'a RawValue)>),
    Array(Vec<&'a RawValue>),
}

impl<'de> Deserialize<'de> for Container<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ContainerVisitor;
        impl<'de> Visitor<'de> for ContainerVisitor {
            type Value = Container<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object or array")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::new();
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    entries.push((key, map.next_value::<&'de RawValue>()?));
                }
                Ok(Container::Object(entries))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<&'de RawValue>()? {
                    items.push(item);
                }
                Ok(Container::Array(items))
            }
        }
        deserializer.deserialize_any(ContainerVisitor)
    }
}
