//! What each API key may do (`keys` in the config): the models it may use,
//! how many of its requests may be admitted at once, and whether it may use
//! the management API.
//!
//! - A key outside its `models` is answered as if the model did not exist
//!   (404 `model_not_found`), and `/v1/models` lists only its models.
//! - `maxConcurrent`: a [`KeyPermit`] per admitted model request, held until
//!   its response body ends (a websocket's until the socket closes); one more
//!   is 429 `key_busy`.
//! - With `admin: true` on any entry, a key without it reaches only the model
//!   endpoints, the model listing, `/metrics` and the open paths; everything
//!   else (loading, unloading, cancelling, profiles, logs, captures, the
//!   UI's data) is 403 `admin_key_required`. Without any admin entry every
//!   key keeps full access, as before.
//!
//! Keys are known here by their position in `apiKeys`; their text never is.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::api::error::ApiError;
use crate::config::{Config, KeyScope, ModelConfig};
use crate::priority::KeyIndex;

/// The rules of every configured API key, by its position in `apiKeys`.
#[derive(Debug, Default)]
pub(crate) struct KeyRules {
    keys: Vec<KeyRule>,
    /// Some entry says `admin: true`: the management API is for admins only.
    admin_configured: bool,
}

/// One key's rules.
#[derive(Debug)]
struct KeyRule {
    /// Shown instead of the key (activity, logs, metrics, the UI).
    name: Arc<str>,
    scope: Option<KeyScope>,
    /// Its requests admitted now (for `maxConcurrent`), shared by the permits.
    in_flight: Arc<AtomicUsize>,
}

impl KeyRules {
    /// The rules `config` gives its `apiKeys`.
    pub(crate) fn new(config: &Config) -> Self {
        let keys = (0..config.api_keys.len())
            .map(|i| {
                let scope = config.keys.iter().find(|s| s.key == i).cloned();
                KeyRule {
                    name: Arc::from(
                        scope
                            .as_ref()
                            .map_or_else(|| format!("key{i}"), |s| s.name.clone()),
                    ),
                    scope,
                    in_flight: Arc::new(AtomicUsize::new(0)),
                }
            })
            .collect();
        Self {
            keys,
            admin_configured: config.keys.iter().any(|s| s.admin),
        }
    }

    fn scope(&self, key: Option<KeyIndex>) -> Option<&KeyScope> {
        let KeyIndex(i) = key?;
        self.keys.get(i)?.scope.as_ref()
    }

    /// The name a key is shown by.
    pub(crate) fn name(&self, key: KeyIndex) -> Option<&Arc<str>> {
        self.keys.get(key.0).map(|rule| &rule.name)
    }

    /// Whether requests with `key` may use local model `model`.
    pub(crate) fn allows_model(&self, key: Option<KeyIndex>, model: &ModelConfig) -> bool {
        self.scope(key).is_none_or(|scope| {
            scope.allows(
                std::iter::once(model.id.as_str()).chain(model.aliases.iter().map(String::as_str)),
            )
        })
    }

    /// Whether requests with `key` may use model `model` of peer `peer`
    /// (by `peer/model` or by `model`).
    pub(crate) fn allows_peer_model(&self, key: Option<KeyIndex>, peer: &str, model: &str) -> bool {
        self.scope(key).is_none_or(|scope| {
            let qualified = crate::names::qualified_name(peer, model);
            scope.allows([qualified.as_str(), model])
        })
    }

    /// Whether `key` may use every model (it has no `models` list).
    pub(crate) fn allows_everything(&self, key: Option<KeyIndex>) -> bool {
        self.scope(key).is_none_or(|scope| scope.models.is_none())
    }

    /// Whether `key` may use the management API, logs and captures.
    pub(crate) fn may_manage(&self, key: Option<KeyIndex>) -> bool {
        !self.admin_configured || self.scope(key).is_some_and(|scope| scope.admin)
    }

    /// Counts one more admitted request of `key` against its
    /// `maxConcurrent`; the permit counts it out when dropped.
    ///
    /// # Errors
    ///
    /// [`ApiError::KeyBusy`] when the key already has that many.
    pub(crate) fn admit(&self, key: Option<KeyIndex>) -> Result<Option<KeyPermit>, ApiError> {
        let Some(KeyIndex(i)) = key else {
            return Ok(None);
        };
        let Some(rule) = self.keys.get(i) else {
            return Ok(None);
        };
        let Some(limit) = rule.scope.as_ref().and_then(|s| s.max_concurrent) else {
            return Ok(None);
        };
        let admitted = rule
            .in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            });
        match admitted {
            Ok(_) => Ok(Some(KeyPermit {
                in_flight: Arc::clone(&rule.in_flight),
            })),
            Err(_) => Err(ApiError::KeyBusy {
                name: rule.name.to_string(),
                limit,
            }),
        }
    }
}

/// One admitted request of a key with `maxConcurrent`; counted out on drop.
#[derive(Debug)]
pub(crate) struct KeyPermit {
    in_flight: Arc<AtomicUsize>,
}

impl Drop for KeyPermit {
    fn drop(&mut self) {
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Whether a request to `path` needs an admin key when admins are
/// configured: everything but the model endpoints, the model listing,
/// `/metrics` and the paths open to anyone.
pub(crate) fn needs_admin(path: &str) -> bool {
    !(crate::api::paths::is_model_path(path)
        || matches!(path, "/v1/models" | "/models" | "/metrics"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(yaml: &str) -> Config {
        Config::loader()
            .yaml("test.yaml", yaml)
            .env(&|_: &str| None)
            .load()
            .expect("loads")
            .config
    }

    fn rules(yaml: &str) -> KeyRules {
        KeyRules::new(&config(yaml))
    }

    const BASE: &str = "apiKeys: [k-a, k-b, k-c]\nmodels:\n  qwen-7b:\n    cmd: srv --port ${PORT}\n  llama:\n    cmd: srv --port ${PORT}\n    aliases: [chat]\n";

    #[test]
    fn max_concurrent_admits_up_to_the_limit_and_a_dropped_permit_frees_one() {
        let rules = rules(&format!(
            "{BASE}keys:\n  - key: k-b\n    name: batch\n    maxConcurrent: 2\n"
        ));
        let key = Some(KeyIndex(1));
        let first = rules.admit(key).expect("first");
        let _second = rules.admit(key).expect("second");
        let third = rules.admit(key).expect_err("third");
        assert_eq!(third.kind().code, "key_busy");
        assert!(third.to_string().contains("batch"), "{third}");
        drop(first);
        assert!(rules.admit(key).is_ok());
        assert!(rules.admit(Some(KeyIndex(0))).expect("unbounded").is_none());
    }

    #[test]
    fn models_scope_by_id_alias_or_glob_and_admins_manage() {
        let config = config(&format!(
            "{BASE}keys:\n  - key: k-a\n    models: [qwen-*]\n  - key: k-b\n    models: [chat]\n  - key: k-c\n    admin: true\n"
        ));
        let rules = KeyRules::new(&config);
        let (a, b, c) = (Some(KeyIndex(0)), Some(KeyIndex(1)), Some(KeyIndex(2)));
        let qwen = config.model("qwen-7b").expect("qwen");
        let llama = config.model("llama").expect("llama");
        assert!(rules.allows_model(a, qwen));
        assert!(!rules.allows_model(a, llama));
        assert!(rules.allows_model(b, llama), "by its alias");
        assert!(rules.allows_model(c, qwen), "no models: all");
        assert!(!rules.may_manage(a));
        assert!(rules.may_manage(c));
        assert_eq!(rules.name(KeyIndex(0)).map(|n| &**n), Some("key0"));
    }

    #[test]
    fn without_an_admin_entry_every_key_manages() {
        let rules = rules(&format!("{BASE}keys:\n  - key: k-a\n    models: [llama]\n"));
        assert!(rules.may_manage(Some(KeyIndex(0))));
        assert!(rules.may_manage(Some(KeyIndex(1))));
    }

    #[test]
    fn only_model_routes_listings_and_metrics_are_open_to_non_admins() {
        for path in [
            "/v1/chat/completions",
            "/upstream/qwen/v1/models",
            "/comfyui/",
            "/v1/models",
            "/metrics",
        ] {
            assert!(!needs_admin(path), "{path}");
        }
        for path in [
            "/api/models/unload",
            "/api/models/load/qwen",
            "/logs",
            "/logs/stream/qwen",
            "/api/events",
            "/api/captures/1",
            "/api/profiles/active",
            "/running",
            "/api/queue",
        ] {
            assert!(needs_admin(path), "{path}");
        }
    }
}
