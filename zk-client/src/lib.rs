//! zk-client: a ZooKeeper client for Rust.
//!
//! - [`core`]: the sans-IO session core (handshake, xids, pings, reconnect, watches, replay).
//!   The tokio [`Client`] drives it; zk-ffi drives the same core from its own threads.
//! - [`Client`]: the async API on tokio, every ZooKeeper operation, typed [`Error`]s, one-shot
//!   watches as futures, persistent watches as streams, a session-state stream.
//! - [`connect_string`]: parsing "host:port,host:port/chroot".
#![deny(missing_docs)]

pub mod connect_string;
pub mod core;
