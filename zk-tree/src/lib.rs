//! zk-tree: ZooKeeper's replicated state machine, behaving as Apache ZooKeeper 3.8's DataTree,
//! PrepRequestProcessor, WatchManager, SessionTracker, ACL checks and FinalRequestProcessor reads.
//!
//! The write path is [`Database::prep`] (leader: validate against the tree as it will be once
//! every earlier prepped txn is applied, and build the txn to log) followed by [`Database::apply`]
//! (everyone, in zxid order). Reads are served from applied state.
//!
//! Architecture invariant: this crate is pure and deterministic. It never reads a clock (time is an
//! argument), does no I/O and starts no threads; the same txns applied to the same state give the
//! same state and the same watch events.
//!
//! # Example
//!
//! A session and a create prepped into transactions and applied in zxid order, then a read:
//!
//! ```
//! use zk_proto::{perms, Acl, CreateRequest, Id, OpCode, Request, TxnHeader};
//! use zk_tree::{AuthIds, Database, RequestCtx, TreeConfig};
//!
//! let mut db = Database::new(TreeConfig::default());
//! let (session, now_ms) = (0x100, 1_700_000_000_000);
//! let header = |zxid, txn_type: OpCode| TxnHeader {
//!     client_id: session,
//!     cxid: zxid as i32,
//!     zxid,
//!     time: now_ms,
//!     txn_type: txn_type.code(),
//! };
//! let txn = db.prep_create_session(session, 30_000);
//! db.apply(&header(1, OpCode::CreateSession), &txn);
//!
//! let auth = AuthIds::default();
//! let request = Request::Create(CreateRequest {
//!     path: "/app".into(),
//!     data: Some("v1".into()),
//!     acl: vec![Acl { perms: perms::ALL, id: Id { scheme: "world".into(), id: "anyone".into() } }],
//!     flags: 0,
//! });
//! let txn = db.prep(&RequestCtx { session, cxid: 2, auth: &auth }, &request, 2, now_ms);
//! db.apply(&header(2, zk_tree::txn_type(request.op(), &txn)), &txn);
//!
//! let (data, stat) = db.get_data("/app", &auth, None).expect("created");
//! assert_eq!(data.as_deref(), Some(&b"v1"[..]));
//! assert_eq!(stat.czxid, 2);
//! ```
#![deny(missing_docs)]

pub mod acl;
pub mod apache_snap;
mod apply;
mod child_names;
mod database;
pub mod digest;
pub mod expiry;
pub mod java;
pub mod memory;
pub mod node;
mod nodes;
mod outstanding;
mod prep;
pub mod quota;
mod reads;
pub mod session;
pub mod snapshot;
#[allow(unsafe_code)] // One owned byte buffer behind a pointer and a u32 length (a znode's).
mod thin;
pub mod tree;
pub mod watch;
pub mod x509;

pub use acl::{authenticate, authenticate_conn, digest_id, AuthIdEntry};
pub use child_names::ChildNames;
pub use database::{Database, DatabaseId};
pub use expiry::SessionExpiry;
pub use session::{first_session_id, session_password, SessionTable};
pub use snapshot::{
    load_snapshot, ContentBuilder, Decoded, EndState, RecordRun, RecordRuns, Recovery, SnapshotCheck,
    SnapshotCursor, SnapshotDecoder, SnapshotError, SnapshotLoader, Unverifiable, WarmScratch,
};

use std::sync::Arc;
use zk_proto::{Acl, ErrorCode, Id, OpResult, Stat, WatcherEvent};

/// A session id.
pub type SessionId = i64;
/// A watcher: one per client connection, assigned by the server.
pub type WatcherId = u64;

/// Who is asking: the caller's authenticated identities (`ip:<addr>` always, plus digest ids added
/// by addauth) and whether any of them is super.
#[derive(Debug, Clone, Default)]
pub struct AuthIds {
    /// Identities, as Apache's `authInfo`.
    pub ids: Vec<Id>,
    /// Super bypasses every ACL check (an id with scheme `super` counts too).
    pub is_super: bool,
}

/// Settings that change the tree's behaviour.
#[derive(Debug, Clone)]
pub struct TreeConfig {
    /// TTL nodes allowed (zoo.cfg `extendedTypesEnabled`); without it createTTL is UNIMPLEMENTED.
    pub extended_types_enabled: bool,
    /// `"super:<base64 sha1>"` (DigestAuthenticationProvider.superDigest).
    pub super_digest: Option<String>,
    /// Session expiry bucket width, ms (tickTime).
    pub tick_ms: i64,
    /// The digest scheme is available (zookeeper.DigestAuthenticationProvider.enabled, default true).
    pub digest_enabled: bool,
    /// Containers that never had a child are reaped once this old (ms since mtime); 0 = never
    /// (znode.container.maxNeverUsedIntervalMs).
    pub container_max_never_used_ms: i64,
    /// exists checks READ when the node exists (later 3.8.x/3.9); Apache 3.8.0, which this
    /// defaults to, checks nothing.
    pub exists_requires_read: bool,
    /// Refuse writes that break a quota's hard limit with QUOTAEXCEEDED (zookeeper.enforceQuota,
    /// default false: quotas are only counted).
    pub enforce_quota: bool,
    /// The `x509` scheme is available: the server has a TLS client port, whose verified client
    /// certificates give `x509:<subject>` ids (Apache registers its X509AuthenticationProvider
    /// then).
    pub x509_enabled: bool,
    /// `X509AuthenticationProvider.superUser`: the certificate subject that is super; an
    /// `x509` ACL entry also matches it.
    pub x509_super_user: Option<String>,
    /// The `sasl` scheme is available (an `authProvider.N` line names Apache's
    /// SASLAuthenticationProvider): `sasl:<user>` ACL entries are accepted and match the ids a
    /// SASL exchange gives; the id `sasl:super` matches every `sasl` entry, as in Apache.
    pub sasl_enabled: bool,
    /// Keep the tree digest ([`digest`]) and predict it at prep, for the txn digest an ensemble's
    /// proposals carry (Apache's `zookeeper.digest.enabled`, on by default there). Off, no
    /// digest is computed at all: a standalone server has no use for one.
    pub tree_digest: bool,
    /// The memory brake's soft limit on the tree's accounted bytes (zoo.cfg's zkrs key
    /// `zkrs.treeMemorySoftLimitBytes`; 0, the default, = no limit): past it, prep refuses writes
    /// that grow the tree with [`memory::MEMORY_BRAKE_ERROR`] ([`memory`] says what is counted
    /// and why).
    pub memory_soft_limit_bytes: u64,
}

impl Default for TreeConfig {
    fn default() -> Self {
        TreeConfig {
            extended_types_enabled: false,
            super_digest: None,
            tick_ms: 3000,
            digest_enabled: true,
            container_max_never_used_ms: 0,
            exists_requires_read: false,
            enforce_quota: false,
            x509_enabled: false,
            x509_super_user: None,
            sasl_enabled: false,
            tree_digest: false,
            memory_soft_limit_bytes: 0,
        }
    }
}

/// The request's origin, for prep.
#[derive(Debug, Clone, Copy)]
pub struct RequestCtx<'a> {
    /// Session issuing the request.
    pub session: SessionId,
    /// Its xid.
    pub cxid: i32,
    /// The connection's identities.
    pub auth: &'a AuthIds,
}

/// What applying a txn did.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    /// The reply's substance.
    pub outcome: Outcome,
    /// Watch notifications this txn fires, in Apache's order. The server drops one if the watcher's
    /// connection lacks READ on the node (`acl` is the node's ACL at trigger time, the parent's for
    /// NodeChildrenChanged; None = no check).
    pub events: Vec<WatchDelivery>,
}

/// One notification for one connection.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchDelivery {
    /// The connection to notify.
    pub watcher: WatcherId,
    /// The event (state SyncConnected).
    pub event: WatcherEvent,
    /// ACL to check READ against before sending.
    pub acl: Option<Arc<Vec<Acl>>>,
}

/// The result a txn produced.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// create / create2 / createContainer / createTTL: final path and the new node's stat.
    Created {
        /// Final path (with any sequence suffix).
        path: String,
        /// Stat of the new node.
        stat: Stat,
    },
    /// delete / deleteContainer.
    Deleted,
    /// setData.
    SetData {
        /// Stat after the write.
        stat: Stat,
    },
    /// setACL.
    SetAcl {
        /// Stat after the write.
        stat: Stat,
    },
    /// multi: one result per op (create -> Create, createContainer/createTTL -> Create2; on
    /// failure: earlier ops Error(Ok), the failing one its code, later ones RUNTIMEINCONSISTENCY).
    Multi(Vec<OpResult>),
    /// createSession.
    SessionCreated,
    /// closeSession.
    SessionClosed,
    /// A failed write (ErrorTxn), or a txn that did not apply.
    Error(ErrorCode),
}

/// The opcode the TxnHeader of a prepped request carries: `error` for a failed write, otherwise
/// the request's own opcode (create2 stays create2, multi stays multi even when it failed).
pub fn txn_type(req_op: zk_proto::OpCode, txn: &zk_proto::Txn) -> zk_proto::OpCode {
    match txn {
        zk_proto::Txn::Error(_) => zk_proto::OpCode::Error,
        zk_proto::Txn::CreateSession(_) => zk_proto::OpCode::CreateSession,
        zk_proto::Txn::CloseSession(_) => zk_proto::OpCode::CloseSession,
        zk_proto::Txn::Multi(_) => zk_proto::OpCode::Multi,
        _ => req_op,
    }
}

#[cfg(test)]
mod tests;
