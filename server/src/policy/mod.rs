//! Eviction policy: which running models must stop so that another can run.
