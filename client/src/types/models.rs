//! Model list (`GET /v1/models`) and running models (`GET /running`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::null_as_default;

/// The proxy's model list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
#[non_exhaustive]
pub struct ModelList {
    /// Usually `list`.
    #[serde(deserialize_with = "null_as_default")]
    pub object: String,
    /// The models, sorted by id by llama-swap.
    #[serde(deserialize_with = "null_as_default")]
    pub data: Vec<ModelInfo>,
}

impl ModelList {
    /// A list of these model ids.
    pub fn new(ids: impl IntoIterator<Item = impl Into<String>>) -> ModelList {
        ModelList {
            object: "list".to_owned(),
            data: ids.into_iter().map(ModelInfo::new).collect(),
        }
    }

    /// The ids, in order.
    pub fn ids(&self) -> Vec<&str> {
        self.data.iter().map(|m| m.id.as_str()).collect()
    }
}

/// One configured model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
#[non_exhaustive]
pub struct ModelInfo {
    /// The id requests name.
    #[serde(deserialize_with = "null_as_default")]
    pub id: String,
    /// Usually `model`.
    #[serde(deserialize_with = "null_as_default")]
    pub object: String,
    /// Unix seconds.
    #[serde(deserialize_with = "null_as_default")]
    pub created: u64,
    /// Usually `llama-swap`.
    #[serde(deserialize_with = "null_as_default")]
    pub owned_by: String,
    /// Display name from the config.
    pub name: Option<String>,
    /// Description from the config.
    pub description: Option<String>,
    /// llama-swap's load status (`{"value": "loaded"}`), passed through.
    pub status: Option<Value>,
}

impl ModelInfo {
    /// A model called `id`.
    pub fn new(id: impl Into<String>) -> ModelInfo {
        ModelInfo {
            id: id.into(),
            object: "model".to_owned(),
            ..ModelInfo::default()
        }
    }
}

/// The proxy's running models.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
#[non_exhaustive]
pub struct RunningModels {
    /// Every model whose process is not stopped.
    #[serde(deserialize_with = "null_as_default")]
    pub running: Vec<RunningModel>,
}

/// One running model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
#[non_exhaustive]
pub struct RunningModel {
    /// The model id.
    #[serde(deserialize_with = "null_as_default")]
    pub model: String,
    /// `ready`, `starting`, `stopping`, ...
    #[serde(deserialize_with = "null_as_default")]
    pub state: String,
    /// Idle seconds before automatic unload (0 = never).
    pub ttl: Option<i64>,
    /// Display name from the config.
    pub name: Option<String>,
    /// Description from the config.
    pub description: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_models_parse_llama_swap_shape() {
        let r: RunningModels = serde_json::from_str(
            r#"{"running":[{"model":"a","state":"ready","cmd":"x","proxy":"http://127.0.0.1:5800","ttl":0,"name":"","description":""}]}"#,
        )
        .unwrap();
        assert_eq!(r.running[0].model, "a");
        assert_eq!(r.running[0].state, "ready");
        assert_eq!(r.running[0].ttl, Some(0));
    }

    #[test]
    fn model_list_parses_extra_llama_swap_fields() {
        let l: ModelList = serde_json::from_str(
            r#"{"object":"list","data":[{"id":"m","object":"model","created":1,"owned_by":"llama-swap","meta":{"llamaswap":{}},"status":{"value":"loaded"}}]}"#,
        )
        .unwrap();
        assert_eq!(l.data[0].id, "m");
        assert!(l.data[0].status.is_some());
    }
}
