//! `profiles`: named sets of model-name rewrites, one of which may be switched on
//! at run time (`PUT /api/profiles/active`).

use super::document::error::{KeyPath, Reason};
use super::document::fields::{Diagnostics, Fields};
use super::document::node::Node;
use super::resolved::names::{Pin, ProfileConfig};
use crate::names::NameTable;

/// Reads `profiles`. Pin targets may be models, aliases, peer models or `selector_ids`, never
/// other pins (pins do not chain).
pub(crate) fn read_profiles(
    node: &Node,
    path: &KeyPath,
    names: &NameTable,
    selector_ids: &[&str],
    cx: &mut Diagnostics,
) -> Vec<ProfileConfig> {
    let Node::Map(entries) = node else {
        return cx
            .wrong_type(path, "a map of profile names to profiles", node)
            .unwrap_or_default();
    };
    let mut profiles = Vec::with_capacity(entries.len());
    for (name, value) in entries {
        let profile_path = path.key(name);
        if name.trim().is_empty() {
            cx.error(profile_path, Reason::Empty);
            continue;
        }
        if matches!(value, Node::Seq(_)) {
            cx.error(profile_path, Reason::LegacyProfileList);
            continue;
        }
        let issues_before = cx.issues.len();
        let Some(mut fields) = Fields::new(value, profile_path.clone(), cx) else {
            continue;
        };
        let description = fields
            .take("description")
            .and_then(|(n, p)| cx.string(n, &p))
            .filter(|s| !s.trim().is_empty());
        let pins = match fields.take("pins") {
            Some((n, p)) => read_pins(n, &p, names, selector_ids, cx),
            None => {
                cx.error(profile_path.key("pins"), Reason::Missing);
                Vec::new()
            }
        };
        fields.finish(cx);
        if cx.issues.len() == issues_before {
            profiles.push(ProfileConfig {
                name: name.clone(),
                description,
                pins,
            });
        }
    }
    profiles
}

fn read_pins(
    node: &Node,
    path: &KeyPath,
    names: &NameTable,
    selector_ids: &[&str],
    cx: &mut Diagnostics,
) -> Vec<Pin> {
    let Node::Map(entries) = node else {
        return cx
            .wrong_type(
                path,
                "a map of names to model IDs, aliases or selectors",
                node,
            )
            .unwrap_or_default();
    };
    if entries.is_empty() {
        cx.error(path.clone(), Reason::Empty);
    }
    let mut pins = Vec::with_capacity(entries.len());
    for (name, value) in entries {
        let pin_path = path.key(name);
        if name.trim().is_empty() {
            cx.error(pin_path, Reason::Empty);
            continue;
        }
        let target = match value {
            Node::Null => None,
            other => cx.string(other, &pin_path).filter(|t| !t.is_empty()),
        };
        if let Some(target) = &target
            && names.target(target).is_none()
            && !selector_ids.contains(&target.as_str())
        {
            cx.error(
                pin_path,
                Reason::UnknownPinTarget {
                    name: target.clone(),
                },
            );
            continue;
        }
        pins.push(Pin {
            name: name.clone(),
            target,
        });
    }
    pins
}
