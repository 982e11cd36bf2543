//! `${PORT}` numbers: handed out from `startPort` in model-ID order, and kept
//! across a reload for the models the running configuration already had.
//!
//! Without keeping them, a model added whose ID sorts first would renumber
//! every model after it, which a reload counts as a changed definition and
//! restarts.

use std::collections::{BTreeMap, BTreeSet};

use super::Config;

/// The `${PORT}` numbers of a running configuration's models, for the next
/// load to keep ([`Config::load_sources_keeping`]).
///
/// They are kept only while `startPort` is the same: a new `startPort` numbers
/// every model afresh.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeptPorts {
    start_port: Option<u16>,
    ports: BTreeMap<String, u16>,
}

impl KeptPorts {
    /// The `${PORT}` numbers `config`'s models were given.
    #[must_use]
    pub fn of(config: &Config) -> Self {
        Self {
            start_port: Some(config.start_port),
            ports: config
                .models
                .iter()
                .filter_map(|m| Some((m.id.clone(), m.port?)))
                .collect(),
        }
    }

    /// The ports to keep under `start_port` (`None`: number afresh).
    pub(crate) fn under(&self, start_port: u16) -> Option<&BTreeMap<String, u16>> {
        (self.start_port == Some(start_port) && !self.ports.is_empty()).then_some(&self.ports)
    }
}

/// Hands out `${PORT}` numbers to models in ID order.
pub(crate) struct PortAllocator<'a> {
    /// The next fresh number; `None` once past 65535.
    next: Option<u16>,
    kept: Option<&'a BTreeMap<String, u16>>,
    /// Kept numbers of models in this configuration: never handed out fresh.
    reserved: BTreeSet<u16>,
    taken: BTreeSet<u16>,
}

impl<'a> PortAllocator<'a> {
    /// An allocator from `start_port` for the models `ids`, keeping the
    /// numbers in `kept`.
    pub(crate) fn new<'i>(
        start_port: u16,
        kept: Option<&'a BTreeMap<String, u16>>,
        ids: impl IntoIterator<Item = &'i str>,
    ) -> Self {
        let reserved = match kept {
            Some(kept) => ids
                .into_iter()
                .filter_map(|id| kept.get(id).copied())
                .collect(),
            None => BTreeSet::new(),
        };
        Self {
            next: Some(start_port),
            kept,
            reserved,
            taken: BTreeSet::new(),
        }
    }

    /// The number for model `id`: its kept one, else the next fresh one that
    /// no kept model holds; `None` when the numbers ran out.
    pub(crate) fn take(&mut self, id: &str) -> Option<u16> {
        if let Some(&port) = self.kept.and_then(|kept| kept.get(id))
            && self.taken.insert(port)
        {
            return Some(port);
        }
        loop {
            let port = self.next?;
            self.next = port.checked_add(1);
            if !self.reserved.contains(&port) && self.taken.insert(port) {
                return Some(port);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(list: &[(&str, u16)]) -> BTreeMap<String, u16> {
        list.iter().map(|(id, p)| ((*id).to_owned(), *p)).collect()
    }

    #[test]
    fn without_kept_numbers_ports_follow_id_order() {
        let mut ports = PortAllocator::new(5800, None, ["a", "b", "c"]);
        assert_eq!(
            ["a", "b", "c"].map(|id| ports.take(id)),
            [Some(5800), Some(5801), Some(5802)]
        );
    }

    #[test]
    fn kept_models_keep_their_numbers_and_new_ones_skip_them() {
        let before = kept(&[("b", 5800), ("c", 5801)]);
        let mut ports = PortAllocator::new(5800, Some(&before), ["a", "b", "c"]);
        assert_eq!(
            ["a", "b", "c"].map(|id| ports.take(id)),
            [Some(5802), Some(5800), Some(5801)]
        );
    }

    #[test]
    fn a_removed_model_frees_its_number_for_a_new_one() {
        let before = kept(&[("b", 5800), ("c", 5801)]);
        let mut ports = PortAllocator::new(5800, Some(&before), ["a", "c"]);
        assert_eq!(
            ["a", "c"].map(|id| ports.take(id)),
            [Some(5800), Some(5801)]
        );
    }

    #[test]
    fn numbers_run_out_at_65535() {
        let mut ports = PortAllocator::new(65535, None, ["a", "b"]);
        assert_eq!(ports.take("a"), Some(65535));
        assert_eq!(ports.take("b"), None);
    }
}
