//! The quorum port: the `QuorumPacket` stream and the payloads packets carry.

use bytes::{Bytes, BytesMut};
use zk_quorum::wire::{
    AckEpoch, ForwardedRequest, LeaderInfo, LearnerInfo, QuorumPacketDecoder, RevalidateReply,
    RevalidateRequest, SessionTouch,
};

/// Apache's default `jute.maxbuffer` plus its extra allowance, as a learner bounds packets.
const MAX_BUFFER_LEN: usize = 0xfffff + 1024;

/// A byte stream of packets: each decoded packet re-encodes to bytes that decode, by the same
/// stream decoder, to the same packet, wholly consumed; a decoder that says "incomplete" consumes
/// nothing; the stream never yields more bytes than it was given. Each packet's data also goes
/// through every payload decoder.
pub fn packet(data: &[u8]) {
    let decoder = QuorumPacketDecoder::new(MAX_BUFFER_LEN);
    let mut buf = BytesMut::from(data);
    loop {
        let before = buf.len();
        match decoder.decode(&mut buf) {
            Ok(Some(p)) => {
                assert!(buf.len() < before, "a packet consumed nothing");
                let encoded = p.to_vec();
                let mut again = BytesMut::from(&encoded[..]);
                let p2 = decoder
                    .decode(&mut again)
                    .expect("a re-encoded packet decodes")
                    .expect("a re-encoded packet is complete");
                assert_eq!(p2, p);
                assert!(again.is_empty(), "a re-encoded packet has no trailing bytes");
                if let Some(d) = &p.data {
                    payloads(d);
                }
            }
            Ok(None) => {
                assert_eq!(buf.len(), before, "an incomplete packet consumed bytes");
                return;
            }
            Err(_) => return,
        }
    }
}

/// One payload, its decoder chosen by the first byte: each decoded value re-encodes to bytes that
/// decode to the same value.
pub fn payload(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let rest = Bytes::copy_from_slice(rest);
    match which % 7 {
        0 => check(&rest, |d| LearnerInfo::decode(d).ok(), |v| v.encode()),
        1 => check(&rest, |d| LeaderInfo::decode(d).ok(), |v| v.encode()),
        2 => check(&rest, |d| AckEpoch::decode(d).ok(), |v| v.encode()),
        3 => check(&rest, |d| SessionTouch::decode_list(d).ok(), |v| SessionTouch::encode_list(v)),
        4 => check(&rest, |d| ForwardedRequest::decode(&Bytes::copy_from_slice(d)).ok(), |v| v.encode()),
        5 => check(&rest, |d| RevalidateRequest::decode(d).ok(), |v| v.encode()),
        _ => check(&rest, |d| RevalidateReply::decode(d).ok(), |v| v.encode()),
    }
}

/// Every payload decoder over the same bytes (a packet's data, whatever its type).
fn payloads(data: &Bytes) {
    for which in 0..7u8 {
        let mut v = vec![which];
        v.extend_from_slice(data);
        payload(&v);
    }
}

fn check<T: PartialEq + std::fmt::Debug>(
    data: &[u8],
    decode: impl Fn(&[u8]) -> Option<T>,
    encode: impl Fn(&T) -> Bytes,
) {
    let Some(v) = decode(data) else {
        return;
    };
    let encoded = encode(&v);
    let again = decode(&encoded).expect("a re-encoded payload decodes");
    assert_eq!(again, v);
}

/// Quorum SASL packets (zk-quorum `auth`) as either side reads them off a connection: each packet
/// decoded from the stream re-encodes to the bytes it took; an incomplete packet consumes nothing.
/// The packets go to a server exchange knowing one user ("peer"/"secret"): a success names that
/// user, and the exchange ends at its first success or failure. The same packets go to a learner
/// exchange: it is authenticated only on a SUCCESS packet.
pub fn auth(data: &[u8]) {
    use zk_quorum::auth::{AuthStatus, LearnerAuth, LearnerStep, QuorumAuthPacket, ServerAuth, ServerStep};
    let mut rest = data;
    let mut packets = Vec::new();
    while let Ok(Some((p, used))) = QuorumAuthPacket::decode(rest) {
        assert!(used > 0 && used <= rest.len(), "a packet took {used} of {} bytes", rest.len());
        assert_eq!(p.to_vec(), rest[..used], "a packet re-encodes to the bytes it took");
        rest = &rest[used..];
        packets.push(p);
        if packets.len() == 16 {
            break;
        }
    }
    let mut server = ServerAuth::new(&[2; 16]);
    for p in &packets {
        match server.on_packet(p, |u| (u == "peer").then(|| "secret".to_string())) {
            ServerStep::Continue(c) => assert_eq!(c.status, AuthStatus::InProgress.to_wire()),
            ServerStep::Authenticated { user, reply } => {
                assert_eq!(user, "peer");
                assert_eq!(reply.status, AuthStatus::Success.to_wire());
                break;
            }
            ServerStep::Failed { reply, .. } => {
                assert_eq!(reply.status, AuthStatus::Error.to_wire());
                break;
            }
        }
    }
    let mut learner = LearnerAuth::new("peer", "secret", &[1; 16]);
    learner.first();
    for p in &packets {
        match learner.on_packet(p) {
            Ok(LearnerStep::Send(next)) => assert_eq!(next.status, AuthStatus::InProgress.to_wire()),
            Ok(LearnerStep::Authenticated) => {
                assert_eq!(p.status, AuthStatus::Success.to_wire());
                break;
            }
            Err(_) => break,
        }
    }
}
