//! drivers
