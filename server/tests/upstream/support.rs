//! The process helpers every process-running test binary shares.

#[path = "../common/procs.rs"]
mod procs;
pub(crate) use procs::{
    LIMIT, assert_gone, free_port, is_alive, mockswap_bin, wait_exit, wait_gone, within,
};
