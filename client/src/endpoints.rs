//! The proxy's endpoints. Each one builds an [`Outgoing`] and goes through
//! [`Client::send`], so every endpoint carries the call's priority the same way.

use bytes::Bytes;
use http::{HeaderValue, Method};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::client::Client;
use crate::error::{DecodeTarget, Error, InvalidArgument};
use crate::options::CallOptions;
use crate::stream::{ChatStream, CompletionStream};
use crate::transport::{Accept, BodyLimit, Outgoing, read_body};
use crate::types::{
    ChatRequest, ChatResponse, CompletionRequest, CompletionResponse, EmbeddingsRequest,
    EmbeddingsResponse, ModelList, RunningModels,
};

/// A raw request forwarded by the proxy to one model's server, under
/// `/upstream/<model>/<path>`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct UpstreamRequest {
    /// HTTP method.
    pub method: Method,
    /// Path below the model's server root, with an optional query (`health`,
    /// `/v1/chat/completions`, `slots?fail_on_no_slot=1`).
    pub path: String,
    /// Request body.
    pub body: Option<Bytes>,
    /// `Content-Type` of the body.
    pub content_type: Option<HeaderValue>,
}

impl UpstreamRequest {
    /// A `GET` of `path`.
    pub fn get(path: impl Into<String>) -> UpstreamRequest {
        UpstreamRequest {
            method: Method::GET,
            path: path.into(),
            body: None,
            content_type: None,
        }
    }

    /// A `POST` of `body` as JSON to `path`.
    ///
    /// # Errors
    ///
    /// [`Error::Encode`] when `body` cannot be serialised.
    pub fn post_json<T: Serialize + ?Sized>(
        path: impl Into<String>,
        body: &T,
    ) -> Result<UpstreamRequest, Error> {
        Ok(UpstreamRequest {
            method: Method::POST,
            path: path.into(),
            body: Some(Bytes::from(
                serde_json::to_vec(body).map_err(Error::Encode)?,
            )),
            content_type: Some(HeaderValue::from_static("application/json")),
        })
    }
}

impl Client {
    /// `POST /v1/chat/completions`, non-streaming.
    ///
    /// # Errors
    ///
    /// Any [`Error`]: API errors after retries, timeouts, connection and decode
    /// errors, or an invalid argument (empty model, bad per-call header).
    pub async fn chat(
        &self,
        request: &ChatRequest,
        options: &CallOptions,
    ) -> Result<ChatResponse, Error> {
        require_model(&request.model)?;
        let body = request.wire_body(false)?;
        let out = post("/v1/chat/completions", body, Accept::Json).for_model(&request.model);
        self.json_call(out, options).await
    }

    /// `POST /v1/chat/completions` with `stream: true`; returns once the response
    /// headers arrive. Retries happen only before that point.
    ///
    /// # Errors
    ///
    /// As for [`Client::chat`], for everything up to the response headers; later
    /// failures are items of the returned stream.
    pub async fn chat_stream(
        &self,
        request: &ChatRequest,
        options: &CallOptions,
    ) -> Result<ChatStream, Error> {
        require_model(&request.model)?;
        let body = request.wire_body(true)?;
        let out = post("/v1/chat/completions", body, Accept::EventStream).for_model(&request.model);
        let (response, deadlines) = self.send(out, options).await?;
        Ok(ChatStream::new(
            response,
            deadlines,
            self.inner.max_event_bytes,
        ))
    }

    /// `POST /v1/completions` (non-streaming).
    ///
    /// # Errors
    ///
    /// As for [`Client::chat`].
    pub async fn completions(
        &self,
        request: &CompletionRequest,
        options: &CallOptions,
    ) -> Result<CompletionResponse, Error> {
        let body = completion_body(request, false)?;
        let out = post("/v1/completions", body, Accept::Json).for_model(&request.model);
        self.json_call(out, options).await
    }

    /// `POST /v1/completions` with `stream: true`; returns once the response
    /// headers arrive. Retries happen only before that point.
    ///
    /// # Errors
    ///
    /// As for [`Client::chat_stream`].
    pub async fn completions_stream(
        &self,
        request: &CompletionRequest,
        options: &CallOptions,
    ) -> Result<CompletionStream, Error> {
        let body = completion_body(request, true)?;
        let out = post("/v1/completions", body, Accept::EventStream).for_model(&request.model);
        let (response, deadlines) = self.send(out, options).await?;
        Ok(CompletionStream::new(
            response,
            deadlines,
            self.inner.max_event_bytes,
        ))
    }

    /// `POST /v1/embeddings`.
    ///
    /// # Errors
    ///
    /// As for [`Client::chat`].
    pub async fn embeddings(
        &self,
        request: &EmbeddingsRequest,
        options: &CallOptions,
    ) -> Result<EmbeddingsResponse, Error> {
        require_model(&request.model)?;
        let body = serde_json::to_vec(request).map_err(Error::Encode)?;
        let out = post("/v1/embeddings", body, Accept::Json).for_model(&request.model);
        self.json_call(out, options).await
    }

    /// `GET /v1/models`.
    ///
    /// # Errors
    ///
    /// As for [`Client::chat`].
    pub async fn models(&self, options: &CallOptions) -> Result<ModelList, Error> {
        self.json_call(get("/v1/models"), options).await
    }

    /// `GET /running`: the models whose processes are not stopped.
    ///
    /// # Errors
    ///
    /// As for [`Client::chat`].
    pub async fn running(&self, options: &CallOptions) -> Result<RunningModels, Error> {
        self.json_call(get("/running"), options).await
    }

    /// `POST /api/models/unload`: stops every model (returns when they stopped).
    ///
    /// # Errors
    ///
    /// As for [`Client::chat`].
    pub async fn unload_all(&self, options: &CallOptions) -> Result<(), Error> {
        self.empty_call(
            post("/api/models/unload", Vec::new(), Accept::Json),
            options,
        )
        .await
    }

    /// `POST /api/models/unload/<model>`: stops one model (or alias).
    ///
    /// # Errors
    ///
    /// As for [`Client::chat`]; an unknown model is an [`Error::Api`] with 404.
    pub async fn unload_model(&self, model: &str, options: &CallOptions) -> Result<(), Error> {
        require_model(model)?;
        let path = format!("/api/models/unload/{}", encode_path(model));
        self.empty_call(post(&path, Vec::new(), Accept::Json), options)
            .await
    }

    /// `GET /health`: succeeds when the proxy answers 2xx.
    ///
    /// # Errors
    ///
    /// As for [`Client::chat`].
    pub async fn health(&self, options: &CallOptions) -> Result<(), Error> {
        self.empty_call(get("/health"), options).await
    }

    /// A raw request to `/upstream/<model>/<path>`. The response is returned as
    /// received once its status is a success (its body is not read); non-success
    /// statuses become [`Error::Api`] like every other endpoint.
    ///
    /// # Errors
    ///
    /// As for [`Client::chat`], plus [`InvalidArgument::InvalidPath`] for a path
    /// that climbs out of the model's prefix.
    pub async fn upstream(
        &self,
        model: &str,
        request: UpstreamRequest,
        options: &CallOptions,
    ) -> Result<reqwest::Response, Error> {
        require_model(model)?;
        let (path, query) = match request.path.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (request.path.as_str(), None),
        };
        let path = path.trim_start_matches('/');
        if path.split('/').any(|seg| seg == "..") {
            return Err(InvalidArgument::InvalidPath {
                path: request.path.clone(),
            }
            .into());
        }
        let mut full = format!("/upstream/{}/{}", encode_path(model), encode_path(path));
        if let Some(q) = query {
            full.push('?');
            full.push_str(q);
        }
        let out = Outgoing {
            method: request.method,
            path: full,
            body: request.body,
            content_type: request.content_type,
            accept: Accept::Any,
            model: Some(model.to_owned()),
        };
        let (response, _) = self.send(out, options).await?;
        Ok(response)
    }

    pub(crate) async fn json_call<T: DeserializeOwned>(
        &self,
        out: Outgoing,
        options: &CallOptions,
    ) -> Result<T, Error> {
        let (response, deadlines) = self.send(out, options).await?;
        let body = read_body(
            response,
            &deadlines,
            BodyLimit::Fail(self.inner.max_body_bytes),
        )
        .await?;
        serde_json::from_slice(&body).map_err(|source| Error::Decode {
            what: DecodeTarget::ResponseBody,
            raw: String::from_utf8_lossy(&body).into_owned(),
            source,
        })
    }

    async fn empty_call(&self, out: Outgoing, options: &CallOptions) -> Result<(), Error> {
        let (response, deadlines) = self.send(out, options).await?;
        // Drained so the connection goes back to the pool.
        read_body(
            response,
            &deadlines,
            BodyLimit::Fail(self.inner.max_body_bytes),
        )
        .await?;
        Ok(())
    }
}

fn completion_body(request: &CompletionRequest, stream: bool) -> Result<Vec<u8>, Error> {
    require_model(&request.model)?;
    let mut request = request.clone();
    request.stream = stream.then_some(true);
    serde_json::to_vec(&request).map_err(Error::Encode)
}

pub(crate) fn require_model(model: &str) -> Result<(), InvalidArgument> {
    if model.trim().is_empty() {
        return Err(InvalidArgument::EmptyModel);
    }
    Ok(())
}

fn get(path: &str) -> Outgoing {
    Outgoing {
        method: Method::GET,
        path: path.to_owned(),
        body: None,
        content_type: None,
        accept: Accept::Json,
        model: None,
    }
}

pub(crate) fn post(path: &str, body: Vec<u8>, accept: Accept) -> Outgoing {
    Outgoing {
        method: Method::POST,
        path: path.to_owned(),
        body: Some(Bytes::from(body)),
        content_type: Some(HeaderValue::from_static("application/json")),
        accept,
        model: None,
    }
}

impl Outgoing {
    /// Names the model in the call's tracing span.
    pub(crate) fn for_model(mut self, model: &str) -> Outgoing {
        self.model = Some(model.to_owned());
        self
    }
}

/// Percent-encodes what a path may not hold literally; `/` is kept because model
/// ids such as `org/model` span segments in llama-swap's routes.
fn encode_path(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        let keep = b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/".contains(&b);
        if keep {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_encoding_keeps_slashes_and_escapes_the_rest() {
        assert_eq!(encode_path("org/model:q4"), "org/model:q4");
        assert_eq!(encode_path("a b?#%é"), "a%20b%3F%23%25%C3%A9");
    }

    #[test]
    fn completion_body_sets_stream_only_when_streaming() {
        let req = CompletionRequest::new("m", "hi");
        let plain: serde_json::Value =
            serde_json::from_slice(&completion_body(&req, false).unwrap()).unwrap();
        assert!(plain.get("stream").is_none());
        let streamed: serde_json::Value =
            serde_json::from_slice(&completion_body(&req, true).unwrap()).unwrap();
        assert_eq!(streamed["stream"], true);
    }

    #[test]
    fn empty_model_is_rejected_before_sending() {
        assert!(matches!(
            completion_body(&CompletionRequest::new(" ", "x"), false),
            Err(Error::InvalidArgument(InvalidArgument::EmptyModel))
        ));
        assert_eq!(require_model(""), Err(InvalidArgument::EmptyModel));
    }
}
