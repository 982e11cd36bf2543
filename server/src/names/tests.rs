//! The chain on a table built by hand: pins, then selectors, then local
//! names, then peers.

use super::*;

fn table() -> NameTable {
    let chat = vec!["chat".to_owned()];
    let local = LocalNames::new([
        LocalModel {
            id: "llama",
            aliases: &chat,
            listed: true,
        },
        LocalModel {
            id: "qwen",
            aliases: &[],
            listed: true,
        },
    ])
    .unwrap();
    let a = vec!["llama".to_owned(), "mistral".to_owned()];
    let b = vec!["mistral".to_owned(), "phi".to_owned()];
    let peers = PeerRoutes::new([("a", &a), ("b", &b)]);
    NameTable::new(local, peers)
        .with_selectors(["fast"])
        .with_profiles([
            ("work", vec![("chat", Some("qwen")), ("phi", None)]),
            ("home", vec![("chat", Some("fast"))]),
        ])
}

#[test]
fn a_pin_applies_only_while_its_profile_is_active() {
    let t = table();
    assert_eq!(t.pinned(None, "chat"), Pinned::No);
    assert_eq!(t.pinned(Some(0), "chat"), Pinned::To("qwen"));
    assert_eq!(t.pinned(Some(1), "chat"), Pinned::To("fast"));
    assert_eq!(
        t.pinned(Some(0), "phi"),
        Pinned::Disabled { profile: "work" }
    );
    assert_eq!(t.pinned(Some(7), "chat"), Pinned::No, "no such profile");
}

#[test]
fn selectors_then_local_names_then_peers() {
    let t = table();
    assert_eq!(
        t.lead("fast"),
        Some(Lead::Selector {
            id: "fast",
            index: 0
        })
    );
    assert_eq!(
        t.lead("chat"),
        Some(Lead::Model {
            id: "llama",
            index: 0
        })
    );
    assert_eq!(t.target("fast"), None, "a selector is no target");
    assert_eq!(t.lead("nothing"), None);
}

#[test]
fn a_local_name_wins_over_a_bare_peer_name_but_not_a_qualified_one() {
    let t = table();
    // Peer a lists "llama", which is also a local model.
    assert!(matches!(t.lead("llama"), Some(Lead::Model { .. })));
    let qualified = t.lead("a/llama").unwrap();
    assert_eq!(
        qualified,
        Lead::Peer(PeerRoute::Peer {
            peer: 0,
            model: "llama"
        })
    );
    assert_eq!(t.canonical_name(qualified), "a/llama");
}

#[test]
fn a_bare_name_one_peer_lists_is_that_peers_and_several_make_a_pool() {
    let t = table();
    let phi = t.target("phi").unwrap();
    assert_eq!(t.canonical_name(phi), "b/phi");
    let mistral = t.target("mistral").unwrap();
    assert!(matches!(
        mistral,
        Lead::Peer(PeerRoute::Pool {
            model: "mistral",
            ..
        })
    ));
    assert_eq!(t.canonical_name(mistral), "mistral");
}

#[test]
fn pins_named_lists_every_profile_pinning_a_name() {
    let t = table();
    let pins: Vec<_> = t.pins_named("chat").collect();
    assert_eq!(pins, [("work", Some("qwen")), ("home", Some("fast"))]);
}
