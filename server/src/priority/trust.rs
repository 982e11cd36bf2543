//! How far `X-Priority` is trusted (`priority:` in the config).
//!
//! The header value is capped before `max(model floor, header)` is taken:
//! `ignoreHeader` makes every header count as absent (0); `maxHeaderPriority`
//! is a ceiling for everyone; a per-key `maxPriority` is a ceiling for the
//! calls made with that API key (a negative one lowers even calls without a
//! header). The model floor still applies afterwards, so a config that pins a
//! model high keeps working.

use super::Priority;

/// Which configured API key a request authenticated with (its index in
/// `apiKeys`), set by the authentication layer. The key itself is never kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyIndex(pub usize);

/// The trust rules of one configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trust {
    ignore_header: bool,
    max_header: Option<i32>,
    /// Indexed by `apiKeys` position; `None` = no cap for that key.
    key_caps: Vec<Option<i32>>,
}

impl Trust {
    /// Rules: ignore the header or not, a global ceiling, and per-key ceilings
    /// by key index (the config's `priority:` section builds them).
    pub fn new(ignore_header: bool, max_header: Option<i32>, key_caps: Vec<Option<i32>>) -> Self {
        Self {
            ignore_header,
            max_header,
            key_caps,
        }
    }

    /// The priority of a request whose header said `requested` (0 when absent
    /// or invalid), sent with API key `key`.
    pub fn cap(&self, requested: i32, key: Option<KeyIndex>) -> Priority {
        let mut value = if self.ignore_header { 0 } else { requested };
        if let Some(max) = self.max_header {
            value = value.min(max);
        }
        if let Some(Some(max)) = key.and_then(|KeyIndex(i)| self.key_caps.get(i)) {
            value = value.min(*max);
        }
        Priority::with_cap(requested, value)
    }

    /// A one-line description for `--check-config` (never shows a key).
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.ignore_header {
            parts.push("X-Priority ignored".to_owned());
        }
        if let Some(max) = self.max_header {
            parts.push(format!("X-Priority capped at {max}"));
        }
        for (i, cap) in self.key_caps.iter().enumerate() {
            if let Some(cap) = cap {
                parts.push(format!("apiKeys[{i}] capped at {cap}"));
            }
        }
        if parts.is_empty() {
            "X-Priority trusted as sent".to_owned()
        } else {
            parts.join(", ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_cap_lowers_only_values_above_it() {
        let trust = Trust::new(false, Some(5), Vec::new());
        assert_eq!(trust.cap(10, None).capped(), 5);
        assert_eq!(trust.cap(3, None).capped(), 3);
        assert_eq!(trust.cap(-10, None).capped(), -10);
    }

    #[test]
    fn key_cap_applies_to_that_key_only_and_can_lower_headerless_calls() {
        let trust = Trust::new(false, Some(10), vec![None, Some(-10)]);
        assert_eq!(trust.cap(10, Some(KeyIndex(0))).capped(), 10);
        assert_eq!(trust.cap(10, Some(KeyIndex(1))).capped(), -10);
        assert_eq!(trust.cap(0, Some(KeyIndex(1))).capped(), -10);
        assert_eq!(trust.cap(100, None).capped(), 10);
    }

    #[test]
    fn ignored_header_counts_as_absent_but_key_caps_still_apply() {
        let trust = Trust::new(true, None, vec![Some(-5)]);
        assert_eq!(trust.cap(10, None).capped(), 0);
        assert_eq!(trust.cap(-10, None).capped(), 0);
        assert_eq!(trust.cap(10, Some(KeyIndex(0))).capped(), -5);
    }

    #[test]
    fn description_names_keys_by_position_only() {
        let trust = Trust::new(false, Some(3), vec![Some(-1)]);
        assert_eq!(
            trust.describe(),
            "X-Priority capped at 3, apiKeys[0] capped at -1"
        );
        assert_eq!(Trust::default().describe(), "X-Priority trusted as sent");
    }
}
