//! Asking a ready upstream how many requests it serves at once (`parallel: auto`).
//!
//! llama.cpp's `llama-server` answers `GET /props` with a JSON object whose
//! `total_slots` is its `--parallel` value. Anything else (another server, an
//! error status, no such field, a key-protected `/props`) means "not known".

use http::StatusCode;

use super::health::HealthTarget;
use crate::proxy::UpstreamTls;

/// Largest `/props` body read (it holds the chat template, which can be long).
const MAX_PROPS_BODY: usize = 1 << 20;

/// `total_slots` from `GET <proxy>/props`, if the upstream reports a positive
/// one; an `https://` upstream is asked with `tls` (the system's roots when `None`).
pub(crate) async fn total_slots(proxy: &str, tls: Option<&UpstreamTls>) -> Option<usize> {
    let target = HealthTarget::new(proxy, "/props", tls).ok()?;
    let (status, body) = target.fetch(MAX_PROPS_BODY).await?;
    if status != StatusCode::OK {
        return None;
    }
    slots_in(&body)
}

/// `total_slots` of a `/props` body: a positive integer, else `None`.
fn slots_in(body: &[u8]) -> Option<usize> {
    let props: serde_json::Value = serde_json::from_slice(body).ok()?;
    let slots = props.get("total_slots")?.as_u64()?;
    usize::try_from(slots).ok().filter(|&n| n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    #[test]
    fn total_slots_is_read_from_llama_server_props() {
        let body = br#"{"default_generation_settings":{"n_ctx":4096},"total_slots":4,"model_path":"m.gguf"}"#;
        assert_eq!(slots_in(body), Some(4));
    }

    #[test]
    fn props_without_a_positive_slot_count_say_nothing() {
        for body in [
            &br#"{"model_path":"m.gguf"}"#[..],
            br#"{"total_slots":0}"#,
            br#"{"total_slots":-1}"#,
            br#"{"total_slots":"4"}"#,
            b"not json",
        ] {
            assert_eq!(slots_in(body), None, "{}", String::from_utf8_lossy(body));
        }
    }

    /// Answers one connection with `status` and `body`.
    async fn answer_once(status: u16, body: &'static str) -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let n = sock.read(&mut buf).await.unwrap();
            assert!(
                String::from_utf8_lossy(&buf[..n]).starts_with("GET /props "),
                "asked for the wrong path"
            );
            let response = format!(
                "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            sock.write_all(response.as_bytes()).await.unwrap();
        });
        port
    }

    #[tokio::test]
    async fn total_slots_asks_the_upstream_for_its_props() {
        let port = answer_once(200, r#"{"total_slots":2}"#).await;
        assert_eq!(
            total_slots(&format!("http://127.0.0.1:{port}"), None).await,
            Some(2)
        );
    }

    #[tokio::test]
    async fn an_upstream_refusing_props_has_no_known_slots() {
        let port = answer_once(401, r#"{"error":"invalid api key"}"#).await;
        assert_eq!(
            total_slots(&format!("http://127.0.0.1:{port}"), None).await,
            None
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let closed = listener.local_addr().unwrap().port();
        drop(listener);
        assert_eq!(
            total_slots(&format!("http://127.0.0.1:{closed}"), None).await,
            None
        );
    }
}
