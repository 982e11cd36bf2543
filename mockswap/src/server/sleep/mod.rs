//! Sleep and wake, as vLLM's sleep mode (`POST /sleep?level=1`, `POST /wake_up`,
//! `GET /is_sleeping`) and SGLang's memory release (`POST
//! /release_memory_occupation`, `POST /resume_memory_occupation`) answer.
//!
//! Going to sleep takes `sleep_time`, waking `wake_time` (both answered once
//! done, as vLLM does). While asleep or waking, `GET /health` answers 503
//! `{"status":"sleeping"}` and model requests 503 `model_sleeping`, so a proxy
//! that forwards before the model woke is caught; each such request is
//! counted. `GET /__mockswap/sleep` reports the state, the counts and the
//! memory the fake model holds (`memory` awake, `sleep_memory` asleep).

mod state;

use std::time::Duration;

use http::{Method, Response, StatusCode};
use serde_json::json;

use super::shared::Shared;
use crate::body::MockBody;
use crate::envelope::{ApiError, json_response};
use state::Phase;
pub(crate) use state::{Sleep, SleepSettings};

/// The sleep endpoints; `None` for any other path.
pub(crate) async fn handle(
    shared: &Shared,
    method: &Method,
    path: &str,
    query: Option<&str>,
) -> Option<Response<MockBody>> {
    let sleep = &shared.sleep;
    let settings = shared.settings.sleep;
    let post = |allowed: bool| {
        (!allowed).then(|| {
            ApiError::MethodNotAllowed {
                method: method.clone(),
                path: path.to_owned(),
                allow: "POST",
            }
            .into_response()
        })
    };
    match path {
        "/sleep" | "/release_memory_occupation" => {
            if let Some(refused) = post(method == Method::POST) {
                return Some(refused);
            }
            let level = query
                .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("level=")))
                .and_then(|l| l.parse::<u8>().ok())
                .unwrap_or(1);
            {
                let mut counts = sleep.lock();
                if counts.phase != Phase::Awake {
                    return Some(ok());
                }
                counts.phase = Phase::FallingAsleep;
                counts.level = level;
            }
            wait(shared, settings.sleep_time).await;
            let mut counts = sleep.lock();
            counts.phase = Phase::Asleep;
            counts.sleeps += 1;
            Some(ok())
        }
        "/wake_up" | "/resume_memory_occupation" => {
            if let Some(refused) = post(method == Method::POST) {
                return Some(refused);
            }
            {
                let mut counts = sleep.lock();
                if counts.phase != Phase::Asleep {
                    return Some(ok());
                }
                counts.phase = Phase::Waking;
            }
            wait(shared, settings.wake_time).await;
            let mut counts = sleep.lock();
            counts.phase = Phase::Awake;
            counts.wakes += 1;
            Some(ok())
        }
        "/is_sleeping" => {
            let phase = sleep.lock().phase;
            Some(json_response(
                StatusCode::OK,
                &json!({"is_sleeping": phase != Phase::Awake}),
            ))
        }
        _ => None,
    }
}

/// `GET /__mockswap/sleep`: the state, the counts and the memory held;
/// `None` for any other path.
pub(crate) fn status(shared: &Shared, path: &str) -> Option<Response<MockBody>> {
    if path != "/__mockswap/sleep" {
        return None;
    }
    let settings = shared.settings.sleep;
    let counts = shared.sleep.lock();
    let memory = if counts.phase == Phase::Awake {
        settings.memory
    } else {
        settings.sleep_memory
    };
    Some(json_response(
        StatusCode::OK,
        &json!({
            "state": counts.phase.name(),
            "level": counts.level,
            "sleeps": counts.sleeps,
            "wakes": counts.wakes,
            "refused_while_asleep": counts.refused,
            "memory_bytes": memory,
        }),
    ))
}

/// Waits `time`, or until the mock stops.
async fn wait(shared: &Shared, time: Duration) {
    tokio::select! {
        () = tokio::time::sleep(time) => {}
        () = shared.life.shutdown.cancelled() => {}
    }
}

fn ok() -> Response<MockBody> {
    json_response(StatusCode::OK, &json!({}))
}
