//! The session handshake, which has no request header and an optional trailing readOnly byte.

use crate::jute::{DecodeError, Jute, Reader};
use bytes::{BufMut, Bytes};

/// The first frame a client sends.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConnectRequest {
    /// Always 0.
    pub protocol_version: i32,
    /// Last zxid the client has seen.
    pub last_zxid_seen: i64,
    /// Requested session timeout, ms.
    pub time_out: i32,
    /// 0 for a new session, else the session to resume.
    pub session_id: i64,
    /// The session's password (16 bytes when resuming).
    pub passwd: Bytes,
    /// Whether the client accepts a read-only server; `None` when an old client omitted the byte.
    pub read_only: Option<bool>,
}

impl Jute for ConnectRequest {
    fn write<B: BufMut>(&self, out: &mut B) {
        self.protocol_version.write(out);
        self.last_zxid_seen.write(out);
        self.time_out.write(out);
        self.session_id.write(out);
        self.passwd.write(out);
        if let Some(ro) = self.read_only {
            ro.write(out);
        }
    }
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ConnectRequest {
            protocol_version: Jute::read(r)?,
            last_zxid_seen: Jute::read(r)?,
            time_out: Jute::read(r)?,
            session_id: Jute::read(r)?,
            passwd: Jute::read(r)?,
            read_only: if r.remaining() > 0 { Some(Jute::read(r)?) } else { None },
        })
    }
}

/// The server's answer to [`ConnectRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConnectResponse {
    /// Always 0.
    pub protocol_version: i32,
    /// Negotiated timeout, ms; 0 when the session is refused.
    pub time_out: i32,
    /// Session id; 0 when refused.
    pub session_id: i64,
    /// Session password (16 bytes).
    pub passwd: Bytes,
    /// Whether the server is read-only; sent only when the request carried the byte.
    pub read_only: Option<bool>,
}

impl Jute for ConnectResponse {
    fn write<B: BufMut>(&self, out: &mut B) {
        self.protocol_version.write(out);
        self.time_out.write(out);
        self.session_id.write(out);
        self.passwd.write(out);
        if let Some(ro) = self.read_only {
            ro.write(out);
        }
    }
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ConnectResponse {
            protocol_version: Jute::read(r)?,
            time_out: Jute::read(r)?,
            session_id: Jute::read(r)?,
            passwd: Jute::read(r)?,
            read_only: if r.remaining() > 0 { Some(Jute::read(r)?) } else { None },
        })
    }
}
