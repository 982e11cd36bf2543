//! The format of error answers, as the client's `Accept` asks (llama-swap's
//! `SendResponse`): `text/plain` gets `llama-swap: <message>` as plain text,
//! `text/html` a small HTML page, anything else the JSON envelope.
//!
//! Every error an endpoint answers with [`ApiError`](crate::api::error::ApiError)
//! carries its message in an [`ErrorText`] response extension; the front layer
//! reads the request's `Accept` before the endpoint runs and renders the
//! answer again on the way out when the client asked for text or HTML. As in
//! llama-swap, the 429 `concurrency_limit` answer (its `HTTPError`, written
//! verbatim) stays JSON, and so does every answer that is not an error of this
//! server's (an upstream's own error passes through as the upstream sent it).

use axum::body::Body;
use axum::response::Response;
use http::{HeaderMap, HeaderValue, header};

/// The message of an error answer that may be rendered as text or HTML.
#[derive(Debug, Clone)]
pub(crate) struct ErrorText(pub(crate) String);

/// How the client asked for errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorFormat {
    /// The JSON envelope (the default).
    Json,
    /// `llama-swap: <message>`, `text/plain`.
    Text,
    /// `<html><body><h1>llama-swap</h1><p>message</p></body></html>`, `text/html`.
    Html,
}

impl ErrorFormat {
    /// llama-swap's choice: the first `Accept` value containing `text/plain`
    /// (checked first) or `text/html`, compared as written.
    pub(crate) fn of(headers: &HeaderMap) -> Self {
        let Some(accept) = headers.get(header::ACCEPT).map(HeaderValue::as_bytes) else {
            return Self::Json;
        };
        if memchr::memmem::find(accept, b"text/plain").is_some() {
            Self::Text
        } else if memchr::memmem::find(accept, b"text/html").is_some() {
            Self::Html
        } else {
            Self::Json
        }
    }

    /// `response` rendered in this format when it is an error answer of this
    /// server's ([`ErrorText`]); as it is otherwise. Status and headers are
    /// kept (`WWW-Authenticate`, `Retry-After`, `Allow`, ...).
    pub(crate) fn render(self, response: Response) -> Response {
        if self == Self::Json {
            return response;
        }
        let Some(ErrorText(message)) = response.extensions().get::<ErrorText>().cloned() else {
            return response;
        };
        let (mut parts, _json) = response.into_parts();
        let (content_type, body) = match self {
            Self::Text => ("text/plain", format!("llama-swap: {message}")),
            _ => (
                "text/html",
                format!(
                    "<html><body><h1>llama-swap</h1><p>{}</p></body></html>",
                    escape_html(&message)
                ),
            ),
        };
        parts
            .headers
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        parts.headers.remove(header::CONTENT_LENGTH);
        Response::from_parts(parts, Body::from(body))
    }
}

/// `text` with the five characters Go's `html.EscapeString` escapes escaped
/// as it does.
fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\'' => out.push_str("&#39;"),
            '"' => out.push_str("&#34;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(value: &str) -> ErrorFormat {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_str(value).unwrap());
        ErrorFormat::of(&headers)
    }

    #[test]
    fn accept_chooses_as_llama_swap_does() {
        assert_eq!(ErrorFormat::of(&HeaderMap::new()), ErrorFormat::Json);
        assert_eq!(accept("*/*"), ErrorFormat::Json);
        assert_eq!(accept("application/json"), ErrorFormat::Json);
        assert_eq!(accept("text/plain"), ErrorFormat::Text);
        assert_eq!(
            accept("text/html,application/xhtml+xml,*/*;q=0.8"),
            ErrorFormat::Html
        );
        assert_eq!(
            accept("text/html, text/plain"),
            ErrorFormat::Text,
            "plain first"
        );
    }

    #[test]
    fn html_is_escaped_as_go_escapes_it() {
        assert_eq!(
            escape_html(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&#34;x&#34;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }
}
