//! The election port's connection handshake and message framing.
//!
//! The initiator of a connection first sends who it is: a protocol version, its sid and its own
//! election address(es). After that both directions carry `i32 length + payload` frames whose payload
//! is always a notification.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Protocol version of a 3.5+ handshake with one election address.
pub const PROTOCOL_VERSION_V1: i64 = -65536;
/// Protocol version of a 3.6+ handshake that may list several addresses (`multiAddress.enabled`).
pub const PROTOCOL_VERSION_V2: i64 = -65535;
/// Largest address field a handshake may carry; Apache closes the connection past it.
pub const MAX_HANDSHAKE_ADDR_LEN: usize = 2048;
/// Largest election message payload; Apache closes the connection past it (512 KiB).
pub const MAX_ELECTION_MESSAGE_LEN: usize = 524_288;

/// Which form of handshake a peer sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandshakeVersion {
    /// A pre-3.5 peer: the first eight bytes are just its sid (non-negative), nothing follows.
    Legacy,
    /// [`PROTOCOL_VERSION_V1`].
    V1,
    /// [`PROTOCOL_VERSION_V2`].
    V2,
}

pub(crate) use zk_proto::host_port::split_host_port;
pub use zk_proto::HostPort;

/// The first message on an election connection, from the initiator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectionHandshake {
    /// Which form was (or will be) sent.
    pub version: HandshakeVersion,
    /// The initiator's server id.
    pub sid: i64,
    /// The initiator's election address(es); empty for [`HandshakeVersion::Legacy`].
    pub addresses: Vec<HostPort>,
}

/// Why a handshake was refused. Apache closes the connection in every case.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandshakeError {
    /// A negative first i64 that is neither V1 nor V2.
    #[error("unknown election protocol version {0}")]
    UnknownProtocolVersion(i64),
    /// The address length was not within 1..=2048.
    #[error("unreasonable handshake address length {0}")]
    BadAddressLength(i32),
    /// The address bytes were not UTF-8.
    #[error("handshake address is not UTF-8")]
    AddressNotUtf8,
    /// An address was not `host:port`.
    #[error("badly formed address {0:?}")]
    BadAddress(String),
    /// A port was not a number in 0..=65535.
    #[error("bad port number {0:?}")]
    BadPort(String),
    /// An address list to encode was empty or too long for the limit.
    #[error("cannot encode handshake: {0}")]
    Unencodable(&'static str),
}

impl From<zk_proto::HostPortError> for HandshakeError {
    fn from(e: zk_proto::HostPortError) -> HandshakeError {
        match e {
            zk_proto::HostPortError::NotHostPort(s) => HandshakeError::BadAddress(s),
            zk_proto::HostPortError::BadPort(s) => HandshakeError::BadPort(s),
        }
    }
}

impl ElectionHandshake {
    /// A 3.5+ (V1) handshake naming one election address, the form Apache 3.8 sends by default.
    pub fn v1(sid: i64, election_addr: HostPort) -> ElectionHandshake {
        ElectionHandshake { version: HandshakeVersion::V1, sid, addresses: vec![election_addr] }
    }

    /// Encodes the handshake. The result must go out in one write: Apache reads the address with a
    /// single `read()` and drops the connection on a short read.
    ///
    /// Errors: a V1/V2 handshake without addresses, V1 with more than one, or an address field longer
    /// than [`MAX_HANDSHAKE_ADDR_LEN`].
    pub fn encode(&self) -> Result<Vec<u8>, HandshakeError> {
        let mut out = Vec::with_capacity(64);
        match self.version {
            HandshakeVersion::Legacy => {
                out.put_i64(self.sid);
                return Ok(out);
            }
            HandshakeVersion::V1 => {
                if self.addresses.len() != 1 {
                    return Err(HandshakeError::Unencodable("V1 carries exactly one address"));
                }
                out.put_i64(PROTOCOL_VERSION_V1);
            }
            HandshakeVersion::V2 => {
                if self.addresses.is_empty() {
                    return Err(HandshakeError::Unencodable("V2 needs at least one address"));
                }
                out.put_i64(PROTOCOL_VERSION_V2);
            }
        }
        let addr = self.addresses.iter().map(|a| a.to_string()).collect::<Vec<_>>().join("|");
        if addr.len() > MAX_HANDSHAKE_ADDR_LEN {
            return Err(HandshakeError::Unencodable("address field longer than 2048 bytes"));
        }
        out.put_i64(self.sid);
        out.put_i32(addr.len() as i32);
        out.put_slice(addr.as_bytes());
        Ok(out)
    }
}

/// Decodes a handshake from the start of `buf`.
///
/// Returns `Ok(None)` while more bytes are needed, `Ok(Some((handshake, consumed)))` once complete.
/// A non-negative first i64 is a pre-3.5 peer's bare sid (8 bytes consumed). Errors: an unknown
/// negative protocol version, an address length outside 1..=2048, non-UTF-8 or malformed addresses.
/// Unlike Apache this waits for a short address read to complete rather than failing.
pub fn decode_handshake(buf: &[u8]) -> Result<Option<(ElectionHandshake, usize)>, HandshakeError> {
    let mut r = buf;
    if r.remaining() < 8 {
        return Ok(None);
    }
    let first = r.get_i64();
    let version = match first {
        v if v >= 0 => {
            let hs = ElectionHandshake { version: HandshakeVersion::Legacy, sid: v, addresses: Vec::new() };
            return Ok(Some((hs, 8)));
        }
        PROTOCOL_VERSION_V1 => HandshakeVersion::V1,
        PROTOCOL_VERSION_V2 => HandshakeVersion::V2,
        other => return Err(HandshakeError::UnknownProtocolVersion(other)),
    };
    if r.remaining() < 12 {
        return Ok(None);
    }
    let sid = r.get_i64();
    let addr_len = r.get_i32();
    if addr_len <= 0 || addr_len as usize > MAX_HANDSHAKE_ADDR_LEN {
        return Err(HandshakeError::BadAddressLength(addr_len));
    }
    let addr_len = addr_len as usize;
    if r.remaining() < addr_len {
        return Ok(None);
    }
    let text = std::str::from_utf8(&r[..addr_len]).map_err(|_| HandshakeError::AddressNotUtf8)?;
    let addresses = text.split('|').map(HostPort::parse).collect::<Result<Vec<_>, _>>()?;

    Ok(Some((ElectionHandshake { version, sid, addresses }, 20 + addr_len)))
}

/// Why an election message frame was refused; Apache closes the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ElectionFrameError {
    /// The length prefix was not within 1..=524288.
    #[error("invalid election message length {0}")]
    BadLength(i32),
}

/// Appends one election message frame (`i32 length + payload`) to `out`.
///
/// Errors: an empty payload or one longer than [`MAX_ELECTION_MESSAGE_LEN`], which the peer would
/// refuse.
pub fn encode_election_frame(payload: &[u8], out: &mut Vec<u8>) -> Result<(), ElectionFrameError> {
    if payload.is_empty() || payload.len() > MAX_ELECTION_MESSAGE_LEN {
        return Err(ElectionFrameError::BadLength(payload.len().min(i32::MAX as usize) as i32));
    }
    out.put_i32(payload.len() as i32);
    out.put_slice(payload);
    Ok(())
}

/// Takes one complete election message off the front of `buf`.
///
/// Returns `Ok(None)` (consuming nothing) while the frame is incomplete. The length is checked before
/// waiting for the payload, so a peer cannot make the caller buffer more than 512 KiB per message.
pub fn decode_election_frame(buf: &mut BytesMut) -> Result<Option<Bytes>, ElectionFrameError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if len <= 0 || len as usize > MAX_ELECTION_MESSAGE_LEN {
        return Err(ElectionFrameError::BadLength(len));
    }
    let len = len as usize;
    if buf.len() < 4 + len {
        return Ok(None);
    }
    buf.advance(4);
    Ok(Some(buf.split_to(len).freeze()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [cap] Apache 3.8.0's handshake as sid 1 (ZAB-FACTS §1).
    const CAPTURED_SID1: &str = "ffffffffffff0000 0000000000000001 0000000f";

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn captured_handshake_decodes_and_reencodes() {
        let mut bytes = hex(CAPTURED_SID1);
        bytes.extend_from_slice(b"127.0.0.1:38881");
        let (hs, used) = decode_handshake(&bytes).unwrap().unwrap();
        assert_eq!(used, bytes.len());
        assert_eq!(hs, ElectionHandshake::v1(1, HostPort { host: "127.0.0.1".into(), port: 38881 }));
        assert_eq!(hs.encode().unwrap(), bytes);
    }

    #[test]
    fn every_prefix_of_a_handshake_asks_for_more() {
        let bytes = ElectionHandshake::v1(7, HostPort::parse("h:1").unwrap()).encode().unwrap();
        for n in 0..bytes.len() {
            assert_eq!(decode_handshake(&bytes[..n]), Ok(None), "prefix {n}");
        }
        assert!(decode_handshake(&bytes).unwrap().is_some());
    }

    /// Found by fuzzing (fuzz/ `election_handshake`): the address `[[55]:30` was taken as host
    /// `[55`, which prints as `[55:30` and so could not be sent back; it is refused now.
    #[test]
    fn bracketed_host_with_a_bracket_is_refused() {
        let bytes = hex("ffffffffffff0001 0000000000000002 0000000f 5b5b35355d3a33307c3139313a3331373a");
        assert!(matches!(decode_handshake(&bytes), Err(HandshakeError::BadAddress(_))));
        let hs = ElectionHandshake::v1(2, HostPort::parse("[::1]:30").unwrap());
        assert_eq!(decode_handshake(&hs.encode().unwrap()).unwrap().unwrap().0, hs);
    }

    #[test]
    fn legacy_peer_sends_a_bare_sid() {
        let (hs, used) = decode_handshake(&5i64.to_be_bytes()).unwrap().unwrap();
        assert_eq!((hs.version, hs.sid, used), (HandshakeVersion::Legacy, 5, 8));
        assert!(hs.addresses.is_empty());
    }

    #[test]
    fn v2_lists_several_addresses_and_ipv6() {
        let hs = ElectionHandshake {
            version: HandshakeVersion::V2,
            sid: 3,
            addresses: vec![HostPort::parse("a:1").unwrap(), HostPort::parse("[::1]:3888").unwrap()],
        };
        let bytes = hs.encode().unwrap();
        assert!(bytes.ends_with(b"a:1|[::1]:3888"));
        assert_eq!(decode_handshake(&bytes).unwrap().unwrap().0, hs);
        assert_eq!(hs.addresses[1].host, "::1");
    }

    #[test]
    fn bad_handshakes_are_refused() {
        let mut b = (-1i64).to_be_bytes().to_vec();
        assert_eq!(decode_handshake(&b), Err(HandshakeError::UnknownProtocolVersion(-1)));
        for bad_len in [0i32, -1, 2049, i32::MAX] {
            b = PROTOCOL_VERSION_V1.to_be_bytes().to_vec();
            b.extend_from_slice(&1i64.to_be_bytes());
            b.extend_from_slice(&bad_len.to_be_bytes());
            assert_eq!(decode_handshake(&b), Err(HandshakeError::BadAddressLength(bad_len)));
        }
        for (addr, err) in [
            ("nocolon", HandshakeError::BadAddress("nocolon".into())),
            ("a:b:c", HandshakeError::BadAddress("a:b:c".into())),
            ("h:99999", HandshakeError::BadPort("99999".into())),
            ("h:x", HandshakeError::BadPort("x".into())),
        ] {
            b = PROTOCOL_VERSION_V1.to_be_bytes().to_vec();
            b.extend_from_slice(&1i64.to_be_bytes());
            b.extend_from_slice(&(addr.len() as i32).to_be_bytes());
            b.extend_from_slice(addr.as_bytes());
            assert_eq!(decode_handshake(&b), Err(err));
        }
    }

    #[test]
    fn wildcards_are_recognised() {
        assert!(HostPort::parse("0.0.0.0:1").unwrap().is_wildcard());
        assert!(HostPort::parse("[::]:1").unwrap().is_wildcard());
        assert!(!HostPort::parse("127.0.0.1:1").unwrap().is_wildcard());
    }

    #[test]
    fn frames_are_bounded() {
        let mut out = Vec::new();
        encode_election_frame(b"abc", &mut out).unwrap();
        let mut buf = BytesMut::from(&out[..3]);
        assert_eq!(decode_election_frame(&mut buf), Ok(None));
        buf.extend_from_slice(&out[3..]);
        assert_eq!(decode_election_frame(&mut buf).unwrap().unwrap(), &b"abc"[..]);
        assert!(buf.is_empty());
        for bad in [0i32, -5, 524_289] {
            let mut buf = BytesMut::from(&bad.to_be_bytes()[..]);
            assert_eq!(decode_election_frame(&mut buf), Err(ElectionFrameError::BadLength(bad)));
        }
        assert!(encode_election_frame(&[], &mut out).is_err());
        assert!(encode_election_frame(&vec![0; MAX_ELECTION_MESSAGE_LEN + 1], &mut out).is_err());
    }
}
