//! Client requests decoded by opcode, and multi-op bodies.

use crate::codes::{ErrorCode, OpCode};
use crate::jute::{DecodeError, Jute, Reader};
use crate::records::*;
use bytes::BufMut;

/// A client request body, decoded by its header's opcode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// create (1).
    Create(CreateRequest),
    /// create2 (15).
    Create2(CreateRequest),
    /// createContainer (19).
    CreateContainer(CreateRequest),
    /// createTTL (21).
    CreateTtl(CreateTtlRequest),
    /// delete (2).
    Delete(DeleteRequest),
    /// deleteContainer (20).
    DeleteContainer(DeleteRequest),
    /// exists (3).
    Exists(ExistsRequest),
    /// getData (4).
    GetData(GetDataRequest),
    /// setData (5).
    SetData(SetDataRequest),
    /// getACL (6).
    GetAcl(GetAclRequest),
    /// setACL (7).
    SetAcl(SetAclRequest),
    /// getChildren (8).
    GetChildren(GetChildrenRequest),
    /// sync (9).
    Sync(SyncRequest),
    /// ping (11).
    Ping,
    /// getChildren2 (12).
    GetChildren2(GetChildren2Request),
    /// check (13), only inside multi.
    Check(CheckVersionRequest),
    /// multi (14).
    Multi(Vec<Request>),
    /// reconfig (16).
    Reconfig(ReconfigRequest),
    /// checkWatches (17).
    CheckWatches(CheckWatchesRequest),
    /// removeWatches (18).
    RemoveWatches(RemoveWatchesRequest),
    /// multiRead (22).
    MultiRead(Vec<Request>),
    /// auth (100).
    Auth(AuthPacket),
    /// setWatches (101).
    SetWatches(SetWatches),
    /// sasl (102).
    Sasl(GetSaslRequest),
    /// getEphemerals (103).
    GetEphemerals(GetEphemeralsRequest),
    /// getAllChildrenNumber (104).
    GetAllChildrenNumber(GetAllChildrenNumberRequest),
    /// setWatches2 (105).
    SetWatches2(SetWatches2),
    /// addWatch (106).
    AddWatch(AddWatchRequest),
    /// whoAmI (107).
    WhoAmI,
    /// closeSession (-11).
    CloseSession,
}

impl Request {
    /// The opcode this request is sent under.
    pub fn op(&self) -> OpCode {
        match self {
            Request::Create(_) => OpCode::Create,
            Request::Create2(_) => OpCode::Create2,
            Request::CreateContainer(_) => OpCode::CreateContainer,
            Request::CreateTtl(_) => OpCode::CreateTtl,
            Request::Delete(_) => OpCode::Delete,
            Request::DeleteContainer(_) => OpCode::DeleteContainer,
            Request::Exists(_) => OpCode::Exists,
            Request::GetData(_) => OpCode::GetData,
            Request::SetData(_) => OpCode::SetData,
            Request::GetAcl(_) => OpCode::GetAcl,
            Request::SetAcl(_) => OpCode::SetAcl,
            Request::GetChildren(_) => OpCode::GetChildren,
            Request::Sync(_) => OpCode::Sync,
            Request::Ping => OpCode::Ping,
            Request::GetChildren2(_) => OpCode::GetChildren2,
            Request::Check(_) => OpCode::Check,
            Request::Multi(_) => OpCode::Multi,
            Request::Reconfig(_) => OpCode::Reconfig,
            Request::CheckWatches(_) => OpCode::CheckWatches,
            Request::RemoveWatches(_) => OpCode::RemoveWatches,
            Request::MultiRead(_) => OpCode::MultiRead,
            Request::Auth(_) => OpCode::Auth,
            Request::SetWatches(_) => OpCode::SetWatches,
            Request::Sasl(_) => OpCode::Sasl,
            Request::GetEphemerals(_) => OpCode::GetEphemerals,
            Request::GetAllChildrenNumber(_) => OpCode::GetAllChildrenNumber,
            Request::SetWatches2(_) => OpCode::SetWatches2,
            Request::AddWatch(_) => OpCode::AddWatch,
            Request::WhoAmI => OpCode::WhoAmI,
            Request::CloseSession => OpCode::CloseSession,
        }
    }

    /// The path the request addresses, if it has one.
    pub fn path(&self) -> Option<&str> {
        Some(match self {
            Request::Create(r) | Request::Create2(r) | Request::CreateContainer(r) => &r.path,
            Request::CreateTtl(r) => &r.path,
            Request::Delete(r) | Request::DeleteContainer(r) => &r.path,
            Request::Exists(r) => &r.path,
            Request::GetData(r) => &r.path,
            Request::SetData(r) => &r.path,
            Request::GetAcl(r) => &r.path,
            Request::SetAcl(r) => &r.path,
            Request::GetChildren(r) => &r.path,
            Request::Sync(r) => &r.path,
            Request::GetChildren2(r) => &r.path,
            Request::Check(r) => &r.path,
            Request::CheckWatches(r) => &r.path,
            Request::RemoveWatches(r) => &r.path,
            Request::GetEphemerals(r) => &r.prefix_path,
            Request::GetAllChildrenNumber(r) => &r.path,
            Request::AddWatch(r) => &r.path,
            _ => return None,
        })
    }

    /// Decodes the body of a request sent under `op`.
    ///
    /// Errors: [`RequestError::Unknown`] for an opcode clients may not send (the server answers
    /// UNIMPLEMENTED and closes), [`RequestError::Decode`] for a body that does not parse.
    pub fn decode(op: i32, r: &mut Reader) -> Result<Request, RequestError> {
        let code = OpCode::from_i32(op).ok_or(RequestError::Unknown(op))?;
        Ok(match code {
            OpCode::Create => Request::Create(Jute::read(r)?),
            OpCode::Create2 => Request::Create2(Jute::read(r)?),
            OpCode::CreateContainer => Request::CreateContainer(Jute::read(r)?),
            OpCode::CreateTtl => Request::CreateTtl(Jute::read(r)?),
            OpCode::Delete => Request::Delete(Jute::read(r)?),
            OpCode::DeleteContainer => Request::DeleteContainer(Jute::read(r)?),
            OpCode::Exists => Request::Exists(Jute::read(r)?),
            OpCode::GetData => Request::GetData(Jute::read(r)?),
            OpCode::SetData => Request::SetData(Jute::read(r)?),
            OpCode::GetAcl => Request::GetAcl(Jute::read(r)?),
            OpCode::SetAcl => Request::SetAcl(Jute::read(r)?),
            OpCode::GetChildren => Request::GetChildren(Jute::read(r)?),
            OpCode::Sync => Request::Sync(Jute::read(r)?),
            OpCode::Ping => Request::Ping,
            OpCode::GetChildren2 => Request::GetChildren2(Jute::read(r)?),
            OpCode::Check => Request::Check(Jute::read(r)?),
            OpCode::Multi => Request::Multi(decode_multi(r, false)?),
            OpCode::MultiRead => Request::MultiRead(decode_multi(r, true)?),
            OpCode::Reconfig => Request::Reconfig(Jute::read(r)?),
            OpCode::CheckWatches => Request::CheckWatches(Jute::read(r)?),
            OpCode::RemoveWatches => Request::RemoveWatches(Jute::read(r)?),
            OpCode::Auth => Request::Auth(Jute::read(r)?),
            OpCode::SetWatches => Request::SetWatches(Jute::read(r)?),
            OpCode::Sasl => Request::Sasl(Jute::read(r)?),
            OpCode::GetEphemerals => Request::GetEphemerals(Jute::read(r)?),
            OpCode::GetAllChildrenNumber => Request::GetAllChildrenNumber(Jute::read(r)?),
            OpCode::SetWatches2 => Request::SetWatches2(Jute::read(r)?),
            OpCode::AddWatch => Request::AddWatch(Jute::read(r)?),
            OpCode::WhoAmI => Request::WhoAmI,
            OpCode::CloseSession => Request::CloseSession,
            OpCode::Notification | OpCode::CreateSession | OpCode::Error => {
                return Err(RequestError::Unknown(op))
            }
        })
    }

    /// Appends the body's encoding (not the header).
    pub fn encode<B: BufMut>(&self, out: &mut B) {
        match self {
            Request::Create(r) | Request::Create2(r) | Request::CreateContainer(r) => r.write(out),
            Request::CreateTtl(r) => r.write(out),
            Request::Delete(r) | Request::DeleteContainer(r) => r.write(out),
            Request::Exists(r) => r.write(out),
            Request::GetData(r) => r.write(out),
            Request::SetData(r) => r.write(out),
            Request::GetAcl(r) => r.write(out),
            Request::SetAcl(r) => r.write(out),
            Request::GetChildren(r) => r.write(out),
            Request::Sync(r) => r.write(out),
            Request::GetChildren2(r) => r.write(out),
            Request::Check(r) => r.write(out),
            Request::Multi(ops) | Request::MultiRead(ops) => {
                for op in ops {
                    MultiHeader { op: op.op().code(), done: false, err: -1 }.write(out);
                    op.encode(out);
                }
                MultiHeader { op: -1, done: true, err: -1 }.write(out);
            }
            Request::Reconfig(r) => r.write(out),
            Request::CheckWatches(r) => r.write(out),
            Request::RemoveWatches(r) => r.write(out),
            Request::Auth(r) => r.write(out),
            Request::SetWatches(r) => r.write(out),
            Request::Sasl(r) => r.write(out),
            Request::GetEphemerals(r) => r.write(out),
            Request::GetAllChildrenNumber(r) => r.write(out),
            Request::SetWatches2(r) => r.write(out),
            Request::AddWatch(r) => r.write(out),
            Request::Ping | Request::WhoAmI | Request::CloseSession => {}
        }
    }
}

/// Why a request body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The opcode is not one a client may send.
    #[error("unknown opcode {0}")]
    Unknown(i32),
    /// The body did not parse.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// A multi contained an op its kind does not allow.
    #[error("op {0} not allowed in this multi")]
    BadMultiOp(i32),
}

impl RequestError {
    /// The error code Apache ZooKeeper answers with.
    pub fn code(&self) -> ErrorCode {
        match self {
            RequestError::Unknown(_) => ErrorCode::Unimplemented,
            RequestError::Decode(_) | RequestError::BadMultiOp(_) => ErrorCode::MarshallingError,
        }
    }
}

/// Most ops one multi may carry; a multi is also bounded by the frame size, this only caps the
/// bookkeeping allocated per op.
pub const MAX_MULTI_OPS: usize = 100_000;

fn decode_multi(r: &mut Reader, read_only: bool) -> Result<Vec<Request>, RequestError> {
    let mut ops = Vec::new();
    loop {
        let h = MultiHeader::read(r)?;
        if h.done {
            return Ok(ops);
        }
        if ops.len() >= MAX_MULTI_OPS {
            return Err(RequestError::BadMultiOp(h.op));
        }
        let op = OpCode::from_i32(h.op).ok_or(RequestError::BadMultiOp(h.op))?;
        let allowed = if read_only {
            matches!(op, OpCode::GetChildren | OpCode::GetData)
        } else {
            matches!(
                op,
                OpCode::Create
                    | OpCode::Create2
                    | OpCode::CreateTtl
                    | OpCode::CreateContainer
                    | OpCode::Delete
                    | OpCode::SetData
                    | OpCode::Check
            )
        };
        if !allowed {
            return Err(RequestError::BadMultiOp(h.op));
        }
        ops.push(Request::decode(h.op, r)?);
    }
}
