//! `selectors`: virtual model names that pick one of their targets per request.

use super::document::error::{KeyPath, Reason, WarningKind};
use super::document::fields::{Diagnostics, Fields};
use super::document::node::Node;
use super::resolved::names::{DEFAULT_SPILLOVER, SelectorConfig, SelectorStrategy};
use super::resolved::types::GroupConfig;
use crate::names::{Lead, NameTable};
use crate::policy::matrix::Matrix;

/// Reads `selectors`. `matrix` is the compiled matrix when the matrix router is
/// in use (spillover targets must fit one combination), else `groups` decide.
pub(crate) fn read_selectors(
    node: &Node,
    path: &KeyPath,
    names: &NameTable,
    groups: &[GroupConfig],
    matrix: Option<&Matrix>,
    cx: &mut Diagnostics,
) -> Vec<SelectorConfig> {
    let Node::Map(entries) = node else {
        return cx
            .wrong_type(path, "a map of selector IDs to selector settings", node)
            .unwrap_or_default();
    };
    let ids: Vec<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
    let mut selectors = Vec::with_capacity(entries.len());
    for (id, value) in entries {
        let selector_path = path.key(id);
        if id.trim().is_empty() {
            cx.error(selector_path, Reason::Empty);
            continue;
        }
        if let Some(model) = names.local().resolve(id) {
            let taken = if model == id {
                "a model ID".to_owned()
            } else {
                format!("an alias of model {model:?}")
            };
            cx.error(selector_path, Reason::NameTaken { taken });
            continue;
        }
        let context = Context {
            names,
            selector_ids: &ids,
            groups,
            matrix,
        };
        if let Some(selector) = read_selector(id, value, selector_path, &context, cx) {
            selectors.push(selector);
        }
    }
    selectors
}

struct Context<'a> {
    names: &'a NameTable,
    selector_ids: &'a [&'a str],
    groups: &'a [GroupConfig],
    matrix: Option<&'a Matrix>,
}

fn read_selector(
    id: &str,
    node: &Node,
    path: KeyPath,
    context: &Context<'_>,
    cx: &mut Diagnostics,
) -> Option<SelectorConfig> {
    let issues_before = cx.issues.len();
    let mut fields = Fields::new(node, path.clone(), cx)?;
    let strategy = match fields.take("strategy") {
        Some((n, p)) => match cx.word(n, &p, &["pin", "warm", "spillover"]) {
            Some("pin") => Some(SelectorStrategy::Pin),
            Some("warm") => Some(SelectorStrategy::Warm),
            Some(_) => Some(SelectorStrategy::Spillover),
            None => None,
        },
        None => {
            cx.error(path.key("strategy"), Reason::Missing);
            None
        }
    };
    let mut targets: Vec<String> = Vec::new();
    let mut target_ids: Vec<String> = Vec::new();
    match fields.take("targets") {
        None => cx.error(path.key("targets"), Reason::Missing),
        Some((n, p)) => {
            if let Some(list) = cx.string_list(n, &p) {
                if list.is_empty() {
                    cx.error(p.clone(), Reason::Empty);
                }
                for (target, target_path) in list {
                    if context.selector_ids.contains(&target.as_str()) {
                        cx.error(target_path, Reason::SelectorChain { selector: target });
                        continue;
                    }
                    let model = match context.names.target(&target) {
                        Some(Lead::Model { id, .. }) => id.to_owned(),
                        // A warm selector goes by states only local models have.
                        Some(Lead::Peer(_)) if strategy == Some(SelectorStrategy::Warm) => {
                            cx.error(target_path, Reason::WarmPeerTarget { name: target });
                            continue;
                        }
                        Some(lead) => context.names.canonical_name(lead),
                        None => {
                            cx.error(target_path, Reason::UnknownTarget { name: target });
                            continue;
                        }
                    };
                    let duplicate = target_ids.iter().position(|t| *t == model);
                    if let (Some(SelectorStrategy::Spillover), Some(first)) = (strategy, duplicate)
                    {
                        cx.error(
                            target_path,
                            Reason::DuplicateTarget {
                                model,
                                first: targets[first].clone(),
                            },
                        );
                        continue;
                    }
                    target_ids.push(model);
                    targets.push(target);
                }
            }
        }
    }
    let mut spillover = DEFAULT_SPILLOVER;
    if let Some((settings_node, settings_path)) = fields.take("settings")
        && let Some(mut settings) = Fields::new(settings_node, settings_path, cx)
    {
        if let Some((n, p)) = settings.take("spillover") {
            if let Some(value) = cx.int_min(n, &p, 1) {
                spillover = usize::try_from(value).unwrap_or(usize::MAX);
            }
            if strategy.is_some_and(|s| s != SelectorStrategy::Spillover) {
                cx.warn(
                    p,
                    WarningKind::NoEffect {
                        because: "the strategy is not spillover",
                    },
                );
            }
        }
        settings.finish(cx);
    }
    let text = |fields: &mut Fields<'_>, key: &str, cx: &mut Diagnostics| {
        fields
            .take(key)
            .and_then(|(n, p)| cx.string(n, &p))
            .filter(|s| !s.trim().is_empty())
    };
    let name = text(&mut fields, "name", cx);
    let description = text(&mut fields, "description", cx);
    let unlisted = fields
        .take("unlisted")
        .and_then(|(n, p)| cx.bool(n, &p))
        .unwrap_or(false);
    let metadata = fields.take("metadata").map(|(n, _)| n.to_json());
    fields.finish(cx);

    let strategy = strategy?;
    if cx.issues.len() > issues_before {
        return None;
    }
    if strategy == SelectorStrategy::Spillover
        && let Err(why) = can_run_together(&target_ids, context)
    {
        cx.error(path.key("targets"), Reason::SpilloverApart { why });
        return None;
    }
    Some(SelectorConfig {
        id: id.to_owned(),
        strategy,
        targets,
        target_ids,
        spillover,
        name,
        description,
        unlisted,
        metadata,
    })
}

/// Spillover sends concurrent requests to several targets at once, so they must
/// be able to run side by side: in one matrix combination, or in one group with
/// `swap: false` (with groups, llama-swap's rule).
fn can_run_together(models: &[String], context: &Context<'_>) -> Result<(), &'static str> {
    // Peer models run elsewhere: only local targets compete for this host.
    let models: Vec<String> = models
        .iter()
        .filter(|m| context.names.local().resolve(m).is_some())
        .cloned()
        .collect();
    let models = models.as_slice();
    if models.len() <= 1 {
        return Ok(());
    }
    if let Some(matrix) = context.matrix {
        return if matrix.can_coexist(models) {
            Ok(())
        } else {
            Err("they do not all appear together in one combination of a matrix set")
        };
    }
    let group_of = |model: &str| {
        context
            .groups
            .iter()
            .find(|g| g.members.iter().any(|m| m == model))
    };
    let Some(group) = group_of(&models[0]) else {
        return Err("they must all be members of one group with swap: false");
    };
    if group.swap {
        return Err("they must all be members of one group with swap: false");
    }
    if models[1..]
        .iter()
        .all(|m| group_of(m).is_some_and(|g| g.name == group.name))
    {
        Ok(())
    } else {
        Err("they must all be members of one group with swap: false")
    }
}
