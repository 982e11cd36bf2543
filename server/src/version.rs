//! What this build is: `GET /api/version` and `-version` (llama-swap's
//! fields and line). The commit and date come from `build.rs`.

use serde::Serialize;

/// The crate's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The commit built (`unknown` for a debug build without
/// `LLAMA_SWAP_SERVER_COMMIT`).
pub const COMMIT: &str = env!("LLAMA_SWAP_SERVER_COMMIT");
/// When the commit was made (RFC 3339), or `LLAMA_SWAP_SERVER_BUILD_DATE`.
pub const BUILD_DATE: &str = env!("LLAMA_SWAP_SERVER_BUILD_DATE");

/// `GET /api/version`'s answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BuildInfo {
    /// [`VERSION`].
    pub version: &'static str,
    /// [`COMMIT`].
    pub commit: &'static str,
    /// [`BUILD_DATE`].
    pub build_date: &'static str,
}

/// This build.
pub const BUILD: BuildInfo = BuildInfo {
    version: VERSION,
    commit: COMMIT,
    build_date: BUILD_DATE,
};

/// `-version`'s line, as llama-swap prints it.
pub fn line() -> String {
    format!("version: {VERSION} ({COMMIT}), built at {BUILD_DATE}")
}
