//! The Zab machines against bytes an Apache ZooKeeper 3.8.0 leader really sent (the captures of
//! `tests/golden/apache380-quorum-*`, see `tests/golden.rs`): our learner follows that exchange to
//! UPTODATE, and our leader's packets of the same exchange are byte for byte Apache's.
//!
//! The capture: a three-server ensemble, fresh (zxid 0, epoch 0); Apache's leader 3, already
//! established in epoch 1, syncs our follower 1 by SNAP.

use bytes::{Bytes, BytesMut};
use zk_quorum::quorum::QuorumVerifier;
use zk_quorum::wire::packet::JUTE_MAXBUFFER_DEFAULT;
use zk_quorum::wire::{AckEpoch, LearnerInfo, PacketType, QuorumPacket, QuorumPacketDecoder};
use zk_quorum::zab::{Leader, LeaderAction, Learner, LearnerAction, LocalState, ZabConfig};

const LEADERINFO: &[u8] = include_bytes!("golden/apache380-quorum-leaderinfo.bin");
const SNAP: &[u8] = include_bytes!("golden/apache380-quorum-snap.bin");
const SNAPSHOT_STREAM: &[u8] = include_bytes!("golden/apache380-quorum-snapshot-stream.bin");
const NEWLEADER: &[u8] = include_bytes!("golden/apache380-quorum-newleader.bin");
const UPTODATE: &[u8] = include_bytes!("golden/apache380-quorum-uptodate.bin");
const CONFIG_QUORUM: &str = include_str!("golden/apache380-config-quorum.txt");

const EPOCH_START: i64 = 1 << 32;

fn cfg(sid: i64) -> ZabConfig {
    let mut c = ZabConfig::new(sid, QuorumVerifier::majority([1, 2, 3], []), 2000, 10, 5);
    c.config_string = Bytes::from_static(CONFIG_QUORUM.as_bytes());
    c
}

fn fresh() -> LocalState {
    LocalState { accepted_epoch: 0, current_epoch: 0, last_logged_zxid: 0, first_logged_zxid: None }
}

fn decode(bytes: &[u8]) -> QuorumPacket {
    let mut buf = BytesMut::from(bytes);
    let p = QuorumPacketDecoder::new(JUTE_MAXBUFFER_DEFAULT).decode(&mut buf).unwrap().unwrap();
    assert!(buf.is_empty());
    p
}

fn learner_actions(l: &mut Learner) -> Vec<LearnerAction> {
    std::iter::from_fn(|| l.poll_action()).collect()
}

fn send(t: PacketType, zxid: i64, data: Option<Bytes>) -> LearnerAction {
    LearnerAction::Send(QuorumPacket::new(t, zxid, data))
}

#[test]
fn our_learner_follows_an_apache_leader_to_uptodate() {
    let mut l = Learner::new(cfg(1), 3, false, fresh(), 0);
    l.connected(0);
    // Apache's 20 bytes, then zkrs's extension (which an Apache leader reads past).
    let mut info = LearnerInfo::new(1, 0);
    info.zkrs_flags = Some(zk_quorum::wire::payload::LEARNER_TAKES_UNPROPOSED);
    assert_eq!(learner_actions(&mut l), vec![send(PacketType::FollowerInfo, 0, Some(info.encode()))]);
    l.handle_packet(decode(LEADERINFO), 1);
    assert_eq!(learner_actions(&mut l), vec![LearnerAction::PersistAcceptedEpoch(1)]);
    l.epoch_persisted(2);
    assert_eq!(
        learner_actions(&mut l),
        vec![send(PacketType::AckEpoch, 0, Some(AckEpoch { current_epoch: 0 }.encode()))]
    );
    l.handle_packet(decode(SNAP), 3);
    assert_eq!(learner_actions(&mut l), vec![LearnerAction::ReceiveSnapshot { zxid: EPOCH_START }]);
    // The server reads SNAPSHOT_STREAM off the socket itself, then goes on decoding packets.
    assert!(!SNAPSHOT_STREAM.is_empty());
    l.handle_packet(decode(NEWLEADER), 4);
    assert!(learner_actions(&mut l).is_empty(), "nothing before the snapshot is durable (ZK-3642)");
    l.snapshot_loaded(EPOCH_START, 5);
    assert_eq!(learner_actions(&mut l), vec![LearnerAction::PersistCurrentEpoch(1)]);
    l.epoch_persisted(6);
    assert_eq!(learner_actions(&mut l), vec![send(PacketType::Ack, EPOCH_START, None)]);
    l.handle_packet(decode(UPTODATE), 7);
    assert_eq!(
        learner_actions(&mut l),
        vec![LearnerAction::UpToDate, send(PacketType::Ack, EPOCH_START, None)]
    );
    assert!(l.is_up_to_date());
}

#[test]
fn our_leader_sends_apaches_bytes() {
    let mut l = Leader::new(cfg(3), fresh(), vec![], 0);
    let mut sent: Vec<(u64, Vec<u8>)> = Vec::new();
    let pump = |l: &mut Leader, sent: &mut Vec<(u64, Vec<u8>)>| {
        while let Some(a) = l.poll_action() {
            match a {
                LeaderAction::Send { conn, packet } => sent.push((conn, packet.to_vec())),
                LeaderAction::PersistAcceptedEpoch(_) | LeaderAction::PersistCurrentEpoch(_) => {
                    l.epoch_persisted(0)
                }
                LeaderAction::Established { epoch } => assert_eq!(epoch, 1),
                other => panic!("unexpected {other:?}"),
            }
        }
    };
    for (conn, sid) in [(2u64, 2i64), (1, 1)] {
        l.learner_connected(conn, 0);
        l.handle_packet(
            conn,
            QuorumPacket::new(PacketType::FollowerInfo, 0, Some(LearnerInfo::new(sid, 0).encode())),
            0,
        );
        pump(&mut l, &mut sent);
    }
    for conn in [2u64, 1] {
        l.handle_packet(
            conn,
            QuorumPacket::new(PacketType::AckEpoch, 0, Some(AckEpoch { current_epoch: 0 }.encode())),
            1,
        );
        pump(&mut l, &mut sent);
    }
    for conn in [2u64, 1] {
        l.handle_packet(conn, QuorumPacket::new(PacketType::Ack, EPOCH_START, None), 2);
        pump(&mut l, &mut sent);
    }
    let to_1: Vec<&Vec<u8>> = sent.iter().filter(|(c, _)| *c == 1).map(|(_, b)| b).collect();
    // Both learners were fresh and so are we: an empty DIFF where Apache's leader, already past its
    // epoch start, sent SNAP. The rest is Apache's exact bytes.
    assert_eq!(to_1.len(), 4, "{to_1:?}");
    assert_eq!(to_1[0], LEADERINFO);
    assert_eq!(decode(to_1[1]).kind(), Ok(PacketType::Diff));
    assert_eq!(to_1[2], NEWLEADER);
    assert_eq!(to_1[3], UPTODATE);
}
