//! The machinery every reader stands on: the YAML document as a generic tree
//! (`node`), where it comes from and how files merge (`sources`),
//! `${env.NAME}` (`env`), macros (`macros`), `${PORT}` numbers (`ports`),
//! typed reads that collect every problem with its key path (`fields`), and
//! the errors and warnings themselves (`error`).
//!
//! Nothing here knows a configuration key except `ports`, which numbers the
//! models of a resolved configuration for the next reload.

pub(crate) mod env;
pub(crate) mod error;
pub(crate) mod fields;
pub(crate) mod macros;
pub(crate) mod node;
pub(crate) mod ports;
pub(crate) mod sizes;
pub(crate) mod sources;
