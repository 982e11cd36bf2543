//! The matrix eviction policy (llama-swap's `routing.router.use: matrix`).
//!
//! A matrix lists named **sets**, in order; each is an expression over model names
//! that describes which models may run *together*:
//!
//! - `a & b`: `a` and `b` together; `a | b`: either one (`&` binds tighter);
//!   parentheses group; `+other` inlines the set named `other`.
//! - Names are `vars` (a short name for a model ID), then model IDs, then aliases.
//!   A set only says which models may coexist: choosing one never starts the others.
//! - `evict_costs` weigh how much stopping a model hurts (default 1; keys may be vars).
//!
//! To run a target with some models running, the policy picks a **combination**
//! (one way to satisfy one set's expression) that contains the target:
//!
//! 1. a target that is already running evicts nothing;
//! 2. otherwise every combination of every set containing the target is a candidate,
//!    sets in definition order with the sets a set references first, combinations in
//!    the order the expression lists them;
//! 3. a candidate costs the sum of the evict costs of the running models it leaves
//!    out; the strictly cheapest wins, so on a tie the first one found wins;
//! 4. a target that no set mentions runs alone: everything running is evicted.
//!
//! The running models outside the winner are the ones to stop. Solving never
//! expands every combination: each sub-expression is projected onto the models that
//! matter to the query (the target and the running ones), equal projections merge,
//! and a projection contained in an earlier one is dropped (it can never be cheaper
//! and never comes first), so the cost follows the number of running models, not
//! the size of the product the expressions describe.
//!
//! Like the group policy this is pure: names in, names out, no logging.
//!
//! ```
//! use llama_swap_server::testing::policy::matrix::{Matrix, MatrixSet, MatrixSettings};
//!
//! let models: Vec<String> = ["gemma", "qwen", "voxtral", "llama70b"].map(String::from).into();
//! let settings = MatrixSettings {
//!     vars: vec![("g".into(), "gemma".into()), ("q".into(), "qwen".into()),
//!                ("v".into(), "voxtral".into()), ("L".into(), "llama70b".into())],
//!     evict_costs: vec![("v".into(), 50)],
//!     sets: vec![MatrixSet::new("standard", "(g | q) & v"), MatrixSet::new("big", "L")],
//! };
//! let matrix = Matrix::new(&models, &settings, |name| models.iter().find(|m| *m == name).cloned())?;
//!
//! // gemma fits beside the running voxtral.
//! assert!(matrix.evict_for("gemma", &["voxtral"]).is_empty());
//! // llama70b runs only alone.
//! let choice = matrix.choose("llama70b", &["qwen", "voxtral"]);
//! assert_eq!(choice.evict, ["qwen", "voxtral"]);
//! assert_eq!((choice.set, choice.cost), (Some("big"), 51));
//! # Ok::<(), llama_swap_server::testing::policy::matrix::MatrixError>(())
//! ```

mod bits;
mod compile;
mod dsl;
mod policy;
#[cfg(test)]
mod props;
mod solve;
#[cfg(test)]
mod tests;

pub use dsl::SyntaxError;

use bits::Bits;

/// One named set, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatrixSet {
    /// The set's name (its key under `sets`).
    pub name: String,
    /// Its expression, e.g. `(g | q) & v`.
    pub expr: String,
}

impl MatrixSet {
    /// A set named `name` with expression `expr`.
    pub fn new(name: impl Into<String>, expr: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            expr: expr.into(),
        }
    }
}

/// A matrix as configured, before compilation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MatrixSettings {
    /// `vars`: short name → model ID (or alias), in file order.
    pub vars: Vec<(String, String)>,
    /// `evict_costs`: var, model ID or alias → cost (at least 1), in file order.
    /// Models not listed cost 1.
    pub evict_costs: Vec<(String, u32)>,
    /// `sets`, in file order (the order breaks ties).
    pub sets: Vec<MatrixSet>,
}

/// Why a matrix does not compile. Each error says which part of the matrix it is
/// about ([`MatrixError::location`]), so the config loader can name the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MatrixError {
    /// `sets` is missing or empty.
    #[error("the matrix must define at least one set")]
    NoSets,
    /// Two sets share a name.
    #[error("set {set:?} is defined twice")]
    DuplicateSet {
        /// The set's name.
        set: String,
    },
    /// A var name outside `[A-Za-z0-9.-]{1,32}`.
    #[error("var name {var:?} must be 1 to 32 letters, digits, '-' or '.'")]
    BadVarName {
        /// The var's name.
        var: String,
    },
    /// A var defined twice.
    #[error("var {var:?} is defined twice")]
    DuplicateVar {
        /// The var's name.
        var: String,
    },
    /// A var naming something that is not a model.
    #[error("var {var:?} names {target:?}, which is neither a model ID nor an alias")]
    UnknownVarTarget {
        /// The var's name.
        var: String,
        /// What it names.
        target: String,
    },
    /// An `evict_costs` key that is not a var, model ID or alias.
    #[error("{name:?} is neither a var, a model ID nor an alias")]
    UnknownCostName {
        /// The key.
        name: String,
    },
    /// An evict cost below 1.
    #[error("the evict cost of {name:?} must be at least 1")]
    ZeroCost {
        /// The key.
        name: String,
    },
    /// Two `evict_costs` keys naming the same model.
    #[error("names model {model:?}, which already has an evict cost through {first:?}")]
    DuplicateCost {
        /// The later key.
        name: String,
        /// The model both keys name.
        model: String,
        /// The key that set it first.
        first: String,
    },
    /// A set's expression does not parse.
    #[error("{error}")]
    Syntax {
        /// The set's name.
        set: String,
        /// What is wrong with it.
        #[source]
        error: SyntaxError,
    },
    /// A name in an expression that is not a var, model ID or alias.
    #[error("{name:?} is neither a var, a model ID nor an alias")]
    UnknownName {
        /// The set's name.
        set: String,
        /// The name.
        name: String,
    },
    /// `+name` where no set has that name.
    #[error("+{reference} refers to no set")]
    UndefinedSet {
        /// The set whose expression has the reference.
        set: String,
        /// The name after `+`.
        reference: String,
    },
    /// Sets that reference each other in a loop.
    #[error("sets reference each other in a loop: {}", cycle.join(" -> "))]
    Cycle {
        /// The set where the loop was found.
        set: String,
        /// The loop, starting and ending with the same set.
        cycle: Vec<String>,
    },
}

/// Which part of the matrix a [`MatrixError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MatrixKey<'a> {
    /// `sets` itself.
    Sets,
    /// `sets.<name>`.
    Set(&'a str),
    /// `vars.<name>`.
    Var(&'a str),
    /// `evict_costs.<name>`.
    Cost(&'a str),
}

impl MatrixError {
    /// Which key of the matrix the error is about.
    #[must_use]
    pub fn location(&self) -> MatrixKey<'_> {
        match self {
            MatrixError::NoSets => MatrixKey::Sets,
            MatrixError::DuplicateSet { set }
            | MatrixError::Syntax { set, .. }
            | MatrixError::UnknownName { set, .. }
            | MatrixError::UndefinedSet { set, .. }
            | MatrixError::Cycle { set, .. } => MatrixKey::Set(set),
            MatrixError::BadVarName { var }
            | MatrixError::DuplicateVar { var }
            | MatrixError::UnknownVarTarget { var, .. } => MatrixKey::Var(var),
            MatrixError::UnknownCostName { name }
            | MatrixError::ZeroCost { name }
            | MatrixError::DuplicateCost { name, .. } => MatrixKey::Cost(name),
        }
    }
}

/// A node of the compiled expression graph. A `+ref` is no node of its own: the
/// referencing node points at the referenced set's root, so shared sub-expressions
/// are solved once per query.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    /// One model (index into the sorted model IDs).
    Leaf(usize),
    And(Vec<usize>),
    Or(Vec<usize>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct CompiledSet {
    name: String,
    expr: String,
    root: usize,
}

/// A compiled matrix: answers "to run this model, which running models must stop?".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matrix {
    /// Model IDs, sorted; a model's index is its position here.
    models: Vec<String>,
    /// Evict cost of each model.
    costs: Vec<u64>,
    nodes: Vec<Node>,
    /// Every model each node can mention (over model indices).
    support: Vec<Bits>,
    /// In solve order: definition order, referenced sets first.
    sets: Vec<CompiledSet>,
}

/// What the matrix chose for a target (see [`Matrix::choose`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice<'a> {
    /// Running models to stop, sorted by ID.
    pub evict: Vec<&'a str>,
    /// The set the winning combination comes from; `None` when the target was
    /// already running or is in no set (it then runs alone).
    pub set: Option<&'a str>,
    /// That set's expression.
    pub expr: Option<&'a str>,
    /// Sum of the evict costs of `evict`.
    pub cost: u64,
}

impl Matrix {
    /// The model IDs the matrix knows, sorted.
    #[must_use]
    pub fn models(&self) -> &[String] {
        &self.models
    }

    /// The set names in solve order (definition order, referenced sets first).
    pub fn set_names(&self) -> impl Iterator<Item = &str> {
        self.sets.iter().map(|s| s.name.as_str())
    }

    /// The evict cost of a model (1 unless configured).
    #[must_use]
    pub fn cost_of(&self, model: &str) -> Option<u64> {
        self.index_of(model).map(|m| self.costs[m])
    }

    /// Index of `model` in the sorted model list.
    pub(crate) fn index_of(&self, model: &str) -> Option<usize> {
        self.models.binary_search_by(|m| m.as_str().cmp(model)).ok()
    }

    /// The running models that must stop before `target` can run, sorted by ID.
    ///
    /// `running` may contain `target` itself (then nothing is evicted) and names the
    /// matrix does not know (ignored). An unknown `target` evicts nothing.
    pub fn evict_for<S: AsRef<str>>(&self, target: &str, running: &[S]) -> Vec<String> {
        self.choose(target, running)
            .evict
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    /// As [`Matrix::evict_for`], with the set that won and the cost, for logging.
    pub fn choose<S: AsRef<str>>(&self, target: &str, running: &[S]) -> Choice<'_> {
        let Some(t) = self.index_of(target) else {
            return Choice {
                evict: Vec::new(),
                set: None,
                expr: None,
                cost: 0,
            };
        };
        let running: Vec<usize> = running
            .iter()
            .filter_map(|r| self.index_of(r.as_ref()))
            .collect();
        let solution = self.solve(t, &running);
        Choice {
            evict: solution
                .evict
                .iter()
                .map(|&m| self.models[m].as_str())
                .collect(),
            set: solution.set.map(|s| self.sets[s].name.as_str()),
            expr: solution.set.map(|s| self.sets[s].expr.as_str()),
            cost: solution.cost,
        }
    }

    /// Whether some combination of some set holds every one of `models` (unknown
    /// names never fit). An empty list always fits.
    pub fn can_coexist<S: AsRef<str>>(&self, models: &[S]) -> bool {
        let mut indices = Vec::with_capacity(models.len());
        for model in models {
            match self.index_of(model.as_ref()) {
                Some(m) => indices.push(m),
                None => return false,
            }
        }
        self.fits_together(&indices)
    }
}
