//! The three selector strategies, and the spillover reservations.

use std::sync::{Arc, Mutex, PoisonError};

use super::{SelectError, Selection};
use crate::config::{SelectorConfig, SelectorStrategy};
use crate::router::{ModelState, RunningModel};

/// One selector with its spillover bookkeeping.
#[derive(Debug)]
pub(super) struct Selector {
    pub(super) config: SelectorConfig,
    /// Spillover selectors only.
    spill: Option<Arc<Mutex<Spill>>>,
}

/// Requests of one spillover selector that are not finished, per target.
#[derive(Debug)]
struct Spill {
    in_flight: Vec<usize>,
    /// Turns among equally busy targets.
    turn: usize,
}

impl Selector {
    pub(super) fn new(config: SelectorConfig) -> Self {
        let spill = (config.strategy == SelectorStrategy::Spillover).then(|| {
            Arc::new(Mutex::new(Spill {
                in_flight: vec![0; config.targets.len()],
                turn: 0,
            }))
        });
        Self { config, spill }
    }
}

/// The target a selector chose for one request.
#[derive(Debug)]
pub(crate) struct Pick {
    /// The target as the selector lists it (model ID or alias): the name the
    /// request continues with.
    pub target: String,
    /// The model ID it names.
    pub model: String,
    /// Counts the request against its target until dropped (spillover only);
    /// keep it until the response ends.
    pub reservation: Option<Reservation>,
}

/// One request of a spillover selector on one target; dropping it ends it.
#[derive(Debug)]
pub(crate) struct Reservation {
    spill: Arc<Mutex<Spill>>,
    target: usize,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut spill = self.spill.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = spill.in_flight.get_mut(self.target) {
            *n = n.saturating_sub(1);
        }
    }
}

impl Selection {
    /// Whether the selector `id` looks at model states to choose (warm and
    /// spillover do; so the caller fetches them only then).
    #[must_use]
    pub(crate) fn needs_states(&self, id: &str) -> bool {
        self.selector(id)
            .is_some_and(|s| s.strategy != SelectorStrategy::Pin)
    }

    /// Picks the target of selector `id` for one request; `None` when `id` is no
    /// selector. `running` are the models that are not stopped.
    ///
    /// Spillover: targets being stopped are skipped; a target is *active* when it
    /// is starting or ready or has requests of this selector in flight, *cold*
    /// otherwise. With no active target the first cold one is taken. Otherwise
    /// the least busy active target is taken while it has fewer than `spillover`
    /// requests in flight (equally busy ones take turns); past that the first
    /// cold target is started, and with none left the least busy active one
    /// takes the request anyway.
    ///
    /// # Errors
    ///
    /// [`SelectError::NoSpilloverTarget`] when every spillover target is being stopped.
    pub(crate) fn choose(
        &self,
        id: &str,
        running: &[RunningModel],
    ) -> Option<Result<Pick, SelectError>> {
        let selector = self.find(id)?;
        let config = &selector.config;
        let state = |model: &str| {
            running
                .iter()
                .find(|r| r.model == model)
                .map_or(ModelState::Stopped, |r| r.state)
        };
        let pick = |i: usize, reservation: Option<Reservation>| Pick {
            target: config.targets[i].clone(),
            model: config.target_ids[i].clone(),
            reservation,
        };
        let chosen = match (config.strategy, &selector.spill) {
            (SelectorStrategy::Warm, _) => {
                let first_in = |wanted: ModelState| {
                    (0..config.targets.len()).find(|&i| state(&config.target_ids[i]) == wanted)
                };
                // A sleeping target wakes faster than a stopped one starts.
                let i = first_in(ModelState::Ready)
                    .or_else(|| first_in(ModelState::Starting))
                    .or_else(|| first_in(ModelState::Sleeping))
                    .unwrap_or(0);
                Ok(pick(i, None))
            }
            (SelectorStrategy::Spillover, Some(spill)) => {
                let states: Vec<ModelState> = config.target_ids.iter().map(|m| state(m)).collect();
                let mut guard = spill.lock().unwrap_or_else(PoisonError::into_inner);
                match spill_target(&mut guard, &states, config.spillover) {
                    Some(i) => {
                        guard.in_flight[i] += 1;
                        drop(guard);
                        let reservation = Reservation {
                            spill: Arc::clone(spill),
                            target: i,
                        };
                        Ok(pick(i, Some(reservation)))
                    }
                    None => Err(SelectError::NoSpilloverTarget {
                        selector: config.id.clone(),
                    }),
                }
            }
            _ => Ok(pick(0, None)),
        };
        Some(chosen)
    }
}

/// The spillover choice (see [`Selection::choose`]) as a target index.
fn spill_target(spill: &mut Spill, states: &[ModelState], spillover: usize) -> Option<usize> {
    let mut active = Vec::new();
    let mut cold = Vec::new();
    for (i, state) in states.iter().enumerate() {
        match state {
            ModelState::Stopping => {}
            ModelState::Ready | ModelState::Starting => active.push(i),
            ModelState::Stopped | ModelState::Sleeping if spill.in_flight[i] > 0 => active.push(i),
            ModelState::Stopped | ModelState::Sleeping => cold.push(i),
        }
    }
    let Some(least) = active.iter().map(|&i| spill.in_flight[i]).min() else {
        return cold.first().copied();
    };
    if least >= spillover
        && let Some(&first_cold) = cold.first()
    {
        return Some(first_cold);
    }
    let tied: Vec<usize> = active
        .into_iter()
        .filter(|&i| spill.in_flight[i] == least)
        .collect();
    let i = tied[spill.turn % tied.len()];
    spill.turn = spill.turn.wrapping_add(1);
    Some(i)
}
