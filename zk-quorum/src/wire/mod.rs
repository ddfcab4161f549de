//! Apache ZooKeeper 3.8's quorum wire formats, byte for byte.
//!
//! The election port carries a connection handshake, then length-framed notifications both ways
//! ([`handshake`], [`notification`]). The quorum port carries back-to-back jute `QuorumPacket`s with
//! no outer framing ([`packet`]), whose `data` field holds the payloads in [`payload`].

pub mod handshake;
pub mod notification;
pub mod packet;
pub mod payload;

pub use handshake::{
    decode_election_frame, decode_handshake, encode_election_frame, ElectionFrameError, ElectionHandshake,
    HandshakeError, HandshakeVersion, HostPort,
};
pub use notification::{Notification, NotificationError, PeerState};
pub use packet::{PacketError, PacketType, QuorumPacket, QuorumPacketDecoder};
pub use payload::{
    AckEpoch, ForwardedRequest, LeaderInfo, LearnerInfo, MovedSessions, PayloadError, RevalidateReply,
    RevalidateRequest, SessionTouch, MOVED_SESSIONS_MAX,
};
