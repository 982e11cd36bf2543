//! `routing.router.settings.matrix` (and the legacy top-level `matrix`): read the
//! YAML, then compile it once so every problem is reported with its key path.

use crate::policy::matrix::{Matrix, MatrixError, MatrixKey, MatrixSet, MatrixSettings};

use super::document::error::{KeyPath, Reason};
use super::document::fields::{Diagnostics, Fields};
use super::document::node::Node;
use crate::names::NameTable;

/// Reads and checks a matrix. Returns the settings with the compiled matrix (the
/// selectors check that spillover targets can run together), or `None` after
/// reporting what is wrong.
pub(crate) fn read_matrix(
    node: &Node,
    path: &KeyPath,
    names: &NameTable,
    cx: &mut Diagnostics,
) -> Option<(MatrixSettings, Matrix)> {
    let mut fields = Fields::new(node, path.clone(), cx)?;
    let issues_before = cx.issues.len();
    let vars = match fields.take("vars") {
        Some((n, p)) => string_map(n, &p, "a map of var names to model IDs", cx),
        None => Vec::new(),
    };
    let evict_costs = match fields.take("evict_costs") {
        Some((n, p)) => cost_map(n, &p, cx),
        None => Vec::new(),
    };
    let sets = match fields.take("sets") {
        Some((n, p)) => string_map(n, &p, "a map of set names to set expressions", cx),
        None => Vec::new(),
    };
    fields.finish(cx);
    if cx.issues.len() > issues_before {
        return None;
    }
    let settings = MatrixSettings {
        vars,
        evict_costs,
        sets: sets
            .into_iter()
            .map(|(name, expr)| MatrixSet { name, expr })
            .collect(),
    };
    match Matrix::compile(names.local().ids(), &settings, |name| {
        names.local().resolve(name).map(str::to_owned)
    }) {
        Ok(matrix) => Some((settings, matrix)),
        Err(errors) => {
            for error in errors {
                cx.error(key_of(path, &error), Reason::Matrix(error));
            }
            None
        }
    }
}

/// A map of names to strings, in file order.
fn string_map(
    node: &Node,
    path: &KeyPath,
    expected: &'static str,
    cx: &mut Diagnostics,
) -> Vec<(String, String)> {
    let Node::Map(entries) = node else {
        return cx.wrong_type(path, expected, node).unwrap_or_default();
    };
    entries
        .iter()
        .filter_map(|(key, value)| {
            let text = cx.string(value, &path.key(key))?;
            Some((key.clone(), text))
        })
        .collect()
}

fn cost_map(node: &Node, path: &KeyPath, cx: &mut Diagnostics) -> Vec<(String, u32)> {
    let Node::Map(entries) = node else {
        return cx
            .wrong_type(
                path,
                "a map of var or model names to positive integers",
                node,
            )
            .unwrap_or_default();
    };
    entries
        .iter()
        .filter_map(|(key, value)| {
            let cost = cx.int_range(value, &path.key(key), 1, i64::from(u32::MAX))?;
            Some((key.clone(), u32::try_from(cost).ok()?))
        })
        .collect()
}

/// The YAML key a compile error is about.
fn key_of(path: &KeyPath, error: &MatrixError) -> KeyPath {
    match error.location() {
        MatrixKey::Set(name) => path.key("sets").key(name),
        MatrixKey::Var(name) => path.key("vars").key(name),
        MatrixKey::Cost(name) => path.key("evict_costs").key(name),
        MatrixKey::Sets => path.key("sets"),
    }
}
