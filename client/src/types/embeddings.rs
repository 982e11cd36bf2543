//! Embeddings (`POST /v1/embeddings`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::null_as_default;
use super::usage::Usage;

/// What to embed: one text or a batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EmbeddingInput {
    /// One text.
    Text(String),
    /// Several texts, one vector each.
    Batch(Vec<String>),
}

impl From<&str> for EmbeddingInput {
    fn from(text: &str) -> Self {
        EmbeddingInput::Text(text.to_owned())
    }
}

impl From<String> for EmbeddingInput {
    fn from(text: String) -> Self {
        EmbeddingInput::Text(text)
    }
}

impl From<&String> for EmbeddingInput {
    fn from(text: &String) -> Self {
        EmbeddingInput::Text(text.clone())
    }
}

impl From<Vec<String>> for EmbeddingInput {
    fn from(texts: Vec<String>) -> Self {
        EmbeddingInput::Batch(texts)
    }
}

impl From<Vec<&str>> for EmbeddingInput {
    fn from(texts: Vec<&str>) -> Self {
        EmbeddingInput::Batch(texts.into_iter().map(str::to_owned).collect())
    }
}

impl From<&[&str]> for EmbeddingInput {
    fn from(texts: &[&str]) -> Self {
        EmbeddingInput::Batch(texts.iter().map(|t| (*t).to_owned()).collect())
    }
}

impl<const N: usize> From<[&str; N]> for EmbeddingInput {
    fn from(texts: [&str; N]) -> Self {
        EmbeddingInput::Batch(texts.into_iter().map(str::to_owned).collect())
    }
}

/// A `POST /v1/embeddings` request. Vectors are requested as floats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct EmbeddingsRequest {
    /// The model (or alias) the proxy routes by.
    pub model: String,
    /// The input.
    pub input: EmbeddingInput,
    /// Output dimensions, for models that support shortening.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dimensions: Option<u32>,
    /// Any other body field.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl EmbeddingsRequest {
    /// A request for `model` embedding `input`.
    pub fn new(model: impl Into<String>, input: impl Into<EmbeddingInput>) -> EmbeddingsRequest {
        EmbeddingsRequest {
            model: model.into(),
            input: input.into(),
            dimensions: None,
            extra: Map::new(),
        }
    }
}

/// The vectors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
#[non_exhaustive]
pub struct EmbeddingsResponse {
    /// Usually `list`.
    #[serde(deserialize_with = "null_as_default")]
    pub object: String,
    /// One entry per input, in input order.
    #[serde(deserialize_with = "null_as_default")]
    pub data: Vec<Embedding>,
    /// The model that answered.
    #[serde(deserialize_with = "null_as_default")]
    pub model: String,
    /// Token accounting, if reported.
    pub usage: Option<Usage>,
}

impl EmbeddingsResponse {
    /// The vectors of `model`, one per input in order.
    pub fn new(
        model: impl Into<String>,
        vectors: impl IntoIterator<Item = Vec<f32>>,
    ) -> EmbeddingsResponse {
        EmbeddingsResponse {
            object: "list".to_owned(),
            data: (0u32..)
                .zip(vectors)
                .map(|(index, embedding)| Embedding { index, embedding })
                .collect(),
            model: model.into(),
            usage: None,
        }
    }
}

/// One vector.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
#[non_exhaustive]
pub struct Embedding {
    /// Which input this vector belongs to.
    #[serde(deserialize_with = "null_as_default")]
    pub index: u32,
    /// The vector.
    #[serde(deserialize_with = "null_as_default")]
    pub embedding: Vec<f32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedding_input_comes_from_owned_and_borrowed_texts() {
        let one = EmbeddingInput::Text("a".to_owned());
        assert_eq!(EmbeddingInput::from("a".to_owned()), one);
        assert_eq!(EmbeddingInput::from(&"a".to_owned()), one);
        let batch = EmbeddingInput::Batch(vec!["a".to_owned(), "b".to_owned()]);
        assert_eq!(EmbeddingInput::from(vec!["a", "b"]), batch);
        assert_eq!(EmbeddingInput::from(&["a", "b"][..]), batch);
        assert_eq!(EmbeddingInput::from(["a", "b"]), batch);
        let request = EmbeddingsRequest::new("e", vec!["a", "b"]);
        assert_eq!(request.input, batch);
    }

    #[test]
    fn embeddings_response_parses_vectors_and_ignores_unknown_fields() {
        let resp: EmbeddingsResponse = serde_json::from_str(
            r#"{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,-1]}],"model":"e","usage":{"prompt_tokens":2}}"#,
        )
        .unwrap();
        assert_eq!(resp.data[0].embedding, vec![0.5, -1.0]);
        assert_eq!(resp.usage.unwrap().prompt_tokens, 2);
    }
}
