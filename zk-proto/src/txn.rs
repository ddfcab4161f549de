//! Transaction records: what the leader logs and every server applies.

use crate::record;
use crate::records::Acl;
use bytes::Bytes;

record! {
    /// Header of every logged transaction.
    pub struct TxnHeader {
        /// Session that issued it.
        pub client_id: i64,
        /// The request's xid.
        pub cxid: i32,
        /// Zxid assigned.
        pub zxid: i64,
        /// Leader's clock when prepared, ms since the epoch.
        pub time: i64,
        /// [`crate::OpCode`] of the transaction.
        pub txn_type: i32,
    }
}

record! {
    /// Digest of the tree after a txn (optional trailer).
    pub struct TxnDigest {
        /// Digest version.
        pub version: i32,
        /// Digest value.
        pub tree_digest: i64,
    }
}

record! {
    /// create / create2.
    pub struct CreateTxn {
        /// Final path.
        pub path: String,
        /// Data.
        pub data: Option<Bytes>,
        /// ACL.
        pub acl: Vec<Acl>,
        /// Ephemeral node.
        pub ephemeral: bool,
        /// Parent's stored cversion after this create.
        pub parent_cversion: i32,
    }
}

record! {
    /// Old create txn without parentCVersion.
    pub struct CreateTxnV0 {
        /// Final path.
        pub path: String,
        /// Data.
        pub data: Option<Bytes>,
        /// ACL.
        pub acl: Vec<Acl>,
        /// Ephemeral node.
        pub ephemeral: bool,
    }
}

record! {
    /// createTTL.
    pub struct CreateTtlTxn {
        /// Final path.
        pub path: String,
        /// Data.
        pub data: Option<Bytes>,
        /// ACL.
        pub acl: Vec<Acl>,
        /// Parent's stored cversion after this create.
        pub parent_cversion: i32,
        /// TTL, ms.
        pub ttl: i64,
    }
}

record! {
    /// createContainer.
    pub struct CreateContainerTxn {
        /// Final path.
        pub path: String,
        /// Data.
        pub data: Option<Bytes>,
        /// ACL.
        pub acl: Vec<Acl>,
        /// Parent's stored cversion after this create.
        pub parent_cversion: i32,
    }
}

record! {
    /// delete / deleteContainer.
    pub struct DeleteTxn {
        /// Path.
        pub path: String,
    }
}

record! {
    /// setData.
    pub struct SetDataTxn {
        /// Path.
        pub path: String,
        /// New data.
        pub data: Option<Bytes>,
        /// New version.
        pub version: i32,
    }
}

record! {
    /// check (inside multi).
    pub struct CheckVersionTxn {
        /// Path.
        pub path: String,
        /// Version checked.
        pub version: i32,
    }
}

record! {
    /// setACL.
    pub struct SetAclTxn {
        /// Path.
        pub path: String,
        /// New ACL.
        pub acl: Vec<Acl>,
        /// New ACL version.
        pub version: i32,
    }
}

record! {
    /// Legacy quota txn.
    pub struct SetMaxChildrenTxn {
        /// Path.
        pub path: String,
        /// Max children.
        pub max: i32,
    }
}

record! {
    /// createSession.
    pub struct CreateSessionTxn {
        /// Negotiated timeout, ms.
        pub time_out: i32,
    }
}

record! {
    /// closeSession.
    pub struct CloseSessionTxn {
        /// Ephemerals deleted with the session.
        pub paths2_delete: Vec<String>,
    }
}

record! {
    /// A failed write.
    pub struct ErrorTxn {
        /// Error code.
        pub err: i32,
    }
}

record! {
    /// One sub-transaction of a multi.
    pub struct SubTxn {
        /// Its type.
        pub txn_type: i32,
        /// Its encoded record.
        pub data: Bytes,
    }
}

record! {
    /// multi.
    pub struct MultiTxn {
        /// Sub-transactions in order.
        pub txns: Vec<SubTxn>,
    }
}

use crate::codes::OpCode;
use crate::jute::{DecodeError, Jute, Reader};
use bytes::BufMut;

/// A decoded transaction body, keyed by the type in its header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Txn {
    /// create or create2 (the header's type says which).
    Create(CreateTxn),
    /// createTTL.
    CreateTtl(CreateTtlTxn),
    /// createContainer.
    CreateContainer(CreateContainerTxn),
    /// delete.
    Delete(DeleteTxn),
    /// deleteContainer (issued by the server's container reaper).
    DeleteContainer(DeleteTxn),
    /// setData (also reconfig, on /zookeeper/config).
    SetData(SetDataTxn),
    /// check inside a multi.
    Check(CheckVersionTxn),
    /// setACL.
    SetAcl(SetAclTxn),
    /// createSession.
    CreateSession(CreateSessionTxn),
    /// closeSession.
    CloseSession(CloseSessionTxn),
    /// A failed write.
    Error(ErrorTxn),
    /// multi: sub-transactions, each with its own type.
    Multi(Vec<(OpCode, Txn)>),
}

impl Txn {
    /// Decodes the body of a transaction of type `op`.
    pub fn decode(op: OpCode, r: &mut Reader) -> Result<Txn, DecodeError> {
        Ok(match op {
            OpCode::Create | OpCode::Create2 => Txn::Create(Jute::read(r)?),
            OpCode::CreateTtl => Txn::CreateTtl(Jute::read(r)?),
            OpCode::CreateContainer => Txn::CreateContainer(Jute::read(r)?),
            OpCode::Delete => Txn::Delete(Jute::read(r)?),
            OpCode::DeleteContainer => Txn::DeleteContainer(Jute::read(r)?),
            OpCode::SetData | OpCode::Reconfig => Txn::SetData(Jute::read(r)?),
            OpCode::Check => Txn::Check(Jute::read(r)?),
            OpCode::SetAcl => Txn::SetAcl(Jute::read(r)?),
            OpCode::CreateSession => Txn::CreateSession(Jute::read(r)?),
            OpCode::CloseSession => {
                // Old logs carry closeSession with no body.
                if r.remaining() == 0 {
                    Txn::CloseSession(CloseSessionTxn::default())
                } else {
                    Txn::CloseSession(Jute::read(r)?)
                }
            }
            OpCode::Error => Txn::Error(Jute::read(r)?),
            OpCode::Multi => {
                let m = MultiTxn::read(r)?;
                let mut out = Vec::with_capacity(m.txns.len());
                for sub in m.txns {
                    let sop = OpCode::from_i32(sub.txn_type).ok_or(DecodeError::InvalidValue {
                        what: "sub-transaction type",
                        value: sub.txn_type as i64,
                    })?;
                    if sop == OpCode::Multi {
                        return Err(DecodeError::InvalidValue { what: "nested multi", value: 14 });
                    }
                    let t = Txn::decode(sop, &mut Reader::new(sub.data))?;
                    out.push((sop, t));
                }
                Txn::Multi(out)
            }
            other => {
                return Err(DecodeError::InvalidValue {
                    what: "transaction type",
                    value: other.code() as i64,
                })
            }
        })
    }

    /// Appends the body's encoding.
    pub fn encode<B: BufMut>(&self, out: &mut B) {
        match self {
            Txn::Create(t) => t.write(out),
            Txn::CreateTtl(t) => t.write(out),
            Txn::CreateContainer(t) => t.write(out),
            Txn::Delete(t) | Txn::DeleteContainer(t) => t.write(out),
            Txn::SetData(t) => t.write(out),
            Txn::Check(t) => t.write(out),
            Txn::SetAcl(t) => t.write(out),
            Txn::CreateSession(t) => t.write(out),
            Txn::CloseSession(t) => t.write(out),
            Txn::Error(t) => t.write(out),
            Txn::Multi(subs) => {
                let txns = subs
                    .iter()
                    .map(|(op, t)| {
                        let mut data = Vec::new();
                        t.encode(&mut data);
                        SubTxn { txn_type: op.code(), data: data.into() }
                    })
                    .collect();
                MultiTxn { txns }.write(out);
            }
        }
    }
}
