//! [`KeyScope`]: what one API key may do (the `keys` section).

/// One entry of `keys` (this server's extension): what the API key at
/// [`key`](Self::key) in `apiKeys` may use, and the name it is shown by.
/// The key's text is not kept here: it stays in [`ApiKey`](super::api_key::ApiKey).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct KeyScope {
    /// The key's position in `apiKeys`.
    pub key: usize,
    /// `name` (default `key<N>`, its position): shown in activity, logs,
    /// metrics and the UI instead of the key.
    pub name: String,
    /// `models` (default: all): model IDs, aliases, peer models and globs
    /// (`*` any run of characters, `?` one) a request with this key may use.
    pub models: Option<Vec<String>>,
    /// `maxConcurrent` (default: no bound): requests of this key admitted at
    /// once; beyond it 429 `key_busy`.
    pub max_concurrent: Option<usize>,
    /// `admin` (default false): with any admin key configured, only admin
    /// keys may use the management API, logs and captures.
    pub admin: bool,
}

impl KeyScope {
    /// Whether this key may use a model known by any of `names` (its ID and
    /// aliases, or a peer model's qualified and bare names).
    pub fn allows<'a>(&self, names: impl IntoIterator<Item = &'a str> + Clone) -> bool {
        let Some(patterns) = &self.models else {
            return true;
        };
        patterns
            .iter()
            .any(|pattern| names.clone().into_iter().any(|name| glob(pattern, name)))
    }
}

/// Whether `pattern` is a glob rather than a name.
pub(crate) fn is_glob(pattern: &str) -> bool {
    pattern.contains(['*', '?'])
}

/// Matches `text` against `pattern`: `*` is any run of characters (also
/// none), `?` exactly one, everything else itself.
pub(crate) fn glob(pattern: &str, text: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    // The classic two-pointer match with one backtrack point: linear in
    // practice, never exponential.
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(c) if *c == '?' || *c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_runs_and_single_characters() {
        assert!(glob("qwen-*", "qwen-7b"));
        assert!(glob("qwen-*", "qwen-"));
        assert!(!glob("qwen-*", "qwen"));
        assert!(glob("*-7b", "llama-7b"));
        assert!(glob("q?en", "qwen"));
        assert!(!glob("q?en", "qween"));
        assert!(glob("a*b*c", "axxbyyc"));
        assert!(!glob("a*b*c", "axxbyy"));
        assert!(glob("embed", "embed"));
        assert!(!glob("embed", "embed2"));
        assert!(glob("*", ""));
    }

    #[test]
    fn a_scope_allows_a_model_by_any_of_its_names() {
        let scope = KeyScope {
            key: 0,
            name: "batch".into(),
            models: Some(vec!["qwen-*".into(), "embed".into()]),
            max_concurrent: None,
            admin: false,
        };
        assert!(scope.allows(["qwen-7b"]));
        assert!(scope.allows(["e5-large", "embed"]), "by its alias");
        assert!(!scope.allows(["llama", "chat"]));
        let all = KeyScope {
            models: None,
            ..scope
        };
        assert!(all.allows(["anything"]));
    }
}
