//! Where the configuration fixtures live.

use std::path::PathBuf;

/// `tests/fixtures/config/<relative>` of this package.
pub(crate) fn fixture(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/config")
        .join(relative)
}
