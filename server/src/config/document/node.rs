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

/// One YAML value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Node {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    /// Entries in file order; keys are scalars rendered as text.
    Map(Vec<(String, Node)>),
}

impl Node {
    /// What kind of value this is, phrased for "expected X, got Y" messages. Never
    /// includes the value itself, so secrets (API keys) cannot leak through it.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Node::Null => "nothing (null)",
            Node::Bool(_) => "a boolean",
            Node::Int(_) => "an integer",
            // A whole number beyond 64 bits arrives as a float; it is not a fraction.
            Node::Float(f) if f.fract() == 0.0 && f.abs() >= 9.223_372_036_854_776e18 => {
                "a whole number too large for a 64-bit integer"
            }
            Node::Float(_) => "a fractional number",
            Node::Str(_) => "a string",
            Node::Seq(_) => "a list",
            Node::Map(_) => "a map",
        }
    }

    /// The text of a scalar, as a string-typed field would see it (YAML `8080` is a
    /// valid value for a string field, as in llama-swap's Go decoder).
    pub(crate) fn scalar_text(&self) -> Option<String> {
        match self {
            Node::Bool(b) => Some(b.to_string()),
            Node::Int(i) => Some(i.to_string()),
            Node::Float(f) => Some(f.to_string()),
            Node::Str(s) => Some(s.clone()),
            Node::Null | Node::Seq(_) | Node::Map(_) => None,
        }
    }

    /// True for strings, numbers and booleans.
    pub(crate) fn is_scalar(&self) -> bool {
        matches!(
            self,
            Node::Bool(_) | Node::Int(_) | Node::Float(_) | Node::Str(_)
        )
    }

    /// Types text the way a plain YAML scalar would be typed, so that a value that is
    /// exactly `${env.NAME}` behaves as if the variable's text had been written there
    /// (llama-swap substitutes environment variables textually before parsing). Only
    /// text that converts back unchanged becomes a number or boolean, so a string
    /// field (an API key `007`, say) always gets the variable's exact text.
    pub(crate) fn from_plain_text(text: &str) -> Node {
        match text {
            "true" => return Node::Bool(true),
            "false" => return Node::Bool(false),
            _ => {}
        }
        match text.parse::<i64>() {
            Ok(i) if i.to_string() == text => Node::Int(i),
            _ => Node::Str(text.to_owned()),
        }
    }

    /// Converts to JSON for free-form data such as `metadata`.
    pub(crate) fn to_json(&self) -> serde_json::Value {
        match self {
            Node::Null => serde_json::Value::Null,
            Node::Bool(b) => serde_json::Value::Bool(*b),
            Node::Int(i) => serde_json::Value::from(*i),
            Node::Float(f) => serde_json::Number::from_f64(*f)
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

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Node, E> {
        Ok(Node::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Node, E> {
        Ok(Node::Int(v))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Node, E> {
        Ok(i64::try_from(v).map_or(Node::Float(v as f64), Node::Int))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Node, E> {
        Ok(i64::try_from(v).map_or(Node::Float(v as f64), Node::Int))
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Node, E> {
        Ok(i64::try_from(v).map_or(Node::Float(v as f64), Node::Int))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Node, E> {
        Ok(Node::Float(v))
    }

    fn visit_char<E: de::Error>(self, v: char) -> Result<Node, E> {
        Ok(Node::Str(v.to_string()))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Node, E> {
        Ok(Node::Str(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Node, E> {
        Ok(Node::Str(v))
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Node, E> {
        Ok(Node::Str(String::from_utf8_lossy(v).into_owned()))
    }

    fn visit_none<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Node, D::Error> {
        Node::deserialize(deserializer)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, deserializer: D) -> Result<Node, D::Error> {
        Node::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Node>()? {
            items.push(item);
        }
        Ok(Node::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries: Vec<(String, Node)> = Vec::new();
        while let Some(key) = map.next_key::<Node>()? {
            let Some(key) = key.scalar_text().or_else(|| match key {
                Node::Null => Some("null".to_owned()),
                _ => None,
            }) else {
                return Err(de::Error::custom(format!(
                    "map keys must be scalars, got {}",
                    key.kind()
                )));
            };
            let value = map.next_value::<Node>()?;
            entries.push((key, value));
        }
        Ok(Node::Map(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Node {
        serde_saphyr::from_str(text).unwrap()
    }

    #[test]
    fn map_order_follows_the_file() {
        let node = parse("b: 1\na: two\nc: [true, 1.5, ~]\n");
        assert_eq!(
            node,
            Node::Map(vec![
                ("b".into(), Node::Int(1)),
                ("a".into(), Node::Str("two".into())),
                (
                    "c".into(),
                    Node::Seq(vec![Node::Bool(true), Node::Float(1.5), Node::Null])
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
        assert_eq!(m.get("ttl"), Some(&Node::Int(5)));
        assert_eq!(m.get("cmd"), Some(&Node::Str("x".into())));
    }

    #[test]
    fn duplicate_keys_are_rejected_by_the_parser() {
        assert!(serde_saphyr::from_str::<Node>("a: 1\na: 2\n").is_err());
    }

    #[test]
    fn plain_text_is_typed_like_a_yaml_scalar() {
        assert_eq!(Node::from_plain_text("300"), Node::Int(300));
        assert_eq!(Node::from_plain_text("-2"), Node::Int(-2));
        assert_eq!(Node::from_plain_text("true"), Node::Bool(true));
        assert_eq!(Node::from_plain_text("007"), Node::Str("007".into()));
        assert_eq!(Node::from_plain_text("+5"), Node::Str("+5".into()));
        assert_eq!(Node::from_plain_text("1e5"), Node::Str("1e5".into()));
        assert_eq!(
            Node::from_plain_text("/models"),
            Node::Str("/models".into())
        );
    }
}
