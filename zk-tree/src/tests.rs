//! Scenario tests of the whole database: prep then apply, reads, watches, sessions.

mod multi_tests;
mod prop_tests;
mod snapshot_tests;
mod support;
mod watch_tests;
mod write_tests;
