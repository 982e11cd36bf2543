//! From [`MatrixSettings`] to a [`Matrix`]: names resolved, references linked, sets
//! put in solve order, loops and unknown names refused.

use std::collections::BTreeMap;

use super::dsl::{self, Expr};
use super::{Bits, CompiledSet, Matrix, MatrixError, MatrixSettings, Node};

/// llama-swap's rule for var names.
fn valid_var_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
}

impl Matrix {
    /// Compiles a matrix over `models` (IDs). `resolve` maps a model ID or alias to
    /// its ID; names in expressions and `evict_costs` are looked up as vars first,
    /// then through `resolve`.
    ///
    /// # Errors
    ///
    /// The first [`MatrixError`] found (see [`Matrix::compile`] for all of them).
    pub fn new(
        models: &[String],
        settings: &MatrixSettings,
        resolve: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, MatrixError> {
        Self::compile(models, settings, resolve).map_err(|mut errors| errors.swap_remove(0))
    }

    /// As [`Matrix::new`], reporting every problem instead of the first.
    ///
    /// # Errors
    ///
    /// Every [`MatrixError`] found, in the order of the settings (vars, evict costs,
    /// then sets); never empty.
    pub fn compile(
        models: &[String],
        settings: &MatrixSettings,
        resolve: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, Vec<MatrixError>> {
        let mut ids = models.to_vec();
        ids.sort();
        ids.dedup();
        let index_of = |id: &str| ids.binary_search_by(|m| m.as_str().cmp(id)).ok();
        let mut errors = Vec::new();

        let mut vars: BTreeMap<&str, usize> = BTreeMap::new();
        for (var, target) in &settings.vars {
            if !valid_var_name(var) {
                errors.push(MatrixError::BadVarName { var: var.clone() });
            } else if vars.contains_key(var.as_str()) {
                errors.push(MatrixError::DuplicateVar { var: var.clone() });
            } else {
                match resolve(target).and_then(|id| index_of(&id)) {
                    Some(m) => {
                        vars.insert(var, m);
                    }
                    None => errors.push(MatrixError::UnknownVarTarget {
                        var: var.clone(),
                        target: target.clone(),
                    }),
                }
            }
        }
        let name_to_model = |name: &str| {
            vars.get(name)
                .copied()
                .or_else(|| resolve(name).and_then(|id| index_of(&id)))
        };

        let mut costs = vec![1_u64; ids.len()];
        let mut cost_key: Vec<Option<&str>> = vec![None; ids.len()];
        for (name, cost) in &settings.evict_costs {
            if *cost == 0 {
                errors.push(MatrixError::ZeroCost { name: name.clone() });
                continue;
            }
            let Some(m) = name_to_model(name) else {
                errors.push(MatrixError::UnknownCostName { name: name.clone() });
                continue;
            };
            if let Some(first) = cost_key[m] {
                errors.push(MatrixError::DuplicateCost {
                    name: name.clone(),
                    model: ids[m].clone(),
                    first: first.to_owned(),
                });
                continue;
            }
            cost_key[m] = Some(name);
            costs[m] = u64::from(*cost);
        }

        if settings.sets.is_empty() {
            errors.push(MatrixError::NoSets);
        }
        // Parsed sets by definition index, with the sets each references in order of
        // first mention.
        let mut parsed: Vec<Option<(Expr, Vec<usize>)>> = Vec::with_capacity(settings.sets.len());
        let mut set_index: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, set) in settings.sets.iter().enumerate() {
            if set_index.insert(&set.name, i).is_some() {
                errors.push(MatrixError::DuplicateSet {
                    set: set.name.clone(),
                });
            }
        }
        for set in &settings.sets {
            let expr = match dsl::parse(&set.expr) {
                Ok(expr) => expr,
                Err(error) => {
                    errors.push(MatrixError::Syntax {
                        set: set.name.clone(),
                        error,
                    });
                    parsed.push(None);
                    continue;
                }
            };
            let mut refs = Vec::new();
            let mut ok = true;
            expr.leaves(&mut |leaf| match leaf {
                Expr::Name(name) if name_to_model(name).is_none() => {
                    ok = false;
                    errors.push(MatrixError::UnknownName {
                        set: set.name.clone(),
                        name: name.clone(),
                    });
                }
                Expr::Ref(reference) => match set_index.get(reference.as_str()) {
                    Some(&r) if !refs.contains(&r) => refs.push(r),
                    Some(_) => {}
                    None => {
                        ok = false;
                        errors.push(MatrixError::UndefinedSet {
                            set: set.name.clone(),
                            reference: reference.clone(),
                        });
                    }
                },
                _ => {}
            });
            parsed.push(ok.then_some((expr, refs)));
        }

        let order = solve_order(&settings.sets, &parsed, &mut errors);
        if !errors.is_empty() {
            return Err(errors);
        }

        let mut builder = Builder {
            nodes: Vec::new(),
            support: Vec::new(),
            width: ids.len(),
            leaf_of: vec![None; ids.len()],
            roots: vec![None; settings.sets.len()],
        };
        let mut sets = Vec::with_capacity(order.len());
        for i in order {
            let Some((expr, _)) = &parsed[i] else {
                continue;
            };
            let root = builder.lower(expr, &name_to_model, &set_index);
            builder.roots[i] = Some(root);
            sets.push(CompiledSet {
                name: settings.sets[i].name.clone(),
                expr: settings.sets[i].expr.clone(),
                root,
            });
        }
        Ok(Self {
            models: ids,
            costs,
            nodes: builder.nodes,
            support: builder.support,
            sets,
        })
    }
}

/// Definition order with every set's references placed before it (depth first, in
/// order of first mention). Reports each loop once.
fn solve_order(
    sets: &[super::MatrixSet],
    parsed: &[Option<(Expr, Vec<usize>)>],
    errors: &mut Vec<MatrixError>,
) -> Vec<usize> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Done,
    }
    fn visit(
        i: usize,
        sets: &[super::MatrixSet],
        parsed: &[Option<(Expr, Vec<usize>)>],
        marks: &mut [Mark],
        path: &mut Vec<usize>,
        order: &mut Vec<usize>,
        errors: &mut Vec<MatrixError>,
    ) {
        marks[i] = Mark::OnPath;
        path.push(i);
        let refs = parsed[i].as_ref().map_or(&[][..], |(_, refs)| refs);
        for &r in refs {
            match marks[r] {
                Mark::New => visit(r, sets, parsed, marks, path, order, errors),
                Mark::OnPath => {
                    let start = path.iter().position(|&p| p == r).unwrap_or(0);
                    let mut cycle: Vec<String> = path[start..]
                        .iter()
                        .map(|&p| sets[p].name.clone())
                        .collect();
                    cycle.push(sets[r].name.clone());
                    errors.push(MatrixError::Cycle {
                        set: sets[r].name.clone(),
                        cycle,
                    });
                }
                Mark::Done => {}
            }
        }
        path.pop();
        marks[i] = Mark::Done;
        order.push(i);
    }
    let mut marks = vec![Mark::New; sets.len()];
    let mut order = Vec::with_capacity(sets.len());
    let mut path = Vec::new();
    for i in 0..sets.len() {
        if marks[i] == Mark::New {
            visit(i, sets, parsed, &mut marks, &mut path, &mut order, errors);
        }
    }
    order
}

struct Builder {
    nodes: Vec<Node>,
    support: Vec<Bits>,
    width: usize,
    /// The one leaf node of each model, shared by every mention.
    leaf_of: Vec<Option<usize>>,
    /// Root node of each set, by definition index, once lowered.
    roots: Vec<Option<usize>>,
}

impl Builder {
    fn push(&mut self, node: Node, support: Bits) -> usize {
        self.nodes.push(node);
        self.support.push(support);
        self.nodes.len() - 1
    }

    /// Lowers an expression whose names and references were checked and whose
    /// referenced sets are already lowered (solve order guarantees it).
    fn lower(
        &mut self,
        expr: &Expr,
        name_to_model: &impl Fn(&str) -> Option<usize>,
        set_index: &BTreeMap<&str, usize>,
    ) -> usize {
        match expr {
            Expr::Name(name) => {
                let m = name_to_model(name).unwrap_or(0);
                if let Some(leaf) = self.leaf_of[m] {
                    return leaf;
                }
                let mut support = Bits::empty(self.width);
                support.insert(m);
                let leaf = self.push(Node::Leaf(m), support);
                self.leaf_of[m] = Some(leaf);
                leaf
            }
            Expr::Ref(reference) => set_index
                .get(reference.as_str())
                .and_then(|&i| self.roots[i])
                .unwrap_or(0),
            Expr::And(children) | Expr::Or(children) => {
                let children: Vec<usize> = children
                    .iter()
                    .map(|c| self.lower(c, name_to_model, set_index))
                    .collect();
                let mut support = Bits::empty(self.width);
                for &c in &children {
                    support.union_with(&self.support[c]);
                }
                let node = if matches!(expr, Expr::And(_)) {
                    Node::And(children)
                } else {
                    Node::Or(children)
                };
                self.push(node, support)
            }
        }
    }
}
