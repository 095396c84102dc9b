//! AIcard hub library: everything the `aicard` binary does, as modules a test can drive.

pub mod commands;
pub mod exec;
pub mod flows;
