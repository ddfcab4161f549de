//! Replies: the per-op result records and the multi reply layout.

use crate::codes::{ErrorCode, OpCode};
use crate::jute::{DecodeError, Jute, Reader};
use crate::records::*;
use bytes::BufMut;

/// One result inside a multi or multiRead reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpResult {
    /// create: the path.
    Create(String),
    /// create2 / createTTL / createContainer: path and stat.
    Create2(String, Stat),
    /// delete.
    Delete,
    /// setData: the new stat.
    SetData(Stat),
    /// check.
    Check,
    /// getChildren inside multiRead.
    GetChildren(Vec<String>),
    /// getData inside multiRead.
    GetData(GetDataResponse),
    /// An error.
    Error(ErrorCode),
}

impl OpResult {
    /// Appends the op header and its record.
    pub fn encode<B: BufMut>(&self, out: &mut B) {
        let (op, err) = match self {
            OpResult::Create(_) => (OpCode::Create.code(), 0),
            OpResult::Create2(..) => (OpCode::Create2.code(), 0),
            OpResult::Delete => (OpCode::Delete.code(), 0),
            OpResult::SetData(_) => (OpCode::SetData.code(), 0),
            OpResult::Check => (OpCode::Check.code(), 0),
            OpResult::GetChildren(_) => (OpCode::GetChildren.code(), 0),
            OpResult::GetData(_) => (OpCode::GetData.code(), 0),
            OpResult::Error(e) => (-1, e.code()),
        };
        MultiHeader { op, done: false, err }.write(out);
        match self {
            OpResult::Create(path) => path.write(out),
            OpResult::Create2(path, stat) => {
                path.write(out);
                stat.write(out);
            }
            OpResult::SetData(stat) => stat.write(out),
            OpResult::GetChildren(c) => c.write(out),
            OpResult::GetData(d) => d.write(out),
            OpResult::Error(e) => e.code().write(out),
            OpResult::Delete | OpResult::Check => {}
        }
    }
}

/// Encodes a whole multi reply body: each result, then the end marker.
pub fn encode_multi_response<B: BufMut>(results: &[OpResult], out: &mut B) {
    for r in results {
        r.encode(out);
    }
    MultiHeader { op: -1, done: true, err: -1 }.write(out);
}

/// Decodes a multi or multiRead reply body.
pub fn decode_multi_response(r: &mut Reader) -> Result<Vec<OpResult>, DecodeError> {
    let mut out = Vec::new();
    loop {
        let h = MultiHeader::read(r)?;
        if h.done {
            return Ok(out);
        }
        let res = match OpCode::from_i32(h.op) {
            Some(OpCode::Create) => OpResult::Create(String::read(r)?),
            Some(OpCode::Create2) | Some(OpCode::CreateTtl) | Some(OpCode::CreateContainer) => {
                let c = Create2Response::read(r)?;
                OpResult::Create2(c.path, c.stat)
            }
            Some(OpCode::Delete) => OpResult::Delete,
            Some(OpCode::SetData) => OpResult::SetData(Stat::read(r)?),
            Some(OpCode::Check) => OpResult::Check,
            Some(OpCode::GetChildren) => OpResult::GetChildren(Vec::read(r)?),
            Some(OpCode::GetData) => OpResult::GetData(GetDataResponse::read(r)?),
            Some(OpCode::Error) => {
                let e = ErrorResponse::read(r)?.err;
                OpResult::Error(
                    ErrorCode::from_i32(e)
                        .ok_or(DecodeError::InvalidValue { what: "error code", value: e as i64 })?,
                )
            }
            _ => return Err(DecodeError::InvalidValue { what: "multi result type", value: h.op as i64 }),
        };
        out.push(res);
    }
}
