//! `${env.NAME}`: environment variables, substituted in the whole document
//! before anything else looks at it.
//!
//! As in llama-swap, every reference counts wherever it is (an unused macro,
//! a key nobody reads, a map key): a variable that is not set, or whose value
//! holds a line break or NUL, fails the load. References in YAML comments do
//! not count (the parser has already dropped comments).
//!
//! Substitution works on the parsed tree, so values arrive exactly as set: a
//! value that is exactly one reference is typed like a plain YAML scalar
//! (`ttl: ${env.TTL}` with `TTL=300` is the integer 300), anything else is
//! text. Only a document that does not parse before substitution (a flow
//! list like `[${env.KEY}]`, where `{` opens a flow map) is substituted as
//! text first, the way llama-swap always does it.

use super::error::{Issue, KeyPath, Reason};
use super::node::Node;

/// How the server looks up environment variables; injected so tests never touch the
/// process environment.
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Where a reference starts.
const OPEN: &str = "${env.";

/// A variable name llama-swap recognises: `[A-Za-z_][A-Za-z0-9_]*`.
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// One `${env.NAME}` inside `text`: byte range and name.
fn references(text: &str) -> Vec<(usize, usize, &str)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(start) = text[from..].find(OPEN).map(|i| i + from) {
        let name_start = start + OPEN.len();
        let Some(len) = text[name_start..].find('}') else {
            break;
        };
        let name = &text[name_start..name_start + len];
        let end = name_start + len + 1;
        if valid_name(name) {
            out.push((start, end, name));
            from = end;
        } else {
            from = name_start;
        }
    }
    out
}

/// The value of `name`, refused when it would break the document apart.
fn value_of(name: &str, env: EnvLookup<'_>) -> Result<String, Reason> {
    let value = (env)(name).ok_or_else(|| Reason::EnvNotSet {
        name: name.to_owned(),
    })?;
    if value.contains(['\n', '\r', '\0']) {
        return Err(Reason::EnvLineBreak {
            name: name.to_owned(),
        });
    }
    Ok(value)
}

/// `text` with every reference replaced; `None` (and issues) when one fails.
fn substitute_text(
    text: &str,
    env: EnvLookup<'_>,
    path: &KeyPath,
    issues: &mut Vec<Issue>,
) -> Option<String> {
    let refs = references(text);
    if refs.is_empty() {
        return Some(text.to_owned());
    }
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    let mut ok = true;
    for (start, end, name) in refs {
        out.push_str(&text[last..start]);
        match value_of(name, env) {
            Ok(value) => out.push_str(&value),
            Err(reason) => {
                ok = false;
                if !issues.iter().any(|i| i.path == *path && i.reason == reason) {
                    issues.push(Issue {
                        path: path.clone(),
                        reason,
                    });
                }
            }
        }
        last = end;
    }
    out.push_str(&text[last..]);
    ok.then_some(out)
}

/// Substitutes every reference in `node` (values and map keys), collecting a
/// problem for each reference that cannot be substituted.
pub(crate) fn substitute(node: &Node, env: EnvLookup<'_>, issues: &mut Vec<Issue>) -> Node {
    walk(node, env, &KeyPath::root(), issues)
}

fn walk(node: &Node, env: EnvLookup<'_>, path: &KeyPath, issues: &mut Vec<Issue>) -> Node {
    match node {
        Node::Str(text) if text.contains(OPEN) => {
            let whole = matches!(references(text).as_slice(), [(0, end, _)] if *end == text.len());
            match substitute_text(text, env, path, issues) {
                Some(value) if whole => Node::from_plain_text(&value),
                Some(value) => Node::Str(value),
                None => node.clone(),
            }
        }
        Node::Seq(items) => Node::Seq(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| walk(item, env, &path.index(i), issues))
                .collect(),
        ),
        Node::Map(entries) => Node::Map(
            entries
                .iter()
                .map(|(key, value)| {
                    let key = if key.contains(OPEN) {
                        substitute_text(key, env, path, issues).unwrap_or_else(|| key.clone())
                    } else {
                        key.clone()
                    };
                    let child = walk(value, env, &path.key(&key), issues);
                    (key, child)
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// llama-swap's textual substitution, for a document that only parses once
/// substituted: values are escaped for double-quoted YAML (`\` and `"`), as
/// llama-swap escapes them. Every reference in the text counts, comments too
/// (the text could not be parsed to tell them apart).
pub(crate) fn substitute_raw(text: &str, env: EnvLookup<'_>) -> Result<String, Vec<Issue>> {
    let mut issues = Vec::new();
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for (start, end, name) in references(text) {
        out.push_str(&text[last..start]);
        match value_of(name, env) {
            Ok(value) => out.push_str(&value.replace('\\', "\\\\").replace('"', "\\\"")),
            Err(reason) => {
                if !issues.iter().any(|i: &Issue| i.reason == reason) {
                    issues.push(Issue {
                        path: KeyPath::root(),
                        reason,
                    });
                }
            }
        }
        last = end;
    }
    out.push_str(&text[last..]);
    if issues.is_empty() {
        Ok(out)
    } else {
        Err(issues)
    }
}

/// Whether `text` holds a reference at all.
pub(crate) fn mentions_env(text: &str) -> bool {
    !references(text).is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "TTL" => Some("300".into()),
            "HOST" => Some("gpu-box".into()),
            "MULTI" => Some("a\nb".into()),
            "QUOTED" => Some(r#"say "hi" \o/"#.into()),
            _ => None,
        }
    }

    fn parse(text: &str) -> Node {
        Node::parse(text).unwrap()
    }

    #[test]
    fn a_whole_reference_is_typed_and_a_partial_one_is_text() {
        let mut issues = Vec::new();
        let node = substitute(
            &parse("ttl: ${env.TTL}\nproxy: http://${env.HOST}:8080\n"),
            &env,
            &mut issues,
        );
        assert!(issues.is_empty(), "{issues:?}");
        assert_eq!(node.get("ttl"), Some(&Node::int(300)));
        assert_eq!(
            node.get("proxy"),
            Some(&Node::Str("http://gpu-box:8080".into()))
        );
    }

    #[test]
    fn every_unset_reference_counts_even_where_nothing_reads_it() {
        let mut issues = Vec::new();
        substitute(
            &parse("macros:\n  unused: ${env.NOPE}\nx-helper: ${env.ALSO_NOPE}\n"),
            &env,
            &mut issues,
        );
        let reasons: Vec<&Reason> = issues.iter().map(|i| &i.reason).collect();
        assert_eq!(
            reasons,
            [
                &Reason::EnvNotSet {
                    name: "NOPE".into()
                },
                &Reason::EnvNotSet {
                    name: "ALSO_NOPE".into()
                }
            ]
        );
        assert_eq!(issues[0].path.to_string(), "macros.unused");
    }

    #[test]
    fn a_value_with_a_line_break_is_refused() {
        let mut issues = Vec::new();
        substitute(&parse("cmd: run ${env.MULTI}\n"), &env, &mut issues);
        assert_eq!(
            issues[0].reason,
            Reason::EnvLineBreak {
                name: "MULTI".into()
            }
        );
    }

    #[test]
    fn map_keys_are_substituted_too() {
        let mut issues = Vec::new();
        let node = substitute(
            &parse("models:\n  ${env.HOST}: {cmd: x}\n"),
            &env,
            &mut issues,
        );
        assert!(node.get("models").unwrap().get("gpu-box").is_some());
    }

    #[test]
    fn raw_substitution_escapes_for_double_quotes() {
        let text = "apiKeys: [${env.HOST}]\nname: \"${env.QUOTED}\"\n";
        let out = substitute_raw(text, &env).unwrap();
        let node = parse(&out);
        assert_eq!(
            node.get("apiKeys"),
            Some(&Node::Seq(vec![Node::Str("gpu-box".into())]))
        );
        assert_eq!(node.get("name"), Some(&Node::Str(r#"say "hi" \o/"#.into())));
    }

    #[test]
    fn only_valid_names_are_references() {
        assert!(references("${env.1X} ${env.} ${env.a-b}").is_empty());
        assert_eq!(references("${env._ok9}")[0].2, "_ok9");
    }
}
