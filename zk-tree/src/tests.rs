//! Scenario tests of the whole database: prep then apply, reads, watches, sessions.

mod support;
mod write_tests;
