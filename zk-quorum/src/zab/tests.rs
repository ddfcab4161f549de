//! Scripted exchanges: one leader, learners 2 and 3 (voters) and 4 (observer); the exact packets
//! and actions each rule of ZAB-FACTS §2 and each bug of §5 calls for.

use bytes::Bytes;
use std::collections::BTreeSet;

use super::*;
use crate::wire::{
    AckEpoch, ForwardedRequest, LeaderInfo, LearnerInfo, MovedSessions, PacketType as T, QuorumPacket,
    RevalidateReply, RevalidateRequest, SessionTouch,
};

const E5: u32 = 5;

fn cfg(sid: i64) -> ZabConfig {
    let mut c = ZabConfig::new(sid, QuorumVerifier::majority([1, 2, 3], [4]), 100, 10, 5);
    c.config_string = Bytes::from_static(b"version=0");
    c.committed_log_max = 3;
    c
}

fn z(epoch: u32, counter: u32) -> i64 {
    make_zxid(epoch, counter)
}

fn tx(zxid: i64) -> Bytes {
    Bytes::from(format!("txn {zxid:#x}"))
}

fn txs(zxids: &[i64]) -> Vec<(i64, Bytes)> {
    zxids.iter().map(|z| (*z, tx(*z))).collect()
}

fn pkt(t: T, zxid: i64, data: Option<Bytes>) -> QuorumPacket {
    QuorumPacket::new(t, zxid, data)
}

fn local(accepted: u32, current: u32, last: i64, first: Option<i64>) -> LocalState {
    LocalState {
        accepted_epoch: accepted,
        current_epoch: current,
        last_logged_zxid: last,
        first_logged_zxid: first,
    }
}

fn leader_actions(l: &mut Leader) -> Vec<LeaderAction> {
    std::iter::from_fn(|| l.poll_action()).collect()
}

fn learner_actions(l: &mut Learner) -> Vec<LearnerAction> {
    std::iter::from_fn(|| l.poll_action()).collect()
}

fn send(conn: ConnId, t: T, zxid: i64, data: Option<Bytes>) -> LeaderAction {
    LeaderAction::Send { conn, packet: pkt(t, zxid, data) }
}

fn pair(conn: ConnId, zxid: i64) -> [LeaderAction; 2] {
    [send(conn, T::Proposal, zxid, Some(tx(zxid))), send(conn, T::Commit, zxid, None)]
}

fn new_leader(conn: ConnId, epoch: u32) -> LeaderAction {
    send(conn, T::NewLeader, z(epoch, 0), Some(Bytes::from_static(b"version=0")))
}

/// The LearnerInfo a zkrs learner sends: Apache's 20 bytes and zkrs's extension (it takes
/// ZKRS_UNPROPOSED).
fn zkrs_learner_info(sid: i64) -> Bytes {
    let mut info = LearnerInfo::new(sid, 0);
    info.zkrs_flags = Some(crate::wire::payload::LEARNER_TAKES_UNPROPOSED);
    info.encode()
}

fn follower_info(sid: i64, accepted: u32) -> QuorumPacket {
    pkt(T::FollowerInfo, z(accepted, 0), Some(LearnerInfo::new(sid, 0).encode()))
}

fn ack_epoch(last: i64, current: i32) -> QuorumPacket {
    pkt(T::AckEpoch, last, Some(AckEpoch { current_epoch: current }.encode()))
}

/// The follower's ACKs are clamped before its sync's first packet (review F3).
fn reset(sid: i64, to: i64) -> LeaderAction {
    LeaderAction::AckReset { sid, to }
}

fn closes(actions: &[LeaderAction], conn: ConnId) -> bool {
    actions.iter().any(|a| matches!(a, LeaderAction::Close { conn: c, .. } if *c == conn))
}

/// Leader 1 (epoch 5 history ending at `last`, window `recent`) established in epoch 6 with
/// follower 2 on conn 20, which had the same history (empty DIFF).
fn established(recent: &[i64], last: i64, first: Option<i64>) -> Leader {
    established_with(cfg(1), recent, last, first)
}

/// [`established`] with the leader's configuration `c`.
fn established_with(c: ZabConfig, recent: &[i64], last: i64, first: Option<i64>) -> Leader {
    let mut l = Leader::new(c, local(E5, E5, last, first), txs(recent), 0);
    l.learner_connected(20, 0);
    l.handle_packet(20, follower_info(2, E5), 1);
    assert_eq!(leader_actions(&mut l), vec![LeaderAction::PersistAcceptedEpoch(6)]);
    l.epoch_persisted(2);
    let li = Some(LeaderInfo { protocol_version: 0x10000 }.encode());
    assert_eq!(leader_actions(&mut l), vec![send(20, T::LeaderInfo, z(6, 0), li)]);
    l.handle_packet(20, ack_epoch(last, E5 as i32), 3);
    assert_eq!(leader_actions(&mut l), vec![LeaderAction::PersistCurrentEpoch(6)]);
    l.epoch_persisted(4);
    assert_eq!(leader_actions(&mut l), vec![send(20, T::Diff, last, None), new_leader(20, 6)]);
    l.handle_packet(20, pkt(T::Ack, z(6, 0), None), 5);
    assert_eq!(
        leader_actions(&mut l),
        vec![LeaderAction::Established { epoch: 6 }, send(20, T::UpToDate, -1, None)]
    );
    assert!(l.is_established());
    l
}

/// A learner joining an established leader on `conn`: FOLLOWERINFO/OBSERVERINFO and ACKEPOCH; the
/// sync actions that follow.
fn join(l: &mut Leader, conn: ConnId, sid: i64, peer_last: i64, now: u64) -> Vec<LeaderAction> {
    l.learner_connected(conn, now);
    let info = if sid == 4 {
        pkt(T::ObserverInfo, z(E5, 0), Some(LearnerInfo::new(sid, 0).encode()))
    } else {
        follower_info(sid, E5)
    };
    l.handle_packet(conn, info, now);
    let li = leader_actions(l);
    assert_eq!(li.len(), 1, "{li:?}");
    l.handle_packet(conn, ack_epoch(peer_last, E5 as i32), now);
    leader_actions(l)
}

#[test]
fn discovery_waits_for_a_quorum_and_persists_each_epoch_before_sending() {
    let mut l = Leader::new(cfg(1), local(3, 3, z(3, 1), Some(z(3, 1))), txs(&[z(3, 1)]), 0);
    assert!(leader_actions(&mut l).is_empty());
    // The observer's epoch raises the new one but does not make a quorum.
    l.learner_connected(40, 0);
    l.handle_packet(40, pkt(T::ObserverInfo, z(4, 0), Some(LearnerInfo::new(4, 0).encode())), 1);
    assert!(leader_actions(&mut l).is_empty());
    l.learner_connected(20, 1);
    l.handle_packet(20, follower_info(2, 2), 2);
    // 1 + max(3, 4, 2); nothing is sent before acceptedEpoch is durable.
    assert_eq!(leader_actions(&mut l), vec![LeaderAction::PersistAcceptedEpoch(5)]);
    l.epoch_persisted(3);
    let li = || Some(LeaderInfo { protocol_version: 0x10000 }.encode());
    assert_eq!(
        leader_actions(&mut l),
        vec![send(20, T::LeaderInfo, z(5, 0), li()), send(40, T::LeaderInfo, z(5, 0), li())]
    );
    // A learner that had accepted this epoch already answers -1: not counted.
    l.learner_connected(30, 3);
    l.handle_packet(30, follower_info(3, 5), 3);
    assert_eq!(leader_actions(&mut l), vec![send(30, T::LeaderInfo, z(5, 0), li())]);
    l.handle_packet(30, ack_epoch(z(3, 1), -1), 4);
    assert!(leader_actions(&mut l).is_empty());
    // The observer's ACKEPOCH does not count either; follower 2's does.
    l.handle_packet(40, ack_epoch(z(3, 1), 3), 4);
    assert!(leader_actions(&mut l).is_empty());
    l.handle_packet(20, ack_epoch(z(3, 1), 3), 5);
    assert_eq!(leader_actions(&mut l), vec![LeaderAction::PersistCurrentEpoch(5)]);
    // Sync starts only once currentEpoch is durable; NEWLEADER ends each sync.
    l.epoch_persisted(6);
    assert_eq!(
        leader_actions(&mut l),
        vec![
            send(20, T::Diff, z(3, 1), None),
            new_leader(20, 5),
            send(30, T::Diff, z(3, 1), None),
            new_leader(30, 5),
            send(40, T::Diff, z(3, 1), None),
            new_leader(40, 5),
        ]
    );
    // The observer's NEWLEADER ACK does not establish; a follower's does.
    l.handle_packet(40, pkt(T::Ack, z(5, 0), None), 7);
    assert!(leader_actions(&mut l).is_empty());
    l.handle_packet(30, pkt(T::Ack, z(5, 0), None), 8);
    assert_eq!(
        leader_actions(&mut l),
        vec![
            LeaderAction::Established { epoch: 5 },
            send(30, T::UpToDate, -1, None),
            send(40, T::UpToDate, -1, None),
        ]
    );
    // A late NEWLEADER ACK gets UPTODATE at once.
    l.handle_packet(20, pkt(T::Ack, z(5, 0), None), 9);
    assert_eq!(leader_actions(&mut l), vec![send(20, T::UpToDate, -1, None)]);
}

#[test]
fn a_learner_ahead_of_the_leader_is_refused_during_discovery_only() {
    let mut l =
        Leader::new(cfg(1), local(5, 5, z(5, 3), Some(z(5, 1))), txs(&[z(5, 1), z(5, 2), z(5, 3)]), 0);
    l.learner_connected(20, 0);
    l.handle_packet(20, follower_info(2, 5), 0);
    l.epoch_persisted(1);
    leader_actions(&mut l);
    l.handle_packet(20, ack_epoch(z(5, 4), 5), 2);
    let a = leader_actions(&mut l);
    assert!(closes(&a, 20), "{a:?}");
    assert!(!l.is_stopped());
    // Once established, the same learner is cut back instead (TRUNC).
    let mut l = established(&[z(5, 1), z(5, 2), z(5, 3)], z(5, 3), Some(z(5, 1)));
    assert_eq!(
        join(&mut l, 30, 3, z(5, 4), 10),
        vec![reset(3, z(5, 3)), send(30, T::Trunc, z(5, 3), None), new_leader(30, 6)]
    );
}

#[test]
fn sync_by_empty_diff_trunc_and_diff_from_the_window() {
    let recent = [z(5, 4), z(5, 5), z(5, 6)];
    let mut l = established(&recent, z(5, 6), Some(z(5, 1)));
    assert_eq!(
        join(&mut l, 30, 3, z(5, 6), 10),
        vec![reset(3, z(5, 6)), send(30, T::Diff, z(5, 6), None), new_leader(30, 6)]
    );
    let mut l = established(&recent, z(5, 6), Some(z(5, 1)));
    assert_eq!(
        join(&mut l, 30, 3, z(5, 9), 10),
        vec![reset(3, z(5, 6)), send(30, T::Trunc, z(5, 6), None), new_leader(30, 6)]
    );
    let mut l = established(&recent, z(5, 6), Some(z(5, 1)));
    let mut want = vec![reset(3, z(5, 4)), send(30, T::Diff, z(5, 6), None)];
    want.extend(pair(30, z(5, 5)));
    want.extend(pair(30, z(5, 6)));
    want.push(new_leader(30, 6));
    assert_eq!(join(&mut l, 30, 3, z(5, 4), 10), want);
}

#[test]
fn unknown_zxid_truncates_within_its_epoch_and_snaps_across_epochs() {
    // The learner logged e4:7, which never committed: the leader went from e4:5 to epoch 5.
    let recent = [z(4, 5), z(5, 1), z(5, 2)];
    let mut l = established(&recent, z(5, 2), Some(z(4, 1)));
    let mut want = vec![reset(3, z(4, 5)), send(30, T::Trunc, z(4, 5), None)];
    want.extend(pair(30, z(5, 1)));
    want.extend(pair(30, z(5, 2)));
    want.push(new_leader(30, 6));
    assert_eq!(join(&mut l, 30, 3, z(4, 7), 10), want);
    // e4:2 with e3:5 before it: the histories may differ before e4, so SNAP.
    let recent = [z(3, 5), z(5, 1), z(5, 2)];
    let mut l = established(&recent, z(5, 2), Some(z(3, 1)));
    assert_eq!(
        join(&mut l, 30, 3, z(4, 2), 10),
        vec![
            reset(3, z(5, 2)),
            send(30, T::Snap, z(5, 2), None),
            LeaderAction::SerializeSnapshot { req: 1, zxid: z(5, 2) }
        ]
    );
    l.snapshot_bytes(1, Bytes::from_static(b"abc"), false, 11);
    l.snapshot_bytes(1, Bytes::from_static(b"def"), true, 12);
    assert_eq!(
        leader_actions(&mut l),
        vec![
            LeaderAction::SendRaw { conn: 30, bytes: Bytes::from_static(b"abc") },
            LeaderAction::SendRaw { conn: 30, bytes: Bytes::from_static(b"def") },
            new_leader(30, 6),
        ]
    );
}

#[test]
fn history_older_than_the_window_is_read_from_the_log_or_sent_as_a_snapshot() {
    let recent = [z(5, 4), z(5, 5), z(5, 6)];
    let mut l = established(&recent, z(5, 6), Some(z(5, 1)));
    assert_eq!(
        join(&mut l, 30, 3, z(5, 2), 10),
        vec![LeaderAction::ReadLog { req: 1, from_zxid: z(5, 2), through_zxid: z(5, 6), max_bytes: None }]
    );
    // A proposal made meanwhile is queued for the learner after its sync, before NEWLEADER.
    l.propose(z(6, 1), tx(z(6, 1)), 11);
    assert_eq!(leader_actions(&mut l), vec![send(20, T::Proposal, z(6, 1), Some(tx(z(6, 1))))]);
    l.log_read(1, txs(&[z(5, 2), z(5, 3), z(5, 4), z(5, 5), z(5, 6)]), 12);
    let mut want = vec![reset(3, z(5, 2)), send(30, T::Diff, z(5, 6), None)];
    for c in 3..=6 {
        want.extend(pair(30, z(5, c)));
    }
    want.push(send(30, T::Proposal, z(6, 1), Some(tx(z(6, 1)))));
    want.push(new_leader(30, 6));
    assert_eq!(leader_actions(&mut l), want);

    // The log's record before the learner's unknown zxid, same epoch: TRUNC to it.
    let mut l = established(&recent, z(5, 6), Some(z(5, 1)));
    join(&mut l, 30, 3, z(5, 2), 10);
    l.log_read(1, txs(&[z(5, 1), z(5, 4), z(5, 5), z(5, 6)]), 12);
    let a = leader_actions(&mut l);
    assert_eq!(a[..2], [reset(3, z(5, 1)), send(30, T::Trunc, z(5, 1), None)]);
    assert_eq!(a.len(), 2 + 2 * 3 + 1);

    // Purged meanwhile: SNAP.
    let mut l = established(&recent, z(5, 6), Some(z(5, 1)));
    join(&mut l, 30, 3, z(5, 2), 10);
    l.log_read_failed(1, 12);
    assert_eq!(
        leader_actions(&mut l),
        vec![
            reset(3, z(5, 6)),
            send(30, T::Snap, z(5, 6), None),
            LeaderAction::SerializeSnapshot { req: 2, zxid: z(5, 6) }
        ]
    );

    // Older than the log: SNAP at once; an empty learner too.
    for peer in [z(4, 9), 0] {
        let mut l = established(&recent, z(5, 6), Some(z(5, 1)));
        assert_eq!(
            join(&mut l, 30, 3, peer, 10),
            vec![
                reset(3, z(5, 6)),
                send(30, T::Snap, z(5, 6), None),
                LeaderAction::SerializeSnapshot { req: 1, zxid: z(5, 6) }
            ]
        );
    }
}

#[test]
fn zk_3104_newleader_follows_every_sync_packet_and_outstanding_proposal() {
    let recent = [z(5, 4), z(5, 5), z(5, 6)];
    let mut l = established(&recent, z(5, 6), Some(z(5, 1)));
    l.propose(z(6, 1), tx(z(6, 1)), 10);
    l.propose(z(6, 2), tx(z(6, 2)), 10);
    leader_actions(&mut l);
    l.committed(z(6, 1), 11);
    assert_eq!(leader_actions(&mut l), vec![send(20, T::Commit, z(6, 1), None)]);
    let mut want = vec![reset(3, z(5, 5)), send(30, T::Diff, z(6, 1), None)];
    want.extend(pair(30, z(5, 6)));
    want.extend(pair(30, z(6, 1)));
    want.push(send(30, T::Proposal, z(6, 2), Some(tx(z(6, 2)))));
    want.push(new_leader(30, 6));
    assert_eq!(join(&mut l, 30, 3, z(5, 5), 12), want);
    // The observer gets the committed history but no outstanding proposal.
    let mut want = vec![send(40, T::Diff, z(6, 1), None)];
    want.extend(pair(40, z(5, 6)));
    want.extend(pair(40, z(6, 1)));
    want.push(new_leader(40, 6));
    assert_eq!(join(&mut l, 40, 4, z(5, 5), 12), want);
    // Proposals after NEWLEADER go out live, to followers only.
    l.propose(z(6, 3), tx(z(6, 3)), 13);
    assert_eq!(
        leader_actions(&mut l),
        vec![
            send(20, T::Proposal, z(6, 3), Some(tx(z(6, 3)))),
            send(30, T::Proposal, z(6, 3), Some(tx(z(6, 3))))
        ]
    );
    // Commit: COMMIT to followers, INFORM with the payload to the observer.
    l.committed(z(6, 2), 14);
    assert_eq!(
        leader_actions(&mut l),
        vec![
            send(20, T::Commit, z(6, 2), None),
            send(30, T::Commit, z(6, 2), None),
            send(40, T::Inform, z(6, 2), Some(tx(z(6, 2)))),
        ]
    );
}

#[test]
fn broadcast_acks_are_reported_never_committed_by_the_machine() {
    let mut l = established(&[z(5, 1)], z(5, 1), Some(z(5, 1)));
    l.propose(z(6, 1), tx(z(6, 1)), 10);
    leader_actions(&mut l);
    // Out-of-order or foreign-epoch proposals are refused.
    l.propose(z(6, 1), tx(z(6, 1)), 10);
    l.propose(z(7, 1), tx(z(7, 1)), 10);
    assert!(leader_actions(&mut l).is_empty());
    l.handle_packet(20, pkt(T::Ack, z(6, 1), None), 12);
    assert_eq!(leader_actions(&mut l), vec![LeaderAction::Ack { sid: 2, zxid: z(6, 1) }]);
    l.committed(z(6, 1), 13);
    leader_actions(&mut l);
    // A late ACK of a committed proposal and the ACK after UPTODATE are ignored.
    l.handle_packet(20, pkt(T::Ack, z(6, 1), None), 14);
    l.handle_packet(20, pkt(T::Ack, z(6, 0), None), 14);
    assert!(leader_actions(&mut l).is_empty());
    // An ACK of something never proposed closes the connection; the leader stays.
    l.handle_packet(20, pkt(T::Ack, z(6, 9), None), 15);
    assert!(closes(&leader_actions(&mut l), 20));
    assert!(l.is_established());
}

#[test]
fn pings_requests_revalidation_and_sync_answers() {
    let mut l = established(&[z(5, 1)], z(5, 1), Some(z(5, 1)));
    assert_eq!(l.poll_timeout(), Some(55));
    l.handle_timeout(55);
    assert_eq!(leader_actions(&mut l), vec![send(20, T::Ping, z(6, 0), None)]);
    let touches = vec![SessionTouch { session_id: 7, timeout_ms: 4000 }];
    l.handle_packet(20, pkt(T::Ping, z(6, 0), Some(SessionTouch::encode_list(&touches))), 56);
    assert_eq!(leader_actions(&mut l), vec![LeaderAction::Touch { sessions: touches }]);
    let req = ForwardedRequest { session_id: 7, cxid: 1, op: 9, body: Bytes::new() };
    let mut p = pkt(T::Request, -1, Some(req.encode()));
    p.authinfo = Some(vec![zk_proto::Id { scheme: "ip".into(), id: "10.0.0.1".into() }]);
    l.handle_packet(20, p.clone(), 57);
    assert_eq!(
        leader_actions(&mut l),
        vec![LeaderAction::Forwarded { sid: 2, conn: 20, request: req, authinfo: p.authinfo.unwrap() }]
    );
    l.sync_ready(20, 58);
    assert_eq!(leader_actions(&mut l), vec![send(20, T::Sync, 0, None)]);
    let rv = RevalidateRequest { session_id: 7, timeout_ms: 4000 }.encode();
    l.handle_packet(20, pkt(T::Revalidate, -1, Some(rv)), 59);
    assert_eq!(
        leader_actions(&mut l),
        vec![LeaderAction::Revalidate { conn: 20, session: 7, timeout: 4000 }]
    );
    l.revalidate_reply(20, 7, true);
    let reply = RevalidateReply { session_id: 7, valid: true }.encode();
    assert_eq!(leader_actions(&mut l), vec![send(20, T::Revalidate, -1, Some(reply))]);
}

#[test]
fn leader_steps_down_without_a_quorum_heard_within_sync_limit() {
    let mut l = established(&[z(5, 1)], z(5, 1), Some(z(5, 1)));
    // Follower 2 last spoke at 5; syncLimit is 500 ms. Pings keep going until then.
    let mut now = 5;
    while let Some(t) = l.poll_timeout() {
        now = t;
        l.handle_timeout(now);
        let a = leader_actions(&mut l);
        if a.iter().any(|a| matches!(a, LeaderAction::StepDown { .. })) {
            assert!(closes(&a, 20), "the silent learner is dropped first: {a:?}");
            break;
        }
        assert!(now < 600, "{a:?}");
    }
    assert_eq!(now, 505);
    assert!(l.is_stopped());
    assert_eq!(l.poll_timeout(), None);
}

#[test]
fn discovery_and_sync_each_wait_at_most_init_limit() {
    let mut l = Leader::new(cfg(1), local(5, 5, 0, None), vec![], 0);
    assert_eq!(l.poll_timeout(), Some(1000));
    l.handle_timeout(999);
    assert!(leader_actions(&mut l).is_empty());
    l.handle_timeout(1000);
    assert!(matches!(leader_actions(&mut l)[..], [LeaderAction::StepDown { .. }]));
    // The NEWLEADER wait restarts the clock at currentEpoch's write.
    let mut l = Leader::new(cfg(1), local(5, 5, 0, None), vec![], 0);
    l.learner_connected(20, 900);
    l.handle_packet(20, follower_info(2, 5), 900);
    l.epoch_persisted(900);
    l.handle_packet(20, ack_epoch(0, 5), 950);
    l.epoch_persisted(990);
    leader_actions(&mut l);
    assert_eq!(l.poll_timeout(), Some(1990));
    l.handle_timeout(1990);
    assert!(leader_actions(&mut l).iter().any(|a| matches!(a, LeaderAction::StepDown { .. })));
}

#[test]
fn malformed_or_untimely_packets_close_only_their_connection() {
    let mut l = established(&[z(5, 1)], z(5, 1), Some(z(5, 1)));
    let cases: Vec<QuorumPacket> = vec![
        QuorumPacket { packet_type: 99, zxid: 0, data: None, authinfo: None },
        pkt(T::FollowerInfo, 0, Some(Bytes::from_static(&[0, 1]))),
        pkt(T::AckEpoch, 0, None),
        pkt(T::Proposal, z(6, 1), None),
    ];
    for (i, p) in cases.into_iter().enumerate() {
        let conn = 100 + i as u64;
        l.learner_connected(conn, 10);
        if i >= 2 {
            l.handle_packet(conn, follower_info(3, 5), 10);
            leader_actions(&mut l);
        }
        l.handle_packet(conn, p, 11);
        assert!(closes(&leader_actions(&mut l), conn), "case {i}");
    }
    // FOLLOWERINFO from a non-voter, from our own sid; a bad PING list from a synced follower.
    l.learner_connected(200, 12);
    l.handle_packet(200, follower_info(9, 5), 12);
    assert!(closes(&leader_actions(&mut l), 200));
    l.learner_connected(201, 12);
    l.handle_packet(201, follower_info(1, 5), 12);
    assert!(closes(&leader_actions(&mut l), 201));
    l.handle_packet(20, pkt(T::Ping, 0, Some(Bytes::from_static(&[1, 2, 3]))), 13);
    assert!(closes(&leader_actions(&mut l), 20));
    assert!(l.is_established());
    // The wrong ACK where the NEWLEADER ACK is due (ZK-4685) closes too.
    join(&mut l, 30, 3, z(5, 1), 14);
    l.handle_packet(30, pkt(T::Ack, z(6, 1), None), 15);
    assert!(closes(&leader_actions(&mut l), 30));
}

#[test]
fn zk_4685_a_proposal_ack_before_the_newleader_ack_counts_and_the_learner_stays() {
    // An Apache 3.8.0 learner ACKs a proposal it got at its sync before it ACKs NEWLEADER.
    let mut l = established(&[z(5, 1)], z(5, 1), Some(z(5, 1)));
    l.propose(z(6, 1), tx(z(6, 1)), 10);
    leader_actions(&mut l);
    let mut want = vec![
        reset(3, z(5, 1)),
        send(30, T::Diff, z(5, 1), None),
        send(30, T::Proposal, z(6, 1), Some(tx(z(6, 1)))),
    ];
    want.push(new_leader(30, 6));
    assert_eq!(join(&mut l, 30, 3, z(5, 1), 11), want);
    l.handle_packet(30, pkt(T::Ack, z(6, 1), None), 12);
    assert_eq!(leader_actions(&mut l), vec![LeaderAction::Ack { sid: 3, zxid: z(6, 1) }]);
    // The NEWLEADER ACK still brings UPTODATE.
    l.handle_packet(30, pkt(T::Ack, z(6, 0), None), 13);
    assert_eq!(leader_actions(&mut l), vec![send(30, T::UpToDate, -1, None)]);
    // An observer's ACK, or one of a zxid never proposed, still closes.
    join(&mut l, 40, 4, z(5, 1), 14);
    l.handle_packet(40, pkt(T::Ack, z(6, 1), None), 15);
    assert!(closes(&leader_actions(&mut l), 40));
    let mut l = established(&[z(5, 1)], z(5, 1), Some(z(5, 1)));
    l.propose(z(6, 1), tx(z(6, 1)), 10);
    leader_actions(&mut l);
    join(&mut l, 30, 3, z(5, 1), 11);
    l.handle_packet(30, pkt(T::Ack, z(6, 2), None), 12);
    assert!(closes(&leader_actions(&mut l), 30));
}

#[test]
fn a_learner_that_accepted_a_later_epoch_makes_the_leader_step_down() {
    let mut l = established(&[z(5, 1)], z(5, 1), Some(z(5, 1)));
    l.learner_connected(30, 10);
    l.handle_packet(30, follower_info(3, 7), 10);
    assert!(matches!(leader_actions(&mut l)[..], [LeaderAction::StepDown { .. }]));
}

// ---- learner ----

fn learner(observer: bool, st: LocalState) -> Learner {
    let sid = if observer { 4 } else { 2 };
    let mut l = Learner::new(cfg(sid), 1, observer, st, 0);
    l.connected(0);
    l
}

fn lsend(t: T, zxid: i64, data: Option<Bytes>) -> LearnerAction {
    LearnerAction::Send(pkt(t, zxid, data))
}

fn leader_info(epoch: u32) -> QuorumPacket {
    pkt(T::LeaderInfo, z(epoch, 0), Some(LeaderInfo { protocol_version: 0x10000 }.encode()))
}

fn newleader_pkt(epoch: u32) -> QuorumPacket {
    pkt(T::NewLeader, z(epoch, 0), Some(Bytes::from_static(b"version=0")))
}

/// A follower at (accepted 5, current 5, last e5:3) through LEADERINFO(6) and ACKEPOCH.
fn discovered(observer: bool) -> Learner {
    let mut l = learner(observer, local(5, 5, z(5, 3), Some(z(5, 1))));
    let kind = if observer { T::ObserverInfo } else { T::FollowerInfo };
    let sid = if observer { 4 } else { 2 };
    assert_eq!(learner_actions(&mut l), vec![lsend(kind, z(5, 0), Some(zkrs_learner_info(sid)))]);
    l.handle_packet(leader_info(6), 1);
    assert_eq!(learner_actions(&mut l), vec![LearnerAction::PersistAcceptedEpoch(6)]);
    l.epoch_persisted(2);
    assert_eq!(
        learner_actions(&mut l),
        vec![lsend(T::AckEpoch, z(5, 3), Some(AckEpoch { current_epoch: 5 }.encode()))]
    );
    l
}

#[test]
fn learner_discovery_epochs() {
    discovered(false);
    // Equal: -1 at once, nothing persisted.
    let mut l = learner(false, local(6, 5, z(5, 3), None));
    learner_actions(&mut l);
    l.handle_packet(leader_info(6), 1);
    assert_eq!(
        learner_actions(&mut l),
        vec![lsend(T::AckEpoch, z(5, 3), Some(AckEpoch { current_epoch: -1 }.encode()))]
    );
    // Lower: back to the election.
    let mut l = learner(false, local(7, 5, z(5, 3), None));
    learner_actions(&mut l);
    l.handle_packet(leader_info(6), 1);
    assert!(matches!(learner_actions(&mut l)[..], [LearnerAction::Disconnect { .. }]));
    assert!(l.is_stopped());
}

#[test]
fn zk_3911_4643_4685_newleader_ack_after_durable_txns_then_current_epoch() {
    let mut l = discovered(false);
    l.handle_packet(pkt(T::Diff, z(5, 5), None), 3);
    l.handle_packet(pkt(T::Proposal, z(5, 4), Some(tx(z(5, 4)))), 3);
    l.handle_packet(pkt(T::Commit, z(5, 4), None), 3);
    l.handle_packet(pkt(T::Proposal, z(5, 5), Some(tx(z(5, 5)))), 3);
    l.handle_packet(newleader_pkt(6), 3);
    // A live proposal right behind NEWLEADER waits for our ACK; a PING is not answered before it.
    l.handle_packet(pkt(T::Proposal, z(6, 1), Some(tx(z(6, 1)))), 4);
    l.handle_packet(pkt(T::Ping, z(6, 1), None), 4);
    assert_eq!(
        learner_actions(&mut l),
        vec![
            LearnerAction::Log { zxid: z(5, 4), payload: tx(z(5, 4)) },
            LearnerAction::Commit { zxid: z(5, 4), payload: tx(z(5, 4)) },
            LearnerAction::Log { zxid: z(5, 5), payload: tx(z(5, 5)) },
        ]
    );
    // Not all durable yet: no currentEpoch, no ACK (ZK-3911, -4646).
    l.durable(z(5, 4), 5);
    assert!(learner_actions(&mut l).is_empty());
    l.durable(z(5, 5), 6);
    // Txns durable, then currentEpoch (ZK-4643).
    assert_eq!(learner_actions(&mut l), vec![LearnerAction::PersistCurrentEpoch(6)]);
    l.epoch_persisted(7);
    // The NEWLEADER ACK first (ZK-4685), then the outstanding proposal's ACK, then live traffic.
    assert_eq!(
        learner_actions(&mut l),
        vec![
            lsend(T::Ack, z(6, 0), None),
            lsend(T::Ack, z(5, 5), None),
            LearnerAction::Log { zxid: z(6, 1), payload: tx(z(6, 1)) },
        ]
    );
    // ZK-4394: the COMMIT of a proposal received before NEWLEADER applies normally.
    l.handle_packet(pkt(T::Commit, z(5, 5), None), 8);
    assert_eq!(learner_actions(&mut l), vec![LearnerAction::Commit { zxid: z(5, 5), payload: tx(z(5, 5)) }]);
    l.handle_packet(pkt(T::UpToDate, -1, None), 9);
    assert_eq!(learner_actions(&mut l), vec![LearnerAction::UpToDate, lsend(T::Ack, z(6, 0), None)]);
    assert!(l.is_up_to_date());
    // Proposals are ACKed once durable, in order.
    l.handle_packet(pkt(T::Proposal, z(6, 2), Some(tx(z(6, 2)))), 10);
    learner_actions(&mut l);
    l.durable(z(6, 2), 11);
    assert_eq!(learner_actions(&mut l), vec![lsend(T::Ack, z(6, 1), None), lsend(T::Ack, z(6, 2), None)]);
}

#[test]
fn zk_3642_snap_is_durable_before_the_newleader_ack() {
    let mut l = discovered(false);
    l.handle_packet(pkt(T::Snap, z(5, 9), None), 3);
    assert_eq!(learner_actions(&mut l), vec![LearnerAction::ReceiveSnapshot { zxid: z(5, 9) }]);
    // The server reads the stream, then keeps feeding packets; they wait for the load.
    l.handle_packet(pkt(T::Proposal, z(5, 10), Some(tx(z(5, 10)))), 4);
    l.handle_packet(pkt(T::Commit, z(5, 10), None), 4);
    l.handle_packet(newleader_pkt(6), 4);
    assert!(learner_actions(&mut l).is_empty());
    l.snapshot_loaded(z(5, 9), 5);
    assert_eq!(
        learner_actions(&mut l),
        vec![
            LearnerAction::Log { zxid: z(5, 10), payload: tx(z(5, 10)) },
            LearnerAction::Commit { zxid: z(5, 10), payload: tx(z(5, 10)) },
        ]
    );
    l.durable(z(5, 10), 6);
    assert_eq!(learner_actions(&mut l), vec![LearnerAction::PersistCurrentEpoch(6)]);
}

#[test]
fn zk_2832_trunc_cuts_before_anything_follows_and_no_stale_txn_is_committed() {
    let mut l = discovered(false);
    l.handle_packet(pkt(T::Trunc, z(5, 2), None), 3);
    assert_eq!(learner_actions(&mut l), vec![LearnerAction::Truncate { after_zxid: z(5, 2) }]);
    // e5:3 was ours and is gone: a new e5:3 from the leader is logged after the cut.
    l.handle_packet(pkt(T::Proposal, z(5, 3), Some(Bytes::from_static(b"new"))), 4);
    l.handle_packet(pkt(T::Commit, z(5, 3), None), 4);
    assert!(learner_actions(&mut l).is_empty());
    l.truncated(z(5, 2), 5);
    assert_eq!(
        learner_actions(&mut l),
        vec![
            LearnerAction::Log { zxid: z(5, 3), payload: Bytes::from_static(b"new") },
            LearnerAction::Commit { zxid: z(5, 3), payload: Bytes::from_static(b"new") },
        ]
    );
    // A TRUNC beyond our log is a protocol violation.
    let mut l = discovered(false);
    l.handle_packet(pkt(T::Trunc, z(5, 4), None), 3);
    assert!(matches!(learner_actions(&mut l)[..], [LearnerAction::Disconnect { .. }]));
}

#[test]
fn zk_4925_a_commit_out_of_order_disconnects() {
    let mut l = discovered(false);
    l.handle_packet(pkt(T::Diff, z(5, 5), None), 3);
    l.handle_packet(pkt(T::Proposal, z(5, 4), Some(tx(z(5, 4)))), 3);
    l.handle_packet(pkt(T::Proposal, z(5, 5), Some(tx(z(5, 5)))), 3);
    l.handle_packet(pkt(T::Commit, z(5, 5), None), 3);
    let a = learner_actions(&mut l);
    assert!(matches!(a.last(), Some(LearnerAction::Disconnect { .. })), "{a:?}");
    assert!(!a.iter().any(|a| matches!(a, LearnerAction::Commit { .. })));
    // A proposal not after the last logged one, too.
    let mut l = discovered(false);
    l.handle_packet(pkt(T::Diff, z(5, 5), None), 3);
    l.handle_packet(pkt(T::Proposal, z(5, 3), Some(tx(z(5, 3)))), 3);
    assert!(matches!(learner_actions(&mut l)[..], [LearnerAction::Disconnect { .. }]));
}

/// A follower synced by an empty DIFF and up to date in epoch 6.
fn up_to_date(observer: bool) -> Learner {
    let mut l = discovered(observer);
    l.handle_packet(pkt(T::Diff, z(5, 3), None), 3);
    l.handle_packet(newleader_pkt(6), 3);
    assert_eq!(learner_actions(&mut l), vec![LearnerAction::PersistCurrentEpoch(6)]);
    l.epoch_persisted(4);
    assert_eq!(learner_actions(&mut l), vec![lsend(T::Ack, z(6, 0), None)]);
    l.handle_packet(pkt(T::UpToDate, -1, None), 5);
    assert_eq!(learner_actions(&mut l), vec![LearnerAction::UpToDate, lsend(T::Ack, z(6, 0), None)]);
    l
}

#[test]
fn learner_pings_requests_and_answers() {
    let mut l = discovered(false);
    // Requests before UPTODATE wait for it.
    let req = ForwardedRequest { session_id: 7, cxid: 1, op: 9, body: Bytes::new() };
    l.forward(req.clone());
    l.touch(7, 4000);
    l.touch(8, 3000);
    l.handle_packet(pkt(T::Diff, z(5, 3), None), 3);
    l.handle_packet(newleader_pkt(6), 3);
    l.epoch_persisted(4);
    learner_actions(&mut l);
    l.handle_packet(pkt(T::UpToDate, -1, None), 5);
    assert_eq!(
        learner_actions(&mut l),
        vec![
            LearnerAction::UpToDate,
            lsend(T::Ack, z(6, 0), None),
            lsend(T::Request, -1, Some(req.encode()))
        ]
    );
    l.handle_packet(pkt(T::Ping, z(6, 4), None), 6);
    let touches =
        [SessionTouch { session_id: 7, timeout_ms: 4000 }, SessionTouch { session_id: 8, timeout_ms: 3000 }];
    assert_eq!(
        learner_actions(&mut l),
        vec![lsend(T::Ping, z(6, 4), Some(SessionTouch::encode_list(&touches)))]
    );
    l.handle_packet(pkt(T::Ping, z(6, 4), None), 7);
    assert_eq!(learner_actions(&mut l), vec![lsend(T::Ping, z(6, 4), Some(Bytes::new()))]);
    l.handle_packet(pkt(T::Sync, 0, None), 8);
    assert_eq!(learner_actions(&mut l), vec![LearnerAction::SyncDone]);
    l.revalidate(7, 4000);
    let rv = RevalidateRequest { session_id: 7, timeout_ms: 4000 }.encode();
    assert_eq!(learner_actions(&mut l), vec![lsend(T::Revalidate, -1, Some(rv))]);
    l.handle_packet(
        pkt(T::Revalidate, -1, Some(RevalidateReply { session_id: 7, valid: false }.encode())),
        9,
    );
    assert_eq!(learner_actions(&mut l), vec![LearnerAction::Revalidated { session: 7, valid: false }]);
}

#[test]
fn observers_apply_informs_and_never_ack() {
    let mut l = up_to_date(true);
    l.handle_packet(pkt(T::Inform, z(6, 1), Some(tx(z(6, 1)))), 6);
    l.durable(z(6, 1), 7);
    assert_eq!(
        learner_actions(&mut l),
        vec![
            LearnerAction::Log { zxid: z(6, 1), payload: tx(z(6, 1)) },
            LearnerAction::Commit { zxid: z(6, 1), payload: tx(z(6, 1)) },
        ]
    );
    l.handle_packet(pkt(T::Proposal, z(6, 2), Some(tx(z(6, 2)))), 8);
    assert!(matches!(learner_actions(&mut l)[..], [LearnerAction::Disconnect { .. }]));
}

#[test]
fn learner_leaves_a_silent_leader_and_malformed_input() {
    let mut l = up_to_date(false);
    assert_eq!(l.poll_timeout(), Some(505));
    l.handle_packet(pkt(T::Ping, z(6, 0), None), 100);
    learner_actions(&mut l);
    assert_eq!(l.poll_timeout(), Some(600));
    l.handle_timeout(599);
    assert!(learner_actions(&mut l).is_empty());
    l.handle_timeout(600);
    assert!(matches!(learner_actions(&mut l)[..], [LearnerAction::Disconnect { .. }]));
    assert_eq!(l.poll_timeout(), None);
    // Before UPTODATE the limit is initLimit.
    let l = discovered(false);
    assert_eq!(l.poll_timeout(), Some(1001));
    for bad in [
        QuorumPacket { packet_type: 0, zxid: 0, data: None, authinfo: None },
        pkt(T::Proposal, z(7, 1), Some(tx(z(7, 1)))),
        pkt(T::Commit, z(6, 9), None),
        pkt(T::UpToDate, -1, None),
        pkt(T::Revalidate, -1, Some(Bytes::from_static(&[1]))),
    ] {
        let mut l = up_to_date(false);
        l.handle_packet(bad.clone(), 6);
        assert!(matches!(learner_actions(&mut l)[..], [LearnerAction::Disconnect { .. }]), "{bad:?}");
        l.handle_packet(pkt(T::Ping, 0, None), 7);
        assert!(learner_actions(&mut l).is_empty());
    }
}

#[test]
fn a_follower_that_does_not_ack_within_sync_limit_is_dropped() {
    let mut l = established(&[z(5, 1)], z(5, 1), Some(z(5, 1)));
    l.propose(z(6, 1), tx(z(6, 1)), 10);
    l.propose(z(6, 2), tx(z(6, 2)), 20);
    leader_actions(&mut l);
    // It keeps answering pings and ACKs the first proposal only.
    l.handle_packet(20, pkt(T::Ack, z(6, 1), None), 300);
    for t in [100, 200, 300, 400, 500] {
        l.handle_packet(20, pkt(T::Ping, z(6, 2), None), t);
    }
    leader_actions(&mut l);
    // e6:2 was proposed at 20: due by 520.
    l.handle_timeout(519);
    assert!(!closes(&leader_actions(&mut l), 20));
    l.handle_timeout(520);
    let a = leader_actions(&mut l);
    assert!(
        a.iter().any(|a| matches!(a, LeaderAction::Close { conn: 20, reason } if reason.contains("ACKed"))),
        "{a:?}"
    );
}

#[test]
fn a_single_voter_ensemble_establishes_by_itself() {
    let mut c = cfg(1);
    c.verifier = QuorumVerifier::majority([1], []);
    let mut l = Leader::new(c, local(2, 2, z(2, 7), Some(z(2, 1))), txs(&[z(2, 7)]), 0);
    assert_eq!(leader_actions(&mut l), vec![LeaderAction::PersistAcceptedEpoch(3)]);
    l.epoch_persisted(1);
    assert_eq!(leader_actions(&mut l), vec![LeaderAction::PersistCurrentEpoch(3)]);
    l.epoch_persisted(2);
    assert_eq!(leader_actions(&mut l), vec![LeaderAction::Established { epoch: 3 }]);
    // Its own durability is the server's to count (its ledger): the machine reports nothing.
    l.propose(z(3, 1), tx(z(3, 1)), 3);
    assert!(leader_actions(&mut l).is_empty());
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    /// Mostly well-formed packets of every phase (so that runs get deep), some garbage.
    fn arb_packet() -> impl Strategy<Value = QuorumPacket> {
        prop_oneof![
            3 => (2i64..4, 4u32..8).prop_map(|(sid, e)| follower_info(sid, e)),
            3 => (0u32..6, prop_oneof![Just(5), Just(-1)]).prop_map(|(c, cur)| ack_epoch(z(5, c), cur)),
            3 => (5u32..7, 0u32..4).prop_map(|(e, c)| pkt(T::Ack, z(e, c), None)),
            2 => (5u32..8).prop_map(leader_info),
            2 => (0u32..6).prop_map(|c| pkt(T::Diff, z(5, c), None)),
            1 => (0u32..6).prop_map(|c| pkt(T::Trunc, z(5, c), None)),
            1 => (0u32..6).prop_map(|c| pkt(T::Snap, z(5, c), None)),
            3 => (5u32..7, 0u32..8).prop_map(|(e, c)| pkt(T::Proposal, z(e, c), Some(tx(z(e, c))))),
            3 => (5u32..7, 0u32..8).prop_map(|(e, c)| pkt(T::Commit, z(e, c), None)),
            2 => (5u32..7, 0u32..8).prop_map(|(e, c)| pkt(T::Inform, z(e, c), Some(tx(z(e, c))))),
            2 => (5u32..8).prop_map(newleader_pkt),
            1 => Just(pkt(T::UpToDate, -1, None)),
            1 => Just(pkt(T::Ping, 0, None)),
            4 => arb_garbage(),
        ]
    }

    fn arb_garbage() -> impl Strategy<Value = QuorumPacket> {
        (
            0i32..22,
            prop_oneof![Just(0i64), Just(-1i64), 0i64..(8i64 << 32), any::<i64>()],
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..30)),
        )
            .prop_map(|(t, zxid, data)| QuorumPacket {
                packet_type: t,
                zxid,
                data: data.map(Bytes::from),
                authinfo: None,
            })
    }

    #[derive(Debug, Clone)]
    enum Ev {
        Packet(u64, QuorumPacket),
        Connect(u64),
        Disconnect(u64),
        Persisted,
        Durable(i64),
        Timeout(u64),
        Propose,
        Commit,
        Loaded(i64),
        Truncated(i64),
    }

    fn arb_event() -> impl Strategy<Value = Ev> {
        prop_oneof![
            6 => (20u64..23, arb_packet()).prop_map(|(c, p)| Ev::Packet(c, p)),
            1 => (20u64..23).prop_map(Ev::Connect),
            1 => (20u64..23).prop_map(Ev::Disconnect),
            1 => Just(Ev::Persisted),
            1 => (0i64..(8i64 << 32)).prop_map(Ev::Durable),
            1 => (0u64..5000).prop_map(Ev::Timeout),
            1 => Just(Ev::Propose),
            1 => Just(Ev::Commit),
            1 => (0i64..(8i64 << 32)).prop_map(Ev::Loaded),
            1 => (0i64..(8i64 << 32)).prop_map(Ev::Truncated),
        ]
    }

    proptest! {
        /// Any input in any order: no panic, and the leader only leaves its role by StepDown.
        #[test]
        fn leader_survives_any_input(events in proptest::collection::vec(arb_event(), 0..60)) {
            let mut l = Leader::new(cfg(1), local(5, 5, z(5, 3), Some(z(5, 1))), txs(&[z(5, 2), z(5, 3)]), 0);
            let mut now = 0;
            let mut counter = 0;
            for e in events {
                now += 7;
                match e {
                    Ev::Packet(c, p) => l.handle_packet(c, p, now),
                    Ev::Connect(c) => l.learner_connected(c, now),
                    Ev::Disconnect(c) => l.learner_disconnected(c, now),
                    Ev::Persisted => l.epoch_persisted(now),
                    Ev::Durable(zx) => l.committed(zx, now),
                    Ev::Timeout(d) => l.handle_timeout(now + d),
                    Ev::Propose => {
                        counter += 1;
                        l.propose(z(l.epoch().unwrap_or(6), counter), tx(counter.into()), now)
                    }
                    Ev::Commit => l.committed(l.last_proposed(), now),
                    Ev::Loaded(zx) => l.log_read(1, txs(&[zx]), now),
                    Ev::Truncated(zx) => l.snapshot_bytes(1, tx(zx), zx % 2 == 0, now),
                }
                let stepped = leader_actions(&mut l).iter().any(|a| matches!(a, LeaderAction::StepDown { .. }));
                prop_assert_eq!(stepped && !l.is_stopped(), false);
            }
        }

        /// Same for a learner.
        #[test]
        fn learner_survives_any_input(events in proptest::collection::vec(arb_event(), 0..60)) {
            let mut l = learner(false, local(5, 5, z(5, 3), Some(z(5, 1))));
            let mut now = 0;
            for e in events {
                now += 7;
                match e {
                    Ev::Packet(_, p) => l.handle_packet(p, now),
                    Ev::Connect(_) => l.connected(now),
                    Ev::Disconnect(_) | Ev::Propose | Ev::Commit => l.touch(now as i64, 1),
                    Ev::Persisted => l.epoch_persisted(now),
                    Ev::Durable(zx) => l.durable(zx, now),
                    Ev::Timeout(d) => l.handle_timeout(now + d),
                    Ev::Loaded(zx) => l.snapshot_loaded(zx, now),
                    Ev::Truncated(zx) => l.truncated(zx, now),
                }
                learner_actions(&mut l);
            }
        }
    }
}

/// PROPOSAL data of a reconfig transaction (TxnHeader type 16, SetDataTxn on /zookeeper/config).
fn reconfig_tx(zxid: i64, config: &str) -> Bytes {
    use zk_proto::jute::Jute;
    let mut b = bytes::BytesMut::new();
    zk_proto::TxnHeader { client_id: 9, cxid: 3, zxid, time: 0, txn_type: zk_proto::OpCode::Reconfig.code() }
        .write(&mut b);
    zk_proto::SetDataTxn {
        path: "/zookeeper/config".into(),
        data: Some(Bytes::copy_from_slice(config.as_bytes())),
        version: -1,
    }
    .write(&mut b);
    b.freeze()
}

#[test]
fn a_committed_reconfiguration_goes_out_with_the_designated_leader() {
    let mut l = established(&[z(5, 1)], z(5, 1), Some(z(5, 1)));
    join(&mut l, 40, 4, z(5, 1), 6);
    l.handle_packet(40, pkt(T::Ack, z(6, 0), None), 7);
    leader_actions(&mut l);
    assert_eq!(l.synced_followers(), BTreeSet::from([2]), "observers are not followers");
    let rc = reconfig_tx(z(6, 1), "server.1=a:1:2:participant\nversion=600000001");
    l.propose(z(6, 1), rc.clone(), 10);
    leader_actions(&mut l);
    l.committed_and_activate(z(6, 1), 3, 11);
    let mut inform = 3i64.to_be_bytes().to_vec();
    inform.extend_from_slice(&rc);
    assert_eq!(
        leader_actions(&mut l),
        vec![
            send(20, T::CommitAndActivate, z(6, 1), Some(Bytes::copy_from_slice(&3i64.to_be_bytes()))),
            send(40, T::InformAndActivate, z(6, 1), Some(Bytes::from(inform))),
        ]
    );
}

#[test]
fn non_voting_followers_are_taken_only_with_reconfiguration_on() {
    let mut l = established(&[z(5, 1)], z(5, 1), Some(z(5, 1)));
    l.learner_connected(50, 6);
    l.handle_packet(50, follower_info(5, E5), 6);
    assert!(closes(&leader_actions(&mut l), 50), "server 5 is not a voter");
    let mut c = cfg(1);
    c.reconfig_enabled = true;
    let mut l = Leader::new(c, local(E5, E5, z(5, 1), Some(z(5, 1))), txs(&[z(5, 1)]), 0);
    l.learner_connected(50, 0);
    l.handle_packet(50, follower_info(5, E5), 1);
    let a = leader_actions(&mut l);
    assert!(!closes(&a, 50), "{a:?}");
}

/// A learner (2, or observer 4) with reconfiguration on, synced by an empty DIFF in epoch 6 and
/// waiting for UPTODATE.
fn reconfiguring_learner(observer: bool) -> Learner {
    let mut c = cfg(if observer { 4 } else { 2 });
    c.reconfig_enabled = true;
    let mut l = Learner::new(c, 1, observer, local(6, 6, z(5, 3), Some(z(5, 1))), 0);
    l.connected(0);
    l.handle_packet(leader_info(6), 1);
    l.handle_packet(pkt(T::Diff, z(5, 3), None), 3);
    l.handle_packet(newleader_pkt(6), 3);
    l.epoch_persisted(4);
    learner_actions(&mut l);
    l
}

#[test]
fn learners_activate_committed_reconfigurations_and_the_newleader_config() {
    let next = "server.1=a:1:2:participant\nserver.2=a:3:4:participant\nversion=600000001";
    // Reconfiguration off: the commit is applied, nothing is activated.
    let mut l = up_to_date(false);
    l.handle_packet(pkt(T::Proposal, z(6, 1), Some(reconfig_tx(z(6, 1), next))), 6);
    l.handle_packet(pkt(T::CommitAndActivate, z(6, 1), Some(Bytes::copy_from_slice(&1i64.to_be_bytes()))), 7);
    let a = learner_actions(&mut l);
    assert!(matches!(a.last(), Some(LearnerAction::Commit { .. })), "{a:?}");

    // On: NEWLEADER's config is activated at UPTODATE, before serving.
    let mut l = reconfiguring_learner(false);
    l.handle_packet(pkt(T::UpToDate, -1, None), 5);
    assert_eq!(
        learner_actions(&mut l)[..2],
        [
            LearnerAction::Activate {
                zxid: z(6, 0),
                config: Bytes::from_static(b"version=0"),
                designated: None
            },
            LearnerAction::UpToDate,
        ]
    );
    // A committed reconfiguration: commit, then activate with the designated leader.
    let rc = reconfig_tx(z(6, 1), next);
    l.handle_packet(pkt(T::Proposal, z(6, 1), Some(rc.clone())), 6);
    learner_actions(&mut l);
    l.handle_packet(pkt(T::CommitAndActivate, z(6, 1), Some(Bytes::copy_from_slice(&3i64.to_be_bytes()))), 7);
    assert_eq!(
        learner_actions(&mut l),
        vec![
            LearnerAction::Commit { zxid: z(6, 1), payload: rc },
            LearnerAction::Activate { zxid: z(6, 1), config: Bytes::from(next), designated: Some(3) },
        ]
    );
    // COMMITANDACTIVATE of a proposal that is no reconfiguration: disconnect.
    l.handle_packet(pkt(T::Proposal, z(6, 2), Some(tx(z(6, 2)))), 8);
    learner_actions(&mut l);
    l.handle_packet(pkt(T::CommitAndActivate, z(6, 2), Some(Bytes::copy_from_slice(&3i64.to_be_bytes()))), 9);
    assert!(matches!(learner_actions(&mut l).last(), Some(LearnerAction::Disconnect { .. })));
}

#[test]
fn observers_activate_inform_and_activate() {
    let next = "server.1=a:1:2:participant\nversion=600000001";
    let mut l = reconfiguring_learner(true);
    l.handle_packet(pkt(T::UpToDate, -1, None), 5);
    learner_actions(&mut l);
    let rc = reconfig_tx(z(6, 1), next);
    let mut data = 1i64.to_be_bytes().to_vec();
    data.extend_from_slice(&rc);
    l.handle_packet(pkt(T::InformAndActivate, z(6, 1), Some(Bytes::from(data))), 6);
    assert_eq!(
        learner_actions(&mut l),
        vec![
            LearnerAction::Log { zxid: z(6, 1), payload: rc.clone() },
            LearnerAction::Commit { zxid: z(6, 1), payload: rc },
            LearnerAction::Activate { zxid: z(6, 1), config: Bytes::from(next), designated: Some(1) },
        ]
    );
}

/// Leader 1 with configuration `c` (log through z(5, 1)): follower 2 (conn 20) fixes epoch 6
/// with it and acknowledges it, and is sent its sync. 2's NEWLEADER ACK is left to the caller.
fn epoch_6_fixed_with_follower_2(c: ZabConfig) -> Leader {
    let mut l = Leader::new(c, local(E5, E5, z(5, 1), Some(z(5, 1))), txs(&[z(5, 1)]), 0);
    l.learner_connected(20, 0);
    l.handle_packet(20, follower_info(2, E5), 1);
    assert_eq!(leader_actions(&mut l), vec![LeaderAction::PersistAcceptedEpoch(6)], "1 and 2 fix the epoch");
    l.epoch_persisted(2);
    assert_eq!(leader_actions(&mut l).len(), 1, "LEADERINFO to 2");
    l.handle_packet(20, ack_epoch(z(5, 1), E5 as i32), 3);
    assert_eq!(leader_actions(&mut l), vec![LeaderAction::PersistCurrentEpoch(6)], "and acknowledge it");
    l.epoch_persisted(4);
    let sync = leader_actions(&mut l);
    assert!(sync.iter().any(|a| matches!(a, LeaderAction::Send { conn: 20, .. })), "{sync:?}");
    l
}

/// A learner joins leader `l` of `epoch_6_fixed_with_follower_2` on `conn` with `info`
/// (FOLLOWERINFO or OBSERVERINFO) at `t`, acknowledges the epoch, is synced and acknowledges
/// NEWLEADER; the leader's actions after that ACK.
fn joins_and_acks_newleader(l: &mut Leader, conn: ConnId, info: QuorumPacket, t: u64) -> Vec<LeaderAction> {
    l.learner_connected(conn, t);
    l.handle_packet(conn, info, t);
    assert_eq!(leader_actions(l).len(), 1, "LEADERINFO to {conn}");
    l.handle_packet(conn, ack_epoch(z(5, 1), E5 as i32), t + 1);
    let sync = leader_actions(l);
    assert!(sync.iter().any(|a| matches!(a, LeaderAction::Send { conn: c, .. } if *c == conn)), "{sync:?}");
    l.handle_packet(conn, pkt(T::Ack, z(6, 0), None), t + 2);
    leader_actions(l)
}

/// As Apache's leader (`getEpochToPropose`, `waitForEpochAck`, `waitForNewLeaderAck`): the new
/// epoch and its acknowledgement need a quorum of the configuration in force, NEWLEADER a quorum
/// of the pending configuration too. (Asking the pending one of the epoch left a leader whose
/// pending configuration needs a learner ahead of it, refused at ACKEPOCH, stuck for good:
/// node_sim's `reconfig_a_joiner_ahead_of_the_lone_voter`.)
#[test]
fn a_pending_configuration_needs_its_own_quorum_for_newleader_not_the_epoch() {
    // In force: voters 1, 2, 3. In this leader's log, not known to be committed: 1, 4, 5.
    let mut c = cfg(1);
    c.reconfig_enabled = true;
    c.pending_verifier = Some(QuorumVerifier::majority([1, 4, 5], []));
    let mut l = epoch_6_fixed_with_follower_2(c);
    l.handle_packet(20, pkt(T::Ack, z(6, 0), None), 5);
    let a = leader_actions(&mut l);
    assert!(!a.iter().any(|a| matches!(a, LeaderAction::Established { .. })), "1 and 2 only: {a:?}");
    assert!(!l.is_established());
    // 4 joins (a voter of the pending configuration) and acknowledges NEWLEADER: both quorums.
    let a = joins_and_acks_newleader(&mut l, 40, follower_info(4, E5), 6);
    assert!(a.contains(&LeaderAction::Established { epoch: 6 }), "1, 2, 4: both: {a:?}");
}

/// An observer of the configuration in force that the pending one makes a voter: its NEWLEADER
/// ACK counts for the pending configuration's quorum, as Apache counts NEWLEADER ACKs by id in
/// each configuration (helper-31's review, F1). It comes back as an observer (its committed
/// configuration says so) and only becomes a follower when it activates the pending
/// configuration at UPTODATE, so a leader that ignored its ACK was never established, and no
/// other leader could be either.
#[test]
fn an_observer_the_pending_configuration_makes_a_voter_counts_for_newleader() {
    // In force: voters 1, 2, 3 and observer 4. Pending: voters 1, 4, 5.
    let mut c = cfg(1);
    c.reconfig_enabled = true;
    c.pending_verifier = Some(QuorumVerifier::majority([1, 4, 5], []));
    let mut l = epoch_6_fixed_with_follower_2(c);
    l.handle_packet(20, pkt(T::Ack, z(6, 0), None), 5);
    assert!(!leader_actions(&mut l).iter().any(|a| matches!(a, LeaderAction::Established { .. })));
    // Observer 4 connects as an observer and acknowledges NEWLEADER: 1 and 4 make the pending
    // configuration's quorum, 1 and 2 the one in force.
    let observer_info = pkt(T::ObserverInfo, z(E5, 0), Some(LearnerInfo::new(4, 0).encode()));
    let a = joins_and_acks_newleader(&mut l, 40, observer_info, 6);
    assert!(a.contains(&LeaderAction::Established { epoch: 6 }), "{a:?}");
    assert!(a.contains(&send(40, T::UpToDate, -1, None)), "{a:?}");
    // Still an observer of the configuration in force: it is no synced follower a
    // reconfiguration may count on.
    assert_eq!(l.synced_followers(), BTreeSet::from([2]));
}

/// A misconfigured observer, 3 (a voter of the leader's configuration in force, connecting with
/// OBSERVERINFO: its reconfiguration off, or its own configuration another), never
/// acknowledges a proposal: its NEWLEADER ACK does not make the configuration's quorum with the
/// leader (helper-32's review of the change above), a follower's does.
#[test]
fn a_misconfigured_observer_that_votes_in_force_does_not_establish() {
    let mut l = epoch_6_fixed_with_follower_2(cfg(1));
    let observer_info = pkt(T::ObserverInfo, z(E5, 0), Some(LearnerInfo::new(3, 0).encode()));
    let a = joins_and_acks_newleader(&mut l, 30, observer_info, 5);
    assert!(!a.iter().any(|a| matches!(a, LeaderAction::Established { .. })), "{a:?}");
    l.handle_packet(20, pkt(T::Ack, z(6, 0), None), 8);
    let a = leader_actions(&mut l);
    assert!(a.contains(&LeaderAction::Established { epoch: 6 }), "{a:?}");
}

/// CVE-2018-8012: only the servers the configuration lists are synced. A FOLLOWERINFO from a
/// non-voter (the observer 4, or the unknown 9) and an OBSERVERINFO from an unknown id are closed
/// with nothing sent; the listed observer is answered with LEADERINFO.
#[test]
fn learners_outside_the_configuration_are_refused() {
    let mut l = established(&[z(5, 1)], z(5, 1), Some(z(5, 1)));
    for (conn, kind, sid) in [(30, T::FollowerInfo, 4), (31, T::FollowerInfo, 9), (32, T::ObserverInfo, 9)] {
        l.learner_connected(conn, 100);
        l.handle_packet(conn, pkt(kind, z(E5, 0), Some(LearnerInfo::new(sid, 0).encode())), 100);
        let a = leader_actions(&mut l);
        assert!(closes(&a, conn), "{kind:?} from {sid}: {a:?}");
        assert!(!a.iter().any(|a| matches!(a, LeaderAction::Send { .. })), "{kind:?} from {sid}: {a:?}");
    }
    l.learner_connected(33, 100);
    l.handle_packet(33, pkt(T::ObserverInfo, z(E5, 0), Some(LearnerInfo::new(4, 0).encode())), 100);
    let a = leader_actions(&mut l);
    assert!(!closes(&a, 33), "{a:?}");
    assert!(a.iter().any(|a| matches!(a, LeaderAction::Send { conn: 33, .. })), "{a:?}");
}

/// Review F3: follower 2 ACKs z(6, 1), its connection drops, it reconnects with that zxid as its
/// last: the leader cuts it back (TRUNC to the last committed) and re-sends the proposal. The
/// server must no longer count 2's ACK of z(6, 1), or the proposal could commit on a follower that
/// truncated it: AckReset comes before the sync's first packet.
#[test]
fn f3_a_follower_ack_does_not_outlive_its_resync() {
    let mut l = established(&[z(5, 1)], z(5, 1), Some(z(5, 1)));
    l.propose(z(6, 1), tx(z(6, 1)), 10);
    leader_actions(&mut l);
    l.handle_packet(20, pkt(T::Ack, z(6, 1), None), 11);
    assert_eq!(leader_actions(&mut l), vec![LeaderAction::Ack { sid: 2, zxid: z(6, 1) }]);
    l.learner_disconnected(20, 12);
    assert_eq!(
        join(&mut l, 21, 2, z(6, 1), 13),
        vec![
            reset(2, z(5, 1)),
            send(21, T::Trunc, z(5, 1), None),
            send(21, T::Proposal, z(6, 1), Some(tx(z(6, 1)))),
            new_leader(21, 6),
        ]
    );
    // With the ledger the server keeps: 2's ACK no longer counts until 2 ACKs again.
    let mut ledger = crate::quorum::AckLedger::new(crate::quorum::VoterSet::new(1, [2, 3]));
    ledger.ack(2, z(6, 1));
    ledger.reset(2, z(5, 1));
    ledger.ack(1, z(6, 1));
    assert_eq!(ledger.committable([z(6, 1)]), None);
    // The SNAP and DIFF heads clamp too: to the snapshot's zxid, to the learner's last zxid.
    let mut l = established(&[z(5, 1)], z(5, 1), Some(z(5, 1)));
    assert_eq!(join(&mut l, 30, 3, z(5, 1), 14)[0], reset(3, z(5, 1)));
    l.learner_disconnected(30, 15);
    assert_eq!(join(&mut l, 31, 3, 0, 15)[..2], [reset(3, z(5, 1)), send(31, T::Snap, z(5, 1), None)]);
    // Observers never ACK: no reset.
    assert!(!join(&mut l, 40, 4, z(5, 1), 16).iter().any(|a| matches!(a, LeaderAction::AckReset { .. })));
}

/// A DIFF from the log is bounded as Apache's (`zookeeper.snapshotSizeFactor` of the database):
/// past it, or when the server's reader stops at the bound, the learner gets a snapshot; a negative
/// factor turns DIFFs from the log off.
#[test]
fn a_diff_from_the_log_past_the_snapshot_size_factor_becomes_a_snap() {
    let recent = [z(5, 4), z(5, 5), z(5, 6)];
    let snap = |req| {
        vec![
            reset(3, z(5, 6)),
            send(30, T::Snap, z(5, 6), None),
            LeaderAction::SerializeSnapshot { req, zxid: z(5, 6) },
        ]
    };
    let mut l = established(&recent, z(5, 6), Some(z(5, 1)));
    l.set_database_bytes(100);
    assert_eq!(
        join(&mut l, 30, 3, z(5, 2), 10),
        vec![LeaderAction::ReadLog {
            req: 1,
            from_zxid: z(5, 2),
            through_zxid: z(5, 6),
            max_bytes: Some(33)
        }]
    );
    // The reader stopped at the bound.
    l.log_read_too_big(1, 11);
    assert_eq!(leader_actions(&mut l), snap(2));
    // A reader that read past it anyway: 4 records of 15 bytes after the anchor.
    let mut l = established(&recent, z(5, 6), Some(z(5, 1)));
    l.set_database_bytes(100);
    join(&mut l, 30, 3, z(5, 2), 10);
    l.log_read(1, txs(&[z(5, 2), z(5, 3), z(5, 4), z(5, 5), z(5, 6)]), 11);
    assert_eq!(leader_actions(&mut l), snap(2));
    // Factor above 1 is Apache's default; 0 is no bound.
    let mut c = cfg(1);
    c.snapshot_size_factor = 0.0;
    assert_eq!(c.snapshot_size_factor, 0.0);
    let mut l = established(&recent, z(5, 6), Some(z(5, 1)));
    l.set_database_bytes(1000);
    assert!(matches!(
        join(&mut l, 30, 3, z(5, 2), 10)[..],
        [LeaderAction::ReadLog { max_bytes: Some(330), .. }]
    ));
}

#[test]
fn a_negative_snapshot_size_factor_turns_diffs_from_the_log_off() {
    let mut c = cfg(1);
    c.snapshot_size_factor = -1.0;
    let mut l = Leader::new(c, local(E5, E5, z(5, 6), Some(z(5, 1))), txs(&[z(5, 4), z(5, 5), z(5, 6)]), 0);
    l.learner_connected(20, 0);
    l.handle_packet(20, follower_info(2, E5), 1);
    l.epoch_persisted(2);
    l.handle_packet(20, ack_epoch(z(5, 2), E5 as i32), 3);
    l.epoch_persisted(4);
    let a = leader_actions(&mut l);
    assert_eq!(a[2..4], [LeaderAction::PersistCurrentEpoch(6), send(20, T::Snap, z(5, 6), None)], "{a:?}");
}

/// A leader of epoch 6 established with follower 2 (connection 20), its log holding 5:1..5:6
/// and its window 5:4..5:6: a learner behind 5:4 is synced from a log read.
fn established_with_follower_2_logging_from_5_1(c: ZabConfig) -> Leader {
    let recent = [z(5, 4), z(5, 5), z(5, 6)];
    let mut l = Leader::new(c, local(E5, E5, z(5, 6), Some(z(5, 1))), txs(&recent), 0);
    l.learner_connected(20, 0);
    l.handle_packet(20, follower_info(2, E5), 1);
    l.epoch_persisted(2);
    l.handle_packet(20, ack_epoch(z(5, 6), E5 as i32), 3);
    l.epoch_persisted(4);
    l.handle_packet(20, pkt(T::Ack, z(6, 0), None), 5);
    leader_actions(&mut l);
    l
}

/// A far-behind learner is never locked out: its DIFF goes out a piece at a time, each once its
/// connection has room again; what commits meanwhile follows from the window, NEWLEADER last.
#[test]
fn a_diff_streams_in_pieces_as_the_connection_drains() {
    let mut c = cfg(1);
    c.sync_piece_packets = 4; // two PROPOSAL+COMMIT pairs a piece
    let mut l = established_with_follower_2_logging_from_5_1(c);
    assert_eq!(
        join(&mut l, 30, 3, z(5, 1), 10),
        vec![LeaderAction::ReadLog { req: 1, from_zxid: z(5, 1), through_zxid: z(5, 6), max_bytes: None }]
    );
    l.log_read(1, txs(&[z(5, 1), z(5, 2), z(5, 3), z(5, 4), z(5, 5), z(5, 6)]), 11);
    let mut want = vec![reset(3, z(5, 1)), send(30, T::Diff, z(5, 6), None)];
    want.extend(pair(30, z(5, 2)));
    want.extend(pair(30, z(5, 3)));
    assert_eq!(leader_actions(&mut l), want);
    // A piece full by its packets (its bytes are far below the bound) says the connection may
    // take no more, so that the server asks for a drain report: otherwise nobody calls
    // `conn_drained` and the sync stalls until the learner gives up (a rolling restart under
    // load, 2026-11-30).
    assert!(!l.may_send(30), "a piece is out");
    // Nothing more until the connection has room; a commit meanwhile is kept for it.
    l.propose(z(6, 1), tx(z(6, 1)), 12);
    l.committed(z(6, 1), 12);
    assert_eq!(
        leader_actions(&mut l),
        vec![send(20, T::Proposal, z(6, 1), Some(tx(z(6, 1)))), send(20, T::Commit, z(6, 1), None)]
    );
    l.propose(z(6, 2), tx(z(6, 2)), 12);
    leader_actions(&mut l);
    l.conn_drained(30, 13);
    assert!(!l.may_send(30), "the next piece is out");
    let mut want = pair(30, z(5, 4)).to_vec();
    want.extend(pair(30, z(5, 5)));
    assert_eq!(leader_actions(&mut l), want);
    l.conn_drained(30, 14);
    let mut want = pair(30, z(5, 6)).to_vec();
    want.extend(pair(30, z(6, 1)));
    assert_eq!(leader_actions(&mut l), want);
    l.conn_drained(30, 15);
    assert_eq!(
        leader_actions(&mut l),
        vec![send(30, T::Proposal, z(6, 2), Some(tx(z(6, 2)))), new_leader(30, 6)]
    );
    // Once attached, live traffic flows as for any learner.
    l.propose(z(6, 3), tx(z(6, 3)), 16);
    assert_eq!(leader_actions(&mut l).len(), 2);
}

/// A learner whose connection takes nothing of its sync for initLimit is dropped by the leader
/// (review MINOR-1: the leader had no deadline of its own while a learner streamed, so one that
/// stalled held its place and the window's bytes until its own side gave up); one that drains
/// gets another initLimit from each drain.
#[test]
fn a_syncing_learner_that_takes_nothing_for_init_limit_is_dropped() {
    let mut c = cfg(1);
    c.sync_piece_packets = 2; // one PROPOSAL+COMMIT pair a piece
    let init = c.init_ms();
    let mut l = established_with_follower_2_logging_from_5_1(c);
    join(&mut l, 30, 3, z(5, 3), 10);
    l.log_read(1, txs(&[z(5, 3), z(5, 4), z(5, 5), z(5, 6)]), 11);
    leader_actions(&mut l);
    assert!(!l.may_send(30), "a piece is out");
    // Follower 2 keeps the quorum (it pings) while learner 3 syncs.
    let alive = |l: &mut Leader, t: u64| l.handle_packet(20, pkt(T::Ping, z(6, 0), None), t);
    // Drained just before the deadline: another initLimit from there.
    alive(&mut l, 11 + init - 1);
    l.conn_drained(30, 11 + init - 1);
    leader_actions(&mut l);
    alive(&mut l, 11 + init + 1);
    l.handle_timeout(11 + init + 1);
    assert!(!leader_actions(&mut l).iter().any(|a| matches!(a, LeaderAction::Close { conn: 30, .. })));
    // Then nothing drains for initLimit: dropped, naming the phase.
    let drained = 11 + init - 1;
    assert!(l.poll_timeout().is_some_and(|t| t <= drained + init), "a deadline is armed");
    alive(&mut l, drained + init);
    l.handle_timeout(drained + init);
    let a = leader_actions(&mut l);
    assert!(
        a.iter()
            .any(|a| matches!(a, LeaderAction::Close { conn: 30, reason } if reason.contains("Streaming"))),
        "{a:?}"
    );
}

/// The window drops, under load, the records a streaming learner was already sent: more than
/// `committed_log_max` commits while a piece is out. The learner needs none of them, so its sync
/// goes on (the leader closed it, "too much committed while the learner synced", and a follower
/// that fell behind in a five-server ensemble under 5,000 creates/s never rejoined, 2026-11-30).
#[test]
fn a_streaming_learner_survives_the_window_dropping_what_it_was_sent() {
    let recent = [z(5, 4), z(5, 5), z(5, 6)];
    let mut c = cfg(1);
    c.sync_piece_packets = 2; // one PROPOSAL+COMMIT pair a piece
    let mut l = established_with(c, &recent, z(5, 6), Some(z(5, 1)));
    let mut want = vec![reset(3, z(5, 4)), send(30, T::Diff, z(5, 6), None)];
    want.extend(pair(30, z(5, 5)));
    assert_eq!(join(&mut l, 30, 3, z(5, 4), 10), want);
    // Four commits while the piece is out: the window (at most three) drops z(5,4) and z(5,5).
    for c in 1..=4 {
        l.propose(z(6, c), tx(z(6, c)), 11);
        l.committed(z(6, c), 11);
    }
    leader_actions(&mut l);
    let mut sent = Vec::new();
    for t in 12..20 {
        l.conn_drained(30, t);
        let a = leader_actions(&mut l);
        assert!(!closes(&a, 30), "{a:?}");
        sent.extend(a);
    }
    let mut want = Vec::new();
    for zxid in [z(5, 6), z(6, 1), z(6, 2), z(6, 3), z(6, 4)] {
        want.extend(pair(30, zxid));
    }
    want.push(new_leader(30, 6));
    assert_eq!(sent, want);
}

/// The same after a snapshot: what was committed while it was written is sent after it, however
/// much the window dropped from before the snapshot's zxid meanwhile.
#[test]
fn a_snapshot_sync_survives_the_window_dropping_what_the_snapshot_holds() {
    let recent = [z(5, 4), z(5, 5), z(5, 6)];
    let mut l = established(&recent, z(5, 6), Some(z(5, 1)));
    assert_eq!(
        join(&mut l, 30, 3, 0, 10),
        vec![
            reset(3, z(5, 6)),
            send(30, T::Snap, z(5, 6), None),
            LeaderAction::SerializeSnapshot { req: 1, zxid: z(5, 6) }
        ]
    );
    five_commits_then_the_snapshot_ends_and_they_follow(&mut l);

    // Past the byte bound the window drops records a learner still needs: that one is closed.
    let mut c = cfg(1);
    c.committed_log_max = 1;
    let mut l = established_with(c, &recent, z(5, 6), Some(z(5, 1)));
    join(&mut l, 30, 3, 0, 10);
    let big = Bytes::from(vec![7u8; crate::zab::leader::SYNC_WINDOW_BYTES_MAX / 3 + 1]);
    for c in 1..=3 {
        l.propose(z(6, c), big.clone(), 11);
        l.committed(z(6, c), 11);
    }
    leader_actions(&mut l);
    // Once the bound dropped what 3 needs, 3 holds nothing back: the window is back to its
    // size with the next commit, not kept at the bound until 3's snapshot ends (review, MINOR-2).
    assert_eq!(l.window_len(), 1);
    l.snapshot_bytes(1, Bytes::from_static(b"tree"), true, 12);
    assert!(closes(&leader_actions(&mut l), 30));
}

/// z(6,1) to z(6,5) committed while learner 3 (conn 30) has its SNAP (request 1) written; once
/// it ends, 3 is sent them all, then NEWLEADER, and is not closed.
fn five_commits_then_the_snapshot_ends_and_they_follow(l: &mut Leader) {
    for c in 1..=5 {
        l.propose(z(6, c), tx(z(6, c)), 11);
        l.committed(z(6, c), 11);
    }
    leader_actions(l);
    l.snapshot_bytes(1, Bytes::from_static(b"tree"), true, 12);
    let a = leader_actions(l);
    assert!(!closes(&a, 30), "{a:?}");
    let mut want = Vec::new();
    for c in 1..=5 {
        want.extend(pair(30, z(6, c)));
    }
    want.push(new_leader(30, 6));
    assert!(a.ends_with(&want), "{a:?}");
}

/// A window that starts empty (the log's recent tail did not end at the last logged zxid) covers
/// everything committed after the last logged zxid: a SNAP at it, with more than the window's
/// size committed meanwhile, is followed by all of it (window-floor review, note 1).
#[test]
fn an_empty_start_window_covers_what_is_committed_after_the_last_logged_zxid() {
    let mut l = established(&[z(5, 4), z(5, 5)], z(5, 6), Some(z(5, 1)));
    let a = join(&mut l, 30, 3, 0, 10);
    assert!(a.contains(&LeaderAction::SerializeSnapshot { req: 1, zxid: z(5, 6) }), "{a:?}");
    five_commits_then_the_snapshot_ends_and_they_follow(&mut l);
}

/// The snapshot stream takes the same flow control: the server asks before each step.
#[test]
fn a_snapshot_stream_steps_only_while_the_connection_may_take_more() {
    let mut c = cfg(1);
    c.sync_piece_bytes = 8;
    let mut l = Leader::new(c, local(E5, E5, z(5, 1), Some(z(5, 1))), txs(&[z(5, 1)]), 0);
    l.learner_connected(20, 0);
    l.handle_packet(20, follower_info(2, E5), 1);
    l.epoch_persisted(2);
    l.handle_packet(20, ack_epoch(0, E5 as i32), 3);
    l.epoch_persisted(4);
    let a = leader_actions(&mut l);
    assert!(matches!(a.last(), Some(LeaderAction::SerializeSnapshot { req: 1, .. })), "{a:?}");
    assert!(l.may_send(20));
    l.snapshot_bytes(1, Bytes::from_static(b"0123456789"), false, 5);
    assert!(!l.may_send(20), "a piece is out");
    l.conn_drained(20, 6);
    assert!(l.may_send(20));
    l.snapshot_bytes(1, Bytes::from_static(b"end"), true, 7);
    let a = leader_actions(&mut l);
    assert_eq!(a.last(), Some(&new_leader(20, 6)));
}

/// A zkrs learner whose tree disagreed with the ensemble's digests asks for a SNAP (zkrs's
/// FOLLOWERINFO extension): the leader sends one even when the learner's last zxid would make
/// an empty DIFF. The extension is 8 bytes after Apache's 20, which Apache's leader ignores.
#[test]
fn a_learner_that_asks_for_a_snapshot_gets_one() {
    let mut l = established(&[z(5, 1), z(5, 2)], z(5, 2), Some(z(5, 1)));
    l.learner_connected(30, 10);
    let mut info = LearnerInfo::new(3, 0);
    info.zkrs_flags = Some(crate::wire::payload::LEARNER_WANTS_SNAP);
    let encoded = info.encode();
    assert_eq!(encoded.len(), 28, "Apache's 20 bytes, then zkrs's magic and flags");
    assert_eq!(LearnerInfo::decode(&encoded).expect("decodes"), info);
    assert_eq!(LearnerInfo::decode(&encoded[..20]).expect("decodes").zkrs_flags, None);
    l.handle_packet(30, pkt(T::FollowerInfo, z(6, 0), Some(encoded)), 11);
    leader_actions(&mut l);
    l.handle_packet(30, ack_epoch(z(5, 2), 6), 12);
    let actions = leader_actions(&mut l);
    assert!(actions.contains(&send(30, T::Snap, z(5, 2), None)), "{actions:?}");
    assert!(!actions.contains(&send(30, T::Diff, z(5, 2), None)), "{actions:?}");

    // The learner's side: the request goes out in its FOLLOWERINFO.
    let mut learner = Learner::new(cfg(3), 1, false, local(E5, E5, z(5, 2), Some(z(5, 1))), 0);
    learner.request_snapshot();
    learner.connected(1);
    let sent = learner_actions(&mut learner);
    let LearnerAction::Send(p) = &sent[0] else { panic!("{sent:?}") };
    let info = LearnerInfo::decode(p.data.as_deref().expect("data")).expect("decodes");
    let both = crate::wire::payload::LEARNER_WANTS_SNAP | crate::wire::payload::LEARNER_TAKES_UNPROPOSED;
    assert_eq!(info.zkrs_flags, Some(both));
}

/// A NEWLEADER ACK stops counting once the learner that gave it has no connection left before
/// the leader is established (zkrs; Apache keeps it): a follower that left could lead a later
/// epoch meanwhile, and the leader would be established, late, with a quorum that no longer
/// follows it (node simulation, seed 700123 of `five`).
#[test]
fn a_newleader_ack_of_a_learner_gone_before_establishment_does_not_count() {
    let mut c = ZabConfig::new(1, QuorumVerifier::majority([1, 2, 3, 4, 5], []), 100, 10, 5);
    c.config_string = Bytes::from_static(b"version=0");
    let last = z(E5, 3);
    let mut l = Leader::new(c, local(E5, E5, last, Some(z(E5, 1))), txs(&[z(E5, 1), z(E5, 2), last]), 0);
    for (conn, sid) in [(20, 2), (30, 3)] {
        l.learner_connected(conn, 0);
        l.handle_packet(conn, follower_info(sid, E5), 1);
    }
    assert_eq!(leader_actions(&mut l), vec![LeaderAction::PersistAcceptedEpoch(6)]);
    l.epoch_persisted(2);
    leader_actions(&mut l);
    for conn in [20, 30] {
        l.handle_packet(conn, ack_epoch(last, E5 as i32), 3);
    }
    assert_eq!(leader_actions(&mut l), vec![LeaderAction::PersistCurrentEpoch(6)]);
    l.epoch_persisted(4);
    let synced = leader_actions(&mut l);
    assert!(synced.contains(&new_leader(20, 6)) && synced.contains(&new_leader(30, 6)), "{synced:?}");
    // 2 acknowledges NEWLEADER, then its connection ends: {1, 2} was no quorum of five.
    l.handle_packet(20, pkt(T::Ack, z(6, 0), None), 5);
    assert!(leader_actions(&mut l).is_empty());
    l.learner_disconnected(20, 6);
    // 3's ACK makes {1, 3}: still no quorum, where {1, 2, 3} would have been one.
    l.handle_packet(30, pkt(T::Ack, z(6, 0), None), 7);
    assert!(leader_actions(&mut l).is_empty());
    assert!(!l.is_established());
    // 2 back on another connection, acknowledging again: established.
    l.learner_connected(21, 8);
    l.handle_packet(21, follower_info(2, 6), 8);
    leader_actions(&mut l);
    l.handle_packet(21, ack_epoch(last, 6), 9);
    let sync = leader_actions(&mut l);
    assert!(sync.contains(&new_leader(21, 6)), "{sync:?}");
    l.handle_packet(21, pkt(T::Ack, z(6, 0), None), 10);
    let done = leader_actions(&mut l);
    assert!(done.contains(&LeaderAction::Established { epoch: 6 }), "{done:?}");
    assert!(l.is_established());
}

/// Leader 1 of five voters in epoch 6, learners 2 (connection 20) and 3 (connection 30) synced:
/// 2 has acknowledged NEWLEADER, 3 not yet. With 2's ACK, 3's makes a quorum. Also the last zxid.
fn five_voters_with_2s_newleader_ack() -> (Leader, i64) {
    let mut c = ZabConfig::new(1, QuorumVerifier::majority([1, 2, 3, 4, 5], []), 100, 10, 5);
    c.config_string = Bytes::from_static(b"version=0");
    let last = z(E5, 3);
    let mut l = Leader::new(c, local(E5, E5, last, Some(z(E5, 1))), txs(&[z(E5, 1), z(E5, 2), last]), 0);
    for (conn, sid) in [(20, 2), (30, 3)] {
        l.learner_connected(conn, 0);
        l.handle_packet(conn, follower_info(sid, E5), 1);
    }
    leader_actions(&mut l);
    l.epoch_persisted(2);
    leader_actions(&mut l);
    for conn in [20, 30] {
        l.handle_packet(conn, ack_epoch(last, E5 as i32), 3);
    }
    leader_actions(&mut l);
    l.epoch_persisted(4);
    leader_actions(&mut l);
    l.handle_packet(20, pkt(T::Ack, z(6, 0), None), 5);
    assert!(leader_actions(&mut l).is_empty());
    (l, last)
}

/// Review of issue 29 (helper-28): a learner that acknowledged NEWLEADER and then sent a packet
/// the leader refuses (an ACK of a zxid never proposed) is closed, and its ACK stops counting.
#[test]
fn a_newleader_ack_of_a_rejected_connection_does_not_count() {
    let (mut l, _) = five_voters_with_2s_newleader_ack();
    l.handle_packet(20, pkt(T::Ack, z(6, 99), None), 6);
    let closed = leader_actions(&mut l);
    assert!(closed.iter().any(|a| matches!(a, LeaderAction::Close { conn: 20, .. })), "{closed:?}");
    // 3's ACK makes {1, 3}: no quorum, where {1, 2, 3} with the rejected one's ACK was one.
    l.handle_packet(30, pkt(T::Ack, z(6, 0), None), 7);
    assert!(!leader_actions(&mut l).iter().any(|a| matches!(a, LeaderAction::Established { .. })));
    assert!(!l.is_established());
}

/// Review of issue 29 (helper-26, finding 6): a learner that acknowledged NEWLEADER and then
/// connects again replaces its old connection; the old connection's ACK stops counting with
/// it, as when the connection closes first.
#[test]
fn a_newleader_ack_of_a_replaced_connection_does_not_count() {
    let (mut l, last) = five_voters_with_2s_newleader_ack();
    // 2 connects again before its old connection is seen to close: the new one replaces it.
    l.learner_connected(21, 6);
    l.handle_packet(21, follower_info(2, 6), 6);
    let closed = leader_actions(&mut l);
    assert!(closed.iter().any(|a| matches!(a, LeaderAction::Close { conn: 20, .. })), "{closed:?}");
    // 3's ACK makes {1, 3}: no quorum, where {1, 2, 3} with the replaced ACK would have been one.
    l.handle_packet(30, pkt(T::Ack, z(6, 0), None), 7);
    assert!(!leader_actions(&mut l).iter().any(|a| matches!(a, LeaderAction::Established { .. })));
    assert!(!l.is_established());
    l.handle_packet(21, ack_epoch(last, 6), 8);
    assert!(leader_actions(&mut l).contains(&new_leader(21, 6)));
    l.handle_packet(21, pkt(T::Ack, z(6, 0), None), 9);
    assert!(leader_actions(&mut l).contains(&LeaderAction::Established { epoch: 6 }));
}

// ---------------------------------------------------------------------------------------------
// Leadership handover.

#[test]
fn handover_candidates_hold_what_their_sync_and_acks_vouch_for() {
    let mut l = established(&[z(5, 1)], z(5, 1), Some(z(5, 1)));
    // Follower 2's empty DIFF carried everything through 5:1; observer 4 is never a candidate.
    assert_eq!(l.handover_candidates(), vec![(2, z(5, 1))]);
    join(&mut l, 40, 4, z(5, 1), 6);
    l.handle_packet(40, pkt(T::Ack, z(6, 0), None), 7);
    leader_actions(&mut l);
    assert_eq!(l.handover_candidates(), vec![(2, z(5, 1))]);
    l.propose(z(6, 1), tx(z(6, 1)), 10);
    leader_actions(&mut l);
    assert!(!l.all_committed());
    assert_eq!(l.handover_candidates(), vec![(2, z(5, 1))], "not yet acknowledged");
    l.handle_packet(20, pkt(T::Ack, z(6, 1), None), 11);
    assert_eq!(l.handover_candidates(), vec![(2, z(6, 1))]);
    l.committed(z(6, 1), 12);
    assert!(l.all_committed());
}

#[test]
fn the_handover_proposal_goes_to_the_successor_alone_and_is_never_committed() {
    let mut l = established(&[z(5, 1)], z(5, 1), Some(z(5, 1)));
    // Follower 3 joins; observer 4 too.
    join(&mut l, 30, 3, z(5, 1), 6);
    l.handle_packet(30, pkt(T::Ack, z(6, 0), None), 7);
    leader_actions(&mut l);
    join(&mut l, 40, 4, z(5, 1), 6);
    l.handle_packet(40, pkt(T::Ack, z(6, 0), None), 7);
    leader_actions(&mut l);
    l.propose(z(6, 1), tx(z(6, 1)), 10);
    leader_actions(&mut l);
    // Not while a proposal is outstanding, not to an observer or a stranger.
    assert_eq!(l.propose_handover(3, 0, tx), None);
    l.handle_packet(30, pkt(T::Ack, z(6, 1), None), 11);
    leader_actions(&mut l);
    l.committed(z(6, 1), 12);
    leader_actions(&mut l);
    assert_eq!(l.propose_handover(4, 0, tx), None);
    assert_eq!(l.propose_handover(9, 0, tx), None);
    // The next zxid of the epoch (past the server's last, when that is further), to 3 only.
    assert_eq!(l.propose_handover(3, z(6, 1), tx), Some(z(6, 2)));
    assert_eq!(leader_actions(&mut l), vec![send(30, T::Proposal, z(6, 2), Some(tx(z(6, 2))))]);
    assert_eq!(l.propose_handover(3, 0, tx), None, "one handover proposal");
    // Nothing is proposed after it.
    l.propose(z(6, 3), tx(z(6, 3)), 13);
    assert!(leader_actions(&mut l).is_empty());
    // Its ACK is the handover's, never one the server counts towards a commit; follower 2 cannot
    // acknowledge what it was never sent.
    l.handle_packet(20, pkt(T::Ack, z(6, 2), None), 14);
    assert!(leader_actions(&mut l).is_empty());
    l.handle_packet(30, pkt(T::Ack, z(6, 2), None), 14);
    assert_eq!(leader_actions(&mut l), vec![LeaderAction::HandoverAcked { sid: 3, zxid: z(6, 2) }]);
}

#[test]
fn no_handover_proposal_past_the_epochs_last_zxid() {
    let mut l = established(&[z(5, 1)], z(5, 1), Some(z(5, 1)));
    assert_eq!(l.propose_handover(2, z(6, 0xffff_fffe), tx), None);
    assert_eq!(l.propose_handover(2, z(6, 0xffff_fffd), tx), Some(z(6, 0xffff_fffe)));
}

#[test]
fn a_leadership_request_counts_from_a_synced_follower_only() {
    use crate::wire::packet::ZKRS_REQUEST_LEADERSHIP;
    let ask = QuorumPacket { packet_type: ZKRS_REQUEST_LEADERSHIP, zxid: -1, data: None, authinfo: None };
    let mut l = established(&[z(5, 1)], z(5, 1), Some(z(5, 1)));
    l.handle_packet(20, ask.clone(), 10);
    assert_eq!(leader_actions(&mut l), vec![LeaderAction::LeadershipRequested { sid: 2 }]);
    // An observer's, or one from a learner still syncing, is ignored; neither is closed.
    join(&mut l, 40, 4, z(5, 1), 11);
    l.handle_packet(40, pkt(T::Ack, z(6, 0), None), 11);
    leader_actions(&mut l);
    l.handle_packet(40, ask.clone(), 12);
    l.learner_connected(30, 12);
    l.handle_packet(30, ask, 12);
    assert!(leader_actions(&mut l).is_empty());
    assert!(l.is_established());
}

#[test]
fn a_learner_asks_for_the_leadership_only_once_up_to_date() {
    use crate::wire::packet::ZKRS_REQUEST_LEADERSHIP;
    let mut l = discovered(false);
    assert!(!l.request_leadership());
    assert!(learner_actions(&mut l).is_empty());
    let mut l = up_to_date(false);
    assert!(l.request_leadership());
    assert_eq!(
        learner_actions(&mut l),
        vec![LearnerAction::Send(QuorumPacket {
            packet_type: ZKRS_REQUEST_LEADERSHIP,
            zxid: -1,
            data: None,
            authinfo: None
        })]
    );
    let mut o = up_to_date(true);
    assert!(!o.request_leadership(), "an observer cannot lead");
}

#[test]
fn a_leader_leaving_after_its_handover_tells_the_learners_that_take_it_what_it_never_proposed() {
    use crate::wire::packet::ZKRS_UNPROPOSED;
    use crate::wire::payload::LEARNER_TAKES_UNPROPOSED;
    let mut l = established(&[z(5, 1)], z(5, 1), Some(z(5, 1)));
    // Follower 3 says it takes the notice; follower 2 (Apache's FOLLOWERINFO) does not.
    l.learner_connected(30, 6);
    let mut info = LearnerInfo::new(3, 0);
    info.zkrs_flags = Some(LEARNER_TAKES_UNPROPOSED);
    l.handle_packet(30, pkt(T::FollowerInfo, z(E5, 0), Some(info.encode())), 6);
    l.handle_packet(30, ack_epoch(z(5, 1), E5 as i32), 6);
    l.handle_packet(30, pkt(T::Ack, z(6, 0), None), 7);
    leader_actions(&mut l);
    l.propose(z(6, 1), tx(z(6, 1)), 10);
    leader_actions(&mut l);
    l.handle_packet(20, pkt(T::Ack, z(6, 1), None), 11);
    l.handle_packet(30, pkt(T::Ack, z(6, 1), None), 11);
    l.committed(z(6, 1), 12);
    leader_actions(&mut l);
    // Not before the handover's proposal: the leader may still propose what it holds.
    let moved = |conn| MovedSessions::Listed(vec![conn as i64 * 100]);
    assert_eq!(l.tell_unproposed(moved), 0);
    assert!(leader_actions(&mut l).is_empty());
    assert_eq!(l.propose_handover(2, z(6, 1), tx), Some(z(6, 2)));
    leader_actions(&mut l);
    assert_eq!(l.tell_unproposed(moved), 1);
    // The word carries what the leader saw move away from that learner.
    let data = Some(MovedSessions::Listed(vec![3000]).encode());
    let notice = QuorumPacket { packet_type: ZKRS_UNPROPOSED, zxid: z(6, 1), data, authinfo: None };
    assert_eq!(leader_actions(&mut l), vec![LeaderAction::Send { conn: 30, packet: notice }]);
}

#[test]
fn a_learner_told_that_nothing_more_was_proposed_reports_it_and_leaves() {
    use crate::wire::packet::ZKRS_UNPROPOSED;
    let notice = QuorumPacket { packet_type: ZKRS_UNPROPOSED, zxid: z(6, 4), data: None, authinfo: None };
    let mut l = up_to_date(false);
    l.handle_packet(notice.clone(), 10);
    let a = learner_actions(&mut l);
    // No data (a zkrs leader of an older build): no session moved.
    let none = MovedSessions::Listed(Vec::new());
    assert!(
        matches!(&a[..], [LearnerAction::Unproposed { through, moved }, LearnerAction::Disconnect { .. }]
            if *through == z(6, 4) && *moved == none),
        "{a:?}"
    );
    assert!(l.is_stopped());
    // The sessions it names are passed on; a word that does not decode forwards nothing again.
    for (data, want) in [
        (MovedSessions::Listed(vec![7, 9]).encode(), MovedSessions::Listed(vec![7, 9])),
        (Bytes::from_static(&[0, 0, 0, 2, 1]), MovedSessions::Unlisted),
    ] {
        let mut l = up_to_date(false);
        l.handle_packet(QuorumPacket { data: Some(data), ..notice.clone() }, 10);
        let a = learner_actions(&mut l);
        assert!(matches!(&a[..], [LearnerAction::Unproposed { moved, .. }, _] if *moved == want), "{a:?}");
    }
    // Still syncing, it serves no client and forwarded nothing: it only leaves.
    let mut l = discovered(false);
    l.handle_packet(notice, 10);
    assert!(matches!(learner_actions(&mut l)[..], [LearnerAction::Disconnect { .. }]));
}
