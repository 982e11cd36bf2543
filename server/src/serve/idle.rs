//! `hooks.on_idle: {after, preload}`: the default model back after a quiet spell.
//!
//! Once no model request has arrived for `after`, nothing is in flight and
//! nothing waits, the listed models that are not running are loaded, as the
//! startup preload does but at the lowest priority, so that any request that
//! arrives meanwhile goes first; a loaded model holds nothing and yields like
//! any idle model. It fires once per quiet spell: the next request arms it
//! again (a listed model with a `ttl` is not loaded over and over).

use std::sync::Arc;

use crate::activity::Activity;
use crate::config::OnIdle;
use crate::metrics::Metrics;
use crate::priority::Priority;
use crate::router::{RouterHandle, Submit};

/// Runs until aborted (a reload or the stop of the instance).
pub(super) async fn preload_when_idle(
    router: RouterHandle,
    activity: Arc<Activity>,
    metrics: Arc<Metrics>,
    idle: OnIdle,
) {
    let mut arrivals = activity.changes();
    loop {
        // A quiet spell: no change in the requests in flight for `after`.
        loop {
            match tokio::time::timeout(idle.after, arrivals.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return,
                Err(_elapsed) => break,
            }
        }
        if !activity.in_flight().is_empty() || !router.queue().await.is_empty() {
            // Work that outlived the spell: wait for the next change.
            if arrivals.changed().await.is_err() {
                return;
            }
            continue;
        }
        let running = router.running().await;
        let busy = running.iter().any(|m| m.in_flight > 0);
        if !busy {
            for model in &idle.preload {
                if running.iter().any(|m| &m.model == model) {
                    continue;
                }
                if load(&router, model).await {
                    metrics.idle_preload(model);
                }
            }
        }
        // Armed again by the next request.
        if arrivals.changed().await.is_err() {
            return;
        }
    }
}

/// Loads `model` like a request at the lowest priority, holding nothing;
/// whether it was loaded.
async fn load(router: &RouterHandle, model: &str) -> bool {
    let submitted = router
        .submit(Submit {
            model: model.to_owned(),
            priority: Priority::new(i32::MIN),
        })
        .await;
    let outcome = match submitted {
        Ok(ticket) => ticket.granted().await.map(drop),
        Err(error) => Err(error),
    };
    match outcome {
        Ok(()) => {
            tracing::info!(%model, "loaded back after the idle spell (hooks.on_idle)");
            true
        }
        Err(error) => {
            tracing::warn!(%model, %error, "hooks.on_idle preload failed");
            false
        }
    }
}
