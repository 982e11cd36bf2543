//! API-key authentication (`apiKeys` in the config).
//!
//! A key is accepted from `Authorization: Bearer <key>`, from `x-api-key: <key>`
//! or as the password of `Authorization: Basic`. Keys are compared in constant time
//! (per key, independent of where the first differing byte is) and every
//! configured key is checked, so timing reveals neither the key nor which one
//! matched. The credential headers are removed before a request goes upstream.
//!
//! One credential per request: several `Authorization` or `x-api-key` lines, or
//! both headers with different credentials, are refused (400) rather than tried
//! one by one, which would let one request test many guesses. Failed attempts
//! are rate-limited per client address (`auth_limit`).

use std::fmt;

use base64::Engine as _;
use http::{HeaderMap, header};

use crate::api::error::ApiError;
use crate::config::constant_time_eq;

/// The header some clients (Anthropic SDKs) use for the key.
const X_API_KEY: &str = "x-api-key";

/// The configured API keys. Empty means authentication is off.
#[derive(Clone, Default)]
pub(crate) struct ApiKeys {
    keys: Vec<Box<[u8]>>,
}

impl fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the keys themselves.
        f.debug_struct("ApiKeys")
            .field("count", &self.keys.len())
            .finish()
    }
}

impl ApiKeys {
    /// Keys from the config's `apiKeys` list.
    pub(crate) fn new<I, S>(keys: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Self {
            keys: keys
                .into_iter()
                .map(|k| k.as_ref().as_bytes().into())
                .collect(),
        }
    }

    /// True when at least one key is configured, so requests must carry one.
    pub(crate) fn is_enabled(&self) -> bool {
        !self.keys.is_empty()
    }

    /// Checks the credentials a request carries.
    ///
    /// # Errors
    ///
    /// [`ApiError::Unauthorized`] when keys are configured and none of the
    /// request's credentials matches one of them.
    pub(crate) fn check(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        if !self.is_enabled() {
            return Ok(());
        }
        let lines = |name| headers.get_all(name).iter().count();
        let (authorization, api_key) = (lines(header::AUTHORIZATION.as_str()), lines(X_API_KEY));
        if authorization > 1 || api_key > 1 {
            return Err(ApiError::MultipleCredentials);
        }
        let candidates = candidates(headers);
        if authorization + api_key > 1 && !(candidates.len() == 2 && candidates[0] == candidates[1])
        {
            // Both headers, with different (or undecodable) credentials.
            return Err(ApiError::MultipleCredentials);
        }
        let mut accepted = false;
        for candidate in candidates {
            for key in &self.keys {
                // `|` rather than `||`: keep comparing after a match.
                accepted |= constant_time_eq(&candidate, key);
            }
        }
        if accepted {
            Ok(())
        } else {
            Err(ApiError::Unauthorized)
        }
    }

    /// Whether the request presents any credential header (a request without one
    /// is not a guess and does not count against the client's attempts).
    pub(crate) fn presents_credentials(headers: &HeaderMap) -> bool {
        headers.contains_key(header::AUTHORIZATION) || headers.contains_key(X_API_KEY)
    }

    /// The index of the configured key the request presents, if any (every
    /// key is compared, in constant time, as in [`check`](Self::check)).
    pub(crate) fn matched(&self, headers: &HeaderMap) -> Option<usize> {
        let mut found = None;
        for candidate in candidates(headers) {
            for (i, key) in self.keys.iter().enumerate() {
                if constant_time_eq(&candidate, key) && found.is_none() {
                    found = Some(i);
                }
            }
        }
        found
    }

    /// Removes the headers that carried this server's key, so the key never
    /// reaches an upstream. Does nothing when authentication is off: then those
    /// headers belong to the upstream.
    pub(crate) fn strip_credentials(&self, headers: &mut HeaderMap) {
        if self.is_enabled() {
            headers.remove(header::AUTHORIZATION);
            headers.remove(X_API_KEY);
        }
    }
}

/// Every credential the request presents: Basic password, Bearer token, `x-api-key`.
fn candidates(headers: &HeaderMap) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for value in headers.get_all(header::AUTHORIZATION) {
        let raw = value.as_bytes();
        let Some(space) = raw.iter().position(|b| *b == b' ') else {
            continue;
        };
        let (scheme, rest) = raw.split_at(space);
        let rest = rest.trim_ascii();
        if scheme.eq_ignore_ascii_case(b"bearer") {
            out.push(rest.to_vec());
        } else if scheme.eq_ignore_ascii_case(b"basic")
            && let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(rest)
            && let Some(colon) = decoded.iter().position(|b| *b == b':')
        {
            out.push(decoded[colon + 1..].to_vec());
        }
    }
    for value in headers.get_all(X_API_KEY) {
        out.push(value.as_bytes().trim_ascii().to_vec());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    fn keys() -> ApiKeys {
        ApiKeys::new(["sk-one", "sk-two"])
    }

    #[test]
    fn no_keys_configured_accepts_everything() {
        assert!(ApiKeys::default().check(&HeaderMap::new()).is_ok());
    }

    #[test]
    fn bearer_token_is_accepted_with_any_scheme_case() {
        assert!(
            keys()
                .check(&headers(&[("authorization", "Bearer sk-two")]))
                .is_ok()
        );
        assert!(
            keys()
                .check(&headers(&[("authorization", "bearer sk-one")]))
                .is_ok()
        );
    }

    #[test]
    fn x_api_key_header_is_accepted() {
        assert!(keys().check(&headers(&[("x-api-key", "sk-one")])).is_ok());
    }

    #[test]
    fn basic_password_is_accepted_and_user_ignored() {
        let token = base64::engine::general_purpose::STANDARD.encode("anyone:sk-two");
        let value = format!("Basic {token}");
        assert!(keys().check(&headers(&[("authorization", &value)])).is_ok());
    }

    #[test]
    fn wrong_missing_or_prefix_keys_are_rejected() {
        for pairs in [
            &[][..],
            &[("authorization", "Bearer sk-on")][..],
            &[("authorization", "Bearer sk-one-more")][..],
            &[("authorization", "sk-one")][..],
            &[("x-api-key", "")][..],
            &[("authorization", "Basic !!notbase64")][..],
        ] {
            let result = keys().check(&headers(pairs));
            assert!(
                matches!(result, Err(ApiError::Unauthorized)),
                "{pairs:?} was accepted"
            );
        }
    }

    #[test]
    fn several_credential_lines_are_refused_even_when_one_is_right() {
        for pairs in [
            &[
                ("authorization", "Bearer sk-wrong"),
                ("authorization", "Bearer sk-one"),
            ][..],
            &[("x-api-key", "sk-wrong"), ("x-api-key", "sk-one")][..],
            &[("authorization", "Bearer sk-one"), ("x-api-key", "sk-two")][..],
            &[("authorization", "Basic !!"), ("x-api-key", "sk-one")][..],
        ] {
            let result = keys().check(&headers(pairs));
            assert!(
                matches!(result, Err(ApiError::MultipleCredentials)),
                "{pairs:?}: {result:?}"
            );
        }
    }

    #[test]
    fn the_same_key_in_both_headers_is_one_credential() {
        let both = headers(&[("authorization", "Bearer sk-one"), ("x-api-key", "sk-one")]);
        assert!(keys().check(&both).is_ok());
    }

    #[test]
    fn several_lines_are_the_upstreams_business_when_auth_is_off() {
        let pairs = [("authorization", "Bearer a"), ("authorization", "Bearer b")];
        assert!(ApiKeys::default().check(&headers(&pairs)).is_ok());
    }

    #[test]
    fn credentials_are_stripped_only_when_auth_is_on() {
        let mut map = headers(&[
            ("authorization", "Bearer sk-one"),
            ("x-api-key", "sk-one"),
            ("accept", "text/event-stream"),
        ]);
        ApiKeys::default().strip_credentials(&mut map);
        assert_eq!(map.len(), 3);
        keys().strip_credentials(&mut map);
        assert_eq!(map.len(), 1);
        assert!(map.contains_key("accept"));
    }

    #[test]
    fn debug_output_hides_the_keys() {
        let text = format!("{:?}", keys());
        assert!(!text.contains("sk-one"), "{text}");
    }

    #[test]
    fn constant_time_eq_matches_plain_equality() {
        for (a, b) in [
            ("", ""),
            ("a", ""),
            ("abc", "abc"),
            ("abc", "abd"),
            ("ab", "abc"),
        ] {
            assert_eq!(
                constant_time_eq(a.as_bytes(), b.as_bytes()),
                a == b,
                "{a} {b}"
            );
        }
    }
}
