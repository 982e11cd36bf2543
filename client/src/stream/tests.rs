use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::types::{FinishReason, ToolCall, Usage};

fn stream_of(pieces: &[&[u8]]) -> ChatStream {
    let pieces: Vec<Result<Bytes, Error>> = pieces
        .iter()
        .map(|p| Ok(Bytes::copy_from_slice(p)))
        .collect();
    ChatStream::from_sse(futures_util::stream::iter(pieces))
}

async fn items(stream: ChatStream) -> Vec<Result<StreamEvent, Error>> {
    StreamExt::collect::<Vec<_>>(stream).await
}

async fn semantic(stream: ChatStream) -> Vec<Result<ChatEvent, Error>> {
    StreamExt::collect::<Vec<_>>(stream.events()).await
}

fn chunk_text(item: &Result<StreamEvent, Error>) -> Option<&str> {
    match item {
        Ok(StreamEvent::Chunk(c)) => c.content(),
        _ => None,
    }
}

fn proxy_statuses(got: &[Result<StreamEvent, Error>]) -> Vec<ProxyStatus> {
    got.iter()
        .filter_map(|i| match i {
            Ok(StreamEvent::Proxy(p)) => Some(p.status.clone()),
            _ => None,
        })
        .collect()
}

/// A cold start as the proxy streams it under contract C1: marked frames carrying
/// llama-swap's text, then the model's own stream (with reasoning, text split
/// inside UTF-8 characters' neighbourhood, a tool call whose arguments arrive in
/// three pieces, usage).
const COLD_START: &str = concat!(
    "data: {\"id\":\"llamaswap-r1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"qwen\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"\\n\"},\"finish_reason\":null}],\"llamaswap\":{\"status\":\"waiting\",\"model\":\"qwen\"}}\n\n",
    "data: {\"id\":\"llamaswap-r1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"qwen\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"Queue position: #3\"},\"finish_reason\":null}],\"llamaswap\":{\"status\":\"queued\",\"position\":3,\"model\":\"qwen\"}}\n\n",
    ": keep-alive\n\n",
    "data: {\"id\":\"llamaswap-r1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"qwen\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"Queue position: #4\"},\"finish_reason\":null}],\"llamaswap\":{\"status\":\"queued\",\"position\":4,\"model\":\"qwen\"}}\n\n",
    "data: {\"id\":\"llamaswap-r1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"qwen\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"llama-swap loading model: qwen\"},\"finish_reason\":null}],\"llamaswap\":{\"status\":\"loading\",\"model\":\"qwen\"}}\n\n",
    "data: {\"id\":\"llamaswap-r1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"qwen\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"Done! (1.20s)\"},\"finish_reason\":null}],\"llamaswap\":{\"status\":\"ready\",\"waited_ms\":1200,\"model\":\"qwen\"}}\n\n",
    "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"hmm\"}}]}\n\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"qwen\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"reasoning_content\":\" think\"}}]}\n\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"qwen\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Grüß \"}}]}\n\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"qwen\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"dich 🦙\"},\"finish_reason\":\"\"}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}}]}}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"ci\"}}]}}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"ty\\\":\\\"Os\"}}]}}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"lo\\\"}\"}}]}}]}\n\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"qwen\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"qwen\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":9,\"total_tokens\":14}}\n\n",
    "data: [DONE]\n\n",
);

/// The semantic events [`COLD_START`] stands for.
fn cold_start_events() -> Vec<ChatEvent> {
    let proxy = |status| ChatEvent::Proxy(ProxyEvent::new(status).with_model("qwen"));
    let with_text = |event: ChatEvent, text: &str| match event {
        ChatEvent::Proxy(p) => ChatEvent::Proxy(p.with_text(text)),
        other => other,
    };
    let call = ToolCall::function("call_1", "get_weather", r#"{"city":"Oslo"}"#);
    vec![
        with_text(proxy(ProxyStatus::Waiting), "\n"),
        with_text(
            proxy(ProxyStatus::Queued { position: 3 }),
            "Queue position: #3",
        ),
        with_text(
            proxy(ProxyStatus::Queued { position: 4 }),
            "Queue position: #4",
        ),
        with_text(
            proxy(ProxyStatus::Loading),
            "llama-swap loading model: qwen",
        ),
        with_text(
            proxy(ProxyStatus::Ready {
                waited: Some(Duration::from_millis(1200)),
            }),
            "Done! (1.20s)",
        ),
        ChatEvent::Started {
            id: String::new(),
            model: String::new(),
        },
        ChatEvent::reasoning("hmm"),
        ChatEvent::reasoning(" think"),
        ChatEvent::text("Grüß "),
        ChatEvent::text("dich 🦙"),
        ChatEvent::ToolCallStarted {
            choice: 0,
            index: 0,
            id: "call_1".into(),
            name: "get_weather".into(),
        },
        ChatEvent::ToolCallArgumentsDelta {
            choice: 0,
            index: 0,
            delta: "{\"ci".into(),
        },
        ChatEvent::ToolCallArgumentsDelta {
            choice: 0,
            index: 0,
            delta: "ty\":\"Os".into(),
        },
        ChatEvent::ToolCallArgumentsDelta {
            choice: 0,
            index: 0,
            delta: "lo\"}".into(),
        },
        ChatEvent::ToolCallFinished {
            choice: 0,
            index: 0,
            call,
            arguments: Some(json!({"city": "Oslo"})),
        },
        ChatEvent::Usage(Usage::new(5, 9)),
        ChatEvent::Done {
            finish_reason: Some(FinishReason::ToolCalls),
        },
    ]
}

#[tokio::test]
async fn marked_frames_are_proxy_events_with_status_model_and_text() {
    let got = items(stream_of(&[COLD_START.as_bytes()])).await;
    assert!(got.iter().all(Result::is_ok));
    assert_eq!(
        proxy_statuses(&got),
        vec![
            ProxyStatus::Waiting,
            ProxyStatus::Queued { position: 3 },
            ProxyStatus::Queued { position: 4 },
            ProxyStatus::Loading,
            ProxyStatus::Ready {
                waited: Some(Duration::from_millis(1200))
            },
        ]
    );
    let text: String = got.iter().filter_map(chunk_text).collect();
    assert_eq!(text, "Grüß dich 🦙");
}

#[tokio::test]
async fn reasoning_only_frame_without_marker_or_id_is_model_content() {
    let got = items(stream_of(&[COLD_START.as_bytes()])).await;
    let reasoning: Vec<&str> = got
        .iter()
        .filter_map(|i| match i {
            Ok(StreamEvent::Chunk(c)) => c.reasoning(),
            _ => None,
        })
        .collect();
    assert_eq!(reasoning, vec!["hmm", " think"]);
}

#[tokio::test]
async fn collect_keeps_unmarked_reasoning_and_skips_proxy_frames() {
    let resp = stream_of(&[COLD_START.as_bytes()]).collect().await.unwrap();
    assert_eq!(resp.id, "c1");
    assert_eq!(resp.model, "qwen");
    assert_eq!(resp.text(), "Grüß dich 🦙");
    assert_eq!(
        resp.choices[0].message.reasoning_content.as_deref(),
        Some("hmm think")
    );
    assert_eq!(resp.finish_reason(), Some(&FinishReason::ToolCalls));
    assert_eq!(resp.usage, Some(Usage::new(5, 9)));
    assert_eq!(
        resp.tool_calls()[0].function.arguments,
        r#"{"city":"Oslo"}"#
    );
}

#[tokio::test]
async fn semantic_events_of_a_cold_start_with_a_split_tool_call() {
    let got: Vec<ChatEvent> = semantic(stream_of(&[COLD_START.as_bytes()]))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(got, cold_start_events());
}

#[tokio::test]
async fn semantic_events_are_the_same_at_every_byte_split() {
    let body = COLD_START.as_bytes();
    let expected = cold_start_events();
    for cut in 0..=body.len() {
        let (a, b) = body.split_at(cut);
        let got: Vec<ChatEvent> = semantic(stream_of(&[a, b]))
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(got, expected, "cut at {cut}");
    }
}

fn block_on<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

proptest! {
    #[test]
    fn semantic_events_survive_any_split_into_pieces(
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..24),
    ) {
        let body = COLD_START.as_bytes();
        let mut offsets: Vec<usize> = cuts.iter().map(|i| i.index(body.len() + 1)).collect();
        offsets.sort_unstable();
        let mut pieces = Vec::new();
        let mut start = 0;
        for cut in offsets {
            pieces.push(&body[start..cut]);
            start = cut;
        }
        pieces.push(&body[start..]);
        let got: Vec<ChatEvent> = block_on(semantic(stream_of(&pieces)))
            .into_iter()
            .map(Result::unwrap)
            .collect();
        prop_assert_eq!(got, cold_start_events());
    }
}

#[tokio::test]
async fn events_rebuilt_into_a_stream_assemble_back_to_the_same_events() {
    let events = cold_start_events();
    let rebuilt = ChatStream::from_events(futures_util::stream::iter(
        events.clone().into_iter().map(Ok),
    ));
    let got: Vec<ChatEvent> = semantic(rebuilt)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(got, events);
}

#[tokio::test]
async fn a_whole_tool_call_event_becomes_started_arguments_and_finished() {
    let events = vec![
        ChatEvent::text("checking"),
        ChatEvent::tool_call(0, "c9", "now", json!({})),
        ChatEvent::done(FinishReason::ToolCalls),
    ];
    let stream = ChatStream::from_events(futures_util::stream::iter(events.into_iter().map(Ok)));
    let got: Vec<ChatEvent> = semantic(stream)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert!(
        matches!(&got[2], ChatEvent::ToolCallStarted { name, id, .. } if name == "now" && id == "c9")
    );
    assert!(matches!(&got[3], ChatEvent::ToolCallArgumentsDelta { delta, .. } if delta == "{}"));
    assert!(
        matches!(&got[4], ChatEvent::ToolCallFinished { arguments: Some(a), .. } if *a == json!({}))
    );
    assert_eq!(
        got.last(),
        Some(&ChatEvent::Done {
            finish_reason: Some(FinishReason::ToolCalls)
        })
    );
}

#[tokio::test]
async fn tool_call_pieces_before_the_name_are_held_until_it_arrives() {
    let body = concat!(
        "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"t1\",\"function\":{\"arguments\":\"{\\\"a\\\"\"}}]}}]}\n\n",
        "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"f\",\"arguments\":\":1}\"}}]}}]}\n\n",
        "data: [DONE]\n\n",
    );
    let got: Vec<ChatEvent> = semantic(stream_of(&[body.as_bytes()]))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert!(matches!(&got[1], ChatEvent::ToolCallStarted { name, .. } if name == "f"));
    assert!(
        matches!(&got[2], ChatEvent::ToolCallArgumentsDelta { delta, .. } if delta == "{\"a\":1}")
    );
    // No finish reason: the call is finished by the end of the stream.
    assert!(
        matches!(&got[3], ChatEvent::ToolCallFinished { arguments: Some(a), .. } if *a == json!({"a": 1}))
    );
    assert_eq!(
        got[4],
        ChatEvent::Done {
            finish_reason: None
        }
    );
}

#[tokio::test]
async fn invalid_tool_arguments_finish_with_no_parsed_value() {
    let body = concat!(
        "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"t\",\"function\":{\"name\":\"f\",\"arguments\":\"{oops\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let got: Vec<ChatEvent> = semantic(stream_of(&[body.as_bytes()]))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    match &got[3] {
        ChatEvent::ToolCallFinished {
            call, arguments, ..
        } => {
            assert_eq!(call.function.arguments, "{oops");
            assert_eq!(*arguments, None);
            assert!(
                call.function
                    .parse_arguments::<serde_json::Value>()
                    .is_err()
            );
        }
        other => panic!("expected a finished call, got {other:?}"),
    }
}

#[tokio::test]
async fn no_done_event_after_a_fatal_error() {
    let body = "data: {\"id\":\"c\",\"choices\":[{\"delta\":{\"content\":\"par\"}}]}\n\n";
    let got = semantic(stream_of(&[body.as_bytes()])).await;
    assert!(matches!(
        got.last(),
        Some(Err(Error::Truncated { chunks: 1 }))
    ));
    assert!(!got.iter().any(|e| matches!(e, Ok(ChatEvent::Done { .. }))));
}

#[tokio::test]
async fn in_stream_error_frame_becomes_an_error_and_ends_the_stream() {
    let body = concat!(
        "data: {\"id\":\"llamaswap-1\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"loading\"}}],\"llamaswap\":{\"status\":\"loading\"}}\n\n",
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
    match got.last().unwrap().as_ref().unwrap_err() {
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
            assert_eq!(*what, crate::DecodeTarget::StreamFrame);
        }
        other => panic!("expected Decode, got {other:?}"),
    }
    assert_eq!(chunk_text(&got[1]), Some("ok"));
    // The semantic stream still ends with Done after a skipped frame.
    let events = semantic(stream_of(&[body.as_bytes()])).await;
    assert!(matches!(events.last(), Some(Ok(ChatEvent::Done { .. }))));
}

#[tokio::test]
async fn connection_error_mid_stream_is_reported_once_and_ends_the_stream() {
    let pieces: Vec<Result<Bytes, Error>> = vec![
        Ok(Bytes::from_static(
            b"data: {\"id\":\"c\",\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n",
        )),
        Err(Error::Timeout {
            phase: crate::TimeoutPhase::Idle,
            after: Duration::from_secs(1),
        }),
        Ok(Bytes::from_static(b"data: [DONE]\n\n")),
    ];
    let got = items(ChatStream::from_sse(futures_util::stream::iter(pieces))).await;
    assert_eq!(got.len(), 2);
    assert_eq!(
        got[1].as_ref().unwrap_err().timeout_phase(),
        Some(crate::TimeoutPhase::Idle)
    );
}

#[tokio::test]
async fn oversized_event_fails_instead_of_buffering() {
    let big: Vec<Result<Bytes, Error>> = vec![Ok(Bytes::from(vec![b'x'; 100]))];
    let source = reader::StreamSource(Box::pin(futures_util::stream::iter(big)));
    let got: Vec<_> =
        StreamExt::collect::<Vec<_>>(reader::sse_items::<ChatKind, _>(source, 64, None)).await;
    assert!(matches!(got[..], [Err(Error::EventTooLarge { limit: 64 })]));
}
