//! Tools the model may call, the calls it makes, and the shape of a structured answer.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value, json};

use super::null_as_default;
use crate::error::{DecodeTarget, Error};

/// A tool definition sent with a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Tool {
    /// The tool type; `function` for every tool the SDK builds.
    #[serde(rename = "type", default = "function_kind")]
    pub kind: String,
    /// The function, for `function` tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<FunctionDefinition>,
    /// Any other field, kept and sent as is.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn function_kind() -> String {
    "function".to_owned()
}

impl Tool {
    /// A function tool: `parameters` is the JSON schema of its arguments object.
    pub fn function(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
    ) -> Tool {
        Tool::from_definition(
            FunctionDefinition::new(name)
                .description(description)
                .parameters(parameters),
        )
    }

    /// A function tool from a full definition.
    pub fn from_definition(definition: FunctionDefinition) -> Tool {
        Tool {
            kind: function_kind(),
            function: Some(definition),
            extra: Map::new(),
        }
    }

    /// Asks the server to hold the model to the schema exactly (`strict: true`).
    #[must_use]
    pub fn strict(mut self, strict: bool) -> Tool {
        if let Some(function) = &mut self.function {
            function.strict = Some(strict);
        }
        self
    }

    /// The function's name, for function tools.
    pub fn name(&self) -> Option<&str> {
        self.function.as_ref().map(|f| f.name.as_str())
    }
}

/// A function the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[non_exhaustive]
pub struct FunctionDefinition {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON schema of the arguments object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    /// Whether the arguments must match the schema exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

impl FunctionDefinition {
    /// A function called `name`, with no description or parameters yet.
    pub fn new(name: impl Into<String>) -> FunctionDefinition {
        FunctionDefinition {
            name: name.into(),
            ..FunctionDefinition::default()
        }
    }

    /// Sets the description.
    #[must_use]
    pub fn description(mut self, text: impl Into<String>) -> FunctionDefinition {
        self.description = Some(text.into());
        self
    }

    /// Sets the JSON schema of the arguments.
    #[must_use]
    pub fn parameters(mut self, schema: Value) -> FunctionDefinition {
        self.parameters = Some(schema);
        self
    }

    /// Sets strict schema adherence.
    #[must_use]
    pub fn strict(mut self, strict: bool) -> FunctionDefinition {
        self.strict = Some(strict);
        self
    }
}

/// Whether and which tool the model must call.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolChoice {
    /// The model decides (`"auto"`).
    Auto,
    /// No tool calls (`"none"`).
    None,
    /// At least one tool call (`"required"`).
    Required,
    /// This function (`{"type": "function", "function": {"name": ...}}`).
    Function(String),
    /// Any other value, sent as is.
    Other(Value),
}

impl ToolChoice {
    /// Forces a call to the function `name`.
    pub fn function(name: impl Into<String>) -> ToolChoice {
        ToolChoice::Function(name.into())
    }
}

impl Serialize for ToolChoice {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ToolChoice::Auto => s.serialize_str("auto"),
            ToolChoice::None => s.serialize_str("none"),
            ToolChoice::Required => s.serialize_str("required"),
            ToolChoice::Function(name) => {
                json!({"type": "function", "function": {"name": name}}).serialize(s)
            }
            ToolChoice::Other(value) => value.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for ToolChoice {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        Ok(match value.as_str() {
            Some("auto") => ToolChoice::Auto,
            Some("none") => ToolChoice::None,
            Some("required") => ToolChoice::Required,
            _ => match value.pointer("/function/name").and_then(Value::as_str) {
                Some(name) if value.get("type").and_then(Value::as_str) == Some("function") => {
                    ToolChoice::Function(name.to_owned())
                }
                _ => ToolChoice::Other(value),
            },
        })
    }
}

/// A complete tool call, in a response message or in history sent back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
#[non_exhaustive]
pub struct ToolCall {
    /// The call's id, echoed by the tool result.
    #[serde(deserialize_with = "null_as_default")]
    pub id: String,
    /// Always `function` today.
    #[serde(rename = "type", deserialize_with = "null_as_default")]
    pub kind: String,
    /// The function and its JSON arguments.
    pub function: FunctionCall,
}

impl ToolCall {
    /// A call `id` of function `name` with `arguments` as JSON text.
    pub fn function(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> ToolCall {
        ToolCall {
            id: id.into(),
            kind: function_kind(),
            function: FunctionCall::new(name, arguments),
        }
    }

    /// A call whose arguments are `arguments` serialised as JSON.
    ///
    /// # Errors
    ///
    /// [`Error::Encode`] when `arguments` cannot be serialised.
    pub fn function_json<T: Serialize + ?Sized>(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: &T,
    ) -> Result<ToolCall, Error> {
        let text = serde_json::to_string(arguments).map_err(Error::Encode)?;
        Ok(ToolCall::function(id, name, text))
    }

    /// The called function's name.
    pub fn name(&self) -> &str {
        &self.function.name
    }
}

/// The function part of a tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
#[non_exhaustive]
pub struct FunctionCall {
    /// Function name.
    #[serde(deserialize_with = "null_as_default")]
    pub name: String,
    /// Arguments as a JSON string.
    #[serde(deserialize_with = "null_as_default")]
    pub arguments: String,
}

impl FunctionCall {
    /// A call of `name` with `arguments` as JSON text.
    pub fn new(name: impl Into<String>, arguments: impl Into<String>) -> FunctionCall {
        FunctionCall {
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    /// The arguments deserialised into `T`. Empty (or all-blank) arguments read as
    /// `{}`, since some servers send nothing for a function without parameters.
    ///
    /// # Errors
    ///
    /// [`Error::Decode`] with [`DecodeTarget::ToolArguments`] and the raw text when
    /// the arguments are not JSON of that shape.
    pub fn parse_arguments<T: DeserializeOwned>(&self) -> Result<T, Error> {
        let text = self.arguments.trim();
        let text = if text.is_empty() { "{}" } else { text };
        serde_json::from_str(text).map_err(|source| Error::Decode {
            what: DecodeTarget::ToolArguments,
            raw: self.arguments.clone(),
            source,
        })
    }
}

/// The shape of the answer a request asks for.
///
/// ```
/// use llama_swap_client::{JsonSchemaFormat, ResponseFormat};
/// use serde_json::json;
///
/// let format = ResponseFormat::json_schema(
///     JsonSchemaFormat::new("verdict", json!({"type": "object", "properties": {"ok": {"type": "boolean"}}}))
///         .strict(true),
/// );
/// let wire = serde_json::to_value(&format).unwrap();
/// assert_eq!(wire["type"], "json_schema");
/// assert_eq!(wire["json_schema"]["name"], "verdict");
/// assert_eq!(wire["json_schema"]["strict"], true);
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ResponseFormat {
    /// Free text (`{"type": "text"}`).
    Text,
    /// Any JSON object (`{"type": "json_object"}`).
    JsonObject,
    /// JSON matching a schema (`{"type": "json_schema", "json_schema": {...}}`).
    JsonSchema(JsonSchemaFormat),
    /// Any other value, sent as is (for example llama.cpp's
    /// `{"type": "json_object", "schema": {...}}`).
    Other(Value),
}

impl ResponseFormat {
    /// JSON matching `format`'s schema.
    pub fn json_schema(format: JsonSchemaFormat) -> ResponseFormat {
        ResponseFormat::JsonSchema(format)
    }
}

/// A named JSON schema for [`ResponseFormat::JsonSchema`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[non_exhaustive]
pub struct JsonSchemaFormat {
    /// The schema's name.
    pub name: String,
    /// What the answer is, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON schema.
    #[serde(default)]
    pub schema: Value,
    /// Whether the answer must match the schema exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

impl JsonSchemaFormat {
    /// A schema called `name`.
    pub fn new(name: impl Into<String>, schema: Value) -> JsonSchemaFormat {
        JsonSchemaFormat {
            name: name.into(),
            schema,
            ..JsonSchemaFormat::default()
        }
    }

    /// Sets the description.
    #[must_use]
    pub fn description(mut self, text: impl Into<String>) -> JsonSchemaFormat {
        self.description = Some(text.into());
        self
    }

    /// Sets strict schema adherence.
    #[must_use]
    pub fn strict(mut self, strict: bool) -> JsonSchemaFormat {
        self.strict = Some(strict);
        self
    }
}

impl Serialize for ResponseFormat {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ResponseFormat::Text => json!({"type": "text"}).serialize(s),
            ResponseFormat::JsonObject => json!({"type": "json_object"}).serialize(s),
            ResponseFormat::JsonSchema(format) => {
                json!({"type": "json_schema", "json_schema": format}).serialize(s)
            }
            ResponseFormat::Other(value) => value.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for ResponseFormat {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        let only_type = value.as_object().is_some_and(|o| o.len() == 1);
        Ok(match value.get("type").and_then(Value::as_str) {
            Some("text") if only_type => ResponseFormat::Text,
            Some("json_object") if only_type => ResponseFormat::JsonObject,
            Some("json_schema") => match value
                .get("json_schema")
                .map(|v| JsonSchemaFormat::deserialize(v.clone()))
            {
                Some(Ok(format)) => ResponseFormat::JsonSchema(format),
                _ => ResponseFormat::Other(value),
            },
            _ => ResponseFormat::Other(value),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_choice_wire_forms() {
        let cases = [
            (ToolChoice::Auto, json!("auto")),
            (ToolChoice::None, json!("none")),
            (ToolChoice::Required, json!("required")),
            (
                ToolChoice::function("f"),
                json!({"type": "function", "function": {"name": "f"}}),
            ),
            (
                ToolChoice::Other(json!({"type": "allowed_tools"})),
                json!({"type": "allowed_tools"}),
            ),
        ];
        for (choice, wire) in cases {
            assert_eq!(serde_json::to_value(&choice).unwrap(), wire);
            assert_eq!(serde_json::from_value::<ToolChoice>(wire).unwrap(), choice);
        }
    }

    #[test]
    fn function_tool_serialises_openai_shape() {
        let tool = Tool::function("f", "does f", json!({"type": "object"})).strict(true);
        assert_eq!(
            serde_json::to_value(&tool).unwrap(),
            json!({"type": "function", "function": {"name": "f", "description": "does f",
                "parameters": {"type": "object"}, "strict": true}})
        );
        let back: Tool = serde_json::from_value(serde_json::to_value(&tool).unwrap()).unwrap();
        assert_eq!(back, tool);
    }

    #[test]
    fn arguments_parse_into_a_type_and_mismatch_is_a_typed_error() {
        #[derive(Deserialize, Debug, PartialEq)]
        struct City {
            city: String,
        }
        let call = ToolCall::function("1", "w", r#"{"city":"Oslo"}"#);
        assert_eq!(
            call.function.parse_arguments::<City>().unwrap(),
            City {
                city: "Oslo".into()
            }
        );
        let empty = FunctionCall::new("now", " ");
        assert_eq!(empty.parse_arguments::<Value>().unwrap(), json!({}));
        let bad = FunctionCall::new("w", r#"{"town":1}"#);
        match bad.parse_arguments::<City>() {
            Err(Error::Decode { what, raw, .. }) => {
                assert_eq!(what, DecodeTarget::ToolArguments);
                assert_eq!(raw, r#"{"town":1}"#);
            }
            other => panic!("expected a decode error, got {other:?}"),
        }
    }

    #[test]
    fn response_formats_round_trip() {
        let cases = [
            (ResponseFormat::Text, json!({"type": "text"})),
            (ResponseFormat::JsonObject, json!({"type": "json_object"})),
            (
                ResponseFormat::json_schema(JsonSchemaFormat::new("n", json!({"type": "object"}))),
                json!({"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "object"}}}),
            ),
            (
                ResponseFormat::Other(json!({"type": "json_object", "schema": {}})),
                json!({"type": "json_object", "schema": {}}),
            ),
        ];
        for (format, wire) in cases {
            assert_eq!(serde_json::to_value(&format).unwrap(), wire);
            assert_eq!(
                serde_json::from_value::<ResponseFormat>(wire).unwrap(),
                format
            );
        }
    }
}
