//! A generic, order-preserving YAML tree.
//!
//! The file is decoded into this tree before anything is typed, because three things
//! need the untyped shape: macros are expanded over every value (and a value that is
//! exactly `${name}` takes the macro's type), unknown keys are reported with their path
//! instead of failing the load, and type errors name the key path rather than a byte
//! offset. Map order is kept because llama-swap's `macros` are ordered and because
//! reports should follow the file.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

/// How a plain scalar was written where YAML gave it a type (`0x10`, `1.20`,
/// `07`, `on`, `True`). Kept so that a value read as text is the text as
/// written, as llama-swap's decoder hands a string field the scalar's text:
/// a model, alias or peer model named `1.20` keeps that name. Two values are
/// equal whatever their spelling (`100` and `0x64` merge as one).
#[derive(Clone, Debug, Default)]
pub(crate) struct Written(Option<Box<str>>);

impl PartialEq for Written {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Written {
    /// The text as written, when it differs from the value's usual rendering.
    fn text(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

/// One YAML value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Node {
    Null,
    Bool(bool, Written),
    Int(i64, Written),
    Float(f64, Written),
    Str(String),
    Seq(Vec<Node>),
    /// Entries in file order; keys are scalars rendered as text, as written.
    Map(Vec<(String, Node)>),
}

impl Node {
    /// Parses YAML text into a tree (duplicate keys are errors) within the
    /// reader's limits ([`YamlLimit`](super::error::YamlLimit)). Typed plain
    /// scalars keep the text they were written as ([`Written`]).
    pub(crate) fn parse(text: &str) -> Result<Node, serde_saphyr::Error> {
        let parsed: Parsed = serde_saphyr::from_str_with_options(text, reader_options())?;
        Ok(parsed.into_node(text))
    }

    /// An integer written the usual way.
    pub(crate) fn int(value: i64) -> Node {
        Node::Int(value, Written::default())
    }

    /// A boolean written the usual way.
    pub(crate) fn bool(value: bool) -> Node {
        Node::Bool(value, Written::default())
    }

    /// What kind of value this is, phrased for "expected X, got Y" messages. Never
    /// includes the value itself, so secrets (API keys) cannot leak through it.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Node::Null => "nothing (null)",
            Node::Bool(..) => "a boolean",
            Node::Int(..) => "an integer",
            // A whole number beyond 64 bits arrives as a float; it is not a fraction.
            Node::Float(f, _) if f.fract() == 0.0 && f.abs() >= 9.223_372_036_854_776e18 => {
                "a whole number too large for a 64-bit integer"
            }
            Node::Float(..) => "a fractional number",
            Node::Str(_) => "a string",
            Node::Seq(_) => "a list",
            Node::Map(_) => "a map",
        }
    }

    /// The text of a scalar, as a string-typed field would see it (YAML `8080` is a
    /// valid value for a string field, as in llama-swap's Go decoder): as written.
    pub(crate) fn scalar_text(&self) -> Option<String> {
        match self {
            Node::Bool(_, w) | Node::Int(_, w) | Node::Float(_, w) if w.text().is_some() => {
                w.text().map(str::to_owned)
            }
            Node::Bool(b, _) => Some(b.to_string()),
            Node::Int(i, _) => Some(i.to_string()),
            Node::Float(f, _) => Some(f.to_string()),
            Node::Str(s) => Some(s.clone()),
            Node::Null | Node::Seq(_) | Node::Map(_) => None,
        }
    }

    /// True for strings, numbers and booleans.
    pub(crate) fn is_scalar(&self) -> bool {
        matches!(
            self,
            Node::Bool(..) | Node::Int(..) | Node::Float(..) | Node::Str(_)
        )
    }

    /// Types text the way a plain YAML scalar would be typed, so that a value that is
    /// exactly `${env.NAME}` behaves as if the variable's text had been written there
    /// (llama-swap substitutes environment variables textually before parsing). Only
    /// text that converts back unchanged becomes a number or boolean, so a string
    /// field (an API key `007`, say) always gets the variable's exact text.
    pub(crate) fn from_plain_text(text: &str) -> Node {
        match text {
            "true" => return Node::bool(true),
            "false" => return Node::bool(false),
            _ => {}
        }
        match text.parse::<i64>() {
            Ok(i) if i.to_string() == text => Node::int(i),
            _ => Node::Str(text.to_owned()),
        }
    }

    /// Converts to JSON for free-form data such as `metadata`.
    pub(crate) fn to_json(&self) -> serde_json::Value {
        match self {
            Node::Null => serde_json::Value::Null,
            Node::Bool(b, _) => serde_json::Value::Bool(*b),
            Node::Int(i, _) => serde_json::Value::from(*i),
            Node::Float(f, _) => serde_json::Number::from_f64(*f)
                .map_or(serde_json::Value::Null, serde_json::Value::Number),
            Node::Str(s) => serde_json::Value::String(s.clone()),
            Node::Seq(items) => serde_json::Value::Array(items.iter().map(Node::to_json).collect()),
            Node::Map(entries) => serde_json::Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_json()))
                    .collect(),
            ),
        }
    }

    /// Looks a key up in a map node.
    pub(crate) fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

/// Most YAML nodes in one file: every key, value, list and map counts one
/// (a model of ten keys is about 25), so about 400 000 such models.
pub(crate) const MAX_YAML_NODES: usize = 10_000_000;
/// Most bytes of keys and values (scalar text) in one file.
pub(crate) const MAX_YAML_TEXT: usize = 256 << 20;
/// Deepest nesting of lists and maps in one file.
pub(crate) const MAX_YAML_DEPTH: usize = 32;
/// Most anchors (`&name`) in one file, and most aliases (`*name`).
pub(crate) const MAX_YAML_ANCHORS: usize = 50_000;
/// Most YAML documents (`---`) in one file.
pub(crate) const MAX_YAML_DOCUMENTS: usize = 1_024;

/// The parser's options: its default limits, but room for a configuration
/// of hundreds of thousands of models (its default of 250 000 nodes refused
/// 50 000 models with `proxy` and `aliases`). Every limit is documented in
/// the README ("Limits") and named by the error that reports it.
fn reader_options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_nodes = MAX_YAML_NODES;
    // A node is one or two events (a map or list also ends); the node limit
    // is the one a real file meets first.
    budget.max_events = 2 * MAX_YAML_NODES + 16;
    budget.max_total_scalar_bytes = MAX_YAML_TEXT;
    budget.max_depth = MAX_YAML_DEPTH;
    budget.max_anchors = MAX_YAML_ANCHORS;
    budget.max_aliases = MAX_YAML_ANCHORS;
    budget.max_documents = MAX_YAML_DOCUMENTS;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options
}

/// The tree as the parser hands it over: typed scalars with where they were
/// written (byte offset and length), map keys still values.
enum Parsed {
    Null,
    Bool(bool, Option<Span>),
    Int(i64, Option<Span>),
    Float(f64, Option<Span>),
    Str(String),
    Seq(Vec<Parsed>),
    Map(Vec<(Parsed, Parsed)>),
}

type Span = (usize, usize);

impl Parsed {
    /// Where a typed scalar was defined (an alias or merge key points at its
    /// anchor's text).
    fn at(mut self, location: &serde_saphyr::Location) -> Self {
        let span = location.span();
        let span = span
            .byte_offset()
            .zip(span.byte_len())
            .and_then(|(o, n)| Some((usize::try_from(o).ok()?, usize::try_from(n).ok()?)));
        if let Parsed::Bool(_, at) | Parsed::Int(_, at) | Parsed::Float(_, at) = &mut self {
            *at = span;
        }
        self
    }

    fn into_node(self, text: &str) -> Node {
        // The written text, when it is not what the value renders as anyway.
        let written = |span: Option<Span>, usual: String| {
            let raw = span
                .and_then(|(o, n)| text.get(o..o.checked_add(n)?))
                .map(str::trim)
                .filter(|raw| !raw.is_empty() && *raw != usual);
            Written(raw.map(Box::from))
        };
        match self {
            Parsed::Null => Node::Null,
            Parsed::Bool(b, at) => Node::Bool(b, written(at, b.to_string())),
            Parsed::Int(i, at) => Node::Int(i, written(at, i.to_string())),
            Parsed::Float(f, at) => Node::Float(f, written(at, f.to_string())),
            Parsed::Str(s) => Node::Str(s),
            Parsed::Seq(items) => Node::Seq(items.into_iter().map(|i| i.into_node(text)).collect()),
            Parsed::Map(entries) => Node::Map(
                entries
                    .into_iter()
                    .map(|(k, v)| {
                        let key = match k.into_node(text) {
                            Node::Null => "null".to_owned(),
                            key => key.scalar_text().unwrap_or_default(),
                        };
                        (key, v.into_node(text))
                    })
                    .collect(),
            ),
        }
    }
}

impl<'de> Deserialize<'de> for Parsed {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ParsedVisitor)
    }
}

struct ParsedVisitor;

impl<'de> Visitor<'de> for ParsedVisitor {
    type Value = Parsed;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Parsed, E> {
        Ok(Parsed::Bool(v, None))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Parsed, E> {
        Ok(Parsed::Int(v, None))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Parsed, E> {
        Ok(i64::try_from(v).map_or(Parsed::Float(v as f64, None), |i| Parsed::Int(i, None)))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Parsed, E> {
        Ok(i64::try_from(v).map_or(Parsed::Float(v as f64, None), |i| Parsed::Int(i, None)))
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Parsed, E> {
        Ok(i64::try_from(v).map_or(Parsed::Float(v as f64, None), |i| Parsed::Int(i, None)))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Parsed, E> {
        Ok(Parsed::Float(v, None))
    }

    fn visit_char<E: de::Error>(self, v: char) -> Result<Parsed, E> {
        Ok(Parsed::Str(v.to_string()))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Parsed, E> {
        Ok(Parsed::Str(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Parsed, E> {
        Ok(Parsed::Str(v))
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Parsed, E> {
        Ok(Parsed::Str(String::from_utf8_lossy(v).into_owned()))
    }

    fn visit_none<E: de::Error>(self) -> Result<Parsed, E> {
        Ok(Parsed::Null)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Parsed, E> {
        Ok(Parsed::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Parsed, D::Error> {
        Parsed::deserialize(deserializer)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Parsed, D::Error> {
        Parsed::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Parsed, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Spanned<Parsed>>()? {
            items.push(item.value.at(&item.defined));
        }
        Ok(Parsed::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Parsed, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<Spanned<Parsed>>()? {
            let key = key.value.at(&key.defined);
            if matches!(key, Parsed::Seq(_) | Parsed::Map(_)) {
                let kind = if matches!(key, Parsed::Seq(_)) {
                    "a list"
                } else {
                    "a map"
                };
                return Err(de::Error::custom(format!(
                    "map keys must be scalars, got {kind}"
                )));
            }
            let value = map.next_value::<Spanned<Parsed>>()?;
            entries.push((key, value.value.at(&value.defined)));
        }
        Ok(Parsed::Map(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Node {
        Node::parse(text).unwrap()
    }

    #[test]
    fn map_order_follows_the_file() {
        let node = parse("b: 1\na: two\nc: [true, 1.5, ~]\n");
        assert_eq!(
            node,
            Node::Map(vec![
                ("b".into(), Node::int(1)),
                ("a".into(), Node::Str("two".into())),
                (
                    "c".into(),
                    Node::Seq(vec![
                        Node::bool(true),
                        Node::Float(1.5, Written::default()),
                        Node::Null
                    ])
                ),
            ])
        );
    }

    #[test]
    fn quoted_numbers_stay_strings() {
        assert_eq!(parse("x: '5'").get("x"), Some(&Node::Str("5".into())));
    }

    #[test]
    fn anchors_and_merge_keys_are_expanded() {
        let node = parse("base: &b {ttl: 5}\nm:\n  <<: *b\n  cmd: x\n");
        let m = node.get("m").unwrap();
        assert_eq!(m.get("ttl"), Some(&Node::int(5)));
        assert_eq!(m.get("cmd"), Some(&Node::Str("x".into())));
    }

    #[test]
    fn duplicate_keys_are_rejected_by_the_parser() {
        assert!(Node::parse("a: 1\na: 2\n").is_err());
    }

    #[test]
    fn plain_text_is_typed_like_a_yaml_scalar() {
        assert_eq!(Node::from_plain_text("300"), Node::int(300));
        assert_eq!(Node::from_plain_text("-2"), Node::int(-2));
        assert_eq!(Node::from_plain_text("true"), Node::bool(true));
        assert_eq!(Node::from_plain_text("007"), Node::Str("007".into()));
        assert_eq!(Node::from_plain_text("+5"), Node::Str("+5".into()));
        assert_eq!(Node::from_plain_text("1e5"), Node::Str("1e5".into()));
        assert_eq!(
            Node::from_plain_text("/models"),
            Node::Str("/models".into())
        );
    }
}
