use std::collections::VecDeque;

use bytes::Bytes;
use futures_util::StreamExt;

use super::*;
use crate::types::{FinishReason, Usage};

/// Feeds scripted pieces; `Err` items model a broken connection.
struct Script(VecDeque<Result<Bytes, Error>>);

impl ByteSource for Script {
    async fn next_piece(&mut self) -> Result<Option<Bytes>, Error> {
        self.0.pop_front().transpose()
    }
}

fn stream_of(pieces: &[&[u8]]) -> ChatStream {
    let script = pieces
        .iter()
        .map(|p| Ok(Bytes::copy_from_slice(p)))
        .collect();
    ChatStream::from_source(Script(script), 1 << 20)
}

async fn items(stream: ChatStream) -> Vec<Result<StreamEvent, Error>> {
    StreamExt::collect::<Vec<_>>(stream).await
}

fn chunk_text(item: &Result<StreamEvent, Error>) -> Option<&str> {
    match item {
        Ok(StreamEvent::Chunk(c)) => c.content(),
        _ => None,
    }
}

const COLD_START: &str = concat!(
    "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"llama-swap loading model: qwen\"}}]}\n\n",
    "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"\\nQueue position: #3 \"}}]}\n\n",
    "data: {\"object\":\"proxy.status\",\"status\":\"queued\",\"position\":2,\"model\":\"qwen\"}\n\n",
    "data: {\"object\":\"proxy.status\",\"status\":\"loading\",\"model\":\"qwen\"}\n\n",
    "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\".\"}}]}\n\n",
    ": keep-alive\n\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"qwen\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"reasoning_content\":\"think\"}}]}\n\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"qwen\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Grüß \"}}]}\n\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"qwen\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"dich 🦙\"},\"finish_reason\":\"\"}]}\n\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"qwen\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{}}\n\n",
    "data: [DONE]\n\n",
);

#[tokio::test]
async fn loading_and_queue_frames_surface_as_proxy_events_not_content() {
    let got = items(stream_of(&[COLD_START.as_bytes()])).await;
    let proxy: Vec<ProxyStatus> = got
        .iter()
        .filter_map(|i| match i {
            Ok(StreamEvent::Proxy(p)) => Some(p.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        proxy,
        vec![
            ProxyStatus::Loading {
                model: Some("qwen".into())
            },
            ProxyStatus::Queued {
                position: 3,
                model: None
            },
            ProxyStatus::Queued {
                position: 2,
                model: Some("qwen".into())
            },
            ProxyStatus::Loading {
                model: Some("qwen".into())
            },
            ProxyStatus::Message(".".into()),
        ]
    );
    let text: String = got.iter().filter_map(chunk_text).collect();
    assert_eq!(text, "Grüß dich 🦙");
    assert!(got.iter().all(Result::is_ok));
}

#[tokio::test]
async fn model_reasoning_with_an_id_stays_model_output() {
    let got = items(stream_of(&[COLD_START.as_bytes()])).await;
    let reasoning: Vec<&str> = got
        .iter()
        .filter_map(|i| match i {
            Ok(StreamEvent::Chunk(c)) => c.reasoning(),
            _ => None,
        })
        .collect();
    assert_eq!(reasoning, vec!["think"]);
}

#[tokio::test]
async fn split_at_every_byte_offset_yields_the_same_events() {
    let body = COLD_START.as_bytes();
    let whole: Vec<String> = items(stream_of(&[body]))
        .await
        .iter()
        .map(|i| format!("{:?}", i.as_ref().unwrap()))
        .collect();
    for cut in 0..=body.len() {
        let (a, b) = body.split_at(cut);
        let split: Vec<String> = items(stream_of(&[a, b]))
            .await
            .iter()
            .map(|i| format!("{:?}", i.as_ref().unwrap()))
            .collect();
        assert_eq!(split, whole, "cut at {cut}");
    }
}

#[tokio::test]
async fn collect_joins_content_and_skips_proxy_events() {
    let resp = stream_of(&[COLD_START.as_bytes()]).collect().await.unwrap();
    assert_eq!(resp.id, "c1");
    assert_eq!(resp.model, "qwen");
    assert_eq!(resp.text(), "Grüß dich 🦙");
    assert_eq!(
        resp.choices[0].message.reasoning_content.as_deref(),
        Some("think")
    );
    assert_eq!(resp.finish_reason(), Some(&FinishReason::Stop));
    assert_eq!(resp.usage, Some(Usage::default()));
}

#[tokio::test]
async fn collect_merges_tool_call_pieces_by_index() {
    let body = concat!(
        "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"t1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"ci\"}}]}}]}\n\n",
        "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"ty\\\":\\\"Oslo\\\"}\"}}]}}]}\n\n",
        "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let resp = stream_of(&[body.as_bytes()]).collect().await.unwrap();
    let call = &resp.choices[0].message.tool_calls[0];
    assert_eq!(call.id, "t1");
    assert_eq!(call.function.name, "get_weather");
    assert_eq!(call.function.arguments, "{\"city\":\"Oslo\"}");
    assert_eq!(resp.choices[0].message.content, None);
}

#[tokio::test]
async fn in_stream_error_frame_becomes_an_error_and_ends_the_stream() {
    let body = concat!(
        "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"llama-swap loading model: m\"}}]}\n\n",
        "data: {\"error\":{\"message\":\"health check timed out\",\"type\":\"server_error\",\"code\":\"model_start_timeout\"}}\n\n",
        "data: [DONE]\n\n",
    );
    let got = items(stream_of(&[body.as_bytes()])).await;
    assert_eq!(got.len(), 2);
    let err = got[1].as_ref().unwrap_err();
    assert!(matches!(err, Error::InStream(_)), "{err:?}");
    assert_eq!(err.code(), Some("model_start_timeout"));
}

#[tokio::test]
async fn bare_json_error_after_loading_frames_is_an_error_not_truncation() {
    // llama-swap writes the error body without `data:` into an already-200 stream.
    let body = concat!(
        "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"llama-swap loading model: m\"}}]}\n\n",
        "{\"error\":{\"message\":\"upstream command exited prematurely\",\"type\":\"server_error\"}}",
    );
    let got = items(stream_of(&[body.as_bytes()])).await;
    let err = got.last().unwrap().as_ref().unwrap_err();
    match err {
        Error::InStream(frame) => {
            assert_eq!(
                frame.envelope.message,
                "upstream command exited prematurely"
            );
        }
        other => panic!("expected InStream, got {other:?}"),
    }
}

#[tokio::test]
async fn event_error_field_becomes_an_error() {
    let got = items(stream_of(&[b"event: error\ndata: overloaded\n\n"])).await;
    match got[0].as_ref().unwrap_err() {
        Error::InStream(frame) => assert_eq!(frame.envelope.message, "overloaded"),
        other => panic!("expected InStream, got {other:?}"),
    }
}

#[tokio::test]
async fn stream_without_done_or_finish_reason_is_truncated() {
    let body = "data: {\"id\":\"c\",\"choices\":[{\"delta\":{\"content\":\"par\"}}]}\n\n";
    let got = items(stream_of(&[body.as_bytes()])).await;
    assert_eq!(chunk_text(&got[0]), Some("par"));
    assert!(matches!(got[1], Err(Error::Truncated { chunks: 1 })));
    assert_eq!(got.len(), 2);
}

#[tokio::test]
async fn empty_stream_is_truncated() {
    let got = items(stream_of(&[])).await;
    assert!(matches!(got[..], [Err(Error::Truncated { chunks: 0 })]));
}

#[tokio::test]
async fn finish_reason_without_done_is_a_complete_stream() {
    let body = "data: {\"id\":\"c\",\"choices\":[{\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\n";
    let got = items(stream_of(&[body.as_bytes()])).await;
    assert_eq!(got.len(), 1);
    assert_eq!(chunk_text(&got[0]), Some("ok"));
}

#[tokio::test]
async fn malformed_frame_is_reported_and_the_stream_goes_on() {
    let body = concat!(
        "data: {not json\n\n",
        "data: {\"id\":\"c\",\"choices\":[{\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let got = items(stream_of(&[body.as_bytes()])).await;
    match got[0].as_ref().unwrap_err() {
        Error::Decode { raw, what, .. } => {
            assert_eq!(raw, "{not json");
            assert_eq!(*what, DecodeTarget::StreamFrame);
        }
        other => panic!("expected Decode, got {other:?}"),
    }
    assert_eq!(chunk_text(&got[1]), Some("ok"));
}

#[tokio::test]
async fn connection_error_mid_stream_is_reported_once_and_ends_the_stream() {
    let script = VecDeque::from(vec![
        Ok(Bytes::from_static(
            b"data: {\"id\":\"c\",\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n",
        )),
        Err(Error::Timeout {
            phase: crate::TimeoutPhase::Idle,
            after: std::time::Duration::from_secs(1),
        }),
        Ok(Bytes::from_static(b"data: [DONE]\n\n")),
    ]);
    let got = items(ChatStream::from_source(Script(script), 1 << 20)).await;
    assert_eq!(got.len(), 2);
    assert_eq!(
        got[1].as_ref().unwrap_err().timeout_phase(),
        Some(crate::TimeoutPhase::Idle)
    );
}

#[tokio::test]
async fn oversized_event_fails_instead_of_buffering() {
    let big = vec![b'x'; 100];
    let got = items(ChatStream::from_source(
        Script(VecDeque::from(vec![Ok(Bytes::from(big))])),
        64,
    ))
    .await;
    assert!(matches!(got[..], [Err(Error::EventTooLarge { limit: 64 })]));
}

#[test]
fn loading_text_parser_recognises_position_and_model() {
    assert_eq!(
        parse_loading_text("\nQueue position: #12 "),
        ProxyStatus::Queued {
            position: 12,
            model: None
        }
    );
    assert_eq!(
        parse_loading_text("llama-swap loading model: a/b"),
        ProxyStatus::Loading {
            model: Some("a/b".into())
        }
    );
    assert_eq!(
        parse_loading_text("Queue posi"),
        ProxyStatus::Message("Queue posi".into())
    );
}

/// What our own server sends while a model loads: a typed frame, then the same
/// state as text for people.
const SERVER_LOADING: &str = concat!(
    "data: {\"object\":\"proxy.status\",\"status\":\"queued\",\"position\":2,\"model\":\"m\"}\n\n",
    "data: {\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"\\nQueue position: #2 \"},\"finish_reason\":null}]}\n\n",
    "data: {\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\".\"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\n",
    "data: [DONE]\n\n",
);

#[tokio::test]
async fn server_loading_frames_without_id_are_proxy_events_reported_once() {
    let got = items(stream_of(&[SERVER_LOADING.as_bytes()])).await;
    let events: Vec<StreamEvent> = got.into_iter().map(Result::unwrap).collect();
    assert_eq!(
        events[..3],
        [
            StreamEvent::Proxy(ProxyStatus::Queued {
                position: 2,
                model: Some("m".into())
            }),
            StreamEvent::Proxy(ProxyStatus::Message("\nQueue position: #2 ".into())),
            StreamEvent::Proxy(ProxyStatus::Message(".".into())),
        ]
    );
    assert!(matches!(&events[3], StreamEvent::Chunk(c) if c.content() == Some("hi")));
    assert_eq!(events.len(), 4);
}

#[test]
fn unknown_typed_status_is_kept() {
    let v: Value =
        serde_json::from_str(r#"{"object":"proxy.status","status":"evicting","model":"m"}"#)
            .unwrap();
    assert_eq!(
        typed_status(&v),
        Some(ProxyStatus::Other {
            status: "evicting".into(),
            model: Some("m".into())
        })
    );
}

/// Frames in the shape the server injects now: every one a chunk with an
/// `id` and the `llamaswap` marker object.
const MARKED_LOADING: &str = concat!(
    "data: {\"id\":\"llamaswap-r\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"llama-swap loading model: m\\n\"},\"finish_reason\":null}],\"llamaswap\":{\"status\":\"queued\",\"position\":2,\"model\":\"m\"}}\n\n",
    "data: {\"id\":\"llamaswap-r\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\".\"},\"finish_reason\":null}],\"llamaswap\":{\"status\":\"queued\",\"position\":2,\"model\":\"m\"}}\n\n",
    "data: {\"id\":\"llamaswap-r\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\".\"},\"finish_reason\":null}],\"llamaswap\":{\"status\":\"loading\",\"model\":\"m\"}}\n\n",
    "data: {\"id\":\"llamaswap-r\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"Done!\"},\"finish_reason\":null}],\"llamaswap\":{\"status\":\"ready\",\"waited_ms\":5,\"model\":\"m\"}}\n\n",
    "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\n",
    "data: [DONE]\n\n",
);

#[tokio::test]
async fn marked_frames_are_proxy_events_and_only_changes_are_typed() {
    let got = items(stream_of(&[MARKED_LOADING.as_bytes()])).await;
    let events: Vec<StreamEvent> = got.into_iter().map(Result::unwrap).collect();
    assert_eq!(
        events[..4],
        [
            StreamEvent::Proxy(ProxyStatus::Queued {
                position: 2,
                model: Some("m".into())
            }),
            StreamEvent::Proxy(ProxyStatus::Message(".".into())),
            StreamEvent::Proxy(ProxyStatus::Loading {
                model: Some("m".into())
            }),
            StreamEvent::Proxy(ProxyStatus::Message("Done!".into())),
        ]
    );
    assert!(matches!(&events[4], StreamEvent::Chunk(c) if c.content() == Some("hi")));
    assert_eq!(events.len(), 5);
}
