//! [`ApiKey`]: a secret that cannot be printed by accident.

use std::fmt;

/// An API key. Its `Debug` output is redacted and it has no `Display`, so it cannot
/// end up in logs or error messages by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub(crate) fn new(key: String) -> Self {
        Self(key)
    }

    /// The key itself, for the one place that needs it (authentication).
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Compares a presented key with this one in time that depends only on the
    /// presented key's length, not on where the first difference is.
    #[must_use]
    pub fn matches(&self, presented: &str) -> bool {
        constant_time_eq(self.0.as_bytes(), presented.as_bytes())
    }
}

/// Compares two byte strings in time that depends only on their lengths, so a
/// guesser learns nothing from how fast a key is refused.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let len = a.len().max(b.len());
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..len {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= x ^ y;
    }
    diff == 0
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_key_debug_is_redacted() {
        let key = ApiKey::new("sk-secret-123".into());
        assert_eq!(format!("{key:?}"), "ApiKey(<redacted>)");
        assert!(!format!("{:?}", vec![key]).contains("secret"));
    }

    #[test]
    fn api_key_matches_only_the_exact_key() {
        let key = ApiKey::new("abc".into());
        assert!(key.matches("abc"));
        assert!(!key.matches("abd"));
        assert!(!key.matches("ab"));
        assert!(!key.matches("abcd"));
        assert!(!key.matches(""));
    }
}
