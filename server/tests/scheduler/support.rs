//! A recording harness around the pure scheduler, and for the router tests a
//! launcher the test drives by channel ([`Rig`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use llama_swap_server::testing::launcher::{BoxFuture, LaunchError, Launcher, UpstreamEvent};
use llama_swap_server::testing::policy::GroupSettings;
use llama_swap_server::testing::priority::Priority;
use llama_swap_server::testing::router::{Lease, Router, RouterHandle, Submit};
use llama_swap_server::testing::scheduler::{
    Effect, ModelSettings, ModelState, RequestId, RouteError, Scheduler, SchedulerKind,
    SchedulerSettings, StopId, StopModel, Tick, WaitStatus,
};
use tokio::sync::{mpsc, oneshot};
use tokio::time::timeout;

/// Upper bound that turns a hang into a failure (virtual time on the paused clock).
pub(crate) const BOUND: Duration = Duration::from_secs(3600);

/// A request for `model` at header priority `priority`.
pub(crate) fn submit(model: &str, priority: impl Into<Priority>) -> Submit {
    Submit {
        model: model.to_owned(),
        priority: priority.into(),
    }
}

/// How a request ended, as far as the scheduler said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    Granted,
    Failed(RouteError),
}

pub(crate) struct Harness {
    pub s: Scheduler,
    pub now: Tick,
    /// Every effect, in order.
    pub log: Vec<Effect>,
    /// Effects since the last `take()`.
    pending: Vec<Effect>,
    pub outcomes: BTreeMap<RequestId, Outcome>,
    pub status: BTreeMap<RequestId, WaitStatus>,
    /// Grants in order.
    pub grants: Vec<(RequestId, String)>,
    /// Swaps started: (target, evict).
    pub swaps: Vec<(String, Vec<String>)>,
    /// Stops issued.
    pub stops: Vec<(StopId, Vec<Vec<StopModel>>)>,
}

pub(crate) fn model(id: &str) -> ModelSettings {
    ModelSettings::new(id)
}

pub(crate) fn models(ids: &[&str]) -> Vec<ModelSettings> {
    ids.iter().map(|id| ModelSettings::new(*id)).collect()
}

pub(crate) fn group(
    name: &str,
    members: &[&str],
    swap: bool,
    exclusive: bool,
    persistent: bool,
) -> GroupSettings {
    GroupSettings {
        name: name.to_owned(),
        swap,
        exclusive,
        persistent,
        members: members.iter().map(|m| (*m).to_owned()).collect(),
    }
}

pub(crate) fn settings(models: Vec<ModelSettings>) -> SchedulerSettings {
    SchedulerSettings::new(models)
}

pub(crate) fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

impl Harness {
    pub(crate) fn new(settings: SchedulerSettings) -> Self {
        Self {
            s: Scheduler::new(&settings).expect("valid settings"),
            now: Tick::ZERO,
            log: Vec::new(),
            pending: Vec::new(),
            outcomes: BTreeMap::new(),
            status: BTreeMap::new(),
            grants: Vec::new(),
            swaps: Vec::new(),
            stops: Vec::new(),
        }
    }

    /// Default group, FIFO with the fence.
    pub(crate) fn with_models(ids: &[&str]) -> Self {
        Self::new(settings(models(ids)))
    }

    pub(crate) fn with_kind(mut settings: SchedulerSettings, kind: SchedulerKind) -> Self {
        settings.kind = kind;
        Self::new(settings)
    }

    pub(crate) fn advance(&mut self, by: Duration) {
        self.now = self.now + by;
    }

    fn record(&mut self, effects: Vec<Effect>) {
        for e in &effects {
            match e {
                Effect::Grant { id, model } => {
                    assert!(
                        self.outcomes.insert(*id, Outcome::Granted).is_none(),
                        "request {id:?} ended twice"
                    );
                    self.status.insert(*id, WaitStatus::Granted);
                    self.grants.push((*id, model.clone()));
                }
                Effect::Fail { id, error } => {
                    assert!(
                        self.outcomes
                            .insert(*id, Outcome::Failed(error.clone()))
                            .is_none(),
                        "request {id:?} ended twice"
                    );
                }
                Effect::Positions { changes } => {
                    for (id, position) in changes {
                        assert!(
                            !self.outcomes.contains_key(id),
                            "position after the end of {id:?}"
                        );
                        self.status.insert(
                            *id,
                            WaitStatus::Queued {
                                position: *position,
                            },
                        );
                    }
                }
                Effect::Status { id, status } => {
                    assert!(
                        !self.outcomes.contains_key(id),
                        "status after the end of {id:?}"
                    );
                    self.status.insert(*id, *status);
                }
                Effect::StartSwap { model, evict } => {
                    let evict = evict.iter().map(|s| s.model.clone()).collect();
                    self.swaps.push((model.clone(), evict));
                }
                Effect::Stop { id, batches } => self.stops.push((*id, batches.clone())),
            }
        }
        self.log.extend(effects.iter().cloned());
        self.pending.extend(effects);
    }

    /// Effects since the last call.
    pub(crate) fn take(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.pending)
    }

    pub(crate) fn try_submit(
        &mut self,
        model: &str,
        priority: impl Into<Priority>,
    ) -> Result<RequestId, RouteError> {
        let mut out = Vec::new();
        let result = self.s.submit(self.now, model, priority.into(), &mut out);
        self.record(out);
        result.map(|a| a.id)
    }

    pub(crate) fn submit(&mut self, model: &str, priority: impl Into<Priority>) -> RequestId {
        self.try_submit(model, priority).expect("admitted")
    }

    pub(crate) fn swap_ok(&mut self, model: &str) {
        let mut out = Vec::new();
        self.s.swap_done(self.now, model, Ok(()), &mut out);
        self.record(out);
    }

    pub(crate) fn swap_err(&mut self, model: &str, error: LaunchError) {
        let mut out = Vec::new();
        self.s.swap_done(self.now, model, Err(error), &mut out);
        self.record(out);
    }

    pub(crate) fn done(&mut self, id: RequestId) {
        let mut out = Vec::new();
        self.s.serve_done(self.now, id, &mut out);
        self.record(out);
    }

    pub(crate) fn cancel(&mut self, id: RequestId) {
        let mut out = Vec::new();
        self.s.cancel(self.now, id, &mut out);
        self.record(out);
    }

    /// The upstream refused granted request `id`: its grant is undone.
    pub(crate) fn refused(&mut self, id: RequestId) {
        assert_eq!(self.outcomes.remove(&id), Some(Outcome::Granted), "{id:?}");
        self.status.remove(&id);
        let mut out = Vec::new();
        self.s.refused(self.now, id, &mut out);
        self.record(out);
    }

    /// An absorbed fast-path grant of model index `t` ended.
    pub(crate) fn fast_done(&mut self, t: usize) {
        let mut out = Vec::new();
        self.s.fast_done(self.now, t, &mut out);
        self.record(out);
    }

    /// The upstream refused fast-path grant `id` of model index `t`.
    pub(crate) fn fast_refused(
        &mut self,
        t: usize,
        id: RequestId,
        priority: i32,
        start: u64,
        absorbed: bool,
    ) {
        let mut out = Vec::new();
        self.s.fast_refused(
            self.now,
            t,
            id,
            Priority::new(priority),
            start,
            absorbed,
            &mut out,
        );
        self.record(out);
    }

    pub(crate) fn exited(&mut self, model: &str) {
        let mut out = Vec::new();
        self.s.upstream_exited(model, &mut out);
        self.record(out);
    }

    pub(crate) fn unload(&mut self, models: Option<&[&str]>) -> Result<Option<StopId>, RouteError> {
        let list: Option<Vec<String>> = models.map(names);
        let mut out = Vec::new();
        let result = self.s.unload(self.now, list.as_deref(), &mut out);
        self.record(out);
        result
    }

    pub(crate) fn shutdown(&mut self) -> Option<StopId> {
        let mut out = Vec::new();
        let result = self.s.shutdown(self.now, &mut out);
        self.record(out);
        result
    }

    /// A reload: `settings` apply from now on; `restart` changed their process.
    pub(crate) fn reconfigure(
        &mut self,
        settings: &SchedulerSettings,
        restart: &[&str],
    ) -> Result<Vec<Option<usize>>, llama_swap_server::testing::scheduler::SettingsError> {
        self.reconfigure_restarts(
            settings,
            &llama_swap_server::testing::scheduler::Restarts::changed(names(restart)),
        )
    }

    /// A reload with the launcher's whole answer.
    pub(crate) fn reconfigure_restarts(
        &mut self,
        settings: &SchedulerSettings,
        restarts: &llama_swap_server::testing::scheduler::Restarts,
    ) -> Result<Vec<Option<usize>>, llama_swap_server::testing::scheduler::SettingsError> {
        let mut out = Vec::new();
        let result = self.s.reconfigure(self.now, settings, restarts, &mut out);
        self.record(out);
        result
    }

    pub(crate) fn stop_done(&mut self, id: StopId) {
        let mut out = Vec::new();
        self.s.stop_done(id, &mut out);
        self.record(out);
    }

    pub(crate) fn tick(&mut self) {
        let mut out = Vec::new();
        self.s.tick(self.now, &mut out);
        self.record(out);
    }

    /// Loads `model` through a request that then ends; the model is left ready and idle.
    pub(crate) fn make_ready(&mut self, model: &str) {
        let id = self.submit(model, 0);
        if self.s.model_state(model) == Some(ModelState::Starting) {
            self.swap_ok(model);
        }
        assert!(self.granted(id), "{model} was not granted");
        self.done(id);
        assert_eq!(self.s.model_state(model), Some(ModelState::Ready));
        self.take();
    }

    pub(crate) fn granted(&self, id: RequestId) -> bool {
        self.outcomes.get(&id) == Some(&Outcome::Granted)
    }

    pub(crate) fn failed(&self, id: RequestId) -> Option<&RouteError> {
        match self.outcomes.get(&id) {
            Some(Outcome::Failed(e)) => Some(e),
            _ => None,
        }
    }

    pub(crate) fn ended(&self, id: RequestId) -> bool {
        self.outcomes.contains_key(&id)
    }

    /// Grant order of the given requests, as indices into `ids`.
    pub(crate) fn grant_order(&self, ids: &[RequestId]) -> Vec<RequestId> {
        self.grants
            .iter()
            .map(|(id, _)| *id)
            .filter(|id| ids.contains(id))
            .collect()
    }

    pub(crate) fn swaps_of(&self, model: &str) -> usize {
        self.swaps.iter().filter(|(m, _)| m == model).count()
    }

    pub(crate) fn grants_of(&self, model: &str) -> usize {
        self.grants.iter().filter(|(_, m)| m == model).count()
    }

    /// Models stopped by evictions and stop operations, in order of issue.
    pub(crate) fn evicted(&self) -> Vec<String> {
        self.swaps
            .iter()
            .flat_map(|(_, e)| e.iter().cloned())
            .collect()
    }

    pub(crate) fn position(&self, id: RequestId) -> Option<usize> {
        match self.status.get(&id) {
            Some(WaitStatus::Queued { position }) => Some(*position),
            _ => None,
        }
    }

    pub(crate) fn queue_ids(&self) -> Vec<RequestId> {
        self.s.queue(self.now).into_iter().map(|e| e.id).collect()
    }
}

/// A launcher that hands every call to the test, which completes it.
#[derive(Debug)]
pub(crate) enum Call {
    EnsureReady {
        model: String,
        done: oneshot::Sender<Result<(), LaunchError>>,
    },
    Stop {
        model: String,
        grace: Duration,
        done: oneshot::Sender<()>,
    },
}

pub(crate) struct FakeLauncher {
    pub calls: mpsc::UnboundedSender<Call>,
}

impl Launcher for FakeLauncher {
    fn ensure_ready(&self, model: &str) -> BoxFuture<'static, Result<(), LaunchError>> {
        let (done, result) = oneshot::channel();
        let _ = self.calls.send(Call::EnsureReady {
            model: model.to_owned(),
            done,
        });
        let model = model.to_owned();
        Box::pin(async move { result.await.unwrap_or(Err(LaunchError::Aborted { model })) })
    }

    fn stop(&self, model: &str, grace: Duration) -> BoxFuture<'static, ()> {
        let (done, result) = oneshot::channel();
        let _ = self.calls.send(Call::Stop {
            model: model.to_owned(),
            grace,
            done,
        });
        Box::pin(async move {
            let _ = result.await;
        })
    }
}

pub(crate) struct Rig {
    pub router: RouterHandle,
    pub calls: mpsc::UnboundedReceiver<Call>,
    pub exits: mpsc::Sender<UpstreamEvent>,
}

pub(crate) fn rig(settings: SchedulerSettings) -> Rig {
    let (calls_tx, calls) = mpsc::unbounded_channel();
    let (exits, exits_rx) = mpsc::channel(8);
    let router = Router::spawn(
        settings,
        Arc::new(FakeLauncher { calls: calls_tx }),
        exits_rx,
    )
    .unwrap();
    Rig {
        router,
        calls,
        exits,
    }
}

impl Rig {
    pub(crate) async fn next_call(&mut self) -> Call {
        timeout(BOUND, self.calls.recv())
            .await
            .expect("a launcher call")
            .expect("launcher alive")
    }

    pub(crate) async fn expect_ensure(
        &mut self,
        model: &str,
    ) -> oneshot::Sender<Result<(), LaunchError>> {
        match self.next_call().await {
            Call::EnsureReady { model: m, done } if m == model => done,
            other => panic!("expected ensure_ready({model}), got {other:?}"),
        }
    }

    pub(crate) async fn expect_stop(&mut self, model: &str) -> (Duration, oneshot::Sender<()>) {
        match self.next_call().await {
            Call::Stop {
                model: m,
                grace,
                done,
            } if m == model => (grace, done),
            other => panic!("expected stop({model}), got {other:?}"),
        }
    }

    /// Loads `model` (stopping `evicting` first) and returns the lease of the request that did it.
    pub(crate) async fn load(&mut self, model: &str, evicting: &[&str]) -> Lease {
        let ticket = self.router.submit(submit(model, 0)).await.unwrap();
        for e in evicting {
            let (_, done) = self.expect_stop(e).await;
            done.send(()).unwrap();
        }
        let id = self.router.resolve(model).expect("configured");
        self.expect_ensure(&id).await.send(Ok(())).unwrap();
        timeout(BOUND, ticket.granted()).await.unwrap().unwrap()
    }

    /// Round trip through the actor: every notice sent before it has been handled.
    pub(crate) async fn sync(&self) {
        self.router.queue().await;
    }

    pub(crate) fn no_call_pending(&mut self) -> bool {
        self.calls.try_recv().is_err()
    }
}
