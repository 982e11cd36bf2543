//! `${PORT}` numbers: handed out from `startPort` in model-ID order, and kept
//! across a reload for the models the running configuration already had.
//!
//! Without keeping them, a model added whose ID sorts first would renumber
//! every model after it, which a reload counts as a changed definition and
//! restarts.

use std::collections::{BTreeMap, BTreeSet};

use crate::config::resolved::types::Config;

/// The `${PORT}` numbers of a running configuration's models, for the next
/// load to keep (`Loader::keep_ports`).
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

    /// The numbers after the next load, `next` (taken with [`of`](Self::of)
    /// from what it loaded): `next`'s, plus those kept here for models `next`
    /// no longer has. A removed model's process may still be serving its last
    /// requests on its port, so its number is not handed to a new model (and
    /// it gets it back if it returns). A new `startPort` keeps only `next`'s.
    #[must_use]
    pub fn then(self, next: Self) -> Self {
        if self.start_port != next.start_port {
            return next;
        }
        let mut ports = self.ports;
        ports.extend(next.ports);
        Self {
            start_port: next.start_port,
            ports,
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
    /// Every kept number, of models in this configuration or not: never
    /// handed out fresh.
    reserved: BTreeSet<u16>,
    taken: BTreeSet<u16>,
}

impl<'a> PortAllocator<'a> {
    /// An allocator from `start_port`, keeping the numbers in `kept`.
    pub(crate) fn new(start_port: u16, kept: Option<&'a BTreeMap<String, u16>>) -> Self {
        let reserved = kept
            .map(|kept| kept.values().copied().collect())
            .unwrap_or_default();
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
        let mut ports = PortAllocator::new(5800, None);
        assert_eq!(
            ["a", "b", "c"].map(|id| ports.take(id)),
            [Some(5800), Some(5801), Some(5802)]
        );
    }

    #[test]
    fn kept_models_keep_their_numbers_and_new_ones_skip_them() {
        let before = kept(&[("b", 5800), ("c", 5801)]);
        let mut ports = PortAllocator::new(5800, Some(&before));
        assert_eq!(
            ["a", "b", "c"].map(|id| ports.take(id)),
            [Some(5802), Some(5800), Some(5801)]
        );
    }

    #[test]
    fn a_removed_models_number_is_not_handed_to_a_new_one() {
        // b was removed: its process may still serve on 5800.
        let before = kept(&[("b", 5800), ("c", 5801)]);
        let mut ports = PortAllocator::new(5800, Some(&before));
        assert_eq!(
            ["a", "c"].map(|id| ports.take(id)),
            [Some(5802), Some(5801)]
        );
    }

    #[test]
    fn numbers_run_out_at_65535() {
        let mut ports = PortAllocator::new(65535, None);
        assert_eq!(ports.take("a"), Some(65535));
        assert_eq!(ports.take("b"), None);
    }
}
