//! Keys with scopes (issue 29): each `keys` rule over HTTP on every endpoint
//! family (model routes, `/upstream`, websockets, `/api/*`, `/logs`, the UI's
//! data), and the secret absent from every response, log and event.

use serde_json::Value;
use tokio_tungstenite::connect_async;
use tokio_tungstenite::tungstenite::Error as WsError;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

use crate::support::{Harness, LIMIT, ModelSpec, model};

const ADMIN: &str = "sk-admin-secret-1";
const BATCH: &str = "sk-batch-secret-2";
const BOT: &str = "sk-bot-secret-3";
const SECRETS: [&str; 3] = [ADMIN, BATCH, BOT];

/// The first key is the admin's: the harness watches `/api/events` with it.
const KEYS: &str = "apiKeys: [sk-admin-secret-1, sk-batch-secret-2, sk-bot-secret-3]
keys:
  - key: sk-admin-secret-1
    name: admin
    admin: true
  - key: sk-batch-secret-2
    name: batch
    models: [q*]
    maxPriority: -10
    maxConcurrent: 1
";

fn models() -> Vec<ModelSpec> {
    vec![model("qa", "--gate-closed"), model("other", "")]
}

async fn start() -> Harness {
    Harness::start(&models(), KEYS).await
}

async fn finish(handle: tokio::task::JoinHandle<(u16, String)>) -> (u16, String) {
    tokio::time::timeout(LIMIT, handle).await.unwrap().unwrap()
}

async fn send(request: reqwest::RequestBuilder) -> (u16, reqwest::header::HeaderMap, String) {
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.text().await.unwrap())
}

fn code(body: &str) -> String {
    let json: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    json["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// A websocket handshake to `path` with `key`: the status it was refused
/// with, or 101.
async fn handshake(h: &Harness, path: &str, key: &str) -> (u16, String) {
    let url = format!("{}{path}", h.base.replacen("http://", "ws://", 1));
    let mut request = url.into_client_request().unwrap();
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {key}").parse().unwrap());
    match tokio::time::timeout(LIMIT, connect_async(request))
        .await
        .expect("the handshake did not finish")
    {
        Ok((_ws, response)) => (response.status().as_u16(), String::new()),
        Err(WsError::Http(response)) => {
            let body = response.body().clone().unwrap_or_default();
            (
                response.status().as_u16(),
                String::from_utf8_lossy(&body).into_owned(),
            )
        }
        Err(other) => panic!("the websocket to {path} failed otherwise: {other:?}"),
    }
}

#[tokio::test]
async fn key_outside_its_models_is_told_the_model_does_not_exist_on_every_model_route() {
    let h = start().await;
    let chat = |model: &str, key: &str| h.chat(model, None, false).bearer_auth(key);

    let (status, _, outside) = send(chat("other", BATCH)).await;
    assert_eq!((status, code(&outside).as_str()), (404, "model_not_found"));
    let (_, _, missing) = send(chat("no-such-model", BATCH)).await;
    assert_eq!(
        outside.replace("other", "X"),
        missing.replace("no-such-model", "X"),
        "the same answer as for a model that does not exist"
    );
    let (status, _, body) = send(
        h.http
            .get(h.url("/upstream/other/health"))
            .bearer_auth(BATCH),
    )
    .await;
    assert_eq!((status, code(&body).as_str()), (404, "model_not_found"));
    let (status, body) = handshake(&h, "/upstream/other/ws", BATCH).await;
    assert_eq!((status, code(&body).as_str()), (404, "model_not_found"));
    let (_, _, running) = send(h.http.get(h.url("/running")).bearer_auth(ADMIN)).await;
    assert!(
        !running.contains("\"model\""),
        "nothing was started: {running}"
    );

    // Its own model, by a glob; another key without `models` reaches both.
    let (status, _, _) = send(h.http.get(h.url("/upstream/qa/health")).bearer_auth(BATCH)).await;
    assert_eq!(status, 200);
    let (status, _, _) = send(h.http.get(h.url("/upstream/other/health")).bearer_auth(BOT)).await;
    assert_eq!(status, 200);

    let listed = |key: &'static str| {
        let h = &h;
        async move {
            let body: Value = h
                .http
                .get(h.url("/v1/models"))
                .bearer_auth(key)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let ids: Vec<String> = body["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["id"].as_str().unwrap().to_owned())
                .collect();
            ids
        }
    };
    assert_eq!(listed(BATCH).await, ["qa"]);
    assert_eq!(listed(BOT).await, ["other", "qa"]);
    h.shutdown().await;
}

#[tokio::test]
async fn max_concurrent_refuses_one_more_request_of_the_key_with_429_key_busy() {
    let h = start().await;
    let held = h.spawn(h.chat("qa", None, false).bearer_auth(BATCH));
    h.wait_held("qa", 1).await;

    let (status, headers, body) = send(h.chat("qa", None, false).bearer_auth(BATCH)).await;
    assert_eq!((status, code(&body).as_str()), (429, "key_busy"));
    assert_eq!(headers["retry-after"], "1");
    assert!(
        body.contains("'batch'"),
        "names the key by its name: {body}"
    );
    // Another key is not bound by it.
    let other = h.spawn(h.chat("qa", None, false).bearer_auth(BOT));
    h.wait_held("qa", 2).await;

    h.open_gate("qa").await;
    assert_eq!(finish(held).await.0, 200);
    assert_eq!(finish(other).await.0, 200);
    // The permit went with the response body.
    let (status, _, _) = send(h.chat("qa", None, false).bearer_auth(BATCH)).await;
    assert_eq!(status, 200);
    h.shutdown().await;
}

#[tokio::test]
async fn only_admin_keys_manage_read_logs_captures_and_the_uis_data() {
    let h = start().await;
    // Every management endpoint and every endpoint the UI reads its data from.
    let admin_only: [(reqwest::Method, &str); 23] = [
        (reqwest::Method::POST, "/api/models/unload"),
        (reqwest::Method::POST, "/api/models/unload/qa"),
        (reqwest::Method::GET, "/unload"),
        (reqwest::Method::POST, "/api/models/load/other"),
        (reqwest::Method::GET, "/api/profiles"),
        (reqwest::Method::PUT, "/api/profiles/active"),
        (reqwest::Method::GET, "/logs"),
        (reqwest::Method::GET, "/logs/stream"),
        (reqwest::Method::GET, "/logs/stream/qa"),
        (reqwest::Method::GET, "/api/captures/1"),
        (reqwest::Method::GET, "/api/events"),
        (reqwest::Method::GET, "/api/activity"),
        (reqwest::Method::GET, "/api/metrics/activity"),
        (reqwest::Method::GET, "/api/metrics/stats"),
        (reqwest::Method::GET, "/api/queue"),
        (reqwest::Method::POST, "/api/inflight/1/cancel"),
        (reqwest::Method::POST, "/api/loadtest"),
        (reqwest::Method::GET, "/api/performance"),
        (reqwest::Method::GET, "/api/hardware"),
        (reqwest::Method::GET, "/api/version"),
        (reqwest::Method::GET, "/running"),
        (reqwest::Method::GET, "/api/models/config/qa"),
        (reqwest::Method::GET, "/upstream"),
    ];
    for key in [BATCH, BOT] {
        for (method, path) in &admin_only {
            let (status, _, body) =
                send(h.http.request(method.clone(), h.url(path)).bearer_auth(key)).await;
            assert_eq!(
                (status, code(&body).as_str()),
                (403, "admin_key_required"),
                "{method} {path}"
            );
        }
        for path in ["/v1/models", "/metrics"] {
            let (status, _, _) = send(h.http.get(h.url(path)).bearer_auth(key)).await;
            assert_eq!(status, 200, "{path}");
        }
    }
    for path in [
        "/logs",
        "/api/activity",
        "/api/metrics/activity",
        "/api/queue",
        "/api/profiles",
        "/api/version",
        "/running",
        "/api/models/config/qa",
    ] {
        let (status, _, _) = send(h.http.get(h.url(path)).bearer_auth(ADMIN)).await;
        assert_eq!(status, 200, "{path}");
    }
    let (status, _, _) = send(h.http.post(h.url("/api/models/unload")).bearer_auth(ADMIN)).await;
    assert_eq!(status, 200);
    h.shutdown().await;
}

#[tokio::test]
async fn without_an_admin_entry_every_key_keeps_full_access_but_its_models() {
    let h = Harness::start(
        &models(),
        "apiKeys: [sk-bot-secret-3, sk-batch-secret-2]\nkeys:\n  - key: sk-batch-secret-2\n    models: [qa]\n",
    )
    .await;
    let (status, _, _) = send(h.http.get(h.url("/logs")).bearer_auth(BATCH)).await;
    assert_eq!(status, 200);
    let (status, _, _) = send(h.http.post(h.url("/api/models/unload")).bearer_auth(BATCH)).await;
    assert_eq!(status, 200);
    let (status, _, body) = send(
        h.http
            .get(h.url("/api/models/config/other"))
            .bearer_auth(BATCH),
    )
    .await;
    assert_eq!((status, code(&body).as_str()), (404, "model_not_found"));
    // A model's own log, outside its models: as for a log that does not exist.
    let (status, _, outside) =
        send(h.http.get(h.url("/logs/stream/other")).bearer_auth(BATCH)).await;
    let (_, _, missing) = send(h.http.get(h.url("/logs/stream/nothing")).bearer_auth(BATCH)).await;
    assert_eq!((status, code(&outside).as_str()), (400, "unknown_log"));
    assert_eq!(
        outside.replace("other", "X"),
        missing.replace("nothing", "X")
    );
    let (status, _, body) = send(
        h.http
            .post(h.url("/api/models/load/other"))
            .bearer_auth(BATCH),
    )
    .await;
    assert_eq!((status, code(&body).as_str()), (404, "model_not_found"));
    h.shutdown().await;
}

#[tokio::test]
async fn per_key_totals_by_name_in_metrics_and_activity_and_the_secret_shown_nowhere() {
    let h = Harness::start(&[model("qa", ""), model("other", "")], KEYS).await;
    let (status, _, _) = send(
        h.chat("qa", Some("10"), false)
            .bearer_auth(BATCH)
            .header("x-api-key", BATCH),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _, _) = send(h.chat("other", None, true).bearer_auth(BOT)).await;
    assert_eq!(status, 200);
    let (status, _, _) = send(h.chat("qa", None, false).bearer_auth(BATCH)).await;
    assert_eq!(status, 200);
    // A model the key may not use is answered as unknown, and kept as the
    // 404 row llama-swap keeps for an unknown model, with the key's name.
    let (status, _, refused) = send(h.chat("other", None, false).bearer_auth(BATCH)).await;
    assert_eq!(status, 404);

    let admin_get = |path: &'static str| {
        let h = &h;
        async move {
            let (status, _, body) = send(h.http.get(h.url(path)).bearer_auth(ADMIN)).await;
            assert_eq!(status, 200, "{path}");
            body
        }
    };
    let activity = admin_get("/api/activity").await;
    let rows: Value = serde_json::from_str(&activity).unwrap();
    let rows = rows["activity"].as_array().unwrap();
    let batch: Vec<&Value> = rows.iter().filter(|r| r["api_key"] == "batch").collect();
    assert_eq!(batch.len(), 3, "{rows:?}");
    assert_eq!(
        batch
            .iter()
            .filter(|r| r["resp_status_code"] == 404 && r["model"] == "other")
            .count(),
        1,
        "{rows:?}"
    );
    let asked_high = batch
        .iter()
        .find(|r| r["requested_priority"] == 10)
        .expect("the X-Priority: 10 request");
    assert_eq!(asked_high["capped_priority"], -10, "the key's maxPriority");
    assert!(rows.iter().any(|r| r["api_key"] == "key2"), "{rows:?}");

    let metrics = admin_get("/metrics").await;
    assert!(
        metrics.contains("llamaswap_key_requests_total{key=\"batch\",outcome=\"ok\"} 2\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("llamaswap_key_requests_total{key=\"key2\",outcome=\"ok\"} 1\n"),
        "{metrics}"
    );
    // The refused one, counted with its row.
    assert!(
        metrics.contains("llamaswap_key_requests_total{key=\"batch\",outcome=\"error\"} 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("llamaswap_key_tokens_total{key=\"batch\",kind=\"output\"}"),
        "{metrics}"
    );

    let logs = admin_get("/logs").await;
    let capture_id = asked_high["id"].as_u64().unwrap();
    let capture = send(
        h.http
            .get(h.url(&format!("/api/captures/{capture_id}")))
            .bearer_auth(ADMIN),
    )
    .await
    .2;
    let events = first_events(&h).await;
    let running = admin_get("/running").await;
    let models = admin_get("/v1/models").await;
    for (what, text) in [
        ("activity", &activity),
        ("metrics", &metrics),
        ("logs", &logs),
        ("capture", &capture),
        ("events", &events),
        ("running", &running),
        ("models", &models),
        ("refusal", &refused),
    ] {
        for secret in SECRETS {
            assert!(!text.contains(secret), "{what} shows a key: {text}");
        }
    }
    h.shutdown().await;
}

/// What `/api/events` sends on connecting (its history), read until a
/// chunk holds the activity rows.
async fn first_events(h: &Harness) -> String {
    let mut response = h
        .http
        .get(h.url("/api/events"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut text = String::new();
    while !text.contains("\"activity\"") {
        let chunk = tokio::time::timeout(LIMIT, response.chunk())
            .await
            .expect("events in time")
            .unwrap()
            .expect("the stream goes on");
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    text
}

#[tokio::test]
async fn max_concurrent_counts_an_open_websocket_until_it_closes() {
    let h = Harness::start(&[model("qa", ""), model("other", "")], KEYS).await;
    let auth = [("authorization", "Bearer sk-batch-secret-2")];
    let mut ws = crate::websockets::open(&h, "/upstream/qa/ws", &auth).await;
    crate::websockets::echo(&mut ws, Message::text("held")).await;

    // The open socket is the key's one admitted request: a call and a second
    // socket are refused, another key is not.
    let (status, headers, body) = send(h.chat("qa", None, false).bearer_auth(BATCH)).await;
    assert_eq!((status, code(&body).as_str()), (429, "key_busy"), "{body}");
    assert_eq!(headers["retry-after"], "1");
    let (status, body) = handshake(&h, "/upstream/qa/ws", BATCH).await;
    assert_eq!((status, code(&body).as_str()), (429, "key_busy"), "{body}");
    let (status, _, _) = send(h.chat("qa", None, false).bearer_auth(BOT)).await;
    assert_eq!(status, 200);

    // Closed: the key's next request is admitted (its permit goes with the
    // socket's end, which the in-flight feed reports).
    crate::websockets::close(ws).await;
    h.wait_for(|h| async move {
        let (status, _, body) = send(h.chat("qa", None, false).bearer_auth(BATCH)).await;
        match status {
            200 => Some(()),
            429 => None,
            other => panic!("{other}: {body}"),
        }
    })
    .await;
    h.shutdown().await;
}

#[tokio::test]
async fn a_key_reaches_only_the_peer_models_in_its_scope_and_lists_only_those() {
    let back = Harness::start(&[model("pa", ""), model("pb", "")], "").await;
    let yaml = format!(
        "{}peers:\n  back:\n    proxy: {}\n    models: [pa, pb]\n",
        KEYS.replace("models: [q*]", "models: [q*, back/pa]"),
        back.base
    );
    let front = Harness::start(&models(), &yaml).await;
    let chat = |name: &str, key: &str| {
        front
            .http
            .post(front.url("/v1/chat/completions"))
            .bearer_auth(key)
            .json(&serde_json::json!({"model": name, "messages": [{"role": "user", "content": "hi"}]}))
    };

    // In scope, by its qualified and its bare name.
    for name in ["back/pa", "pa"] {
        let (status, _, body) = send(chat(name, BATCH)).await;
        assert_eq!(status, 200, "{name}: {body}");
    }
    // Outside it: told the model does not exist, on every route to the peer.
    let (_, _, missing) = send(chat("no-such-model", BATCH)).await;
    for name in ["back/pb", "pb"] {
        let (status, _, body) = send(chat(name, BATCH)).await;
        assert_eq!(
            (status, code(&body).as_str()),
            (404, "model_not_found"),
            "{name}"
        );
        assert_eq!(
            body.replace(name, "X"),
            missing.replace("no-such-model", "X"),
            "the same answer as for a model that does not exist"
        );
    }
    let (status, _, body) = send(
        front
            .http
            .get(front.url("/upstream/back/pb/health"))
            .bearer_auth(BATCH),
    )
    .await;
    assert_eq!(
        (status, code(&body).as_str()),
        (404, "model_not_found"),
        "{body}"
    );
    let (status, body) = handshake(&front, "/upstream/back/pb/ws", BATCH).await;
    assert_eq!(
        (status, code(&body).as_str()),
        (404, "model_not_found"),
        "{body}"
    );
    let started = back.running().await;
    assert!(
        !started.contains(&"pb".to_owned()),
        "nothing reached pb: {started:?}"
    );
    // A key without `models` reaches it.
    let (status, _, body) = send(chat("back/pb", BOT)).await;
    assert_eq!(status, 200, "{body}");

    let listed = |key: &'static str| {
        let front = &front;
        async move {
            let body: Value = front
                .http
                .get(front.url("/v1/models"))
                .bearer_auth(key)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            body["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["id"].as_str().unwrap().to_owned())
                .collect::<Vec<String>>()
        }
    };
    assert_eq!(listed(BATCH).await, ["back/pa", "qa"]);
    assert_eq!(listed(BOT).await, ["back/pa", "back/pb", "other", "qa"]);

    // Its maxConcurrent counts a websocket to a peer model until it closes.
    let auth = [("authorization", "Bearer sk-batch-secret-2")];
    let mut ws = crate::websockets::open(&front, "/upstream/back/pa/ws", &auth).await;
    crate::websockets::echo(&mut ws, Message::text("across the hop")).await;
    let (status, _, body) = send(chat("back/pa", BATCH)).await;
    assert_eq!((status, code(&body).as_str()), (429, "key_busy"), "{body}");
    crate::websockets::close(ws).await;
    front
        .wait_for(|_| async {
            let (status, _, body) = send(chat("back/pa", BATCH)).await;
            match status {
                200 => Some(()),
                429 => None,
                other => panic!("{other}: {body}"),
            }
        })
        .await;
    front.shutdown().await;
    back.shutdown().await;
}

#[tokio::test]
async fn max_priority_caps_the_key_on_upstream_and_websocket_routes_too() {
    let h = Harness::start(&[model("qa", ""), model("other", "")], KEYS).await;
    let (status, _, body) = send(
        h.http
            .post(h.url("/upstream/qa/v1/chat/completions"))
            .bearer_auth(BATCH)
            .header("X-Priority", "10")
            .json(&serde_json::json!({"model": "qa", "messages": [{"role": "user", "content": "hi"}]})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let ws = crate::websockets::open(
        &h,
        "/upstream/qa/ws",
        &[
            ("authorization", "Bearer sk-batch-secret-2"),
            ("x-priority", "10"),
        ],
    )
    .await;
    crate::websockets::close(ws).await;
    let rows = h
        .wait_for(|h| async move {
            let (_, _, body) = send(h.http.get(h.url("/api/activity")).bearer_auth(ADMIN)).await;
            let body: Value = serde_json::from_str(&body).unwrap();
            let rows = body["activity"].as_array().cloned().unwrap_or_default();
            (rows.len() == 2).then_some(rows)
        })
        .await;
    for row in &rows {
        assert_eq!(row["api_key"], "batch", "{row}");
        assert_eq!(row["requested_priority"], 10, "{row}");
        assert_eq!(row["capped_priority"], -10, "the key's maxPriority: {row}");
    }
    h.shutdown().await;
}

#[tokio::test]
async fn the_queue_and_in_flight_views_name_who_waits_by_key_name_never_the_secret() {
    let h = Harness::start(
        &[
            model("qa", "--gate-closed"),
            model("other", "--gate-closed"),
        ],
        KEYS,
    )
    .await;
    let mut events = crate::ui::Events::connect(&h, Some(ADMIN)).await;
    // `other` takes the only place; batch's request for qa waits for the swap.
    let holding = h.spawn(h.chat("other", None, false).bearer_auth(BOT));
    h.wait_held("other", 1).await;
    let holder = events
        .until("inflight", |e| {
            e["request"]["api_key"] == "key2" && e["request"]["state"] == "running"
        })
        .await;
    let waiting = h.spawn(
        h.chat("qa", None, false)
            .bearer_auth(BATCH)
            .header("x-api-key", BATCH),
    );
    let queue = h
        .wait_for(|h| async move {
            let (_, _, body) = send(h.http.get(h.url("/api/queue")).bearer_auth(ADMIN)).await;
            let body: Value = serde_json::from_str(&body).unwrap();
            let queue = body["queue"].as_array().cloned().unwrap_or_default();
            (queue.len() == 1).then_some(queue)
        })
        .await;
    assert_eq!(queue[0]["api_key"], "batch", "{queue:?}");

    let queued = events
        .until("queue", |q| q["queue"][0]["api_key"] == "batch")
        .await;
    let in_flight = events
        .until("inflight", |e| {
            e["request"]["api_key"] == "batch" && e["request"]["state"] == "queued"
        })
        .await;
    for text in [
        queued.to_string(),
        in_flight.to_string(),
        holder.to_string(),
    ] {
        for secret in SECRETS {
            assert!(!text.contains(secret), "an event shows a key: {text}");
        }
    }
    // The secret was sent in two headers: the key is taken off the request
    // before anything records it.
    let headers = in_flight["request"]["req_headers"]
        .to_string()
        .to_ascii_lowercase();
    assert!(
        !headers.contains("authorization") && !headers.contains("x-api-key"),
        "{headers}"
    );

    h.open_gate("other").await;
    assert_eq!(finish(holding).await.0, 200);
    h.wait_held("qa", 1).await;
    h.open_gate("qa").await;
    assert_eq!(finish(waiting).await.0, 200);
    h.shutdown().await;
}

#[tokio::test]
async fn the_servers_own_log_never_shows_a_key_whatever_the_request_did() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    let mut yaml = crate::support::config_yaml(&[
        (model("qa", ""), crate::support::free_port()),
        (model("other", ""), crate::support::free_port()),
    ]);
    yaml.push_str(KEYS);
    std::fs::write(&file, yaml).unwrap();
    let server = crate::cli::Server::start(&file, &[]).await;
    let http = reqwest::Client::new();
    let url = |path: &str| format!("{}{path}", server.base);
    let chat = |model: &str| {
        http.post(url("/v1/chat/completions"))
            .json(&serde_json::json!({"model": model, "messages": []}))
    };
    const GUESS: &str = "sk-a-wrong-guess-4";
    for (request, expected) in [
        (chat("qa").bearer_auth(BATCH), 200),
        (chat("qa").header("x-api-key", BOT), 200),
        (chat("other").bearer_auth(BATCH), 404),
        (chat("qa").bearer_auth(GUESS), 401),
        (chat("qa").bearer_auth(BATCH).header("x-api-key", BOT), 400),
        (http.get(url("/running")).bearer_auth(BOT), 403),
        (
            http.get(url("/upstream/other/health")).bearer_auth(BATCH),
            404,
        ),
    ] {
        let (status, _, body) = send(request).await;
        assert_eq!(status, expected, "{body}");
    }
    let (status, _, logs) = send(http.get(url("/logs")).bearer_auth(ADMIN)).await;
    assert_eq!(status, 200);
    assert!(logs.contains("path=/v1/chat/completions"), "{logs}");
    let stdout = server.terminate_with_output().await.join("\n");
    for (what, text) in [("/logs", &logs), ("stdout", &stdout)] {
        for secret in SECRETS.iter().chain([&GUESS]) {
            assert!(!text.contains(secret), "{what} shows {secret}: {text}");
        }
    }
}
