//! Finding the model and the stream flag of a request, the way the proxy does:
//! multipart and url-encoded forms carry `model` as a field (a "form" body that
//! starts with `{` is JSON sent by `curl -d`), anything else must be JSON; `?model=` is the fallback and `?stream=true` also asks for a stream.

use bytes::Bytes;
use http::header;
use serde_json::Value;

use crate::journal::RecordedRequest;
use crate::priority::PriorityHeader;

/// What a request body and query said.
#[derive(Debug, Default)]
pub(crate) struct Extracted {
    /// The body parsed as JSON, when it is a JSON body that parses.
    pub(crate) json: Option<Value>,
    /// The JSON parser's complaint, for a JSON body that does not parse.
    pub(crate) json_error: Option<String>,
    /// The named model (never empty).
    pub(crate) model: Option<String>,
    /// Whether a stream was asked for.
    pub(crate) stream: bool,
}

/// Reads model and stream flag from a request.
pub(crate) fn extract(parts: &http::request::Parts, body: &[u8]) -> Extracted {
    let query = parts.uri.query();
    let query_stream = query.and_then(|q| query_param(q, "stream")).as_deref() == Some("true");
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let mime = content_type
        .and_then(|ct| ct.split(';').next())
        .map(|m| m.trim().to_ascii_lowercase());
    let mut out = Extracted {
        stream: query_stream,
        ..Extracted::default()
    };
    if !body.is_empty() {
        match mime.as_deref() {
            Some("multipart/form-data") => {
                out.model = content_type
                    .and_then(boundary)
                    .and_then(|b| multipart_field(body, &b, "model"));
            }
            // `curl -d '{...}'` labels JSON as a form: read it as JSON, like the server.
            Some("application/x-www-form-urlencoded")
                if !body.trim_ascii_start().starts_with(b"{") =>
            {
                out.model = form_urlencoded::parse(body)
                    .find(|(k, _)| k == "model")
                    .map(|(_, v)| v.into_owned());
            }
            _ => match serde_json::from_slice::<Value>(body) {
                Ok(json) => {
                    out.model = json.get("model").and_then(Value::as_str).map(str::to_owned);
                    out.stream |= json.get("stream").and_then(Value::as_bool) == Some(true);
                    out.json = Some(json);
                }
                Err(err) => out.json_error = Some(err.to_string()),
            },
        }
    }
    out.model = out
        .model
        .filter(|m| !m.is_empty())
        .or_else(|| query.and_then(|q| query_param(q, "model")));
    out
}

/// One query parameter, percent-decoded; `None` when absent or empty.
pub(crate) fn query_param(query: &str, name: &str) -> Option<String> {
    form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
        .filter(|v| !v.is_empty())
}

fn boundary(content_type: &str) -> Option<String> {
    content_type.split(';').skip(1).find_map(|param| {
        let (key, value) = param.split_once('=')?;
        key.trim().eq_ignore_ascii_case("boundary").then(|| {
            let value = value.trim();
            value
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(value)
                .to_owned()
        })
    })
}

/// The text value of a form field in a multipart body.
fn multipart_field(body: &[u8], boundary: &str, field: &str) -> Option<String> {
    let text = String::from_utf8_lossy(body);
    let delimiter = format!("--{boundary}");
    let wanted = format!("name=\"{field}\"");
    text.split(delimiter.as_str()).find_map(|part| {
        let part = part.strip_prefix("\r\n")?;
        let (headers, value) = part.split_once("\r\n\r\n")?;
        let named = headers.lines().any(|line| {
            line.to_ascii_lowercase()
                .starts_with("content-disposition:")
                && line.split(';').any(|p| p.trim() == wanted)
        });
        named.then(|| value.strip_suffix("\r\n").unwrap_or(value).to_owned())
    })
}

/// `/upstream/<model>/<rest>` → (model, `/<rest>`).
pub(crate) fn upstream_target(path: &str) -> Option<(String, String)> {
    let rest = path.strip_prefix("/upstream/")?;
    let (model, tail) = match rest.split_once('/') {
        Some((model, tail)) => (model, format!("/{tail}")),
        None => (rest, "/".to_owned()),
    };
    (!model.is_empty()).then(|| (model.to_owned(), tail))
}

/// Builds the journal entry of a request received `received` after the mock started
/// (seq and dispatch are filled by the journal).
pub(crate) fn recorded(
    received: std::time::Duration,
    parts: &http::request::Parts,
    body: &Bytes,
    json: Option<serde_json::Value>,
    model: Option<String>,
    stream: bool,
) -> RecordedRequest {
    let received_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    RecordedRequest {
        seq: 0,
        received,
        received_unix_ms,
        method: parts.method.clone(),
        path: parts.uri.path().to_owned(),
        query: parts.uri.query().map(str::to_owned),
        headers: parts.headers.clone(),
        body: body.clone(),
        json,
        model,
        stream,
        priority: PriorityHeader::from_headers(&parts.headers),
        queue_timeout: crate::queue_timeout::QueueTimeoutHeader::from_headers(&parts.headers),
        dispatched: None,
        websocket: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(content_type: Option<&str>, uri: &str) -> http::request::Parts {
        let mut builder = http::Request::builder().method("POST").uri(uri);
        if let Some(ct) = content_type {
            builder = builder.header("content-type", ct);
        }
        builder.body(()).unwrap().into_parts().0
    }

    #[test]
    fn json_body_gives_model_and_stream() {
        let got = extract(
            &parts(Some("application/json"), "/x"),
            br#"{"model":"a","stream":true}"#,
        );
        assert_eq!(got.model.as_deref(), Some("a"));
        assert!(got.stream);
        assert!(got.json.is_some());
    }

    #[test]
    fn body_without_content_type_is_read_as_json_and_can_be_invalid() {
        let got = extract(&parts(None, "/x"), b"{\"model\": ");
        assert!(got.json_error.is_some());
        assert_eq!(got.model, None);
    }

    #[test]
    fn url_encoded_form_names_the_model_as_a_field() {
        let got = extract(
            &parts(Some("application/x-www-form-urlencoded"), "/x"),
            b"prompt=hi&model=qwen%202",
        );
        assert_eq!(got.model.as_deref(), Some("qwen 2"));
        assert!(got.json_error.is_none());
    }

    #[test]
    fn json_sent_with_curls_default_form_content_type_is_read_as_json() {
        let got = extract(
            &parts(Some("application/x-www-form-urlencoded"), "/x"),
            br#" {"model":"qwen","stream":true}"#,
        );
        assert_eq!(got.model.as_deref(), Some("qwen"));
        assert!(got.stream);
        assert!(got.json.is_some());
    }

    #[test]
    fn multipart_form_names_the_model_as_a_field() {
        let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\r\nRIFF\r\n--XyZ\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper\r\n--XyZ--\r\n";
        let got = extract(
            &parts(Some("multipart/form-data; boundary=XyZ"), "/x"),
            body,
        );
        assert_eq!(got.model.as_deref(), Some("whisper"));
    }

    #[test]
    fn empty_or_non_string_model_falls_back_to_the_query() {
        let got = extract(&parts(None, "/x?model=q&stream=true"), br#"{"model":""}"#);
        assert_eq!(got.model.as_deref(), Some("q"));
        assert!(got.stream);
        let got = extract(&parts(None, "/x"), br#"{"model":5}"#);
        assert_eq!(got.model, None);
    }
}
