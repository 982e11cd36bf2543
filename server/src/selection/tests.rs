//! llama-swap's profile and selector behaviours (`server/profiles_test.go`,
//! `server/selector_test.go`), without HTTP: the active profile and the
//! selectors' picks here, the pins they switch on from [`NameTable`].

use std::ops::Deref;

use super::selectors::Pick;
use super::*;
use crate::names::{NameTable, Pinned, UpstreamPin};
use crate::router::{ModelState, RunningModel};

/// A configuration's run-time selection with its name table, as a request
/// sees them.
struct Names {
    selection: Selection,
    table: NameTable,
}

impl Names {
    fn pinned(&self, name: &str) -> Pinned<'_> {
        self.table.pinned(self.selection.active_index(), name)
    }

    fn upstream_pin(&self, tail: &str) -> UpstreamPin<'_> {
        self.table.upstream_pin(self.selection.active_index(), tail)
    }
}

impl Deref for Names {
    type Target = Selection;

    fn deref(&self) -> &Selection {
        &self.selection
    }
}

fn names(yaml: &str) -> Names {
    let loaded = Config::loader()
        .yaml("config.yaml", yaml)
        .env(&|_| None)
        .load()
        .unwrap();
    Names {
        selection: Selection::new(&loaded.config),
        table: loaded.config.names(),
    }
}

const CONFIG: &str = r#"
models:
  a: { cmd: "srv --port ${PORT}", aliases: [alias-a] }
  b: { cmd: "srv --port ${PORT}" }
  c: { cmd: "srv --port ${PORT}" }
groups:
  balanced: { swap: false, members: [a, b, c] }
selectors:
  public: { strategy: pin, targets: [alias-a, b] }
  warm: { strategy: warm, targets: [a, b, c] }
  pool: { strategy: spillover, targets: [a, b, c], settings: { spillover: 2 } }
  single: { strategy: spillover, targets: [a, b, c] }
profiles:
  coding:
    pins:
      llm-code: public
      disabled: ~
      a: b
      author: c
      author/public: a
  other:
    pins: { x: a }
"#;

fn running(states: &[(&str, ModelState)]) -> Vec<RunningModel> {
    states
        .iter()
        .map(|(m, s)| RunningModel {
            model: (*m).to_owned(),
            state: *s,
            in_flight: 0,
            parallel: None,
            gpus: Vec::new(),
            memory: 0,
            memory_measured: None,
        })
        .collect()
}

fn choose(names: &Names, id: &str, states: &[(&str, ModelState)]) -> Pick {
    names.choose(id, &running(states)).unwrap().unwrap()
}

#[test]
fn no_profile_is_active_until_one_is_chosen_and_at_most_one_is() {
    let n = names(CONFIG);
    assert!(n.active().is_none());
    assert_eq!(n.pinned("llm-code"), Pinned::No);
    assert_eq!(n.set_active(Some("coding")), Ok(true));
    assert_eq!(n.active().map(|p| p.name.as_str()), Some("coding"));
    assert_eq!(n.set_active(Some("coding")), Ok(false), "no change");
    assert_eq!(n.set_active(Some("other")), Ok(true));
    assert_eq!(n.active().map(|p| p.name.as_str()), Some("other"));
    assert_eq!(
        n.pinned("llm-code"),
        Pinned::No,
        "the other profile's pins are off"
    );
}

#[test]
fn an_unknown_profile_is_refused_and_the_active_one_stays() {
    let n = names(CONFIG);
    n.set_active(Some("coding")).unwrap();
    assert_eq!(
        n.set_active(Some("missing")),
        Err(UnknownProfile {
            name: "missing".into()
        })
    );
    assert_eq!(n.active().map(|p| p.name.as_str()), Some("coding"));
}

#[test]
fn null_or_an_empty_name_turns_profiles_off() {
    let n = names(CONFIG);
    n.set_active(Some("coding")).unwrap();
    assert_eq!(n.set_active(None), Ok(true));
    assert!(n.active().is_none());
    n.set_active(Some("coding")).unwrap();
    assert_eq!(n.set_active(Some("")), Ok(true));
    assert!(n.active().is_none());
}

#[test]
fn switching_profiles_is_announced_to_watchers() {
    let n = names(CONFIG);
    let mut watcher = n.watch_active();
    n.set_active(Some("other")).unwrap();
    assert!(watcher.has_changed().unwrap());
    assert_eq!(*watcher.borrow_and_update(), Some(1));
    n.set_active(Some("other")).unwrap();
    assert!(!watcher.has_changed().unwrap(), "no change, no news");
}

#[test]
fn pins_rewrite_shadow_models_and_disable() {
    let n = names(CONFIG);
    n.set_active(Some("coding")).unwrap();
    assert_eq!(n.pinned("llm-code"), Pinned::To("public"));
    assert_eq!(n.pinned("a"), Pinned::To("b"), "a pin shadows a model ID");
    assert_eq!(n.pinned("disabled"), Pinned::Disabled { profile: "coding" });
    assert_eq!(n.pinned("b"), Pinned::No);
}

#[test]
fn upstream_paths_take_the_longest_pin_prefix() {
    let n = names(CONFIG);
    assert_eq!(n.upstream_pin("a/v1/chat/completions"), UpstreamPin::No);
    n.set_active(Some("coding")).unwrap();
    assert_eq!(
        n.upstream_pin("a/v1/chat/completions"),
        UpstreamPin::To("b/v1/chat/completions".into())
    );
    assert_eq!(
        n.upstream_pin("author/public/v1/chat/completions"),
        UpstreamPin::To("a/v1/chat/completions".into())
    );
    assert_eq!(
        n.upstream_pin("author/v1/models"),
        UpstreamPin::To("c/v1/models".into())
    );
    assert_eq!(n.upstream_pin("a"), UpstreamPin::To("b".into()));
    assert_eq!(
        n.upstream_pin("ab/v1"),
        UpstreamPin::No,
        "a pin is a whole segment"
    );
    assert_eq!(
        n.upstream_pin("disabled/v1/chat/completions"),
        UpstreamPin::Disabled {
            pin: "disabled",
            profile: "coding"
        }
    );
    assert_eq!(n.upstream_pin("b/v1/chat/completions"), UpstreamPin::No);
}

#[test]
fn pin_takes_the_first_target_as_written() {
    let n = names(CONFIG);
    let pick = choose(&n, "public", &[("b", ModelState::Ready)]);
    assert_eq!(
        (pick.target.as_str(), pick.model.as_str()),
        ("alias-a", "a")
    );
    assert!(pick.reservation.is_none());
    assert!(!n.needs_states("public"));
    assert!(n.needs_states("warm") && n.needs_states("pool"));
    assert!(n.choose("not-a-selector", &[]).is_none());
}

#[test]
fn warm_prefers_the_first_ready_then_the_first_starting_then_the_first() {
    use ModelState::{Ready, Starting};
    let n = names(CONFIG);
    let cases: &[(&[(&str, ModelState)], &str)] = &[
        (&[("a", Starting), ("c", Ready)], "c"),
        (&[("a", Starting), ("b", Ready), ("c", Ready)], "b"),
        (&[("a", Starting), ("b", Starting)], "a"),
        (&[("b", Starting), ("c", ModelState::Stopping)], "b"),
        (&[], "a"),
    ];
    for (states, expected) in cases {
        assert_eq!(choose(&n, "warm", states).target, *expected, "{states:?}");
    }
}

#[test]
fn spillover_fills_a_target_up_to_spillover_then_starts_the_next() {
    let n = names(CONFIG);
    let first = choose(&n, "pool", &[]);
    let second = choose(&n, "pool", &[]);
    let third = choose(&n, "pool", &[]);
    assert_eq!(
        [&first.target, &second.target, &third.target],
        ["a", "a", "b"]
    );
    drop(first);
    // a has one in flight, b one, c none: c is the least busy running target.
    let all_ready = [
        ("a", ModelState::Ready),
        ("b", ModelState::Ready),
        ("c", ModelState::Ready),
    ];
    assert_eq!(choose(&n, "pool", &all_ready).target, "c");
}

#[test]
fn spillover_skips_stopping_targets_and_fails_when_all_are_stopping() {
    let n = names(CONFIG);
    let stopping = [
        ("a", ModelState::Stopping),
        ("b", ModelState::Stopping),
        ("c", ModelState::Stopping),
    ];
    assert_eq!(
        n.choose("pool", &running(&stopping)).unwrap().unwrap_err(),
        SelectError::NoSpilloverTarget {
            selector: "pool".into()
        }
    );
    let pick = choose(&n, "pool", &[("a", ModelState::Stopping)]);
    assert_eq!(
        pick.target, "b",
        "a is being stopped: the first cold target"
    );
}

#[test]
fn equally_busy_running_targets_take_turns() {
    let n = names(CONFIG);
    let all_ready = [
        ("a", ModelState::Ready),
        ("b", ModelState::Ready),
        ("c", ModelState::Ready),
    ];
    let picks: Vec<Pick> = (0..3).map(|_| choose(&n, "single", &all_ready)).collect();
    let mut targets: Vec<&str> = picks.iter().map(|p| p.target.as_str()).collect();
    targets.sort_unstable();
    assert_eq!(targets, ["a", "b", "c"], "three requests, three targets");
    // All at the spillover with nothing cold: the least busy still takes it.
    let fourth = choose(&n, "single", &all_ready);
    assert!(n.choose("single", &running(&all_ready)).is_some());
    assert!(["a", "b", "c"].contains(&fourth.target.as_str()));
}

#[test]
fn a_finished_spillover_request_frees_its_target() {
    let n = names(CONFIG);
    let ready_a = [("a", ModelState::Ready)];
    let held = choose(&n, "single", &ready_a);
    assert_eq!(held.target, "a");
    assert_eq!(choose(&n, "single", &ready_a).target, "b", "a is full");
    drop(held);
    // The pick for b above was dropped at once; a is free again.
    assert_eq!(choose(&n, "single", &ready_a).target, "a");
}
