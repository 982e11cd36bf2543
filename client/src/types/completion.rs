//! Legacy text completions (`POST /v1/completions`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::null_as_default;
use super::response::FinishReason;
use super::usage::{Timings, Usage};

/// The prompt: one text or a batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Prompt {
    /// One prompt.
    Text(String),
    /// Several prompts, one choice each.
    Batch(Vec<String>),
}

impl From<&str> for Prompt {
    fn from(text: &str) -> Self {
        Prompt::Text(text.to_owned())
    }
}

impl From<String> for Prompt {
    fn from(text: String) -> Self {
        Prompt::Text(text)
    }
}

/// A `POST /v1/completions` request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CompletionRequest {
    /// The model (or alias) the proxy routes by.
    pub model: String,
    /// The prompt.
    pub prompt: Prompt,
    /// Upper bound on generated tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<Vec<String>>,
    /// Set by the SDK: `true` for streaming calls, absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// Any other body field.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl CompletionRequest {
    /// A request for `model` with `prompt` and nothing else set.
    pub fn new(model: impl Into<String>, prompt: impl Into<Prompt>) -> CompletionRequest {
        CompletionRequest {
            model: model.into(),
            prompt: prompt.into(),
            max_tokens: None,
            temperature: None,
            stop: None,
            stream: None,
            extra: Map::new(),
        }
    }

    /// Sets the token limit.
    #[must_use]
    pub fn max_tokens(mut self, value: u32) -> CompletionRequest {
        self.max_tokens = Some(value);
        self
    }

    /// Sets any other body field.
    #[must_use]
    pub fn extra(mut self, key: impl Into<String>, value: impl Into<Value>) -> CompletionRequest {
        self.extra.insert(key.into(), value.into());
        self
    }
}

/// A text completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
#[non_exhaustive]
pub struct CompletionResponse {
    /// Completion id.
    #[serde(deserialize_with = "null_as_default")]
    pub id: String,
    /// Usually `text_completion`.
    #[serde(deserialize_with = "null_as_default")]
    pub object: String,
    /// Unix seconds.
    #[serde(deserialize_with = "null_as_default")]
    pub created: u64,
    /// The model that answered.
    #[serde(deserialize_with = "null_as_default")]
    pub model: String,
    /// One per prompt (times `n`).
    #[serde(deserialize_with = "null_as_default")]
    pub choices: Vec<CompletionChoice>,
    /// Token accounting, if reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// llama.cpp's speed report, if sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timings: Option<Timings>,
    /// Every other field, kept as received.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One frame of a streaming text completion: the same shape as a whole response,
/// with the new text in each choice.
pub type CompletionChunk = CompletionResponse;

impl CompletionResponse {
    /// The first choice's text (empty when there is none).
    pub fn text(&self) -> &str {
        self.choices.first().map_or("", |c| c.text.as_str())
    }
}

/// One generated text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
#[non_exhaustive]
pub struct CompletionChoice {
    /// Position among the choices.
    #[serde(deserialize_with = "null_as_default")]
    pub index: u32,
    /// The text.
    #[serde(deserialize_with = "null_as_default")]
    pub text: String,
    /// Why generation stopped.
    #[serde(deserialize_with = "super::response::finish_reason")]
    pub finish_reason: Option<FinishReason>,
    /// Every other field (`logprobs`, ...), kept as received.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completion_request_serialises_text_or_batch_prompts() {
        let one = serde_json::to_value(CompletionRequest::new("m", "hi")).unwrap();
        assert_eq!(one, serde_json::json!({"model": "m", "prompt": "hi"}));
        let many = CompletionRequest::new("m", Prompt::Batch(vec!["a".into(), "b".into()]));
        assert_eq!(
            serde_json::to_value(many).unwrap()["prompt"],
            serde_json::json!(["a", "b"])
        );
    }

    #[test]
    fn completion_response_is_lenient() {
        let resp: CompletionResponse =
            serde_json::from_str(r#"{"choices":[{"text":"ok","finish_reason":""}],"usage":{}}"#)
                .unwrap();
        assert_eq!(resp.text(), "ok");
        assert_eq!(resp.choices[0].finish_reason, None);
    }
}
