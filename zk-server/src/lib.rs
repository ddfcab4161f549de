//! zk-server: the zkrs-server binary's library — configuration, connections, the request pipeline,
//! four-letter words, the AdminServer and the Prometheus endpoint.
//!
//! This is the only zkrs crate that owns sockets, files and threads for the server. The state
//! machine lives in zk-tree and the wire format in zk-proto; this crate wires them to the network.
//!
//! # Example
//!
//! A standalone server from a zoo.cfg, run until Ctrl-C (what `zkrs-server zoo.cfg` does):
//!
//! ```no_run
//! use zk_server::config::ServerConfig;
//! use zk_server::settings::Settings;
//!
//! let cfg = ServerConfig::parse("tickTime=2000\ndataDir=/var/lib/zkrs\nclientPort=2181\n", None)?;
//! let settings = Settings::from_config(&cfg)?;
//! let runtime = tokio::runtime::Runtime::new()?;
//! runtime.block_on(zk_server::server::run(settings, None, async {
//!     tokio::signal::ctrl_c().await.ok();
//! }))?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]
// Clocks, threads and OS randomness are the driver's and the tests' to use; src/core denies them.
#![allow(clippy::disallowed_methods)]

pub mod admin;
pub mod apache_snap_file;
/// Apache's snapshot streams (plain, gz, snappy-java's), decoded: zk-log's module, which
/// `zkrs-cli export --from-snapshot` shares.
pub use zk_log::apache_snap_stream;
pub mod backup;
pub mod config;
pub mod config_reference;
pub mod conn;
pub mod core;
pub mod driver;
pub mod ensemble;
pub mod fourlw;
pub mod frame_queue;
pub mod kerberos;
#[cfg(feature = "kerberos")]
pub mod kerberos_gss;
pub mod log;
pub mod node;
pub mod sasl_config;
pub mod server;
pub mod settings;
pub mod snapshots;
pub mod ssl_config;
pub mod stats;
pub mod status;
pub mod summary;
pub mod tls;
pub mod tools;
pub mod view;
pub mod x509;
