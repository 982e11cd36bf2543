//! Token accounting and llama.cpp's timings.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::null_as_default;

/// Token accounting. Every field defaults, so `usage: {}` is accepted; fields the
/// SDK does not model are kept in `extra`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
#[non_exhaustive]
pub struct Usage {
    /// Tokens in the prompt.
    #[serde(deserialize_with = "null_as_default")]
    pub prompt_tokens: u64,
    /// Tokens generated.
    #[serde(deserialize_with = "null_as_default")]
    pub completion_tokens: u64,
    /// Their sum, as reported.
    #[serde(deserialize_with = "null_as_default")]
    pub total_tokens: u64,
    /// Where the prompt tokens came from (cache, audio).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_details: Option<PromptTokensDetails>,
    /// What the generated tokens were (reasoning, audio, predictions).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion_tokens_details: Option<CompletionTokensDetails>,
    /// Every other field, kept as received.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Usage {
    /// Usage with these three counts and no details.
    pub fn new(prompt_tokens: u64, completion_tokens: u64) -> Usage {
        Usage {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens + completion_tokens,
            ..Usage::default()
        }
    }
}

/// Details of the prompt tokens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
#[non_exhaustive]
pub struct PromptTokensDetails {
    /// Prompt tokens served from the cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    /// Prompt tokens of audio input.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audio_tokens: Option<u64>,
    /// Every other field, kept as received.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Details of the generated tokens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
#[non_exhaustive]
pub struct CompletionTokensDetails {
    /// Tokens spent reasoning.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    /// Generated audio tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audio_tokens: Option<u64>,
    /// Predicted-output tokens that were accepted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accepted_prediction_tokens: Option<u64>,
    /// Predicted-output tokens that were rejected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejected_prediction_tokens: Option<u64>,
    /// Every other field, kept as received.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// llama.cpp's `timings` object (prompt processing and generation speed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
#[non_exhaustive]
pub struct Timings {
    /// Prompt tokens reused from the cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_n: Option<u64>,
    /// Prompt tokens processed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_n: Option<u64>,
    /// Time spent on the prompt, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_ms: Option<f64>,
    /// Milliseconds per prompt token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_per_token_ms: Option<f64>,
    /// Prompt tokens per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_per_second: Option<f64>,
    /// Tokens generated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted_n: Option<u64>,
    /// Time spent generating, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted_ms: Option<f64>,
    /// Milliseconds per generated token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted_per_token_ms: Option<f64>,
    /// Generated tokens per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted_per_second: Option<f64>,
    /// Every other field (draft counts, ...), kept as received.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn usage_keeps_details_and_unknown_fields() {
        let wire = json!({
            "prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
            "prompt_tokens_details": {"cached_tokens": 8, "image_tokens": 2},
            "completion_tokens_details": {"reasoning_tokens": 3, "accepted_prediction_tokens": 0},
            "cost": 0
        });
        let usage: Usage = serde_json::from_value(wire.clone()).unwrap();
        let prompt = usage.prompt_tokens_details.clone().unwrap();
        assert_eq!(prompt.cached_tokens, Some(8));
        assert_eq!(prompt.extra["image_tokens"], 2);
        let completion = usage.completion_tokens_details.clone().unwrap();
        assert_eq!(completion.reasoning_tokens, Some(3));
        assert_eq!(usage.extra["cost"], 0);
        assert_eq!(serde_json::to_value(&usage).unwrap(), wire);
    }

    #[test]
    fn llama_cpp_timings_parse_and_keep_draft_counts() {
        let wire = json!({"cache_n": 3, "prompt_n": 12, "prompt_ms": 40.5, "prompt_per_token_ms": 3.375,
            "prompt_per_second": 296.3, "predicted_n": 7, "predicted_ms": 90.0,
            "predicted_per_token_ms": 12.857, "predicted_per_second": 77.8, "draft_n": 4});
        let t: Timings = serde_json::from_value(wire.clone()).unwrap();
        assert_eq!(t.prompt_n, Some(12));
        assert_eq!(t.predicted_per_second, Some(77.8));
        assert_eq!(t.extra["draft_n"], 4);
        assert_eq!(serde_json::to_value(&t).unwrap(), wire);
    }
}
