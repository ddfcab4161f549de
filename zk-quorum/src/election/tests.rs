//! One test per rule of Apache's Fast Leader Election, driving a single machine by hand.

use super::*;

const CONFIG: &[u8] = b"server.1=h:1:2:participant\nversion=0";

fn config(my_sid: i64, voters: &[i64], observers: &[i64]) -> ElectionConfig {
    ElectionConfig {
        my_sid,
        verifier: QuorumVerifier::majority(voters.iter().copied(), observers.iter().copied()),
        pending_verifier: None,
        config_string: Bytes::from_static(CONFIG),
        timings: ElectionTimings::default(),
        decide_early_when_unanimous: true,
    }
}

fn data(zxid: i64, epoch: i64) -> PeerData {
    PeerData { last_logged_zxid: zxid, current_epoch: epoch }
}

fn note(state: PeerState, leader: i64, zxid: i64, election_epoch: i64, peer_epoch: i64) -> Notification {
    Notification {
        state,
        leader,
        zxid,
        election_epoch,
        peer_epoch,
        version: 2,
        config: Some(Bytes::from_static(CONFIG)),
    }
}

fn looking(leader: i64, zxid: i64, election_epoch: i64, peer_epoch: i64) -> Notification {
    note(PeerState::Looking, leader, zxid, election_epoch, peer_epoch)
}

fn drain(fle: &mut FastLeaderElection) -> Vec<ElectionAction> {
    std::iter::from_fn(|| fle.poll_action()).collect()
}

/// The (destination, leader) of each Send, and the decisions, in order.
fn summary(actions: &[ElectionAction]) -> Vec<(i64, i64)> {
    actions
        .iter()
        .map(|a| match a {
            ElectionAction::Send { to, notification } => (*to, notification.leader),
            ElectionAction::Decided { leader, .. } => (-1, *leader),
        })
        .collect()
}

fn decided(actions: &[ElectionAction]) -> Option<(i64, PeerState)> {
    actions.iter().find_map(|a| match a {
        ElectionAction::Decided { leader, state, .. } => Some((*leader, *state)),
        _ => None,
    })
}

#[test]
fn starts_by_proposing_itself_to_every_other_voter() {
    let mut fle = FastLeaderElection::new(config(2, &[1, 2, 3], &[9]), data(0x1_0000_0003, 1), 1000);
    let actions = drain(&mut fle);
    assert_eq!(summary(&actions), vec![(1, 2), (3, 2)]);
    let ElectionAction::Send { notification, .. } = &actions[0] else { panic!() };
    assert_eq!(notification, &looking(2, 0x1_0000_0003, 1, 1));
    assert_eq!(fle.logical_clock(), 1);
    assert_eq!(fle.poll_timeout(), Some(1200));
    assert_eq!(fle.state(), PeerState::Looking);
}

#[test]
fn a_better_vote_in_the_same_round_is_adopted_and_broadcast() {
    let mut fle = FastLeaderElection::new(config(1, &[1, 2, 3, 4, 5], &[]), data(5, 1), 0);
    drain(&mut fle);
    // Higher zxid, same epoch: better.
    fle.handle_notification(2, looking(2, 6, 1, 1), 10);
    assert_eq!(summary(&drain(&mut fle)), vec![(2, 2), (3, 2), (4, 2), (5, 2)]);
    assert_eq!(fle.proposal().leader, 2);
    // Lower epoch but higher zxid: worse; its sender gets our vote back (zkrs; Apache sends
    // nothing and lets its silence timer re-send later).
    fle.handle_notification(3, looking(3, 100, 1, 0), 20);
    assert_eq!(summary(&drain(&mut fle)), vec![(3, 2)]);
    // Same epoch and zxid, higher sid: better.
    fle.handle_notification(4, looking(4, 6, 1, 1), 30);
    assert_eq!(fle.proposal().leader, 4);
    // Higher epoch beats any zxid.
    fle.handle_notification(3, looking(3, 0, 1, 2), 40);
    assert_eq!(
        fle.proposal(),
        Vote { leader: 3, zxid: 0, election_epoch: 1, peer_epoch: 2, state: PeerState::Looking, version: 0 }
    );
}

#[test]
fn a_weight_zero_candidate_never_wins_a_comparison() {
    let text = "server.1=h:1:2\nserver.2=h:1:2\nserver.3=h:1:2\ngroup.1=1:2:3\nweight.3=0";
    let config = ElectionConfig::new(1, &QuorumConfig::parse(text).unwrap());
    let mut fle = FastLeaderElection::new(config, data(0, 0), 0);
    drain(&mut fle);
    fle.handle_notification(3, looking(3, 1 << 40, 1, 9), 1);
    assert_eq!(fle.proposal().leader, 1);
    assert!(drain(&mut fle).is_empty());
}

#[test]
fn a_higher_round_is_joined_comparing_against_our_initial_vote() {
    let mut fle = FastLeaderElection::new(config(2, &[1, 2, 3, 4, 5], &[]), data(10, 1), 0);
    drain(&mut fle);
    fle.handle_notification(3, looking(3, 20, 1, 1), 1);
    assert_eq!(fle.proposal().leader, 3);
    drain(&mut fle);
    // Round 5 offers a vote worse than ours: we move to round 5 with our own initial vote.
    fle.handle_notification(1, looking(1, 5, 5, 1), 2);
    assert_eq!(fle.logical_clock(), 5);
    assert_eq!(fle.proposal().leader, 2);
    let actions = drain(&mut fle);
    assert_eq!(summary(&actions), vec![(1, 2), (3, 2), (4, 2), (5, 2)]);
    let ElectionAction::Send { notification, .. } = &actions[0] else { panic!() };
    assert_eq!(notification.election_epoch, 5);
}

#[test]
fn a_lagging_looking_peer_gets_our_vote_back_and_is_not_counted() {
    let mut fle = FastLeaderElection::new(config(1, &[1, 2, 3], &[]), data(0, 0), 0);
    drain(&mut fle);
    fle.handle_notification(2, looking(2, 0, 3, 0), 1); // round 3: we join it
    assert_eq!(fle.logical_clock(), 3);
    drain(&mut fle);
    fle.handle_notification(3, looking(3, 0, 2, 0), 2);
    let actions = drain(&mut fle);
    assert_eq!(actions.len(), 1);
    let ElectionAction::Send { to: 3, notification } = &actions[0] else { panic!("{actions:?}") };
    assert_eq!(notification, &looking(2, 0, 3, 0));
    assert_eq!(fle.state(), PeerState::Looking);
}

#[test]
fn a_quorum_waits_the_finalize_time_then_decides() {
    let mut fle = FastLeaderElection::new(config(3, &[1, 2, 3, 4, 5], &[]), data(9, 1), 0);
    drain(&mut fle);
    fle.handle_notification(1, looking(3, 9, 1, 1), 50);
    assert_eq!(fle.poll_timeout(), Some(250));
    fle.handle_notification(2, looking(3, 9, 1, 1), 60);
    // Three of five (with our own looped-back vote): finalize wait.
    assert_eq!(fle.poll_timeout(), Some(260));
    fle.handle_timeout(259);
    assert!(drain(&mut fle).is_empty());
    fle.handle_timeout(260);
    let actions = drain(&mut fle);
    assert_eq!(decided(&actions), Some((3, PeerState::Leading)));
    let ElectionAction::Decided { vote, .. } = &actions[0] else { panic!() };
    assert_eq!((vote.zxid, vote.election_epoch, vote.peer_epoch), (9, 1, 1));
    assert_eq!(fle.state(), PeerState::Leading);
    assert_eq!(fle.poll_timeout(), None);
}

#[test]
fn a_better_vote_during_the_finalize_wait_resumes_the_election() {
    let mut fle = FastLeaderElection::new(config(1, &[1, 2, 3], &[]), data(0, 1), 0);
    drain(&mut fle);
    fle.handle_notification(2, looking(2, 0, 1, 1), 10);
    drain(&mut fle);
    assert_eq!(fle.poll_timeout(), Some(210)); // {1, 2} agree on 2
                                               // A worse vote restarts the wait; its sender gets our vote back.
    fle.handle_notification(3, looking(1, 0, 1, 1), 100);
    assert_eq!(fle.poll_timeout(), Some(300));
    assert_eq!(summary(&drain(&mut fle)), vec![(3, 2)]);
    // A better one resumes: we switch to 3 and broadcast; no decision at the old deadline.
    fle.handle_notification(3, looking(3, 0, 1, 1), 150);
    assert_eq!(summary(&drain(&mut fle)), vec![(2, 3), (3, 3)]);
    assert_eq!(fle.poll_timeout(), Some(350)); // back to the silence interval
    fle.handle_timeout(300);
    assert!(drain(&mut fle).is_empty());
    assert_eq!(fle.state(), PeerState::Looking);
}

#[test]
fn unanimity_decides_without_waiting_unless_disabled() {
    for early in [true, false] {
        let mut cfg = config(2, &[1, 2, 3], &[]);
        cfg.decide_early_when_unanimous = early;
        let mut fle = FastLeaderElection::new(cfg, data(0, 1), 0);
        drain(&mut fle);
        fle.handle_notification(3, looking(3, 0, 1, 1), 5);
        drain(&mut fle);
        fle.handle_notification(1, looking(3, 0, 1, 1), 6);
        let actions = drain(&mut fle);
        if early {
            assert_eq!(decided(&actions), Some((3, PeerState::Following)));
        } else {
            assert_eq!(decided(&actions), None);
            fle.handle_timeout(206);
            assert_eq!(decided(&drain(&mut fle)), Some((3, PeerState::Following)));
        }
    }
}

/// A dead leader is replaced at once: when every voter that is not down agrees (and they are a
/// quorum), there is nobody left to wait for. Down voters that would leave less than a quorum
/// change nothing.
#[test]
fn agreement_of_every_live_voter_decides_without_waiting() {
    let down = |v: &[i64]| v.iter().copied().collect::<std::collections::BTreeSet<i64>>();
    // Three voters, 3 (the old leader) down: 1 and 2 agree on 2.
    let mut fle = FastLeaderElection::new(config(1, &[1, 2, 3], &[]), data(5, 1), 0);
    drain(&mut fle);
    fle.handle_notification(2, looking(2, 7, 1, 1), 10);
    drain(&mut fle);
    assert_eq!(fle.poll_timeout(), Some(210), "a quorum agrees: the finalize wait");
    fle.set_peers_down(down(&[3]));
    assert_eq!(decided(&drain(&mut fle)), Some((2, PeerState::Following)), "decided without waiting");

    // Known down before the votes arrive: decided on the vote that completes the live set.
    let mut fle = FastLeaderElection::new(config(2, &[1, 2, 3], &[]), data(7, 1), 0);
    fle.set_peers_down(down(&[3]));
    drain(&mut fle);
    fle.handle_notification(1, looking(2, 7, 1, 1), 10);
    assert_eq!(decided(&drain(&mut fle)), Some((2, PeerState::Leading)));

    // Five voters, three down: the two live ones are no quorum, whatever they agree.
    let mut fle = FastLeaderElection::new(config(1, &[1, 2, 3, 4, 5], &[]), data(5, 1), 0);
    fle.set_peers_down(down(&[3, 4, 5]));
    drain(&mut fle);
    fle.handle_notification(2, looking(2, 7, 1, 1), 10);
    assert_eq!(decided(&drain(&mut fle)), None);
    assert_eq!(fle.state(), PeerState::Looking);
}

#[test]
fn silence_resends_with_a_doubling_interval_up_to_the_cap() {
    let mut cfg = config(2, &[1, 2], &[]);
    cfg.timings.max_notification_interval_ms = 1000;
    let mut fle = FastLeaderElection::new(cfg, data(0, 0), 0);
    drain(&mut fle);
    let mut now = 0;
    let mut intervals = Vec::new();
    for _ in 0..6 {
        let next = fle.poll_timeout().unwrap();
        intervals.push(next - now);
        now = next;
        fle.handle_timeout(now);
        assert_eq!(summary(&drain(&mut fle)), vec![(1, 2)]);
    }
    assert_eq!(intervals, vec![200, 400, 800, 1000, 1000, 1000]);
    // A notification restarts the interval from now, without resetting its length.
    fle.handle_notification(2, looking(1, 0, 1, 0), now + 10);
    assert_eq!(fle.poll_timeout(), Some(now + 10 + 1000));
}

#[test]
fn zxid_minus_one_votes_do_not_count() {
    let mut fle = FastLeaderElection::new(config(1, &[1, 2, 3], &[]), data(0, 0), 0);
    drain(&mut fle);
    fle.handle_notification(2, looking(2, -1, 1, 0), 1);
    assert_eq!(fle.proposal().leader, 1);
    fle.handle_notification(3, looking(1, -1, 1, 0), 2);
    assert!(drain(&mut fle).is_empty());
    assert_eq!(fle.poll_timeout(), Some(202)); // no quorum, no finalize wait
}

#[test]
fn observers_propose_nothing_are_answered_at_once_and_never_counted() {
    let mut obs = FastLeaderElection::new(config(9, &[1, 2, 3], &[9]), data(50, 7), 0);
    let actions = drain(&mut obs);
    assert_eq!(summary(&actions), vec![(1, i64::MIN), (2, i64::MIN), (3, i64::MIN)]);
    let ElectionAction::Send { notification, .. } = &actions[0] else { panic!() };
    assert_eq!((notification.zxid, notification.peer_epoch), (i64::MIN, i64::MIN));

    // A voter answers the observer right away with its current vote, and does not count it.
    let mut voter = FastLeaderElection::new(config(1, &[1, 2, 3], &[9]), data(3, 1), 0);
    drain(&mut voter);
    voter.handle_notification(9, notification.clone(), 1);
    let answer = drain(&mut voter);
    assert_eq!(answer.len(), 1);
    let ElectionAction::Send { to: 9, notification: reply } = &answer[0] else { panic!() };
    assert_eq!((reply.leader, reply.zxid, reply.state), (1, 3, PeerState::Looking));
    // A vote naming the observer as leader is ignored.
    voter.handle_notification(2, looking(9, 100, 1, 100), 2);
    assert_eq!(voter.proposal().leader, 1);

    // The observer follows once voters that are past the election name a leader that says LEADING.
    obs.handle_notification(2, note(PeerState::Following, 3, 5, 1, 1), 10);
    assert!(drain(&mut obs).is_empty());
    obs.handle_notification(3, note(PeerState::Leading, 3, 5, 1, 1), 11);
    assert_eq!(decided(&drain(&mut obs)), Some((3, PeerState::Observing)));
}

#[test]
fn a_newcomer_follows_a_settled_quorum_only_when_the_leader_says_leading() {
    let mut fle = FastLeaderElection::new(config(4, &[1, 2, 3, 4, 5], &[]), data(0, 0), 0);
    drain(&mut fle);
    // Followers of 5 from round 3 (we are in round 1): three agree, but 5 has not spoken.
    for sid in [1, 2, 3] {
        fle.handle_notification(sid, note(PeerState::Following, 5, 0x2_0000_0000, 3, 2), 10 + sid as u64);
    }
    assert_eq!(decided(&drain(&mut fle)), None);
    fle.handle_notification(5, note(PeerState::Leading, 5, 0x2_0000_0000, 3, 2), 20);
    let actions = drain(&mut fle);
    assert_eq!(decided(&actions), Some((5, PeerState::Following)));
    assert_eq!(fle.logical_clock(), 3);
    // Two followers and the leader are not enough if they disagree on the peer epoch.
    let mut other = FastLeaderElection::new(config(4, &[1, 2, 3, 4, 5], &[]), data(0, 0), 0);
    drain(&mut other);
    other.handle_notification(1, note(PeerState::Following, 5, 0, 3, 1), 1);
    other.handle_notification(2, note(PeerState::Following, 5, 0, 3, 2), 2);
    other.handle_notification(5, note(PeerState::Leading, 5, 0, 3, 2), 3);
    assert_eq!(decided(&drain(&mut other)), None);
}

#[test]
fn settled_votes_of_our_own_round_count_with_looking_ones() {
    // Round 1: 2 already leads (with 3 following), we still look. 2's LEADING vote plus 3's
    // FOLLOWING vote form a quorum of three.
    let mut fle = FastLeaderElection::new(config(1, &[1, 2, 3], &[]), data(0, 0), 0);
    drain(&mut fle);
    fle.handle_notification(3, note(PeerState::Following, 2, 7, 1, 0), 1);
    assert_eq!(decided(&drain(&mut fle)), None);
    fle.handle_notification(2, note(PeerState::Leading, 2, 7, 1, 0), 2);
    assert_eq!(decided(&drain(&mut fle)), Some((2, PeerState::Following)));
}

#[test]
fn once_decided_it_answers_looking_peers_with_the_decided_vote() {
    let mut fle = FastLeaderElection::new(config(2, &[1, 2, 3], &[]), data(0, 1), 0);
    drain(&mut fle);
    fle.handle_notification(3, looking(3, 0, 1, 1), 1);
    fle.handle_notification(1, looking(3, 0, 1, 1), 2);
    assert_eq!(decided(&drain(&mut fle)), Some((3, PeerState::Following)));
    // A restarted peer looking in round 1 again (or any round) gets FOLLOWING 3, round 1.
    fle.handle_notification(1, looking(1, 0, 1, 1), 500);
    let actions = drain(&mut fle);
    assert_eq!(actions.len(), 1);
    let ElectionAction::Send { to: 1, notification } = &actions[0] else { panic!() };
    assert_eq!(notification, &note(PeerState::Following, 3, 0, 1, 1));
    // Non-looking senders get nothing; nothing is timed any more.
    fle.handle_notification(3, note(PeerState::Leading, 3, 0, 1, 1), 501);
    assert!(drain(&mut fle).is_empty());
    fle.handle_timeout(1_000_000);
    assert!(drain(&mut fle).is_empty());
}

#[test]
fn a_new_round_after_losing_the_leader_starts_over() {
    let mut fle = FastLeaderElection::new(config(2, &[1, 2, 3], &[]), data(0, 1), 0);
    drain(&mut fle);
    fle.handle_notification(3, looking(3, 0, 1, 1), 1);
    fle.handle_notification(1, looking(3, 0, 1, 1), 2);
    drain(&mut fle);
    fle.start_election(data(0x2_0000_0004, 2), 1000);
    assert_eq!((fle.state(), fle.logical_clock()), (PeerState::Looking, 2));
    assert_eq!(summary(&drain(&mut fle)), vec![(1, 2), (3, 2)]);
    assert_eq!(fle.proposal().peer_epoch, 2);
    assert_eq!(fle.poll_timeout(), Some(1200));
}

#[test]
fn vote_equality_follows_apache() {
    let base =
        Vote { leader: 1, zxid: 2, election_epoch: 3, peer_epoch: 4, state: PeerState::Looking, version: 0 };
    assert!(base.agrees_with(&base));
    assert!(!base.agrees_with(&Vote { election_epoch: 9, ..base }));
    let f = Vote { state: PeerState::Following, version: 2, ..base };
    assert!(f.agrees_with(&Vote { zxid: 99, election_epoch: 99, state: PeerState::Leading, ..f }));
    assert!(!f.agrees_with(&Vote { peer_epoch: 5, state: PeerState::Leading, ..f }));
    // Exactly one versioned: leader only.
    assert!(f.agrees_with(&Vote { peer_epoch: 5, version: 0, ..f }));
    // Looking on either side: everything but state and version.
    assert!(!f.agrees_with(&Vote { zxid: 99, ..base }));
}

#[test]
fn connection_rule_keeps_the_larger_initiator() {
    assert_eq!(on_accepted_connection(2, 3), AcceptedConnection::Keep);
    assert_eq!(on_accepted_connection(2, 1), AcceptedConnection::CloseAndDialBack);
    assert_eq!(on_accepted_connection(2, 2), AcceptedConnection::Close);
    assert!(keeps_initiated_connection(3, 2));
    assert!(!keeps_initiated_connection(1, 2));
}

#[test]
fn a_pending_configuration_needs_its_own_quorum_and_hears_every_vote() {
    // Current {1, 2, 3}, moving to {1, 2, 3, 4, 5}: 4 and 5 get our notifications and count, and
    // deciding needs 3 of the 5 as well as 2 of the 3.
    let mut cfg = config(1, &[1, 2, 3], &[]);
    cfg.pending_verifier = Some(QuorumVerifier::majority([1, 2, 3, 4, 5], []));
    let mut fle = FastLeaderElection::new(cfg, data(0, 0), 0);
    assert_eq!(summary(&drain(&mut fle)), vec![(2, 1), (3, 1), (4, 1), (5, 1)]);
    fle.handle_notification(5, looking(5, 0, 1, 0), 1);
    drain(&mut fle);
    fle.handle_notification(4, looking(5, 0, 1, 0), 2);
    // {1, 4, 5} is a quorum of the pending configuration but holds only 1 of the current one.
    assert_eq!(fle.poll_timeout(), Some(202));
    fle.handle_notification(2, looking(5, 0, 1, 0), 3);
    assert_eq!(fle.poll_timeout(), Some(203)); // finalize wait: both quorums hold
    fle.handle_timeout(203);
    assert_eq!(decided(&drain(&mut fle)), Some((5, PeerState::Following)));
}

/// One machine for the life of a process: each election starts past every round heard, so a
/// notification left over from an earlier election of its sender is of a lower round and never
/// counted (it is answered, as any lagging LOOKING peer is).
#[test]
fn the_next_election_starts_past_every_round_heard_and_ignores_leftovers() {
    let mut fle = FastLeaderElection::new(config(1, &[1, 2, 3], &[]), data(0x2_0000_0003, 2), 0);
    drain(&mut fle);
    fle.handle_notification(2, looking(2, 0x2_0000_0009, 1, 2), 1);
    fle.handle_notification(3, looking(2, 0x2_0000_0009, 1, 2), 2);
    assert_eq!(decided(&drain(&mut fle)), Some((2, PeerState::Following)));
    // While following: server 3 elected alone in round 4 (a blip) and went back to 2.
    fle.handle_notification(3, looking(3, 0x2_0000_0005, 4, 2), 100);
    drain(&mut fle);
    // Leader 2 is lost: the next election starts in round 5, not 2.
    fle.set_peers_down([2].into_iter().collect());
    fle.start_election(data(0x2_0000_0007, 2), 1000);
    assert_eq!((fle.logical_clock(), fle.start_round()), (5, 5));
    drain(&mut fle);
    // 3's round-4 vote for itself arrives again (re-sent on a reconnect): not counted, answered.
    fle.handle_notification(3, looking(3, 0x2_0000_0005, 4, 2), 1001);
    let actions = drain(&mut fle);
    assert_eq!(summary(&actions), vec![(3, 1)]);
    assert_eq!((fle.state(), fle.proposal().leader), (PeerState::Looking, 1));
    // 3's fresh vote of round 5 decides at once (every live voter agrees).
    fle.handle_notification(3, looking(3, 0x2_0000_0008, 5, 2), 1002);
    let actions = drain(&mut fle);
    let Some(ElectionAction::Decided { vote, .. }) = actions.last() else { panic!("{actions:?}") };
    assert_eq!((vote.leader, vote.zxid, vote.election_epoch), (3, 0x2_0000_0008, 5));
}

/// Joining a settled ensemble keeps our clock (Apache sets it back to the leader's round); the
/// decided vote carries the leader's round, which is what newcomers are answered with.
#[test]
fn joining_a_settled_ensemble_never_moves_the_clock_back() {
    let mut fle = FastLeaderElection::new(config(3, &[1, 2, 3], &[]), data(0, 1), 0);
    drain(&mut fle);
    fle.handle_notification(1, looking(1, 0, 6, 1), 1); // round 6
    assert_eq!(fle.logical_clock(), 6);
    fle.handle_notification(1, note(PeerState::Following, 2, 9, 4, 2), 2);
    fle.handle_notification(2, note(PeerState::Leading, 2, 9, 4, 2), 3);
    let actions = drain(&mut fle);
    let Some(ElectionAction::Decided { vote, state, .. }) = actions.last() else { panic!("{actions:?}") };
    assert_eq!((*state, vote.election_epoch), (PeerState::Following, 4));
    assert_eq!(fle.logical_clock(), 6);
    fle.start_election(data(0, 1), 10);
    assert_eq!(fle.logical_clock(), 7);
}

/// F10: a settled server answers with its own vote's round (Apache's current vote), so that a
/// restarted leader in another round cannot take stale FOLLOWING answers for a fresh quorum.
#[test]
fn settled_answers_carry_the_decided_round_and_the_state_the_server_gives() {
    let mut fle = FastLeaderElection::new(config(2, &[1, 2, 3], &[]), data(5, 1), 0);
    drain(&mut fle);
    fle.handle_notification(3, looking(3, 7, 1, 1), 1);
    fle.handle_notification(1, looking(3, 7, 1, 1), 2);
    assert_eq!(decided(&drain(&mut fle)), Some((3, PeerState::Following)));
    // A LOOKING peer of round 9 gets round 1 back: the round the vote was decided in.
    fle.handle_notification(1, looking(1, 7, 9, 1), 3);
    assert_eq!(
        drain(&mut fle),
        vec![ElectionAction::Send { to: 1, notification: note(PeerState::Following, 3, 7, 1, 1) }]
    );
    // The new epoch is established (ZOOKEEPER-1732): answers carry it.
    fle.set_serving(PeerState::Following, 3, 2);
    fle.handle_notification(1, looking(1, 7, 9, 1), 4);
    assert_eq!(
        drain(&mut fle),
        vec![ElectionAction::Send { to: 1, notification: note(PeerState::Following, 3, 7, 1, 2) }]
    );
    // A reconfiguration designates 1 without an election, while looking: no Decided, and the
    // answers name 1 with no round.
    fle.start_election(data(8, 2), 10);
    drain(&mut fle);
    fle.set_serving(PeerState::Following, 1, 2);
    assert!(drain(&mut fle).is_empty());
    assert_eq!((fle.state(), fle.poll_timeout()), (PeerState::Following, None));
    fle.handle_notification(3, looking(3, 8, 12, 2), 11);
    assert_eq!(
        drain(&mut fle),
        vec![ElectionAction::Send { to: 3, notification: note(PeerState::Following, 1, -1, -1, 2) }]
    );
}

#[test]
fn a_new_configuration_keeps_the_clock() {
    let mut fle = FastLeaderElection::new(config(1, &[1, 2, 3], &[]), data(0, 0), 0);
    fle.handle_notification(2, looking(2, 0, 5, 0), 1);
    let mut next = config(1, &[1, 2, 3, 4], &[]);
    next.pending_verifier = Some(QuorumVerifier::majority([1, 2, 3, 4, 5], []));
    fle.set_config(next);
    assert_eq!(fle.logical_clock(), 5);
    drain(&mut fle);
    fle.start_election(data(0, 0), 2);
    assert_eq!(fle.logical_clock(), 6);
    assert_eq!(summary(&drain(&mut fle)), vec![(2, 1), (3, 1), (4, 1), (5, 1)]);
}

/// A higher round during the finalize wait resumes the election (Apache drops it unless its vote
/// is better, and decides in the older round).
#[test]
fn a_higher_round_during_the_finalize_wait_resumes_the_election() {
    let mut fle = FastLeaderElection::new(config(1, &[1, 2, 3, 4, 5], &[]), data(0, 1), 0);
    drain(&mut fle);
    fle.handle_notification(2, looking(3, 0, 1, 1), 10);
    fle.handle_notification(3, looking(3, 0, 1, 1), 11);
    assert_eq!(fle.poll_timeout(), Some(211), "three of five agree: the finalize wait");
    drain(&mut fle);
    // 3 (the candidate) starts a newer election with the same vote: we join its round.
    fle.handle_notification(3, looking(3, 0, 2, 1), 20);
    assert_eq!(fle.logical_clock(), 2);
    fle.handle_timeout(211);
    assert!(decided(&drain(&mut fle)).is_none(), "no decision in the older round");
}

/// A round joined from a peer is past every round heard before the election started too: its
/// votes are fresh, and unanimity decides at once there as well.
#[test]
fn unanimity_in_a_joined_round_decides_early_too() {
    let mut fle = FastLeaderElection::new(config(2, &[1, 2, 3], &[]), data(0, 1), 0);
    drain(&mut fle);
    fle.handle_notification(3, looking(3, 0, 4, 1), 5);
    fle.handle_notification(1, looking(3, 0, 4, 1), 6);
    assert_eq!(decided(&drain(&mut fle)), Some((3, PeerState::Following)));
}

/// Seed 40239 of the node simulation's `reconfig`: the lone voter 3 proposes adding 2, whose log
/// holds that proposal, so 2 restarts a non-voter of the current configuration with the pending
/// one naming it a voter. The pending quorum {2, 3} needs 2's own agreement, which its vote (a
/// non-voter's, never counted) cannot give: it follows 3 on 3's word alone and counts itself.
#[test]
fn a_server_the_pending_configuration_adds_counts_itself_when_it_follows() {
    let mut cfg = config(2, &[3], &[1]);
    cfg.pending_verifier = Some(QuorumVerifier::majority([2, 3], [1]));
    let mut fle = FastLeaderElection::new(cfg, data(0x1_0000_097f, 1), 0);
    drain(&mut fle);
    fle.handle_notification(3, note(PeerState::Leading, 3, 0x1_0000_097b, 1, 1), 5);
    assert_eq!(decided(&drain(&mut fle)), Some((3, PeerState::Observing)));

    // A voter of the current configuration counts only what it hears, as Apache: {1, 2, 3} moving
    // to {1, 2, 3, 4}; 1 alone saying it leads is not a quorum of either for 2.
    let mut cfg = config(2, &[1, 2, 3], &[]);
    cfg.pending_verifier = Some(QuorumVerifier::majority([1, 2, 3, 4], []));
    let mut fle = FastLeaderElection::new(cfg, data(0, 0), 0);
    drain(&mut fle);
    fle.handle_notification(1, note(PeerState::Leading, 1, 5, 1, 1), 5);
    assert_eq!(decided(&drain(&mut fle)), None);

    // Nor does a non-voter of both (an observer): the leader's word alone is not a quorum of {3, 4}.
    let mut cfg = config(2, &[3, 4], &[2]);
    cfg.pending_verifier = Some(QuorumVerifier::majority([3, 4, 5], [2]));
    let mut fle = FastLeaderElection::new(cfg, data(0, 0), 0);
    drain(&mut fle);
    fle.handle_notification(3, note(PeerState::Leading, 3, 5, 1, 1), 5);
    assert_eq!(decided(&drain(&mut fle)), None);
}

#[test]
fn a_handover_vote_names_the_successor_for_one_round_only() {
    let mut fle = FastLeaderElection::new(config(1, &[1, 2, 3], &[]), data(0x10, 1), 0);
    drain(&mut fle);
    // A leader that handed over to 3 (which alone holds 0x11) names it at once.
    fle.start_election_for(data(0x10, 1), (3, 0x11, 1), 100);
    assert_eq!(fle.proposal().leader, 3);
    assert_eq!(fle.proposal().zxid, 0x11);
    assert_eq!(summary(&drain(&mut fle)), vec![(2, 3), (3, 3)]);
    // 3 never answers; 2 agrees with the vote, and the round decides for 3.
    fle.handle_notification(2, looking(3, 0x11, fle.logical_clock(), 1), 110);
    fle.handle_timeout(400);
    assert_eq!(decided(&drain(&mut fle)), Some((3, PeerState::Following)));
    // 3 could not be reached: the next election starts from this server's own vote.
    fle.start_election(data(0x10, 1), 2_000);
    assert_eq!(fle.proposal().leader, 1);
    assert_eq!(summary(&drain(&mut fle)), vec![(2, 1), (3, 1)]);
}

#[test]
fn a_handover_vote_for_a_non_voter_is_ignored() {
    let mut fle = FastLeaderElection::new(config(1, &[1, 2, 3], &[4]), data(0x10, 1), 0);
    drain(&mut fle);
    fle.start_election_for(data(0x10, 1), (4, 0x11, 1), 100);
    assert_eq!(fle.proposal().leader, 1);
}
