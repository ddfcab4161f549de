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
//!
//! Features: `tokio` (default) builds [`Client`] and [`recipes`]; without it the crate is the
//! sans-IO core alone, with no async runtime (zk-ffi builds libzkrs that way). `cli` (default)
//! builds the `zkrs-cli` shell. `kerberos` (off by default: it builds against the system's MIT
//! GSSAPI library) adds SASL GSSAPI (the `gssapi` module); the sans-IO side of the exchange is
//! always there ([`core::gssapi`]).
//!
//! # Example
//!
//! Connect, create a node, read it back (with the default `tokio` feature):
//!
//! ```no_run
//! use std::time::Duration;
//! use zk_client::{acl, Client};
//! use zk_proto::CreateMode;
//!
//! # async fn example() -> zk_client::Result<()> {
//! let client = Client::connect("127.0.0.1:2181", Duration::from_secs(10)).await?;
//! client.create("/app", b"v1", &acl::open_unsafe(), CreateMode::Persistent).await?;
//! let (data, stat) = client.get_data("/app").await?;
//! assert_eq!((&data[..], stat.version), (&b"v1"[..], 0));
//! client.close().await?;
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]
// Without `tokio`, the links above to the async API lead nowhere; the text still says what it is.
#![cfg_attr(not(feature = "tokio"), allow(rustdoc::broken_intra_doc_links))]

pub mod acl;
// The tokio side reads the clock, spawns the driver task and draws session seeds and recipe ids:
// zk-client/clippy.toml's sans-IO rules hold for the rest of the crate, the session core above all.
#[cfg(feature = "tokio")]
#[allow(clippy::disallowed_methods)]
mod client;
pub mod connect_string;
pub mod core;
#[cfg(feature = "tokio")]
#[allow(clippy::disallowed_methods)]
mod driver;
mod error;
#[cfg(feature = "kerberos")]
pub mod gssapi;
pub mod jaas;
#[cfg(feature = "tokio")]
#[allow(clippy::disallowed_methods)]
pub mod recipes;
mod sasl;
#[cfg(feature = "tokio")]
pub mod tls;
// The verifier libzkrs and the async client share, which zk-proto owns (the server takes it too).
#[cfg(feature = "rustls")]
pub use zk_proto::tls_verify;

#[cfg(feature = "tokio")]
pub use client::{
    multi_error, Client, ClientBuilder, ConnectFailure, PersistentWatch, StateEvents, Watch,
    PERSISTENT_WATCH_BUFFER,
};
pub use core::{MultiOp, ReadOp, SaslCredentials, SessionCredentials, SessionState, WatchedEvent};
pub use error::{Error, Result};
#[cfg(feature = "tokio")]
pub use tls::{ClientTls, TlsConfigError};
pub use zk_proto::{
    Acl, AddWatchMode, ClientInfo, CreateMode, EventType, Id, KeeperState, OpResult, Stat, WatcherType,
};
