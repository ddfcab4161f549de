//! zk-server: the zkrs-server binary's library — configuration, connections, the request pipeline,
//! four-letter words, the AdminServer and the Prometheus endpoint.
//!
//! This is the only zkrs crate that owns sockets, files and threads for the server. The state
//! machine lives in zk-tree and the wire format in zk-proto; this crate wires them to the network.
#![deny(missing_docs)]
// Clocks, threads and OS randomness are the driver's and the tests' to use; src/core denies them.
#![allow(clippy::disallowed_methods)]

pub mod admin;
pub mod config;
pub mod conn;
pub mod core;
pub mod driver;
pub mod ensemble;
pub mod fourlw;
pub mod log;
pub mod server;
pub mod settings;
pub mod snapshots;
pub mod ssl_config;
pub mod stats;
pub mod status;
pub mod tls;
pub mod tools;
pub mod x509;
