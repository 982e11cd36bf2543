//! Priority bands: the bounded set of label values that priorities map to.

use std::fmt;

/// One named band: every priority from `from` up to the next band's `from`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Band {
    /// The label value.
    pub name: String,
    /// Lowest priority in the band (the lowest band also takes everything below).
    pub from: i32,
}

/// Why a list of bands was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BandsError {
    /// No band at all.
    #[error("at least one band is needed")]
    Empty,
    /// A band name that is empty or not `[A-Za-z0-9_-]`.
    #[error("band name {name:?} must be non-empty letters, digits, '_' or '-'")]
    BadName {
        /// The name.
        name: String,
    },
    /// Two bands with the same name or the same lower bound.
    #[error("bands {first:?} and {second:?} overlap (same name or same lower bound)")]
    Overlap {
        /// One band.
        first: String,
        /// The other.
        second: String,
    },
}

/// Thresholds that map an effective priority to a band name. Label values of
/// every priority metric come from here, so their number is bounded by the
/// configuration, not by what clients send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bands {
    /// Sorted by `from`, ascending; never empty.
    bands: Vec<Band>,
}

impl Default for Bands {
    /// `low` (< 0), `normal` (0), `elevated` (> 0): the client's three tiers.
    fn default() -> Self {
        Self {
            bands: vec![
                Band {
                    name: "low".into(),
                    from: i32::MIN,
                },
                Band {
                    name: "normal".into(),
                    from: 0,
                },
                Band {
                    name: "elevated".into(),
                    from: 1,
                },
            ],
        }
    }
}

impl Bands {
    /// Bands from `(name, lowest priority)` pairs in any order.
    ///
    /// # Errors
    ///
    /// [`BandsError`] for an empty list, a bad name, or two bands sharing a name
    /// or a lower bound.
    pub fn new(bands: impl IntoIterator<Item = (String, i32)>) -> Result<Self, BandsError> {
        let mut bands: Vec<Band> = bands
            .into_iter()
            .map(|(name, from)| Band { name, from })
            .collect();
        if bands.is_empty() {
            return Err(BandsError::Empty);
        }
        if let Some(bad) = bands.iter().find(|b| {
            b.name.is_empty()
                || !b
                    .name
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
        }) {
            return Err(BandsError::BadName {
                name: bad.name.clone(),
            });
        }
        bands.sort_by_key(|b| b.from);
        for (i, a) in bands.iter().enumerate() {
            if let Some(b) = bands[i + 1..]
                .iter()
                .find(|b| b.name == a.name || b.from == a.from)
            {
                return Err(BandsError::Overlap {
                    first: a.name.clone(),
                    second: b.name.clone(),
                });
            }
        }
        Ok(Self { bands })
    }

    /// The band of `priority`: the one with the highest lower bound at or below
    /// it; the lowest band for anything below every bound.
    pub fn name_of(&self, priority: i32) -> &str {
        let index = self
            .bands
            .partition_point(|b| b.from <= priority)
            .saturating_sub(1);
        self.bands.get(index).map_or("", |b| b.name.as_str())
    }

    /// Every band, lowest first.
    pub fn iter(&self) -> impl Iterator<Item = &Band> {
        self.bands.iter()
    }
}

impl fmt::Display for Bands {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.bands.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{} (>= {})", b.name, b.from)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_bands_split_at_zero() {
        let bands = Bands::default();
        assert_eq!(bands.name_of(10), "elevated");
        assert_eq!(bands.name_of(1), "elevated");
        assert_eq!(bands.name_of(0), "normal");
        assert_eq!(bands.name_of(-1), "low");
        assert_eq!(bands.name_of(i32::MIN), "low");
        assert_eq!(bands.name_of(i32::MAX), "elevated");
    }

    #[test]
    fn priorities_below_every_bound_fall_in_the_lowest_band() {
        let bands = Bands::new([("batch".to_owned(), -5), ("chat".to_owned(), 5)]).unwrap();
        assert_eq!(bands.name_of(-100), "batch");
        assert_eq!(bands.name_of(4), "batch");
        assert_eq!(bands.name_of(5), "chat");
    }

    #[test]
    fn overlapping_or_badly_named_bands_are_refused() {
        assert_eq!(Bands::new([]), Err(BandsError::Empty));
        assert!(matches!(
            Bands::new([("a".to_owned(), 0), ("b".to_owned(), 0)]),
            Err(BandsError::Overlap { .. })
        ));
        assert!(matches!(
            Bands::new([("a".to_owned(), 0), ("a".to_owned(), 1)]),
            Err(BandsError::Overlap { .. })
        ));
        assert!(matches!(
            Bands::new([("a b".to_owned(), 0)]),
            Err(BandsError::BadName { .. })
        ));
    }
}
