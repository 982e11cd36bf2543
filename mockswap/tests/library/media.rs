//! The media endpoints a playground calls: images, speech and its voices,
//! transcriptions. Small, deterministic fakes in each API's own shape.

use mockswap::{MockSwap, Reply, ReplyRule};
use serde_json::{Value, json};

use crate::{client, post};

/// A multipart body with `fields` and one file part.
fn multipart(boundary: &str, fields: &[(&str, &str)], file: (&str, &str, &[u8])) -> Vec<u8> {
    let mut body = Vec::new();
    for (name, value) in fields {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    let (filename, kind, bytes) = file;
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\nContent-Type: {kind}\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    body
}

async fn transcribe(mock: &MockSwap, fields: &[(&str, &str)]) -> reqwest::Response {
    let body = multipart(
        "b0und",
        fields,
        ("note.wav", "audio/wav", b"RIFF\x00\x00\x00\x00WAVE"),
    );
    client()
        .post(format!("{}/v1/audio/transcriptions", mock.uri()))
        .header("content-type", "multipart/form-data; boundary=b0und")
        .body(body)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn images_come_back_as_n_pngs_one_colour_each_the_same_for_the_same_prompt() {
    let mock = MockSwap::start().await;
    let ask = json!({"model": "sd", "prompt": "a lighthouse", "n": 2, "size": "512x256"});
    let first: Value = post(&mock, "/v1/images/generations", &ask, &[])
        .await
        .json()
        .await
        .unwrap();
    let data = first["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    for image in data {
        // The base64 of the PNG signature.
        assert!(
            image["b64_json"]
                .as_str()
                .unwrap()
                .starts_with("iVBORw0KGgo"),
            "{image}"
        );
        assert_eq!(image["revised_prompt"], "[sd] a lighthouse");
    }
    assert_ne!(data[0]["b64_json"], data[1]["b64_json"]);
    let again: Value = post(&mock, "/v1/images/generations", &ask, &[])
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(again["data"], first["data"]);
    assert_eq!(again["created"], first["created"]);
    let edited = post(
        &mock,
        "/v1/images/edits",
        &json!({"model": "sd", "prompt": "x"}),
        &[],
    )
    .await;
    assert_eq!(edited.status(), 200);
    let one: Value = edited.json().await.unwrap();
    assert_eq!(one["data"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn speech_is_a_wav_whose_length_follows_the_text_and_voices_are_listed() {
    let mock = MockSwap::start().await;
    let ask = |input: &str| json!({"model": "tts", "input": input, "voice": "nova"});
    let short = post(&mock, "/v1/audio/speech", &ask("hello"), &[]).await;
    assert_eq!(short.status(), 200);
    assert_eq!(short.headers()["content-type"], "audio/wav");
    let short = short.bytes().await.unwrap();
    assert_eq!(&short[..4], b"RIFF");
    let long = post(&mock, "/v1/audio/speech", &ask(&"word ".repeat(20)), &[])
        .await
        .bytes()
        .await
        .unwrap();
    assert!(long.len() > short.len());
    for method in ["GET", "POST"] {
        let response = client()
            .request(
                method.parse().unwrap(),
                format!("{}/v1/audio/voices?model=tts", mock.uri()),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{method}");
        let voices: Value = response.json().await.unwrap();
        assert_eq!(voices["model"], "tts");
        assert!(
            voices["voices"]
                .as_array()
                .unwrap()
                .contains(&json!("nova")),
            "{voices}"
        );
    }
    let wrong = client()
        .delete(format!("{}/v1/audio/voices?model=tts", mock.uri()))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 405);
    assert_eq!(mock.requests().len(), 5);
}

#[tokio::test]
async fn a_transcription_says_what_was_uploaded_in_json_or_text() {
    let mock = MockSwap::start().await;
    let response = transcribe(&mock, &[("model", "whisper"), ("language", "en")]).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body,
        json!({"text": "[whisper] heard note.wav (12 bytes of audio/wav)", "language": "en"})
    );
    let text = transcribe(&mock, &[("model", "whisper"), ("response_format", "text")]).await;
    assert_eq!(text.headers()["content-type"], "text/plain; charset=utf-8");
    assert_eq!(
        text.text().await.unwrap(),
        "[whisper] heard note.wav (12 bytes of audio/wav)"
    );
    assert_eq!(mock.requests()[0].model.as_deref(), Some("whisper"));
}

#[tokio::test]
async fn a_scripted_text_replaces_the_transcript_and_the_revised_prompt() {
    let mock = MockSwap::builder()
        .reply(ReplyRule::new(Reply::text("scripted words")))
        .start()
        .await
        .unwrap();
    let body: Value = transcribe(&mock, &[("model", "whisper")])
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body["text"], "scripted words");
    let images: Value = post(
        &mock,
        "/v1/images/generations",
        &json!({"model": "sd", "prompt": "p"}),
        &[],
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(images["data"][0]["revised_prompt"], "scripted words");
}
