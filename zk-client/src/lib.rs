//! zk-client: a ZooKeeper client for Rust.
//!
//! - [`core`]: the sans-IO session core (handshake, xids, pings, reconnect, watches, replay).
//!   The tokio [`Client`] drives it; zk-ffi drives the same core from its own threads.
//! - [`Client`]: the async API on tokio, every ZooKeeper operation, typed [`Error`]s, one-shot
//!   watches as futures ([`Watch`]), persistent watches as streams ([`PersistentWatch`]), and a
//!   session-state stream ([`StateEvents`]).
//! - [`recipes`]: locks, leader election, group membership, configuration store, counter, unique
//!   IDs and sequence reservation, barriers, a queue, retry policies.
//! - [`connect_string`]: parsing "host:port,host:port/chroot"; [`acl`]: the well-known ACLs.
#![deny(missing_docs)]

pub mod acl;
mod client;
pub mod connect_string;
pub mod core;
mod driver;
mod error;
pub mod recipes;

pub use client::{
    multi_error, Client, ClientBuilder, PersistentWatch, StateEvents, Watch, PERSISTENT_WATCH_BUFFER,
};
pub use core::{MultiOp, ReadOp, SessionCredentials, SessionState, WatchedEvent};
pub use error::{Error, Result};
pub use zk_proto::{
    Acl, AddWatchMode, ClientInfo, CreateMode, EventType, Id, KeeperState, OpResult, Stat, WatcherType,
};
