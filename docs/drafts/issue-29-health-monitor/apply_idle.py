import os
os.chdir('/work/wt/ops/server/src')
def edit(path, pairs):
    s=open(path).read()
    for old,new in pairs:
        assert s.count(old)==1,(path,old)
        s=s.replace(old,new)
    open(path,'w').write(s)
edit('config/resolved/types.rs',[("""pub struct Hooks {
    /// `on_startup.preload`: model IDs (aliases resolved) loaded at start, in order.
    pub preload: Vec<String>,
}""","""pub struct Hooks {
    /// `on_startup.preload`: model IDs (aliases resolved) loaded at start, in order.
    pub preload: Vec<String>,
    /// `on_idle` (this server's extension): models loaded back once no
    /// request has arrived for a while.
    pub on_idle: Option<OnIdle>,
}

/// `hooks.on_idle: {after, preload}`: once no model request has arrived for
/// `after` and nothing is in flight or waiting, the `preload` models that are
/// not running are loaded (as the startup preload does, at the lowest
/// priority, so any request goes first); once per idle spell.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OnIdle {
    /// `after` (seconds, at least 1).
    pub after: std::time::Duration,
    /// `preload`: model IDs (aliases resolved), in order.
    pub preload: Vec<String>,
}""")])
edit('config/mod.rs',[("""    Config, GroupConfig, Hooks, LogLevel,""","""    Config, GroupConfig, Hooks, LogLevel, OnIdle,""")])
edit('config/hooks.rs',[("""//! `hooks`: what the server does at start (`on_startup.preload`).""","""//! `hooks`: what the server does at start (`on_startup.preload`) and once
//! idle (`on_idle: {after, preload}`, this server's extension)."""),
("""use super::resolved::types::Hooks;""","""use super::resolved::types::{Hooks, OnIdle};"""),
("""        startup.finish(cx);
    }
    fields.finish(cx);""","""        startup.finish(cx);
    }
    if let Some((idle_node, idle_path)) = fields.take("on_idle")
        && let Some(mut idle) = Fields::new(idle_node, idle_path.clone(), cx)
    {
        let after = match idle.take("after") {
            None => {
                cx.error(idle_path.key("after"), super::document::error::Reason::Missing);
                None
            }
            Some((n, p)) => cx
                .int_min(n, &p, 1)
                .and_then(|s| u64::try_from(s).ok())
                .map(std::time::Duration::from_secs),
        };
        let preload = match idle.take("preload") {
            None => {
                cx.error(idle_path.key("preload"), super::document::error::Reason::Missing);
                Vec::new()
            }
            Some((n, p)) => read_preload(n, &p, names, cx),
        };
        idle.finish(cx);
        if let Some(after) = after
            && !preload.is_empty()
        {
            hooks.on_idle = Some(OnIdle { after, preload });
        }
    }
    fields.finish(cx);""")])
edit('serve/instance.rs',[("""    fn preload(&mut self, config: &Config) {
        self.preload.abort_all();
        if !config.hooks.preload.is_empty() {
            self.preload.spawn(preload_models(
                self.router.clone(),
                config.hooks.preload.clone(),
            ));
        }
    }""","""    fn preload(&mut self, config: &Config) {
        self.preload.abort_all();
        if !config.hooks.preload.is_empty() {
            self.preload.spawn(preload_models(
                self.router.clone(),
                config.hooks.preload.clone(),
            ));
        }
        if let Some(on_idle) = &config.hooks.on_idle {
            self.preload.spawn(super::idle::preload_when_idle(
                self.router.clone(),
                std::sync::Arc::clone(self.state.activity()),
                on_idle.clone(),
            ));
        }
    }""")])
edit('serve/mod.rs',[("mod instance;\n","mod idle;\nmod instance;\n")])
open('serve/idle.rs','w').write('''//! `hooks.on_idle: {after, preload}`: the default model back after a quiet spell.
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
use crate::priority::Priority;
use crate::router::{RouterHandle, Submit};

/// Runs until aborted (a reload or the stop of the instance).
pub(super) async fn preload_when_idle(router: RouterHandle, activity: Arc<Activity>, idle: OnIdle) {
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
                load(&router, model).await;
            }
        }
        // Armed again by the next request.
        if arrivals.changed().await.is_err() {
            return;
        }
    }
}

/// Loads `model` like a request at the lowest priority, holding nothing.
async fn load(router: &RouterHandle, model: &str) {
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
        Ok(()) => tracing::info!(%model, "loaded back after the idle spell (hooks.on_idle)"),
        Err(error) => tracing::warn!(%model, %error, "hooks.on_idle preload failed"),
    }
}
''')
