//! Which peer a model name goes to: llama-swap's naming rules, plus pools.

use std::collections::BTreeMap;

/// The fully qualified name of a peer's model: `<peer ID>/<model>`. Both parts
/// may contain `/`, so such a name is only ever compared whole, never split.
#[must_use]
pub(crate) fn qualified_name(peer: &str, model: &str) -> String {
    format!("{peer}/{model}")
}

/// Where a peer model name leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerRoute<'a> {
    /// One peer's model: a qualified name, or a bare name one peer lists.
    Peer {
        /// Index of the peer (peers are sorted by ID).
        peer: usize,
        /// The model as the peer knows it (what its requests name).
        model: &'a str,
    },
    /// A bare name several peers list: one of them is chosen per request
    /// (by `crate::peers`, which forwards).
    Pool {
        /// The model as the peers know it.
        model: &'a str,
        /// The peers that list it, in ID order.
        peers: &'a [usize],
    },
}

/// The names peer models answer to, built once per configuration.
///
/// - `<peer>/<model>` always names that peer's model;
/// - a bare `<model>` names it too when exactly one peer lists it and no
///   qualified name is spelled the same (`a/b` as peer `a`'s model `b` wins
///   over a peer listing a model called `a/b`);
/// - a bare name several peers list is a pool (this server's extension;
///   llama-swap answers 404 for it).
///
/// Local model IDs and aliases, selectors and profile pins come first; that
/// precedence is the caller's (the config refuses qualified names that clash
/// with them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerRoutes {
    /// Peer IDs, in the order given (sorted): a peer's index is its place here.
    peers: Vec<String>,
    qualified: BTreeMap<String, (usize, String)>,
    bare: BTreeMap<String, Vec<usize>>,
}

impl PeerRoutes {
    /// The routes of `peers`: each peer's ID with the models it lists, peers
    /// sorted by ID.
    #[must_use]
    pub fn new<'a, M>(peers: impl IntoIterator<Item = (&'a str, M)>) -> Self
    where
        M: IntoIterator<Item = &'a String>,
    {
        let mut routes = Self::default();
        for (index, (peer, models)) in peers.into_iter().enumerate() {
            routes.peers.push(peer.to_owned());
            for model in models {
                routes
                    .qualified
                    .entry(qualified_name(peer, model))
                    .or_insert_with(|| (index, model.clone()));
                let listed = routes.bare.entry(model.clone()).or_default();
                if !listed.contains(&index) {
                    listed.push(index);
                }
            }
        }
        routes
    }

    /// True when no peer is configured.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.qualified.is_empty()
    }

    /// Where `name` leads, if it names a peer model at all.
    #[must_use]
    pub fn resolve(&self, name: &str) -> Option<PeerRoute<'_>> {
        if let Some((peer, model)) = self.qualified.get(name) {
            return Some(PeerRoute::Peer { peer: *peer, model });
        }
        let (model, peers) = self.bare.get_key_value(name)?;
        match peers.as_slice() {
            [] => None,
            [peer] => Some(PeerRoute::Peer { peer: *peer, model }),
            many => Some(PeerRoute::Pool { model, peers: many }),
        }
    }

    /// The name `route` is known by in listings and activity: the qualified
    /// name of a peer's model, the bare name of a pool.
    #[must_use]
    pub fn canonical_name(&self, route: PeerRoute<'_>) -> String {
        match route {
            PeerRoute::Peer { peer, model } => {
                let id = self.peers.get(peer).map_or("", String::as_str);
                qualified_name(id, model)
            }
            PeerRoute::Pool { model, .. } => model.to_owned(),
        }
    }

    /// The ID of the peer at `index`.
    #[must_use]
    pub fn peer_id(&self, index: usize) -> Option<&str> {
        self.peers.get(index).map(String::as_str)
    }

    /// Every qualified name with its peer index and model, sorted by name.
    pub fn qualified(&self) -> impl Iterator<Item = (&str, usize, &str)> {
        self.qualified
            .iter()
            .map(|(name, (peer, model))| (name.as_str(), *peer, model.as_str()))
    }

    /// Every bare name with the peers that list it.
    pub fn bare(&self) -> impl Iterator<Item = (&str, &[usize])> {
        self.bare.iter().map(|(m, p)| (m.as_str(), p.as_slice()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(id: &'static str, models: &[&str]) -> (&'static str, Vec<String>) {
        (id, models.iter().map(|m| (*m).to_owned()).collect())
    }

    fn routes(peers: &[(&'static str, Vec<String>)]) -> PeerRoutes {
        PeerRoutes::new(peers.iter().map(|(id, models)| (*id, models)))
    }

    #[test]
    fn qualified_names_always_name_the_peer_model() {
        let peers = [peer("a", &["llama"]), peer("b", &["llama", "qwen"])];
        let routes = routes(&peers);
        assert_eq!(
            routes.resolve("a/llama"),
            Some(PeerRoute::Peer {
                peer: 0,
                model: "llama"
            })
        );
        assert_eq!(
            routes.resolve("b/llama"),
            Some(PeerRoute::Peer {
                peer: 1,
                model: "llama"
            })
        );
        assert_eq!(routes.resolve("c/llama"), None);
    }

    #[test]
    fn a_bare_name_one_peer_lists_names_its_model() {
        let peers = [peer("a", &["llama"]), peer("b", &["llama", "qwen"])];
        let routes = routes(&peers);
        assert_eq!(
            routes.resolve("qwen"),
            Some(PeerRoute::Peer {
                peer: 1,
                model: "qwen"
            })
        );
    }

    #[test]
    fn a_bare_name_several_peers_list_is_a_pool() {
        let peers = [peer("a", &["llama"]), peer("b", &["llama", "qwen"])];
        let routes = routes(&peers);
        assert_eq!(
            routes.resolve("llama"),
            Some(PeerRoute::Pool {
                model: "llama",
                peers: &[0, 1]
            })
        );
        assert_eq!(
            routes.canonical_name(routes.resolve("llama").unwrap()),
            "llama"
        );
    }

    #[test]
    fn a_qualified_name_wins_over_a_bare_name_spelled_the_same() {
        let peers = [peer("p1", &["model"]), peer("p2", &["p1/model"])];
        let routes = routes(&peers);
        assert_eq!(
            routes.resolve("p1/model"),
            Some(PeerRoute::Peer {
                peer: 0,
                model: "model"
            })
        );
        assert_eq!(
            routes.resolve("p2/p1/model"),
            Some(PeerRoute::Peer {
                peer: 1,
                model: "p1/model"
            })
        );
    }

    #[test]
    fn a_model_listed_twice_by_one_peer_is_not_a_pool() {
        let peers = [peer("a", &["llama", "llama"])];
        let routes = routes(&peers);
        assert_eq!(
            routes.resolve("llama"),
            Some(PeerRoute::Peer {
                peer: 0,
                model: "llama"
            })
        );
    }
}
