//! zk-proto: Apache ZooKeeper's wire protocol as plain data.
//!
//! The jute codec ([`jute`]), every client, reply and transaction record ([`records`], [`txn`]),
//! requests decoded by opcode ([`request`]), multi replies ([`response`]), the handshake
//! ([`connect`]), framing bounded by `jute.maxbuffer` ([`frame`]), and path validation ([`path`]).
//!
//! Beside the wire format, two small pieces the server and the client share: SASL's DIGEST-MD5
//! exchange ([`digest_md5`]) with the JAAS files that hold its users ([`jaas`], the text only),
//! and, with the `rustls` feature (off by default), the TLS verifier that checks a certificate's
//! chain and not its name (`tls_verify`).
//!
//! This crate does no I/O and knows nothing of tokio; every other zkrs crate builds on it.
//!
//! # Example
//!
//! A create request encoded as it goes on the wire, and read back:
//!
//! ```
//! use bytes::Bytes;
//! use zk_proto::{perms, Acl, CreateMode, CreateRequest, Id, Jute, Reader};
//!
//! zk_proto::path::validate_path("/app/config").expect("an absolute path");
//! let request = CreateRequest {
//!     path: "/app/config".into(),
//!     data: Some(Bytes::from_static(b"v1")),
//!     acl: vec![Acl { perms: perms::ALL, id: Id { scheme: "world".into(), id: "anyone".into() } }],
//!     flags: CreateMode::Persistent as i32,
//! };
//! let mut wire = Vec::new();
//! request.write(&mut wire);
//! let back = CreateRequest::read(&mut Reader::new(Bytes::from(wire))).expect("decodes");
//! assert_eq!(back.path, "/app/config");
//! assert_eq!(back.data.as_deref(), Some(&b"v1"[..]));
//! ```
#![deny(missing_docs)]

pub mod codes;
pub mod connect;
pub mod digest_md5;
pub mod frame;
pub mod host_port;
pub mod jaas;
pub mod jute;
pub mod path;
pub mod records;
pub mod request;
pub mod response;
#[cfg(feature = "rustls")]
pub mod tls_verify;
pub mod txn;

pub use codes::{
    perms, xid, AddWatchMode, CreateMode, ErrorCode, EventType, KeeperState, OpCode, WatcherType,
};
pub use connect::{ConnectRequest, ConnectResponse};
pub use frame::{FrameDecoder, DEFAULT_MAX_FRAME};
pub use host_port::{HostPort, HostPortError};
pub use jute::{DecodeError, Jute, Reader};
pub use records::*;
pub use request::{Request, RequestError};
pub use response::OpResult;
pub use txn::*;
