//! A fixed-width bit set: model supports at compile time, projected combinations
//! at solve time. Widths are whatever the query needs, so more than 64 models work.

/// A set of small integers below the width it was made with.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Bits(Vec<u64>);

impl Bits {
    /// The empty set able to hold `0..len`.
    pub(crate) fn empty(len: usize) -> Self {
        Self(vec![0; len.div_ceil(64)])
    }

    /// The set `0..len`.
    pub(crate) fn full(len: usize) -> Self {
        let mut bits = Self::empty(len);
        for i in 0..len {
            bits.insert(i);
        }
        bits
    }

    pub(crate) fn insert(&mut self, bit: usize) {
        if let Some(word) = self.0.get_mut(bit / 64) {
            *word |= 1 << (bit % 64);
        }
    }

    pub(crate) fn contains(&self, bit: usize) -> bool {
        self.0
            .get(bit / 64)
            .is_some_and(|word| word & (1 << (bit % 64)) != 0)
    }

    /// Whether every member of `self` is in `other` (same width assumed).
    pub(crate) fn is_subset(&self, other: &Self) -> bool {
        self.0
            .iter()
            .zip(&other.0)
            .all(|(mine, theirs)| mine & !theirs == 0)
    }

    pub(crate) fn intersects(&self, other: &Self) -> bool {
        self.0
            .iter()
            .zip(&other.0)
            .any(|(mine, theirs)| mine & theirs != 0)
    }

    pub(crate) fn union(&self, other: &Self) -> Self {
        Self(
            self.0
                .iter()
                .zip(&other.0)
                .map(|(mine, theirs)| mine | theirs)
                .collect(),
        )
    }

    pub(crate) fn union_with(&mut self, other: &Self) {
        for (mine, theirs) in self.0.iter_mut().zip(&other.0) {
            *mine |= theirs;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_wider_than_one_word_keep_every_bit() {
        let mut a = Bits::empty(130);
        a.insert(0);
        a.insert(64);
        a.insert(129);
        assert!(a.contains(129) && a.contains(64) && !a.contains(63));
        let full = Bits::full(130);
        assert!(a.is_subset(&full));
        assert!(!full.is_subset(&a));
        let mut b = Bits::empty(130);
        b.insert(128);
        assert!(!a.intersects(&b));
        assert!(a.union(&b).contains(128));
        b.union_with(&a);
        assert!(b.contains(0) && b.contains(128));
        assert!(!a.contains(500), "bits past the width are never members");
    }
}
