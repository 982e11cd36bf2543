//! The output side: the resolved configuration a load produces (`types`, and
//! the parts it is made of: `model`, `names`, `upstream`), and what is made of
//! it: the scheduler's and supervisor's settings (`mapping`), the
//! `--check-config` account (`summary`) and the self-proxy check (`loops`).
//!
//! Nothing here reads YAML; the readers build these types.

pub(crate) mod api_key;
pub(crate) mod gpus;
pub(crate) mod key_scope;
pub(crate) mod loops;
pub(crate) mod mapping;
pub(crate) mod memory;
pub(crate) mod model;
pub(crate) mod names;
pub(crate) mod summary;
pub(crate) mod types;
pub(crate) mod upstream;
