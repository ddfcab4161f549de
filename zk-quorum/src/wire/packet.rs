//! `QuorumPacket`, the unit of the leader <-> learner stream, and an incremental decoder for it.
//!
//! The quorum port has no outer framing: packets follow each other back to back, so the decoder
//! walks the fixed fields and length prefixes to find where a packet ends, checking every length
//! against a maximum before waiting for (or allocating) the bytes it announces.

use bytes::{Buf, BufMut, BytesMut};
use zk_proto::jute::{DecodeError, Jute, Reader};
use zk_proto::Id;

/// Apache's default `jute.maxbuffer` (0xfffff bytes), the usual bound for one buffer field.
pub const JUTE_MAXBUFFER_DEFAULT: usize = 0xfffff;

zk_proto::record! {
    /// One packet on the quorum port: `{i32 type, i64 zxid, buffer data, vector<Id> authinfo}`.
    ///
    /// `data` and `authinfo` keep null (`None`) apart from empty, so that a decoded packet re-encodes
    /// to the same bytes; Apache sends a null `authinfo` except on REQUEST.
    pub struct QuorumPacket {
        /// The packet type (see [`PacketType`]); kept raw, because Apache logs and skips an unknown
        /// type rather than closing the connection.
        pub packet_type: i32,
        /// The zxid the packet is about (its meaning depends on the type).
        pub zxid: i64,
        /// The type-specific payload (see [`crate::wire::payload`]).
        pub data: Option<bytes::Bytes>,
        /// Client identities of a forwarded REQUEST.
        pub authinfo: Option<Vec<Id>>,
    }
}

/// The quorum packet types of Apache ZooKeeper 3.8 (`Leader.java`'s numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum PacketType {
    /// Learner -> leader: a client request to run through the leader (1).
    Request = 1,
    /// Leader -> follower: a transaction to log and ACK (2).
    Proposal = 2,
    /// Follower -> leader: logged through this zxid; also the NEWLEADER/UPTODATE acknowledgements (3).
    Ack = 3,
    /// Leader -> follower: the proposal with this zxid is committed (4).
    Commit = 4,
    /// Keep-alive both ways; a learner's reply lists the sessions it touched (5).
    Ping = 5,
    /// Learner -> leader: is this session still valid; the leader answers with the same type (6).
    Revalidate = 6,
    /// Leader -> learner: a forwarded sync has been reached (7).
    Sync = 7,
    /// Leader -> observer: a committed proposal (8).
    Inform = 8,
    /// Leader -> follower: commit a reconfig and activate it (9).
    CommitAndActivate = 9,
    /// Leader -> learner: end of synchronisation, with the config (10).
    NewLeader = 10,
    /// Follower -> leader: first packet, with its LearnerInfo (11).
    FollowerInfo = 11,
    /// Leader -> learner: a quorum has synced, start serving (12).
    UpToDate = 12,
    /// Leader -> learner: synchronisation by proposals follows (13).
    Diff = 13,
    /// Leader -> learner: truncate your log to this zxid (14).
    Trunc = 14,
    /// Leader -> learner: a snapshot stream follows (15).
    Snap = 15,
    /// Observer -> leader: first packet, with its LearnerInfo (16).
    ObserverInfo = 16,
    /// Leader -> learner: the new epoch (17).
    LeaderInfo = 17,
    /// Learner -> leader: acknowledges the new epoch (18).
    AckEpoch = 18,
    /// Leader -> observer: a committed reconfig to activate (19).
    InformAndActivate = 19,
}

impl PacketType {
    /// Every type, in number order.
    pub const ALL: [PacketType; 19] = [
        PacketType::Request,
        PacketType::Proposal,
        PacketType::Ack,
        PacketType::Commit,
        PacketType::Ping,
        PacketType::Revalidate,
        PacketType::Sync,
        PacketType::Inform,
        PacketType::CommitAndActivate,
        PacketType::NewLeader,
        PacketType::FollowerInfo,
        PacketType::UpToDate,
        PacketType::Diff,
        PacketType::Trunc,
        PacketType::Snap,
        PacketType::ObserverInfo,
        PacketType::LeaderInfo,
        PacketType::AckEpoch,
        PacketType::InformAndActivate,
    ];

    /// The wire number.
    pub fn to_wire(self) -> i32 {
        self as i32
    }

    /// The type for a wire number. Errors: [`PacketError::UnknownType`] outside 1..=19.
    pub fn from_wire(v: i32) -> Result<PacketType, PacketError> {
        if (1..=19).contains(&v) {
            Ok(PacketType::ALL[(v - 1) as usize])
        } else {
            Err(PacketError::UnknownType(v))
        }
    }
}

/// zkrs's own packet, follower -> leader: "hand your leadership over to me" (`rqld`), no data.
/// Outside Apache's numbers (1 to 19) and not a [`PacketType`]: Apache's leader logs a packet of
/// a type it does not know and reads on, so it can be sent to any leader of this build or
/// Apache's; a zkrs leader acts on it only from a synced voting follower.
pub const ZKRS_REQUEST_LEADERSHIP: i32 = 0x5a4b_0001;

/// zkrs's own packet, leader -> learner: "I handed my leadership over and will propose nothing
/// more; every request you forwarded me that you have not seen committed by now was never
/// proposed" (zxid: the last zxid this leader committed; data: the sessions that moved away from
/// the learner, [`crate::wire::payload::MovedSessions`], empty from a zkrs leader of an older
/// build). Sent after the last COMMIT on the connection, only to learners whose FOLLOWERINFO said
/// they take it ([`crate::wire::payload::LEARNER_TAKES_UNPROPOSED`]): such a learner forwards
/// those requests again to the next leader instead of failing its clients' requests with
/// ConnectionLoss, except those of the sessions named.
pub const ZKRS_UNPROPOSED: i32 = 0x5a4b_0002;

/// Why quorum-port bytes could not be decoded. Any of these ends the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PacketError {
    /// A length prefix was negative (other than -1 for null).
    #[error("bad length {len} for {field}")]
    BadLength {
        /// Which field.
        field: &'static str,
        /// The length read.
        len: i32,
    },
    /// A length prefix exceeded the decoder's bound.
    #[error("{field} length {len} exceeds the limit {max}")]
    TooLarge {
        /// Which field.
        field: &'static str,
        /// The length read.
        len: i32,
        /// The bound in force.
        max: usize,
    },
    /// A packet type outside 1..=19.
    #[error("unknown quorum packet type {0}")]
    UnknownType(i32),
    /// The packet's bytes did not decode (should not happen once its extent is known).
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

impl QuorumPacket {
    /// A packet with null data and null authinfo.
    pub fn new(packet_type: PacketType, zxid: i64, data: Option<bytes::Bytes>) -> QuorumPacket {
        QuorumPacket { packet_type: packet_type.to_wire(), zxid, data, authinfo: None }
    }

    /// The packet's type. Errors: [`PacketError::UnknownType`].
    pub fn kind(&self) -> Result<PacketType, PacketError> {
        PacketType::from_wire(self.packet_type)
    }

    /// Appends the packet's encoding to `out`.
    pub fn encode<B: BufMut>(&self, out: &mut B) {
        self.write(out);
    }

    /// The packet's encoding in a fresh buffer.
    pub fn to_vec(&self) -> Vec<u8> {
        zk_proto::jute::to_bytes(self)
    }
}

/// Takes `QuorumPacket`s off a byte stream.
///
/// Each length field is checked against `max_buffer_len` as soon as it is read, so a peer cannot make
/// the caller buffer more than about `max_buffer_len` bytes (plus small fixed overheads) per packet.
#[derive(Debug, Clone)]
pub struct QuorumPacketDecoder {
    max_buffer_len: usize,
}

impl QuorumPacketDecoder {
    /// A decoder allowing buffers (data, and each authinfo string) of up to `max_buffer_len` bytes:
    /// Apache's bound is `jute.maxbuffer` plus `zookeeper.jute.maxbuffer.extrasize`.
    pub fn new(max_buffer_len: usize) -> QuorumPacketDecoder {
        QuorumPacketDecoder { max_buffer_len }
    }

    /// Takes one complete packet off the front of `buf`; `Ok(None)` (consuming nothing) while it is
    /// incomplete. Errors: [`PacketError`] for a negative or over-limit length; the stream is then
    /// unusable.
    pub fn decode(&self, buf: &mut BytesMut) -> Result<Option<QuorumPacket>, PacketError> {
        let Some(len) = self.packet_extent(buf)? else {
            return Ok(None);
        };
        let bytes = buf.split_to(len).freeze();
        let mut r = Reader::new(bytes);
        let packet = QuorumPacket::read(&mut r)?;
        debug_assert_eq!(r.remaining(), 0, "extent scan and jute decode disagree");
        Ok(Some(packet))
    }

    /// The byte length of the packet at the front of `buf`, once all of it is there.
    fn packet_extent(&self, buf: &[u8]) -> Result<Option<usize>, PacketError> {
        let mut pos = 12; // type + zxid
        let Some(data_len) = self.length_at(buf, pos, "data")? else {
            return Ok(None);
        };
        pos += 4 + data_len;
        let Some(count) = read_i32(buf, pos) else {
            return Ok(None);
        };
        pos += 4;
        if count < -1 {
            return Err(PacketError::BadLength { field: "authinfo", len: count });
        }
        // An Id takes at least 8 bytes (two length prefixes).
        let max_count = self.max_buffer_len / 8;
        if count > 0 && count as usize > max_count {
            return Err(PacketError::TooLarge { field: "authinfo", len: count, max: max_count });
        }
        for _ in 0..count.max(0) {
            for field in ["authinfo scheme", "authinfo id"] {
                let Some(n) = self.length_at(buf, pos, field)? else {
                    return Ok(None);
                };
                pos += 4 + n;
            }
        }
        Ok(if buf.len() >= pos { Some(pos) } else { None })
    }

    /// Reads a buffer/ustring length prefix at `pos`: `Ok(None)` if not all there yet, the number of
    /// bytes that follow (0 for null) otherwise.
    fn length_at(&self, buf: &[u8], pos: usize, field: &'static str) -> Result<Option<usize>, PacketError> {
        let Some(len) = read_i32(buf, pos) else {
            return Ok(None);
        };
        if len < -1 {
            return Err(PacketError::BadLength { field, len });
        }
        if len > 0 && len as usize > self.max_buffer_len {
            return Err(PacketError::TooLarge { field, len, max: self.max_buffer_len });
        }
        Ok(Some(len.max(0) as usize))
    }
}

fn read_i32(buf: &[u8], pos: usize) -> Option<i32> {
    let mut b = buf.get(pos..pos.checked_add(4)?)?;
    Some(b.get_i32())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use proptest::prelude::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn type_numbers_match_apache() {
        for (i, t) in PacketType::ALL.iter().enumerate() {
            assert_eq!(t.to_wire(), i as i32 + 1);
            assert_eq!(PacketType::from_wire(t.to_wire()), Ok(*t));
        }
        assert_eq!(PacketType::Request.to_wire(), 1);
        assert_eq!(PacketType::NewLeader.to_wire(), 10);
        assert_eq!(PacketType::AckEpoch.to_wire(), 18);
        assert_eq!(PacketType::InformAndActivate.to_wire(), 19);
        assert_eq!(PacketType::from_wire(0), Err(PacketError::UnknownType(0)));
        assert_eq!(PacketType::from_wire(20), Err(PacketError::UnknownType(20)));
    }

    #[test]
    fn uptodate_with_null_fields_is_exact() {
        // UPTODATE, zxid -1, null data, null authinfo: the layout ZAB-FACTS §2 gives.
        let p = QuorumPacket::new(PacketType::UpToDate, -1, None);
        let bytes = p.to_vec();
        assert_eq!(bytes, hex("0000000c ffffffffffffffff ffffffff ffffffff"));
        let mut buf = BytesMut::from(&bytes[..]);
        assert_eq!(QuorumPacketDecoder::new(16).decode(&mut buf).unwrap(), Some(p));
    }

    #[test]
    fn stream_of_packets_split_anywhere() {
        let packets = vec![
            QuorumPacket::new(PacketType::LeaderInfo, 1 << 32, Some(Bytes::from_static(&[0, 1, 0, 0]))),
            QuorumPacket {
                packet_type: PacketType::Request.to_wire(),
                zxid: -1,
                data: Some(Bytes::from_static(b"payload")),
                authinfo: Some(vec![Id { scheme: "ip".into(), id: "127.0.0.1".into() }]),
            },
            QuorumPacket::new(PacketType::Ping, 5, Some(Bytes::new())),
        ];
        let mut stream = Vec::new();
        for p in &packets {
            p.encode(&mut stream);
        }
        let dec = QuorumPacketDecoder::new(JUTE_MAXBUFFER_DEFAULT);
        for chunk in 1..stream.len() {
            let mut buf = BytesMut::new();
            let mut got = Vec::new();
            for piece in stream.chunks(chunk) {
                buf.extend_from_slice(piece);
                while let Some(p) = dec.decode(&mut buf).unwrap() {
                    got.push(p);
                }
            }
            assert_eq!(got, packets, "chunk size {chunk}");
            assert!(buf.is_empty());
        }
    }

    #[test]
    fn lengths_are_checked_before_waiting() {
        let dec = QuorumPacketDecoder::new(100);
        let mut head = hex("00000002 0000000100000001");
        head.extend_from_slice(&101i32.to_be_bytes());
        let err = dec.decode(&mut BytesMut::from(&head[..])).unwrap_err();
        assert_eq!(err, PacketError::TooLarge { field: "data", len: 101, max: 100 });
        head.truncate(12);
        head.extend_from_slice(&(-2i32).to_be_bytes());
        assert_eq!(
            dec.decode(&mut BytesMut::from(&head[..])).unwrap_err(),
            PacketError::BadLength { field: "data", len: -2 }
        );
        head.truncate(12);
        head.extend_from_slice(&(-1i32).to_be_bytes());
        head.extend_from_slice(&i32::MAX.to_be_bytes());
        assert!(matches!(
            dec.decode(&mut BytesMut::from(&head[..])),
            Err(PacketError::TooLarge { field: "authinfo", .. })
        ));
    }

    proptest! {
        #[test]
        fn decoder_is_total(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut buf = BytesMut::from(&bytes[..]);
            let dec = QuorumPacketDecoder::new(64);
            while let Ok(Some(_)) = dec.decode(&mut buf) {}
        }

        #[test]
        fn round_trip(t: i32, zxid: i64, data in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40))) {
            let p = QuorumPacket { packet_type: t, zxid, data: data.map(Bytes::from), authinfo: None };
            let mut buf = BytesMut::from(&p.to_vec()[..]);
            prop_assert_eq!(QuorumPacketDecoder::new(64).decode(&mut buf).unwrap(), Some(p));
        }
    }
}
