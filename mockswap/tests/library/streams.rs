//! Stream shapes, read with a real HTTP client.

use std::time::Duration;

use futures_util::StreamExt;
use mockswap::{Chunking, LineEnding, MockSwap, Reply, ReplyRule, StreamShape};
use serde_json::{Value, json};

use crate::{BOUND, body_text, chat, data_frames, post};

async fn streamed(shape: StreamShape, text: &str) -> String {
    let mock = MockSwap::builder()
        .stream_shape(shape)
        .start()
        .await
        .unwrap();
    let response = post(&mock, "/v1/chat/completions", &chat("m", text, true), &[]).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    body_text(response).await.unwrap()
}

fn content(frames: &[String]) -> String {
    frames
        .iter()
        .filter(|f| *f != "[DONE]")
        .filter_map(|f| {
            let v: Value = serde_json::from_str(f).unwrap();
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}

#[tokio::test]
async fn default_stream_has_role_tokens_finish_with_usage_and_done() {
    let text = streamed(StreamShape::new(), "hello big world").await;
    let frames = data_frames(&text);
    assert_eq!(content(&frames), "[m] hello big world");
    assert_eq!(frames.last().unwrap(), "[DONE]");
    let finish: Value = serde_json::from_str(&frames[frames.len() - 2]).unwrap();
    assert_eq!(finish["choices"][0]["finish_reason"], "stop");
    assert_eq!(finish["usage"]["completion_tokens"], 4);
}

#[tokio::test]
async fn stream_options_include_usage_adds_a_last_chunk_with_empty_choices() {
    let mock = MockSwap::start().await;
    let mut body = chat("m", "a b", true);
    body["stream_options"] = json!({"include_usage": true});
    let text = body_text(post(&mock, "/v1/chat/completions", &body, &[]).await)
        .await
        .unwrap();
    let frames = data_frames(&text);
    let usage: Value = serde_json::from_str(&frames[frames.len() - 2]).unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["completion_tokens"], 3);
    let finish: Value = serde_json::from_str(&frames[frames.len() - 3]).unwrap();
    assert_eq!(finish["choices"][0]["finish_reason"], "stop");
    assert!(finish.get("usage").is_none(), "{finish}");
}

#[tokio::test]
async fn usage_and_done_can_be_switched_off() {
    let text = streamed(StreamShape::new().usage(false).done(false), "x").await;
    assert!(!text.contains("[DONE]"), "{text}");
    assert!(!text.contains("\"usage\""), "{text}");
    assert_eq!(content(&data_frames(&text)), "[m] x");
}

#[tokio::test]
async fn crlf_line_endings_frame_every_event() {
    let text = streamed(StreamShape::new().line_ending(LineEnding::CrLf), "x").await;
    assert!(text.ends_with("data: [DONE]\r\n\r\n"), "{text:?}");
    assert!(!text.replace("\r\n", "").contains('\n'), "{text:?}");
}

#[tokio::test]
async fn keep_alive_comments_come_before_every_frame() {
    let text = streamed(StreamShape::new().keep_alive(true), "x").await;
    let frames = data_frames(&text).len();
    assert_eq!(text.matches(": keep-alive\n\n").count(), frames);
}

/// The body as the client received it, piece by piece. hyper's client hands over one
/// HTTP chunk at a time (possibly in parts, never merged), so the pieces show the
/// server's chunking.
async fn pieces(shape: StreamShape, text: &str) -> Vec<Vec<u8>> {
    let mock = MockSwap::builder()
        .stream_shape(shape)
        .start()
        .await
        .unwrap();
    let response = post(&mock, "/v1/chat/completions", &chat("m", text, true), &[]).await;
    let mut stream = response.bytes_stream();
    let mut out = Vec::new();
    while let Some(chunk) = tokio::time::timeout(BOUND, stream.next()).await.unwrap() {
        out.push(chunk.unwrap().to_vec());
    }
    out
}

#[tokio::test]
async fn fixed_byte_chunking_sends_small_chunks_with_identical_bytes() {
    let reference = streamed(StreamShape::new(), "héllo wörld ✓").await;
    let got = pieces(
        StreamShape::new().chunking(Chunking::FixedBytes(7)),
        "héllo wörld ✓",
    )
    .await;
    assert!(got.iter().all(|p| p.len() <= 7), "{got:?}");
    assert_eq!(got.concat(), reference.as_bytes());
}

#[tokio::test]
async fn utf8_split_chunking_cuts_inside_a_character_with_identical_bytes() {
    let reference = streamed(StreamShape::new(), "héllo").await;
    let got = pieces(StreamShape::new().chunking(Chunking::SplitUtf8), "héllo").await;
    assert!(
        got.iter().any(|p| std::str::from_utf8(p).is_err()),
        "some chunk must end inside a character: {got:?}"
    );
    assert_eq!(got.concat(), reference.as_bytes());
}

#[tokio::test]
async fn paced_stream_delivers_frames_over_time_in_order() {
    let shape = StreamShape::new()
        .time_to_first_token(Duration::from_millis(20))
        .tokens_per_second(200.0);
    let mock = MockSwap::builder()
        .stream_shape(shape)
        .start()
        .await
        .unwrap();
    let response = post(
        &mock,
        "/v1/chat/completions",
        &chat("m", "a b c", true),
        &[],
    )
    .await;
    let mut chunks = 0;
    let mut stream = response.bytes_stream();
    let mut bytes = Vec::new();
    while let Some(chunk) = tokio::time::timeout(BOUND, stream.next()).await.unwrap() {
        bytes.extend_from_slice(&chunk.unwrap());
        chunks += 1;
    }
    // Pacing itself is proven on a paused clock (stream unit tests); here the content
    // must survive it intact, frame by frame.
    assert!(chunks > 1, "{chunks}");
    let frames = data_frames(&String::from_utf8(bytes).unwrap());
    assert_eq!(content(&frames), "[m] a b c");
}

#[tokio::test]
async fn scripted_frames_are_sent_verbatim_then_done() {
    let mock = MockSwap::builder()
        .reply(ReplyRule::new(Reply::frames([r#"{"custom":1}"#, "not json"])).stream(true))
        .start()
        .await
        .unwrap();
    let response = post(&mock, "/v1/chat/completions", &chat("m", "x", true), &[]).await;
    let frames = data_frames(&body_text(response).await.unwrap());
    assert_eq!(frames, [r#"{"custom":1}"#, "not json", "[DONE]"]);
}

#[tokio::test]
async fn other_apis_stream_in_their_own_shape() {
    let mock = MockSwap::start().await;
    let completion = post(
        &mock,
        "/v1/completions",
        &json!({"model": "m", "prompt": "p q", "stream": true}),
        &[],
    )
    .await;
    let frames = data_frames(&body_text(completion).await.unwrap());
    let text: String = frames
        .iter()
        .filter(|f| *f != "[DONE]")
        .filter_map(|f| {
            serde_json::from_str::<Value>(f).unwrap()["choices"][0]["text"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(text, "[m] p q");

    let llama = post(
        &mock,
        "/completion",
        &json!({"model": "m", "prompt": "p", "stream": true}),
        &[],
    )
    .await;
    let frames = data_frames(&body_text(llama).await.unwrap());
    let last: Value = serde_json::from_str(frames.last().unwrap()).unwrap();
    assert_eq!(last["stop"], true);
    assert!(!frames.contains(&"[DONE]".to_owned()));

    let anthropic = post(&mock, "/v1/messages", &chat("m", "hi", true), &[]).await;
    let text = body_text(anthropic).await.unwrap();
    assert!(text.starts_with("event: message_start\n"), "{text}");
    assert!(text.contains("event: content_block_delta\n"), "{text}");
    assert!(
        text.trim_end()
            .ends_with(r#"data: {"type":"message_stop"}"#),
        "{text}"
    );
}

/// Downstream tests may run on a paused tokio clock: the mock's delays then pass
/// without waiting. No `timeout` wraps the calls here, since on a paused clock it
/// would fire as soon as the runtime idles; the test runner's limit is the bound.
#[tokio::test(start_paused = true)]
async fn paused_clock_skips_hour_long_latency_and_pacing() {
    let hour = Duration::from_secs(3600);
    let mock = MockSwap::builder()
        .latency(hour)
        .stream_shape(
            StreamShape::new()
                .time_to_first_token(hour)
                .tokens_per_second(0.001),
        )
        .start()
        .await
        .unwrap();
    let response = crate::client()
        .post(format!("{}/v1/chat/completions", mock.uri()))
        .json(&chat("m", "slow words", true))
        .send()
        .await
        .unwrap();
    let text = response.text().await.unwrap();
    assert_eq!(content(&data_frames(&text)), "[m] slow words");
}

/// Reads an SSE chat stream the way the openai Python client iterates it (and the way
/// async-openai deserializes it): stop at `[DONE]`; every other `data:` payload is
/// JSON; a payload with an `error` key ends the stream as an error; anything else is a
/// `chat.completion.chunk` with `id`, `created`, `model` and a non-empty `choices`
/// array whose entries have an `index` and a `delta` object.
fn openai_chunks(text: &str) -> Result<Vec<Value>, Value> {
    let mut chunks = Vec::new();
    for data in data_frames(text) {
        if data.starts_with("[DONE]") {
            return Ok(chunks);
        }
        let chunk: Value = serde_json::from_str(&data).unwrap_or_else(|e| panic!("{e}: {data}"));
        if let Some(error) = chunk.get("error") {
            return Err(error.clone());
        }
        assert_eq!(chunk["object"], "chat.completion.chunk", "{chunk}");
        assert!(chunk["id"].is_string(), "{chunk}");
        assert!(chunk["created"].is_u64(), "{chunk}");
        assert!(chunk["model"].is_string(), "{chunk}");
        let choices = chunk["choices"]
            .as_array()
            .unwrap_or_else(|| panic!("{chunk}"));
        assert!(!choices.is_empty(), "a frame without choices: {chunk}");
        for choice in choices {
            assert!(choice["index"].is_u64(), "{chunk}");
            assert!(choice["delta"].is_object(), "{chunk}");
        }
        chunks.push(chunk);
    }
    panic!("the stream ended without [DONE]:\n{text}");
}

#[tokio::test]
async fn loading_state_frames_are_marked_chat_chunks_an_openai_client_can_read() {
    let text = streamed(StreamShape::new().loading_state(true), "hi").await;
    let chunks = openai_chunks(&text).unwrap();
    let marked: Vec<&Value> = chunks
        .iter()
        .filter(|c| c.get("llamaswap").is_some())
        .collect();
    let statuses: Vec<&Value> = marked.iter().map(|c| &c["llamaswap"]["status"]).collect();
    assert_eq!(
        statuses,
        [&json!("waiting"), &json!("loading"), &json!("ready")]
    );
    assert!(marked[2]["llamaswap"]["waited_ms"].is_u64());
    for chunk in &marked {
        assert_eq!(chunk["llamaswap"]["model"], "m");
        assert!(chunk["choices"][0]["delta"]["reasoning_content"].is_string());
    }
    assert!(
        marked[0]["choices"][0]["delta"]["reasoning_content"]
            .as_str()
            .unwrap()
            .contains("llama-swap loading model: m")
    );
    // The proxy's frames come first, then the model's own stream, unmarked.
    let first_model = chunks
        .iter()
        .position(|c| c.get("llamaswap").is_none())
        .unwrap();
    assert_eq!(first_model, 3);
    assert!(
        chunks[first_model..]
            .iter()
            .all(|c| c.get("llamaswap").is_none())
    );
    let frames = data_frames(&text);
    assert_eq!(content(&frames), "[m] hi");
}

#[tokio::test]
async fn in_stream_error_frame_reads_as_an_error_for_an_openai_client() {
    let mock = MockSwap::builder()
        .stream_shape(StreamShape::new().loading_state(true))
        .fault(mockswap::FaultRule::new(mockswap::Fault::ErrorFrame {
            after: 4,
            message: "upstream went away".into(),
        }))
        .start()
        .await
        .unwrap();
    let response = post(
        &mock,
        "/v1/chat/completions",
        &chat("m", "a b c", true),
        &[],
    )
    .await;
    let error = openai_chunks(&body_text(response).await.unwrap()).unwrap_err();
    assert_eq!(error["message"], "upstream went away");
}
