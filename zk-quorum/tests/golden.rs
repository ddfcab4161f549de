//! Golden bytes: what Apache ZooKeeper 3.8.0 (Debian) sent our election peer, captured by
//! `tests/apache_election.rs` with `ZKQ_CAPTURE_DIR` set, must decode to the expected values and
//! re-encode byte for byte.
//!
//! The ensemble of the captures: server.1..3 on 127.0.0.1 with ephemeral ports, all fresh (zxid 0,
//! epoch 0), round 1. `looking` is server 2's first notification to our peer 1: its initial vote, for
//! itself. `votes-3` is server 2's first notification to our peer 3 (another run, other ports), sent
//! after it had already switched to 3: Apache keeps only the newest queued message per peer.
//! The `quorum-*` files are an Apache leader's side of the learner handshake (see below).

mod support;

use bytes::Bytes;
use zk_quorum::config::QuorumConfig;
use zk_quorum::wire::packet::JUTE_MAXBUFFER_DEFAULT;
use zk_quorum::wire::payload::LEARNER_PROTOCOL_VERSION;
use zk_quorum::wire::{
    decode_handshake, ElectionHandshake, HandshakeVersion, HostPort, LeaderInfo, Notification, PacketType,
    PeerState, QuorumPacket, QuorumPacketDecoder,
};

const HANDSHAKE_SID2: &[u8] = include_bytes!("golden/apache380-handshake-sid2.bin");
const NOTIFICATION_LOOKING: &[u8] = include_bytes!("golden/apache380-notification-sid2-looking.bin");
const CONFIG_LOOKING: &str = include_str!("golden/apache380-config-looking.txt");
const NOTIFICATION_VOTES_3: &[u8] = include_bytes!("golden/apache380-notification-sid2-votes-3.bin");
const CONFIG_VOTES_3: &str = include_str!("golden/apache380-config-votes-3.txt");

#[test]
fn handshake_from_apache_decodes_and_reencodes() {
    let (hs, used) = decode_handshake(HANDSHAKE_SID2).unwrap().unwrap();
    assert_eq!(used, HANDSHAKE_SID2.len());
    assert_eq!(hs.version, HandshakeVersion::V1);
    assert_eq!(hs.sid, 2);
    assert_eq!(hs.addresses, vec![HostPort { host: "127.0.0.1".into(), port: 45201 }]);
    assert_eq!(ElectionHandshake::v1(2, hs.addresses[0].clone()).encode().unwrap(), HANDSHAKE_SID2);
    // The address is server 2's election address in the config it sent.
    let config = QuorumConfig::parse(CONFIG_LOOKING).unwrap();
    assert_eq!(config.servers[&2].addresses[0].election_addr(), hs.addresses[0]);
}

fn check_notification(bytes: &[u8], config_text: &str, leader: i64) {
    assert_eq!(bytes.len(), 182, "44 bytes of header and a 138-byte config, as ZAB-FACTS §1 says");
    let n = Notification::decode(&Bytes::copy_from_slice(bytes)).unwrap();
    assert_eq!(
        (n.state, n.leader, n.zxid, n.election_epoch, n.peer_epoch, n.version),
        (PeerState::Looking, leader, 0, 1, 0, 2)
    );
    assert_eq!(n.config.as_deref(), Some(config_text.as_bytes()));
    assert_eq!(n.encode(), bytes);
    // The config string parses and formats back to the same bytes.
    let config = QuorumConfig::parse(config_text).unwrap();
    assert_eq!(config.servers.len(), 3);
    assert_eq!(config.version, 0);
    assert_eq!(config.to_config_string(), config_text);
}

#[test]
fn looking_notification_from_apache_decodes_and_reencodes() {
    check_notification(NOTIFICATION_LOOKING, CONFIG_LOOKING, 2);
}

#[test]
fn switched_notification_from_apache_decodes_and_reencodes() {
    check_notification(NOTIFICATION_VOTES_3, CONFIG_VOTES_3, 3);
}

// The leader's side of a learner handshake with Apache 3.8.0 leader 3 (new epoch 1, already
// established), our fresh follower 1 having sent FOLLOWERINFO and ACKEPOCH: LEADERINFO, SNAP, the
// snapshot stream, NEWLEADER (after which we ACKed), UPTODATE. Back to back, as on the wire.
const LEADERINFO: &[u8] = include_bytes!("golden/apache380-quorum-leaderinfo.bin");
const SNAP: &[u8] = include_bytes!("golden/apache380-quorum-snap.bin");
const SNAPSHOT_STREAM: &[u8] = include_bytes!("golden/apache380-quorum-snapshot-stream.bin");
const NEWLEADER: &[u8] = include_bytes!("golden/apache380-quorum-newleader.bin");
const UPTODATE: &[u8] = include_bytes!("golden/apache380-quorum-uptodate.bin");
const CONFIG_QUORUM: &str = include_str!("golden/apache380-config-quorum.txt");

fn decode_one(bytes: &[u8]) -> QuorumPacket {
    let mut buf = bytes::BytesMut::from(bytes);
    let packet = QuorumPacketDecoder::new(JUTE_MAXBUFFER_DEFAULT).decode(&mut buf).unwrap().unwrap();
    assert!(buf.is_empty(), "one packet per file");
    assert_eq!(packet.to_vec(), bytes, "re-encodes byte for byte");
    packet
}

#[test]
fn quorum_packets_from_an_apache_leader_decode_and_reencode() {
    let epoch_start = 1i64 << 32;
    let li = decode_one(LEADERINFO);
    assert_eq!((li.kind(), li.zxid, li.authinfo.as_ref()), (Ok(PacketType::LeaderInfo), epoch_start, None));
    assert_eq!(
        LeaderInfo::decode(li.data.as_deref().unwrap()).unwrap().protocol_version,
        LEARNER_PROTOCOL_VERSION
    );
    // SNAP: zxid = the leader's last processed zxid (the epoch start, set once it was established).
    let snap = decode_one(SNAP);
    assert_eq!(
        (snap.kind(), snap.zxid, snap.data.as_ref(), snap.authinfo.as_ref()),
        (Ok(PacketType::Snap), epoch_start, None, None)
    );
    let nl = decode_one(NEWLEADER);
    assert_eq!((nl.kind(), nl.zxid), (Ok(PacketType::NewLeader), epoch_start));
    assert_eq!(nl.data.as_deref(), Some(CONFIG_QUORUM.as_bytes()));
    let up = decode_one(UPTODATE);
    assert_eq!(
        (up.kind(), up.zxid, up.data.as_ref(), up.authinfo.as_ref()),
        (Ok(PacketType::UpToDate), -1, None, None)
    );
}

#[test]
fn the_snapshot_stream_after_snap_is_walkable_and_the_packets_around_it_split_cleanly() {
    let (paths, len) = support::parse_snapshot_stream(Bytes::from_static(SNAPSHOT_STREAM)).unwrap();
    assert_eq!(len, SNAPSHOT_STREAM.len());
    assert_eq!(paths, ["", "/zookeeper", "/zookeeper/config", "/zookeeper/quota"]);
    // The whole stream as the learner saw it: the packet decoder takes SNAP, the caller the snapshot,
    // then the decoder the rest.
    let mut stream = bytes::BytesMut::new();
    for part in [SNAP, SNAPSHOT_STREAM, NEWLEADER, UPTODATE] {
        stream.extend_from_slice(part);
    }
    let decoder = QuorumPacketDecoder::new(JUTE_MAXBUFFER_DEFAULT);
    assert_eq!(decoder.decode(&mut stream).unwrap().unwrap().kind(), Ok(PacketType::Snap));
    let _ = stream.split_to(SNAPSHOT_STREAM.len());
    assert_eq!(decoder.decode(&mut stream).unwrap().unwrap().kind(), Ok(PacketType::NewLeader));
    assert_eq!(decoder.decode(&mut stream).unwrap().unwrap().kind(), Ok(PacketType::UpToDate));
    assert!(stream.is_empty());
}
