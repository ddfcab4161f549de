//! The `data` payloads of the quorum packets that are not plain records: plain big-endian fields
//! written with Java's `DataOutputStream` or `ByteBuffer`, no jute length prefixes.
//!
//! Decoders take the packet's data (null reads as empty) and, as Apache does, ignore trailing bytes
//! unless the format is a repeated list that must fill the payload exactly.

use bytes::{Buf, BufMut, Bytes};

/// The protocol version a 3.4+ learner and leader announce in LearnerInfo and LEADERINFO.
pub const LEARNER_PROTOCOL_VERSION: i32 = 0x10000;

/// Why a payload did not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    /// The payload is shorter than its fixed fields.
    #[error("{what} payload of {len} bytes is shorter than {needed}")]
    Truncated {
        /// Which payload.
        what: &'static str,
        /// Bytes its fields need.
        needed: usize,
        /// Bytes present.
        len: usize,
    },
    /// A repeated list did not fill the payload in whole entries.
    #[error("{what} payload of {len} bytes is not a whole number of {entry}-byte entries")]
    PartialEntry {
        /// Which payload.
        what: &'static str,
        /// Size of one entry.
        entry: usize,
        /// Bytes present.
        len: usize,
    },
    /// A count field is out of its range.
    #[error("{what} payload counts {count} entries (at most {max})")]
    BadCount {
        /// Which payload.
        what: &'static str,
        /// The count read.
        count: i64,
        /// The most it may be.
        max: usize,
    },
}

fn need(what: &'static str, data: &[u8], needed: usize) -> Result<(), PayloadError> {
    if data.len() < needed {
        Err(PayloadError::Truncated { what, needed, len: data.len() })
    } else {
        Ok(())
    }
}

/// FOLLOWERINFO / OBSERVERINFO data: who the learner is.
///
/// Read by length as the leader does: the sid (8 bytes) is required; the protocol version (next 4)
/// and the config version (next 8) are read only when present, so older learners still decode.
///
/// zkrs may append its own 8 bytes after the config version: the magic [`ZKRS_INFO_MAGIC`]
/// (u32, big-endian) and flags (u32, [`LEARNER_WANTS_SNAP`]). Apache's leader reads the first 20
/// bytes by length and ignores the rest, so an Apache leader sees a plain 3.8 learner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LearnerInfo {
    /// The learner's server id.
    pub sid: i64,
    /// Its protocol version ([`LEARNER_PROTOCOL_VERSION`] from 3.4+).
    pub protocol_version: Option<i32>,
    /// The version of its last activated config (3.5+); the leader refuses a higher one than its own.
    pub config_version: Option<i64>,
    /// zkrs's flags, when the learner is a zkrs server that set any.
    pub zkrs_flags: Option<u32>,
}

/// Marks zkrs's 8 bytes after a LearnerInfo's config version ("ZKRS").
pub const ZKRS_INFO_MAGIC: u32 = 0x5a4b_5253;

/// zkrs learner flag: sync me by SNAP, whatever my last zxid (my tree disagreed with the
/// ensemble's digests, and only a snapshot of the leader's replaces it whole).
pub const LEARNER_WANTS_SNAP: u32 = 1;

/// zkrs learner flag: I understand [`crate::wire::packet::ZKRS_UNPROPOSED`] (a learner of an
/// older build would leave its leader on a packet type it does not know).
pub const LEARNER_TAKES_UNPROPOSED: u32 = 2;

impl LearnerInfo {
    /// The 20-byte form a 3.8 learner sends.
    pub fn new(sid: i64, config_version: i64) -> LearnerInfo {
        LearnerInfo {
            sid,
            protocol_version: Some(LEARNER_PROTOCOL_VERSION),
            config_version: Some(config_version),
            zkrs_flags: None,
        }
    }

    /// Encodes the fields present (a config version is written only after a protocol version).
    pub fn encode(&self) -> Bytes {
        let mut out = Vec::with_capacity(20);
        out.put_i64(self.sid);
        if let Some(v) = self.protocol_version {
            out.put_i32(v);
            if let Some(c) = self.config_version {
                out.put_i64(c);
                if let Some(f) = self.zkrs_flags {
                    out.put_u32(ZKRS_INFO_MAGIC);
                    out.put_u32(f);
                }
            }
        }
        Bytes::from(out)
    }

    /// Decodes by length. Errors: fewer than 8 bytes.
    pub fn decode(mut data: &[u8]) -> Result<LearnerInfo, PayloadError> {
        need("LearnerInfo", data, 8)?;
        let sid = data.get_i64();
        let protocol_version = if data.len() >= 4 { Some(data.get_i32()) } else { None };
        let config_version = if data.len() >= 8 { Some(data.get_i64()) } else { None };
        let zkrs_flags = if config_version.is_some() && data.len() >= 8 && data.get_u32() == ZKRS_INFO_MAGIC {
            Some(data.get_u32())
        } else {
            None
        };
        Ok(LearnerInfo { sid, protocol_version, config_version, zkrs_flags })
    }
}

/// LEADERINFO data: the leader's protocol version (the new epoch is in the packet's zxid).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderInfo {
    /// [`LEARNER_PROTOCOL_VERSION`] from a 3.4+ leader.
    pub protocol_version: i32,
}

impl LeaderInfo {
    /// Four bytes.
    pub fn encode(&self) -> Bytes {
        Bytes::copy_from_slice(&self.protocol_version.to_be_bytes())
    }

    /// Errors: fewer than 4 bytes.
    pub fn decode(mut data: &[u8]) -> Result<LeaderInfo, PayloadError> {
        need("LEADERINFO", data, 4)?;
        Ok(LeaderInfo { protocol_version: data.get_i32() })
    }
}

/// ACKEPOCH data: the learner's current epoch, or -1 when the new epoch equals its accepted epoch
/// (such an ACKEPOCH is not counted toward the leader's quorum). The learner's last logged zxid is
/// the packet's zxid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckEpoch {
    /// Current epoch (a Java int on the wire), or -1.
    pub current_epoch: i32,
}

impl AckEpoch {
    /// Four bytes.
    pub fn encode(&self) -> Bytes {
        Bytes::copy_from_slice(&self.current_epoch.to_be_bytes())
    }

    /// Errors: fewer than 4 bytes.
    pub fn decode(mut data: &[u8]) -> Result<AckEpoch, PayloadError> {
        need("ACKEPOCH", data, 4)?;
        Ok(AckEpoch { current_epoch: data.get_i32() })
    }
}

/// One entry of a learner's PING reply: a session it saw activity on, and that session's timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionTouch {
    /// Session id.
    pub session_id: i64,
    /// Session timeout in milliseconds.
    pub timeout_ms: i32,
}

impl SessionTouch {
    const WIRE_LEN: usize = 12;

    /// Encodes a learner PING reply's data: the entries back to back, no count.
    pub fn encode_list(touches: &[SessionTouch]) -> Bytes {
        let mut out = Vec::with_capacity(touches.len() * Self::WIRE_LEN);
        for t in touches {
            out.put_i64(t.session_id);
            out.put_i32(t.timeout_ms);
        }
        Bytes::from(out)
    }

    /// Decodes a learner PING reply's data (empty or null: no sessions). Errors: a length that is not
    /// a multiple of 12 (the leader's reader would hit end of stream inside an entry).
    pub fn decode_list(mut data: &[u8]) -> Result<Vec<SessionTouch>, PayloadError> {
        if !data.len().is_multiple_of(Self::WIRE_LEN) {
            return Err(PayloadError::PartialEntry { what: "PING", entry: Self::WIRE_LEN, len: data.len() });
        }
        let mut out = Vec::with_capacity(data.len() / Self::WIRE_LEN);
        while data.has_remaining() {
            out.push(SessionTouch { session_id: data.get_i64(), timeout_ms: data.get_i32() });
        }
        Ok(out)
    }
}

/// REQUEST data: a client request a learner forwards to the leader. The client identities travel in
/// the packet's `authinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardedRequest {
    /// The client's session.
    pub session_id: i64,
    /// The client's xid.
    pub cxid: i32,
    /// The opcode.
    pub op: i32,
    /// The request record as the client sent it, without the request header; may be empty.
    pub body: Bytes,
}

impl ForwardedRequest {
    /// `i64 session, i32 cxid, i32 op, body`.
    pub fn encode(&self) -> Bytes {
        let mut out = Vec::with_capacity(16 + self.body.len());
        out.put_i64(self.session_id);
        out.put_i32(self.cxid);
        out.put_i32(self.op);
        out.put_slice(&self.body);
        Bytes::from(out)
    }

    /// The body is a zero-copy slice of `data`. Errors: fewer than 16 bytes.
    pub fn decode(data: &Bytes) -> Result<ForwardedRequest, PayloadError> {
        need("REQUEST", data, 16)?;
        let mut r = data.clone();
        let session_id = r.get_i64();
        let cxid = r.get_i32();
        let op = r.get_i32();
        Ok(ForwardedRequest { session_id, cxid, op, body: r })
    }
}

/// REVALIDATE data from a learner: may this session (reconnecting to the learner) live on?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RevalidateRequest {
    /// Session id.
    pub session_id: i64,
    /// Timeout the client asked for, in milliseconds.
    pub timeout_ms: i32,
}

impl RevalidateRequest {
    /// Twelve bytes.
    pub fn encode(&self) -> Bytes {
        let mut out = Vec::with_capacity(12);
        out.put_i64(self.session_id);
        out.put_i32(self.timeout_ms);
        Bytes::from(out)
    }

    /// Errors: fewer than 12 bytes.
    pub fn decode(mut data: &[u8]) -> Result<RevalidateRequest, PayloadError> {
        need("REVALIDATE", data, 12)?;
        Ok(RevalidateRequest { session_id: data.get_i64(), timeout_ms: data.get_i32() })
    }
}

/// REVALIDATE data from the leader (same packet type, zxid -1): the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RevalidateReply {
    /// Session id.
    pub session_id: i64,
    /// Whether the session is still valid.
    pub valid: bool,
}

impl RevalidateReply {
    /// Nine bytes: `i64 session, u8 valid`.
    pub fn encode(&self) -> Bytes {
        let mut out = Vec::with_capacity(9);
        out.put_i64(self.session_id);
        out.put_u8(u8::from(self.valid));
        Bytes::from(out)
    }

    /// Any non-zero byte is true, as Java's `readBoolean`. Errors: fewer than 9 bytes.
    pub fn decode(mut data: &[u8]) -> Result<RevalidateReply, PayloadError> {
        need("REVALIDATE reply", data, 9)?;
        Ok(RevalidateReply { session_id: data.get_i64(), valid: data.get_u8() != 0 })
    }
}

/// The most sessions a [`MovedSessions`] lists (512 KiB of ids); a leader with more to name
/// sends [`MovedSessions::Unlisted`].
pub const MOVED_SESSIONS_MAX: usize = 65_536;

/// ZKRS_UNPROPOSED data (zkrs's own, [`crate::wire::packet::ZKRS_UNPROPOSED`]): the sessions,
/// among those the learner may forward requests of again, that the leader saw move to another
/// server (a revalidation from elsewhere) before it left. Their requests would have been refused
/// with SESSIONMOVED by that leader, and the next leader does not know who owns them: the
/// learner closes their connections instead of forwarding them again.
///
/// `i32 count`, then `count` session ids (`i64`), filling the payload exactly; count -1:
/// [`MovedSessions::Unlisted`]. An empty payload (a zkrs leader of an older build) lists none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MovedSessions {
    /// These sessions moved; the learner's others did not.
    Listed(Vec<i64>),
    /// More moved than [`MOVED_SESSIONS_MAX`]: the learner forwards nothing again.
    Unlisted,
}

impl MovedSessions {
    /// `i32 count` and the ids.
    pub fn encode(&self) -> Bytes {
        match self {
            MovedSessions::Listed(ids) => {
                assert!(ids.len() <= MOVED_SESSIONS_MAX, "{} moved sessions listed", ids.len());
                let mut out = Vec::with_capacity(4 + 8 * ids.len());
                out.put_i32(ids.len() as i32);
                for &id in ids {
                    out.put_i64(id);
                }
                Bytes::from(out)
            }
            MovedSessions::Unlisted => Bytes::from_static(&[0xff, 0xff, 0xff, 0xff]),
        }
    }

    /// Errors: a count other than -1 or 0..=[`MOVED_SESSIONS_MAX`], or a payload its count
    /// does not fill exactly.
    pub fn decode(mut data: &[u8]) -> Result<MovedSessions, PayloadError> {
        const WHAT: &str = "ZKRS_UNPROPOSED";
        if data.is_empty() {
            return Ok(MovedSessions::Listed(Vec::new()));
        }
        need(WHAT, data, 4)?;
        let count = data.get_i32();
        if count == -1 && data.is_empty() {
            return Ok(MovedSessions::Unlisted);
        }
        let n = usize::try_from(count)
            .ok()
            .filter(|&n| n <= MOVED_SESSIONS_MAX)
            .ok_or(PayloadError::BadCount { what: WHAT, count: i64::from(count), max: MOVED_SESSIONS_MAX })?;
        if data.len() != n * 8 {
            return Err(PayloadError::PartialEntry { what: WHAT, entry: 8, len: data.len() });
        }
        Ok(MovedSessions::Listed((0..n).map(|_| data.get_i64()).collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn learner_info_is_read_by_length() {
        let full = LearnerInfo::new(2, 0x1_0000_0000);
        let bytes = full.encode();
        assert_eq!(&bytes[..], &[0, 0, 0, 0, 0, 0, 0, 2, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0]);
        assert_eq!(LearnerInfo::decode(&bytes), Ok(full));
        let old = LearnerInfo::decode(&bytes[..12]).unwrap();
        assert_eq!((old.protocol_version, old.config_version), (Some(0x10000), None));
        assert_eq!(LearnerInfo::decode(&bytes[..12]).unwrap().encode(), bytes.slice(..12));
        assert_eq!(LearnerInfo::decode(&bytes[..8]).unwrap().protocol_version, None);
        assert!(LearnerInfo::decode(&bytes[..7]).is_err());
    }

    #[test]
    fn fixed_payloads_round_trip_and_reject_short_input() {
        let li = LeaderInfo { protocol_version: LEARNER_PROTOCOL_VERSION };
        assert_eq!(&li.encode()[..], &[0, 1, 0, 0]);
        assert_eq!(LeaderInfo::decode(&li.encode()), Ok(li));
        assert!(LeaderInfo::decode(&[0, 1, 0]).is_err());
        let ae = AckEpoch { current_epoch: -1 };
        assert_eq!(AckEpoch::decode(&ae.encode()), Ok(ae));
        assert!(AckEpoch::decode(&[]).is_err());
        let rq = RevalidateRequest { session_id: 0x0100_0000_0000_0001, timeout_ms: 30000 };
        assert_eq!(RevalidateRequest::decode(&rq.encode()), Ok(rq));
        assert!(RevalidateRequest::decode(&rq.encode()[..11]).is_err());
        let rp = RevalidateReply { session_id: 9, valid: true };
        assert_eq!(rp.encode().len(), 9);
        assert_eq!(RevalidateReply::decode(&rp.encode()), Ok(rp));
        assert!(RevalidateReply::decode(&[0; 8]).is_err());
        assert!(RevalidateReply::decode(&[0, 0, 0, 0, 0, 0, 0, 9, 7]).unwrap().valid);
    }

    #[test]
    fn ping_lists_have_no_count_and_no_partial_entries() {
        let touches = vec![
            SessionTouch { session_id: 1, timeout_ms: 2 },
            SessionTouch { session_id: -3, timeout_ms: 4 },
        ];
        let bytes = SessionTouch::encode_list(&touches);
        assert_eq!(bytes.len(), 24);
        assert_eq!(SessionTouch::decode_list(&bytes), Ok(touches));
        assert_eq!(SessionTouch::decode_list(&[]), Ok(vec![]));
        assert!(SessionTouch::decode_list(&bytes[..13]).is_err());
    }

    #[test]
    fn forwarded_request_keeps_its_body() {
        let r = ForwardedRequest { session_id: 5, cxid: 6, op: 1, body: Bytes::from_static(b"rec") };
        assert_eq!(ForwardedRequest::decode(&r.encode()), Ok(r));
        assert!(ForwardedRequest::decode(&Bytes::from_static(&[0; 15])).is_err());
    }

    proptest! {
        #[test]
        fn decoders_are_total(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = LearnerInfo::decode(&bytes);
            let _ = LeaderInfo::decode(&bytes);
            let _ = AckEpoch::decode(&bytes);
            let _ = SessionTouch::decode_list(&bytes);
            let _ = ForwardedRequest::decode(&Bytes::from(bytes.clone()));
            let _ = RevalidateRequest::decode(&bytes);
            let _ = RevalidateReply::decode(&bytes);
        }
    }

    #[test]
    fn moved_sessions_fill_their_payload() {
        let listed = MovedSessions::Listed(vec![0x101, -2]);
        let bytes = listed.encode();
        assert_eq!(bytes.len(), 4 + 16);
        assert_eq!(&bytes[..4], &[0, 0, 0, 2]);
        assert_eq!(MovedSessions::decode(&bytes), Ok(listed));
        assert_eq!(MovedSessions::decode(&MovedSessions::Unlisted.encode()), Ok(MovedSessions::Unlisted));
        // An older zkrs leader sends no data: nothing moved.
        assert_eq!(MovedSessions::decode(&[]), Ok(MovedSessions::Listed(Vec::new())));
        assert_eq!(MovedSessions::decode(&[0, 0, 0, 0]), Ok(MovedSessions::Listed(Vec::new())));
        assert!(matches!(MovedSessions::decode(&bytes[..19]), Err(PayloadError::PartialEntry { .. })));
        assert!(matches!(MovedSessions::decode(&bytes[..3]), Err(PayloadError::Truncated { .. })));
        assert!(matches!(
            MovedSessions::decode(&[0xff, 0xff, 0xff, 0xfe]),
            Err(PayloadError::BadCount { .. })
        ));
        assert!(matches!(
            MovedSessions::decode(&[0xff, 0xff, 0xff, 0xff, 0]),
            Err(PayloadError::BadCount { .. })
        ));
        let over = (MOVED_SESSIONS_MAX as i32 + 1).to_be_bytes();
        assert!(matches!(MovedSessions::decode(&over), Err(PayloadError::BadCount { .. })));
    }
}
