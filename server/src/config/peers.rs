//! `peers`: other servers (another llama-swap, this server on another host,
//! or any OpenAI-compatible provider) whose models this server forwards to.

use super::document::error::{KeyPath, Reason};
use super::document::fields::{Diagnostics, Fields};
use super::document::macros::Scope;
use super::document::node::Node;
use super::model::command::read_proxy;
use super::model::filters::{expand_by_id_keys, read_filters};
use super::model::timeouts::read_timeouts;
use super::resolved::api_key::ApiKey;
use super::resolved::names::{
    DEFAULT_PEER_CONCURRENCY_LIMIT, PEER_RESPONSE_HEADER_TIMEOUT, PeerConfig, ProfileConfig,
    SelectorConfig, default_peer_timeouts,
};
use crate::filters::Filters;
use crate::names::NameTable;
use crate::names::qualified_name;
use crate::proxy::Timeouts;

/// Reads `peers` (values already expanded with the global macros), sorted by ID.
pub(crate) fn read_peers(
    node: &Node,
    path: &KeyPath,
    scope: &Scope<'_>,
    cx: &mut Diagnostics,
) -> Vec<PeerConfig> {
    let Node::Map(entries) = node else {
        return cx
            .wrong_type(path, "a map of peer IDs to peer settings", node)
            .unwrap_or_default();
    };
    let mut peers = Vec::with_capacity(entries.len());
    for (id, value) in entries {
        let peer_path = path.key(id);
        if id.trim().is_empty() {
            cx.error(peer_path, Reason::Empty);
            continue;
        }
        if let Some(peer) = read_peer(id, value, &peer_path, scope, cx) {
            peers.push(peer);
        }
    }
    peers.sort_by(|a, b| a.id.cmp(&b.id));
    peers
}

fn read_peer(
    id: &str,
    node: &Node,
    path: &KeyPath,
    scope: &Scope<'_>,
    cx: &mut Diagnostics,
) -> Option<PeerConfig> {
    let issues_before = cx.issues.len();
    let mut fields = Fields::new(node, path.clone(), cx)?;
    let proxy = match fields.take("proxy") {
        Some((n, p)) => read_proxy(n, &p, cx),
        None => {
            cx.error(path.key("proxy"), Reason::Missing);
            None
        }
    };
    let api_key = fields.take("apiKey").and_then(|(n, p)| {
        let key = cx.string(n, &p)?;
        if key.is_empty() {
            return None;
        }
        // The key goes into two header values; refuse what a header cannot hold.
        if http::HeaderValue::from_str(&format!("Bearer {key}")).is_err()
            || key.chars().any(char::is_whitespace)
        {
            cx.error(p, Reason::ApiKeyWhitespace);
            return None;
        }
        Some(ApiKey::new(key))
    });
    let mut models: Vec<String> = Vec::new();
    match fields.take("models") {
        None => cx.error(path.key("models"), Reason::Missing),
        Some((n, p)) => {
            if let Some(list) = cx.string_list(n, &p) {
                if list.is_empty() {
                    cx.error(p, Reason::Empty);
                }
                for (model, _) in list {
                    // llama-swap skips a repeated model; so does this server.
                    if !models.contains(&model) {
                        models.push(model);
                    }
                }
            }
        }
    }
    let filters = match fields.take("filters") {
        Some((n, p)) => {
            let mut expanded = n.clone();
            expand_by_id_keys(scope, &mut expanded, &p, cx);
            // Peer setParamsByID names are matched on the requested name only;
            // unlike a model's they are not routable aliases.
            read_filters(&expanded, &p, cx).0
        }
        None => Filters::default(),
    };
    let timeouts = match fields.take("timeouts") {
        Some((n, p)) => read_peer_timeouts(n, &p, cx),
        None => default_peer_timeouts(),
    };
    // This server's extension; 0 keeps the default, as a model's does.
    let concurrency_limit = match fields.take("concurrencyLimit") {
        Some((n, p)) => match cx.seconds(n, &p) {
            Some(0) | None => DEFAULT_PEER_CONCURRENCY_LIMIT,
            Some(limit) => usize::try_from(limit).unwrap_or(usize::MAX),
        },
        None => DEFAULT_PEER_CONCURRENCY_LIMIT,
    };
    fields.finish(cx);
    if cx.issues.len() > issues_before {
        return None;
    }
    Some(PeerConfig {
        id: id.to_owned(),
        proxy: proxy?,
        api_key,
        models,
        filters,
        timeouts,
        concurrency_limit,
    })
}

/// A peer's `timeouts`: as a model's, but `responseHeader` defaults to 60 s.
fn read_peer_timeouts(node: &Node, path: &KeyPath, cx: &mut Diagnostics) -> Timeouts {
    let read = read_timeouts(node, path, cx);
    let set_response_header = matches!(node, Node::Map(entries)
        if entries.iter().any(|(k, v)| k == "responseHeader" && !matches!(v, Node::Null)));
    if set_response_header {
        read
    } else {
        read.response_header(Some(PEER_RESPONSE_HEADER_TIMEOUT))
    }
}

/// Qualified peer names (`<peer>/<model>`) are reserved: two peers may not
/// spell one the same way, and no model ID, alias, selector or profile pin may
/// use one (llama-swap's rules). Bare peer names may be shadowed by local
/// names (the local model wins, as in llama-swap).
pub(crate) fn check_peer_names(
    peers: &[PeerConfig],
    path: &KeyPath,
    names: &NameTable,
    selectors: &[SelectorConfig],
    profiles: &[ProfileConfig],
    cx: &mut Diagnostics,
) {
    let mut seen: Vec<(String, KeyPath)> = Vec::new();
    for peer in peers {
        for (i, model) in peer.models.iter().enumerate() {
            let name = qualified_name(&peer.id, model);
            let model_path = path.key(&peer.id).key("models").index(i);
            if let Some((_, first)) = seen.iter().find(|(n, _)| *n == name) {
                cx.error(
                    model_path,
                    Reason::PeerNameAmbiguous {
                        name,
                        other: first.clone(),
                    },
                );
                continue;
            }
            let taken = match names.local().resolve(&name) {
                Some(id) if id == name => Some("a model ID".to_owned()),
                Some(id) => Some(format!("an alias of model {id:?}")),
                None if selectors.iter().any(|s| s.id == name) => Some("a selector".to_owned()),
                None => profiles
                    .iter()
                    .find(|p| p.pin(&name).is_some())
                    .map(|p| format!("a pin of profile {:?}", p.name)),
            };
            if let Some(taken) = taken {
                cx.error(model_path.clone(), Reason::PeerNameTaken { name, taken });
            }
            seen.push((qualified_name(&peer.id, model), model_path));
        }
    }
}
