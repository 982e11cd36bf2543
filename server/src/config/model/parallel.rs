//! The per-model `parallel` key (this server's extension): how many requests a
//! model's upstream is given at once, the rest ranked in this server's queue.

use crate::config::document::error::{KeyPath, Reason, WarningKind};
use crate::config::document::fields::Diagnostics;
use crate::config::document::node::Node;
use crate::config::resolved::model::ModelConfig;
use crate::config::resolved::types::SchedulerConfig;
use crate::scheduler::Parallel;

/// Reads `parallel`: a positive integer, or `auto` (the upstream's own slot count).
pub(crate) fn read_parallel(node: &Node, path: &KeyPath, cx: &mut Diagnostics) -> Parallel {
    let parsed = match node {
        Node::Int(n, _) => usize::try_from(*n).ok().and_then(Parallel::limit),
        Node::Str(text) if text.trim() == "auto" => Some(Parallel::Auto),
        _ => None,
    };
    match parsed {
        Some(parallel) => parallel,
        None => {
            let got = match node {
                Node::Int(n, _) => n.to_string(),
                other => other
                    .scalar_text()
                    .unwrap_or_else(|| other.kind().to_owned()),
            };
            cx.error(path.clone(), Reason::InvalidParallel { got });
            Parallel::Unlimited
        }
    }
}

/// Warns about `parallel` values that cannot limit anything: under the serial
/// scheduler (one request at a time overall), or at or above the model's
/// `concurrencyLimit` (no more than that many are admitted at all). `models`
/// are those that set `parallel`, each with where it was written.
pub(crate) fn check_parallel<'a>(
    models: impl IntoIterator<Item = (&'a ModelConfig, &'a KeyPath)>,
    scheduler: &SchedulerConfig,
    cx: &mut Diagnostics,
) {
    for (model, path) in models {
        let because = match (scheduler, model.parallel) {
            (SchedulerConfig::Serial, _) => {
                "routing.scheduler.use is serial (one request at a time overall)"
            }
            (_, Parallel::Limit(n)) if n.get() >= model.concurrency_limit => {
                "it is not below the model's concurrencyLimit (no more requests are admitted)"
            }
            _ => continue,
        };
        cx.warn(path.clone(), WarningKind::NoEffect { because });
    }
}
