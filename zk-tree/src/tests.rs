//! Scenario tests of the whole database: prep then apply, reads, watches, sessions.

mod memory_tests;
mod multi_tests;
mod prop_tests;
mod snapshot_tests;
mod support;
mod watch_tests;
mod write_tests;
