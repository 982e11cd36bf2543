//! How every layer reports an error in one line: the error and its causes.

/// An error and its chain of sources on one line (`outer: cause: root cause`), for
/// logs, error bodies and the binary's messages.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn each_cause_follows_its_error_after_a_colon() {
        let error = Outer(std::io::Error::other("root cause"));
        assert_eq!(error_chain(&error), "outer: root cause");
    }
}
