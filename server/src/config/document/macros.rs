//! Macro expansion: user macros (global and per model), `${MODEL_ID}`, and the
//! placeholders resolved later (`${PORT}` once ports are allocated, `${PID}` by
//! the supervisor when it runs `cmdStop`, `${GPU}` by the supervisor when the
//! memory router has placed the model). `${env.NAME}` has been substituted
//! before (`env.rs`).
//!
//! Expansion works on values and follows llama-swap's order rule: a model's
//! macros are `[MODEL_ID, globals..., model-only...]`, a model macro replacing
//! the global of the same name in place, and llama-swap substitutes them from
//! the last to the first, so a macro may use only macros declared before it.
//! Using one declared later is an error here (llama-swap leaves it unexpanded,
//! then fails on the leftover `${name}`); a macro using itself is refused where
//! it is declared.

use std::collections::HashMap;

use super::env::EnvLookup;
use super::error::{KeyPath, Reason};
use super::fields::Diagnostics;
use super::node::Node;

/// The placeholder left in `cmd`/`proxy`/... until ports are allocated.
pub(crate) const PORT_PLACEHOLDER: &str = "${PORT}";

/// The placeholder `${GPU}` leaves in `cmd`, `cmdStop` and `env` until the
/// memory router has placed a model (the supervisor fills it in).
pub(crate) const GPU_PLACEHOLDER: &str = "${GPU}";

const RESERVED: [&str; 3] = ["PORT", "MODEL_ID", "PID"];
const MAX_MACRO_NAME: usize = 63;
/// Most bytes expansion may add to one value. Guards against macros that double in
/// size at every level ("billion laughs"): 40 one-line macros would otherwise ask
/// for a terabyte. Checked on the computed size before anything is expanded.
const MAX_EXPANDED_LEN: usize = 1 << 20;
/// Most bytes expansion may add to a whole configuration: a 1 MiB macro used
/// in thousands of values would otherwise ask for gigabytes, each value under
/// [`MAX_EXPANDED_LEN`]. A real configuration adds kilobytes per model.
const MAX_EXPANDED_TOTAL: usize = 256 << 20;

/// Each macro's expansion within one value, so that a macro used twice (or a
/// chain of macros each using the one before twice, which adds nothing when
/// they are empty) is expanded once, not once per use.
type Memo = HashMap<String, Result<Node, Reason>>;

/// Reads and validates a `macros` block: names, scalar values, order kept.
pub(crate) fn read_macros(
    node: &Node,
    path: &KeyPath,
    cx: &mut Diagnostics,
) -> Vec<(String, Node)> {
    let entries = match node {
        Node::Map(entries) => entries,
        Node::Null => return Vec::new(),
        other => {
            cx.wrong_type::<()>(path, "a map of macro names to values", other);
            return Vec::new();
        }
    };
    let mut out = Vec::with_capacity(entries.len());
    for (name, value) in entries {
        let entry_path = path.key(name);
        if RESERVED.contains(&name.as_str()) {
            cx.error(entry_path, Reason::ReservedMacroName { name: name.clone() });
            continue;
        }
        let valid_name = !name.is_empty()
            && name.len() <= MAX_MACRO_NAME
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid_name {
            cx.error(entry_path, Reason::InvalidMacroName { name: name.clone() });
            continue;
        }
        if !value.is_scalar() {
            cx.error(
                entry_path,
                Reason::MacroNotScalar {
                    found: value.kind(),
                },
            );
            continue;
        }
        if let Node::Str(text) = value
            && text.contains(&format!("${{{name}}}"))
        {
            cx.error(
                entry_path,
                Reason::MacroSelfReference { name: name.clone() },
            );
            continue;
        }
        out.push((name.clone(), value.clone()));
    }
    out
}

/// Everything a value can refer to at one place in the document.
pub(crate) struct Scope<'a> {
    pub(crate) env: EnvLookup<'a>,
    pub(crate) global_macros: &'a [(String, Node)],
    /// Empty outside `models`.
    pub(crate) model_macros: &'a [(String, Node)],
    /// `Some` inside `models.<id>`, where `${MODEL_ID}` and `${PORT}` exist.
    pub(crate) model_id: Option<&'a str>,
}

enum Piece<'s> {
    Text(&'s str),
    Ref(&'s str),
}

/// Splits a string into literal text and `${name}` references. A `${` with no closing
/// brace is literal text.
fn pieces(s: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            break;
        };
        if start > 0 {
            out.push(Piece::Text(&rest[..start]));
        }
        out.push(Piece::Ref(&after[..end]));
        rest = &after[end + 1..];
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest));
    }
    out
}

/// No limit on which macros a value may use (it is not a macro itself).
const ANY: usize = usize::MAX;

impl Scope<'_> {
    /// Expands every string inside `node`. Problems are reported at the path of the
    /// string they occur in; the unexpanded string is kept so reading can go on.
    /// `${PID}` is accepted only when `pid_allowed` (the `cmdStop` value).
    pub(crate) fn expand(
        &self,
        node: &Node,
        path: &KeyPath,
        pid_allowed: bool,
        cx: &mut Diagnostics,
    ) -> Node {
        match node {
            Node::Str(s) => {
                if s.contains("${") {
                    let adds = self
                        .expanded_len(s, pid_allowed, None, &mut HashMap::new())
                        .map(|n| n.saturating_sub(s.len() as u64));
                    // Other problems are reported by the expansion itself.
                    if let Ok(adds) = adds {
                        if adds > MAX_EXPANDED_LEN as u64 {
                            cx.error(
                                path.clone(),
                                Reason::ExpansionTooLarge {
                                    adds,
                                    limit: MAX_EXPANDED_LEN,
                                },
                            );
                            return node.clone();
                        }
                        let total = cx.expanded.saturating_add(adds);
                        if total > MAX_EXPANDED_TOTAL as u64 {
                            cx.error(
                                path.clone(),
                                Reason::ExpansionBudget {
                                    limit: MAX_EXPANDED_TOTAL,
                                },
                            );
                            return node.clone();
                        }
                        cx.expanded = total;
                    }
                }
                match self.expand_str(s, pid_allowed, None, &mut Memo::new()) {
                    Ok(expanded) => expanded,
                    Err(reason) => {
                        cx.error(path.clone(), reason);
                        node.clone()
                    }
                }
            }
            Node::Seq(items) => Node::Seq(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| self.expand(item, &path.index(i), pid_allowed, cx))
                    .collect(),
            ),
            Node::Map(entries) => Node::Map(
                entries
                    .iter()
                    .map(|(k, v)| (k.clone(), self.expand(v, &path.key(k), pid_allowed, cx)))
                    .collect(),
            ),
            Node::Null | Node::Bool(..) | Node::Int(..) | Node::Float(..) => node.clone(),
        }
    }

    /// A macro's place in the order llama-swap expands in, and its value.
    /// Inside a model, place 0 is `MODEL_ID`; globals keep their places (a model
    /// macro of the same name takes over the global's place); model-only macros
    /// follow.
    fn lookup(&self, name: &str) -> Option<(usize, &Node)> {
        let first = usize::from(self.model_id.is_some());
        if let Some(i) = self.global_macros.iter().position(|(k, _)| k == name) {
            let value = self
                .model_macros
                .iter()
                .find(|(k, _)| k == name)
                .map_or(&self.global_macros[i].1, |(_, v)| v);
            return Some((first + i, value));
        }
        let mut place = first + self.global_macros.len();
        for (key, value) in self.model_macros {
            if self.global_macros.iter().any(|(g, _)| g == key) {
                continue;
            }
            if key == name {
                return Some((place, value));
            }
            place += 1;
        }
        None
    }

    /// Expands one string. A string that is exactly one reference takes the type of
    /// what it refers to (`ttl: ${default_ttl}` stays an integer). `within` is the
    /// macro whose value this is (with its place): it may only use macros placed
    /// before it.
    fn expand_str(
        &self,
        s: &str,
        pid_allowed: bool,
        within: Option<(&str, usize)>,
        memo: &mut Memo,
    ) -> Result<Node, Reason> {
        let pieces = pieces(s);
        if let [Piece::Ref(name)] = pieces.as_slice() {
            return self.resolve(name, pid_allowed, within, memo);
        }
        let mut out = String::with_capacity(s.len());
        for piece in &pieces {
            match piece {
                Piece::Text(text) => out.push_str(text),
                Piece::Ref(name) => {
                    let value = self.resolve(name, pid_allowed, within, memo)?;
                    // Macros are scalars by construction, so there is always text.
                    out.push_str(&value.scalar_text().unwrap_or_default());
                }
            }
        }
        Ok(Node::Str(out))
    }

    /// The length `s` expands to, computed without expanding: each macro's size is
    /// computed once (`sizes`), so the work is linear in the macros' text however
    /// large the result would be. Saturates instead of overflowing. The order
    /// rule (`within`) applies as in expansion, which also rules out loops.
    fn expanded_len(
        &self,
        s: &str,
        pid_allowed: bool,
        within: Option<(&str, usize)>,
        sizes: &mut HashMap<String, u64>,
    ) -> Result<u64, Reason> {
        let mut total: u64 = 0;
        for piece in pieces(s) {
            let len = match piece {
                Piece::Text(text) => text.len() as u64,
                Piece::Ref(name) => self.resolved_len(name, pid_allowed, within, sizes)?,
            };
            total = total.saturating_add(len);
        }
        Ok(total)
    }

    fn resolved_len(
        &self,
        name: &str,
        pid_allowed: bool,
        within: Option<(&str, usize)>,
        sizes: &mut HashMap<String, u64>,
    ) -> Result<u64, Reason> {
        let is_user_macro = !name.starts_with("env.") && !RESERVED.contains(&name);
        if is_user_macro && let Some((place, Node::Str(text))) = self.lookup(name) {
            if place >= within.map_or(ANY, |(_, limit)| limit) {
                return Err(Reason::MacroDeclaredLater {
                    user: within.map(|(user, _)| user.to_owned()).unwrap_or_default(),
                    name: name.to_owned(),
                });
            }
            // A macro expands the same wherever it is used (its place bounds it).
            if let Some(size) = sizes.get(name) {
                return Ok(*size);
            }
            let size = self.expanded_len(text, pid_allowed, Some((name, place)), sizes)?;
            sizes.insert(name.to_owned(), size);
            return Ok(size);
        }
        // Built-ins, environment variables and scalar macros: cheap to resolve.
        let value = self.resolve(name, pid_allowed, within, &mut Memo::new())?;
        Ok(value.scalar_text().map_or(0, |t| t.len() as u64))
    }

    fn resolve(
        &self,
        name: &str,
        pid_allowed: bool,
        within: Option<(&str, usize)>,
        memo: &mut Memo,
    ) -> Result<Node, Reason> {
        if let Some(var) = name.strip_prefix("env.") {
            return match (self.env)(var) {
                Some(value) => Ok(Node::from_plain_text(&value)),
                None => Err(Reason::EnvNotSet {
                    name: var.to_owned(),
                }),
            };
        }
        match name {
            "MODEL_ID" => {
                return self.model_id.map(|id| Node::Str(id.to_owned())).ok_or(
                    Reason::MacroNotAvailable {
                        name: "MODEL_ID",
                        where_available: "inside models",
                    },
                );
            }
            "PORT" if self.model_id.is_some() => return Ok(Node::Str(PORT_PLACEHOLDER.to_owned())),
            "PORT" => {
                return Err(Reason::MacroNotAvailable {
                    name: "PORT",
                    where_available: "inside models",
                });
            }
            "PID" if pid_allowed => return Ok(Node::Str("${PID}".to_owned())),
            "PID" => {
                return Err(Reason::MacroNotAvailable {
                    name: "PID",
                    where_available: "in cmdStop",
                });
            }
            _ => {}
        }
        let Some((place, value)) = self.lookup(name) else {
            // `${GPU}` is the memory router's placement, filled in at each
            // start; a user macro of that name wins (llama-swap has no such
            // built-in).
            if name == "GPU" && self.model_id.is_some() {
                return Ok(Node::Str(GPU_PLACEHOLDER.to_owned()));
            }
            return Err(Reason::UnknownMacro {
                name: name.to_owned(),
            });
        };
        let limit = within.map_or(ANY, |(_, place)| place);
        if place >= limit {
            return Err(Reason::MacroDeclaredLater {
                user: within.map(|(user, _)| user.to_owned()).unwrap_or_default(),
                name: name.to_owned(),
            });
        }
        match value {
            // A macro expands the same wherever it is used (its place bounds it).
            Node::Str(text) => {
                if let Some(done) = memo.get(name) {
                    return done.clone();
                }
                let done = self.expand_str(text, pid_allowed, Some((name, place)), memo);
                memo.insert(name.to_owned(), done.clone());
                done
            }
            other => Ok(other.clone()),
        }
    }
}

/// Replaces `${PORT}` everywhere in `node` with the allocated port; a value that is
/// exactly `${PORT}` becomes an integer.
pub(crate) fn substitute_port(node: &mut Node, port: u16) {
    match node {
        Node::Str(s) if s == PORT_PLACEHOLDER => *node = Node::int(i64::from(port)),
        Node::Str(s) => {
            if s.contains(PORT_PLACEHOLDER) {
                *s = s.replace(PORT_PLACEHOLDER, &port.to_string());
            }
        }
        Node::Seq(items) => items
            .iter_mut()
            .for_each(|item| substitute_port(item, port)),
        Node::Map(entries) => entries
            .iter_mut()
            .for_each(|(_, v)| substitute_port(v, port)),
        Node::Null | Node::Bool(..) | Node::Int(..) | Node::Float(..) => {}
    }
}

/// Paths of every string under `node` that still contains `${PORT}`.
pub(crate) fn port_uses(node: &Node, path: &KeyPath, out: &mut Vec<KeyPath>) {
    match node {
        Node::Str(s) if s.contains(PORT_PLACEHOLDER) => out.push(path.clone()),
        Node::Seq(items) => {
            for (i, item) in items.iter().enumerate() {
                port_uses(item, &path.index(i), out);
            }
        }
        Node::Map(entries) => {
            for (k, v) in entries {
                port_uses(v, &path.key(k), out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn scope<'a>(globals: &'a [(String, Node)], model: &'a [(String, Node)]) -> Scope<'a> {
        Scope {
            env: &no_env,
            global_macros: globals,
            model_macros: model,
            model_id: Some("m1"),
        }
    }

    fn s(v: &str) -> Node {
        Node::Str(v.to_owned())
    }

    #[test]
    fn model_macro_overrides_global_and_may_use_earlier_ones() {
        let globals = vec![
            ("bin".to_owned(), s("/usr/bin/llama-server")),
            ("ctx".to_owned(), Node::int(4096)),
        ];
        let model = vec![
            ("ctx".to_owned(), Node::int(8192)),
            ("run".to_owned(), s("${bin} -c ${ctx}")),
        ];
        let mut cx = Diagnostics::default();
        let out = scope(&globals, &model).expand(
            &s("${run} --alias ${MODEL_ID}"),
            &KeyPath::root(),
            false,
            &mut cx,
        );
        assert!(cx.issues.is_empty(), "{:?}", cx.issues);
        assert_eq!(out, s("/usr/bin/llama-server -c 8192 --alias m1"));
    }

    #[test]
    fn whole_value_reference_keeps_the_macro_type() {
        let globals = vec![("ttl".to_owned(), Node::int(300))];
        let mut cx = Diagnostics::default();
        let out = scope(&globals, &[]).expand(&s("${ttl}"), &KeyPath::root(), false, &mut cx);
        assert_eq!(out, Node::int(300));
    }

    #[test]
    fn a_macro_may_not_use_one_declared_after_it() {
        let globals = vec![("a".to_owned(), s("x${b}")), ("b".to_owned(), s("y"))];
        let mut cx = Diagnostics::default();
        scope(&globals, &[]).expand(&s("${a}"), &KeyPath::from_keys(["cmd"]), false, &mut cx);
        assert_eq!(
            cx.issues[0].reason,
            Reason::MacroDeclaredLater {
                user: "a".into(),
                name: "b".into()
            }
        );
    }

    #[test]
    fn a_global_macro_may_not_use_a_model_only_macro_but_may_use_model_id() {
        let globals = vec![("run".to_owned(), s("srv ${local} --alias ${MODEL_ID}"))];
        let model = vec![("local".to_owned(), s("x"))];
        let mut cx = Diagnostics::default();
        scope(&globals, &model).expand(&s("${run}"), &KeyPath::root(), false, &mut cx);
        assert!(matches!(
            cx.issues[0].reason,
            Reason::MacroDeclaredLater { .. }
        ));
        let globals = vec![("run".to_owned(), s("srv --alias ${MODEL_ID}"))];
        let mut cx = Diagnostics::default();
        let out = scope(&globals, &model).expand(&s("${run}"), &KeyPath::root(), false, &mut cx);
        assert!(cx.issues.is_empty(), "{:?}", cx.issues);
        assert_eq!(out, s("srv --alias m1"));
    }

    #[test]
    fn a_model_macro_overriding_a_global_takes_its_place() {
        // llama-swap: [MODEL_ID, tag(model value), msg]; msg uses tag, placed before it.
        let globals = vec![
            ("tag".to_owned(), s("global")),
            ("msg".to_owned(), s("value-${tag}")),
        ];
        let model = vec![("tag".to_owned(), s("model-level"))];
        let mut cx = Diagnostics::default();
        let out =
            scope(&globals, &model).expand(&s("echo ${msg}"), &KeyPath::root(), false, &mut cx);
        assert!(cx.issues.is_empty(), "{:?}", cx.issues);
        assert_eq!(out, s("echo value-model-level"));
    }

    #[test]
    fn exponential_macros_are_cut_off() {
        let mut globals = vec![("m0".to_owned(), s("0123456789abcdef"))];
        for i in 1..40 {
            globals.push((
                format!("m{i}"),
                s(&format!("${{m{}}}${{m{}}}", i - 1, i - 1)),
            ));
        }
        let mut cx = Diagnostics::default();
        scope(&globals, &[]).expand(&s("${m39}"), &KeyPath::root(), false, &mut cx);
        assert!(
            matches!(
                cx.issues[0].reason,
                Reason::ExpansionTooLarge { adds, limit: MAX_EXPANDED_LEN } if adds > 1 << 40
            ),
            "{:?}",
            cx.issues
        );
    }

    #[test]
    fn expansion_over_the_whole_load_is_bounded() {
        let globals = vec![("m".to_owned(), s("0123456789"))];
        let mut cx = Diagnostics {
            expanded: MAX_EXPANDED_TOTAL as u64 - 8,
            ..Diagnostics::default()
        };
        let sc = scope(&globals, &[]);
        assert_eq!(
            sc.expand(&s("${m}"), &KeyPath::root(), false, &mut cx),
            s("0123456789")
        );
        assert!(cx.issues.is_empty(), "{:?}", cx.issues);
        // Each use adds 6 bytes (10 for the 4 of `${m}`): a second one passes
        // the budget and is refused, the value kept as written.
        let path = KeyPath::from_keys(["models", "b", "cmd"]);
        assert_eq!(sc.expand(&s("x ${m}"), &path, false, &mut cx), s("x ${m}"));
        assert_eq!(cx.issues.len(), 1);
        assert_eq!(cx.issues[0].path, path);
        assert!(matches!(
            cx.issues[0].reason,
            Reason::ExpansionBudget {
                limit: MAX_EXPANDED_TOTAL
            }
        ));
    }

    #[test]
    fn a_long_plain_value_is_not_a_macro_expansion() {
        let long = "x".repeat(4 * MAX_EXPANDED_LEN);
        let globals = vec![("flag".to_owned(), s("--verbose"))];
        let mut cx = Diagnostics::default();
        let out = scope(&globals, &[]).expand(&s(&long), &KeyPath::root(), false, &mut cx);
        assert_eq!(out, s(&long));
        let with_macro = format!("{long} ${{flag}}");
        let out = scope(&globals, &[]).expand(&s(&with_macro), &KeyPath::root(), false, &mut cx);
        assert!(cx.issues.is_empty(), "{:?}", cx.issues);
        assert_eq!(out, s(&format!("{long} --verbose")));
    }

    #[test]
    fn the_size_of_a_doubling_chain_is_computed_without_expanding_it() {
        // 2^63 bytes: expanding it would never end; computing its size is instant.
        let mut globals = vec![("m0".to_owned(), s("x"))];
        for i in 1..64 {
            globals.push((
                format!("m{i}"),
                s(&format!("${{m{}}}${{m{}}}", i - 1, i - 1)),
            ));
        }
        let sc = scope(&globals, &[]);
        let size = sc
            .expanded_len("${m63}", false, None, &mut HashMap::new())
            .unwrap();
        assert_eq!(size, 1 << 63);
        // A loop needs a reference to a later macro, which the order rule refuses.
        let cycle = vec![("a".to_owned(), s("${b}")), ("b".to_owned(), s("${a}"))];
        let err = scope(&cycle, &[])
            .expanded_len("${a}", false, None, &mut HashMap::new())
            .unwrap_err();
        assert!(matches!(err, Reason::MacroDeclaredLater { .. }));
    }

    #[test]
    fn pid_is_kept_only_where_allowed() {
        let mut cx = Diagnostics::default();
        let sc = scope(&[], &[]);
        assert_eq!(
            sc.expand(&s("kill ${PID}"), &KeyPath::root(), true, &mut cx),
            s("kill ${PID}")
        );
        assert!(cx.issues.is_empty());
        sc.expand(&s("kill ${PID}"), &KeyPath::root(), false, &mut cx);
        assert!(matches!(
            cx.issues[0].reason,
            Reason::MacroNotAvailable { name: "PID", .. }
        ));
    }

    #[test]
    fn unterminated_reference_is_literal_text() {
        let mut cx = Diagnostics::default();
        let out = scope(&[], &[]).expand(&s("echo ${oops"), &KeyPath::root(), false, &mut cx);
        assert_eq!(out, s("echo ${oops"));
        assert!(cx.issues.is_empty());
    }

    #[test]
    fn port_substitution_types_a_whole_value() {
        let mut node = Node::Map(vec![
            ("cmd".to_owned(), s("srv --port ${PORT}")),
            ("meta".to_owned(), s("${PORT}")),
        ]);
        substitute_port(&mut node, 5801);
        assert_eq!(node.get("cmd"), Some(&s("srv --port 5801")));
        assert_eq!(node.get("meta"), Some(&Node::int(5801)));
    }
}
