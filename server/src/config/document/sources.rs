//! Where a configuration comes from: one file (`--config`), a directory of
//! files (`--config-dir`), or both, merged into one document before it is
//! read, with llama-swap's rules.
//!
//! Files: `--config` first, then every top-level `*.yml`/`*.yaml` of the
//! directory in sorted name order (subdirectories are not read; an empty file
//! adds nothing). Each file is parsed and has its `${env.NAME}` references
//! substituted on its own, so problems name the file they are in.
//!
//! Merge rules, applied file by file:
//! - identity maps (`models`, `groups`, `profiles`, `selectors`, `peers`,
//!   `matrix`, `routing.router.settings.groups`/`.matrix`): each key names one
//!   thing (a model, a group, ...), so a key in two files is an error;
//! - other maps merge key by key, recursively;
//! - lists are concatenated (`apiKeys`, a group's `members`, ...);
//! - scalars must be equal (`globalTTL: 100` in two files is fine, `100` and
//!   `200` is an error); a null yields to the other side;
//! - a map meeting a list or a scalar is an error.

use std::path::{Path, PathBuf};

use super::env::EnvLookup;
use super::error::{ConfigError, Issue, KeyPath, MergeConflict, YamlLimit};
use super::node::Node;

/// The dotted paths whose children are identity-keyed.
const IDENTITY_MAPS: &[&str] = &[
    "models",
    "groups",
    "profiles",
    "selectors",
    "peers",
    "matrix",
    "routing.router.settings.groups",
    "routing.router.settings.matrix",
];

/// The files a configuration is read from, in merge order.
///
/// # Errors
///
/// [`ConfigError::NoSources`] when neither is given, [`ConfigError::ReadDir`]
/// when the directory cannot be listed, [`ConfigError::FileInDir`] when the
/// file is also one of the directory's files, [`ConfigError::EmptyDir`] when
/// only a directory is given and it holds no YAML file.
pub fn source_files(file: Option<&Path>, dir: Option<&Path>) -> Result<Vec<PathBuf>, ConfigError> {
    let mut files: Vec<PathBuf> = file.map(Path::to_path_buf).into_iter().collect();
    let Some(dir) = dir else {
        return if files.is_empty() {
            Err(ConfigError::NoSources)
        } else {
            Ok(files)
        };
    };
    let read_dir = |source| ConfigError::ReadDir {
        path: dir.to_owned(),
        source,
    };
    let mut in_dir = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read_dir)? {
        let entry = entry.map_err(read_dir)?;
        let path = entry.path();
        let yaml = path.extension().is_some_and(|e| e == "yml" || e == "yaml");
        // Follows symlinks, so a linked file counts and a linked directory does not.
        if yaml && path.is_file() {
            in_dir.push(path);
        }
    }
    in_dir.sort();
    if let Some(file) = file {
        let canonical = std::fs::canonicalize(file).ok();
        if let Some(same) = in_dir
            .iter()
            .find(|p| canonical.is_some() && std::fs::canonicalize(p).ok() == canonical)
        {
            return Err(ConfigError::FileInDir {
                file: file.to_owned(),
                dir: dir.to_owned(),
                listed: same.clone(),
            });
        }
    }
    if files.is_empty() && in_dir.is_empty() {
        return Err(ConfigError::EmptyDir {
            path: dir.to_owned(),
        });
    }
    files.extend(in_dir);
    Ok(files)
}

/// The error for a file the parser refused: a limit it went past, by name,
/// or the parser's own message.
fn yaml_error(file: &str, source: serde_saphyr::Error) -> ConfigError {
    match YamlLimit::of(&source) {
        Some((limit, line)) => ConfigError::YamlLimit {
            file: file.to_owned(),
            limit,
            line,
        },
        None => ConfigError::Yaml {
            file: file.to_owned(),
            source: Box::new(source),
        },
    }
}

/// Parses one file's text and substitutes its environment variables; an
/// empty document is `Node::Null`.
pub(crate) fn parse_document(
    file: &str,
    text: &str,
    env: EnvLookup<'_>,
) -> Result<Node, ConfigError> {
    if text.trim().is_empty() {
        return Ok(Node::Null);
    }
    let root: Node = match Node::parse(text) {
        Ok(root) => root,
        // `[${env.KEY}]` does not parse until substituted: do it as text, as
        // llama-swap does, and report the first error if that does not help.
        Err(first) if super::env::mentions_env(text) => {
            let substituted =
                super::env::substitute_raw(text, env).map_err(|issues| ConfigError::Invalid {
                    file: file.to_owned(),
                    issues,
                })?;
            return Node::parse(&substituted).map_err(|second| match YamlLimit::of(&second) {
                Some(_) => yaml_error(file, second),
                None => yaml_error(file, first),
            });
        }
        Err(source) => return Err(yaml_error(file, source)),
    };
    if !matches!(root, Node::Map(_) | Node::Null) {
        return Err(ConfigError::NotAMap {
            file: file.to_owned(),
            found: root.kind(),
        });
    }
    let mut issues: Vec<Issue> = Vec::new();
    let root = super::env::substitute(&root, env, &mut issues);
    if issues.is_empty() {
        Ok(root)
    } else {
        Err(ConfigError::Invalid {
            file: file.to_owned(),
            issues,
        })
    }
}

/// Merges `next` (from `file`) into `merged`.
pub(crate) fn merge(merged: &mut Node, next: Node, file: &str) -> Result<(), ConfigError> {
    merge_at(merged, next, &KeyPath::root(), "").map_err(|(path, conflict)| ConfigError::Merge {
        file: file.to_owned(),
        path,
        conflict,
    })
}

type Conflict = (KeyPath, MergeConflict);

fn merge_at(into: &mut Node, next: Node, path: &KeyPath, dotted: &str) -> Result<(), Conflict> {
    match (into, next) {
        (_, Node::Null) => Ok(()),
        (slot @ Node::Null, next) => {
            *slot = next;
            Ok(())
        }
        (Node::Map(entries), Node::Map(next_entries)) => {
            let identity = IDENTITY_MAPS.contains(&dotted);
            for (key, value) in next_entries {
                let child = path.key(&key);
                match entries.iter_mut().find(|(k, _)| *k == key) {
                    Some(_) if identity => {
                        return Err((child, MergeConflict::Duplicate { key }));
                    }
                    Some((_, existing)) => {
                        let dotted = if dotted.is_empty() {
                            key.clone()
                        } else {
                            format!("{dotted}.{key}")
                        };
                        merge_at(existing, value, &child, &dotted)?;
                    }
                    None => entries.push((key, value)),
                }
            }
            Ok(())
        }
        (Node::Seq(items), Node::Seq(next_items)) => {
            items.extend(next_items);
            Ok(())
        }
        (existing, next) if existing.is_scalar() && next.is_scalar() => {
            if *existing == next {
                Ok(())
            } else {
                Err((path.clone(), MergeConflict::DifferentValue))
            }
        }
        (existing, next) => Err((
            path.clone(),
            MergeConflict::DifferentKinds {
                this: next.kind(),
                previous: existing.kind(),
            },
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Node {
        parse_document("t.yaml", text, &|_| None).unwrap()
    }

    fn merged(docs: &[&str]) -> Result<Node, ConfigError> {
        let mut out = Node::Null;
        for (i, doc) in docs.iter().enumerate() {
            merge(&mut out, parse(doc), &format!("{i}.yaml"))?;
        }
        Ok(out)
    }

    #[test]
    fn models_from_two_files_are_both_kept_but_one_model_twice_is_an_error() {
        let out = merged(&["models: {a: {cmd: x}}", "models: {b: {cmd: y}}"]).unwrap();
        let models = out.get("models").unwrap();
        assert!(models.get("a").is_some() && models.get("b").is_some());
        let err = merged(&["models: {a: {cmd: x}}", "models: {a: {cmd: y}}"]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "1.yaml: models.a: \"a\" is already defined in another configuration file"
        );
    }

    #[test]
    fn routing_groups_are_identity_keyed_but_other_maps_merge() {
        let err = merged(&[
            "routing: {router: {settings: {groups: {g: {members: [a]}}}}}",
            "routing: {router: {settings: {groups: {g: {members: [b]}}}}}",
        ])
        .unwrap_err();
        assert!(matches!(
            err,
            ConfigError::Merge {
                conflict: MergeConflict::Duplicate { .. },
                ..
            }
        ));
        let out = merged(&["macros: {LOW: 1}", "macros: {HIGH: 2, LOW: 1}"]).unwrap();
        assert_eq!(
            out.get("macros"),
            Some(&Node::Map(vec![
                ("LOW".into(), Node::int(1)),
                ("HIGH".into(), Node::int(2))
            ]))
        );
    }

    #[test]
    fn lists_concatenate_and_scalars_must_agree() {
        let out = merged(&["apiKeys: [a]", "apiKeys: [b]\nglobalTTL: 5", "globalTTL: 5"]).unwrap();
        assert_eq!(
            out.get("apiKeys"),
            Some(&Node::Seq(vec![
                Node::Str("a".into()),
                Node::Str("b".into())
            ]))
        );
        let err = merged(&["globalTTL: 100", "globalTTL: 200"]).unwrap_err();
        assert!(matches!(
            err,
            ConfigError::Merge {
                conflict: MergeConflict::DifferentValue,
                ..
            }
        ));
        // 100 and "100" differ in type, as in llama-swap (tags differ).
        assert!(merged(&["globalTTL: 100", "globalTTL: '100'"]).is_err());
    }

    #[test]
    fn null_yields_and_kinds_must_match() {
        let out = merged(&["routing:", "routing: {router: {use: group}}"]).unwrap();
        assert!(out.get("routing").unwrap().get("router").is_some());
        let err = merged(&["startPort: 5800", "startPort: [5800, 5801]"]).unwrap_err();
        assert!(matches!(
            err,
            ConfigError::Merge {
                conflict: MergeConflict::DifferentKinds { .. },
                ..
            }
        ));
    }

    #[test]
    fn a_flow_list_holding_an_env_reference_parses_once_substituted() {
        let root = parse_document("k.yaml", "apiKeys: [${env.KEY}]\n", &|n| {
            (n == "KEY").then(|| "secret".to_owned())
        })
        .unwrap();
        assert_eq!(
            root.get("apiKeys"),
            Some(&Node::Seq(vec![Node::Str("secret".into())]))
        );
    }

    #[test]
    fn a_document_that_is_not_a_map_is_refused() {
        assert!(matches!(
            parse_document("l.yaml", "- a\n- b\n", &|_| None),
            Err(ConfigError::NotAMap { .. })
        ));
    }
}
