//! The pure scheduling state machine.
