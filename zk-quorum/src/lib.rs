//! Zab building blocks that speak Apache ZooKeeper 3.8's own quorum formats, so that a zkrs server can
//! one day join a running Apache ensemble.
//!
//! Modules:
//! - [`wire`]: the byte formats of the election port (connection handshake, message framing,
//!   notifications) and of the quorum port (`QuorumPacket`, its incremental stream decoder, and the
//!   payloads of LEADERINFO, ACKEPOCH, learner PING, REQUEST and REVALIDATE).
//! - [`config`]: the quorum configuration as Apache writes it into notifications and `NEWLEADER`
//!   (`server.N=...` lines, groups, weights, `version=<hex>`), both directions.
//! - [`quorum`]: quorum verifiers (majority and hierarchical): "does this set of sids form a quorum";
//!   and the commit rule on top of them, [`quorum::VoterSet`] and [`quorum::AckLedger`] (each
//!   voter's cumulative ACK, clamped when its sync starts), which the server and the simulators
//!   share.
//! - [`reconfig`]: dynamic reconfiguration: the configuration a reconfig request asks for (or
//!   Apache's error for it), and whom a leader hands over to when it leaves the voters.
//! - [`recovery`]: what forcing one surviving server to lead alone would do (ClickHouse Keeper's
//!   `rcvr`), for an ensemble whose quorum is lost for good.
//! - [`election`]: Fast Leader Election as a sans-IO state machine (events in, actions out), one
//!   per process for its whole life (its round only grows), plus the connection rule of the
//!   election port.
//!
//! **Invariant:** nothing here does I/O, reads a clock, spawns a thread or draws a random number.
//! Time is an argument (`now_ms`, a monotonic millisecond count from any origin), bytes come in as
//! slices and go out as buffers, and every decision is a value the caller acts on. This is what lets
//! the tests run whole ensembles deterministically from one seed. Every decoder is total: bad
//! lengths, unknown types and truncated input give a typed error, never a panic, and no decoder
//! allocates more than the input it was given can hold.
//!
//! # Example
//!
//! The quorum of a zoo.cfg's `server.N` lines (two participants and an observer do not make a
//! three-voter ensemble):
//!
//! ```
//! use zk_quorum::config::QuorumConfig;
//! use zk_quorum::quorum::QuorumVerifier;
//!
//! let config = QuorumConfig::parse(
//!     "server.1=10.0.0.1:2888:3888\n\
//!      server.2=10.0.0.2:2888:3888\n\
//!      server.3=10.0.0.3:2888:3888:observer\n",
//! )?;
//! let verifier = QuorumVerifier::from_config(&config);
//! assert!(verifier.contains_quorum([1, 2]));
//! assert!(!verifier.contains_quorum([1, 3]), "an observer's ack does not count");
//! # Ok::<(), zk_quorum::config::ConfigError>(())
//! ```
#![deny(missing_docs)]

pub mod auth;
pub mod config;
pub mod election;
pub mod quorum;
pub mod reconfig;
pub mod recovery;
pub mod wire;
pub mod zab;
