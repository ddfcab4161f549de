//! Deterministic in-process simulation of whole ensembles of election machines.
//!
//! A seeded RNG draws the ensemble (voters, observers, each server's epoch and zxid, who is down),
//! start times, and the network's behaviour (delay, loss, duplication, and reordering between
//! different senders through random delays; messages from one sender to one receiver stay in order,
//! as on the election port's single TCP connection per pair). Time is simulated: the run jumps from
//! event to event. Every failure names its seed; rerun one with `ZKQ_SIM_SEED=<seed>`, widen a soak
//! run with `ZKQ_SIM_SEEDS=<count>`.
//!
//! The election alone does not promise one leader when messages are lost or servers start late (a
//! server may decide before a better vote reaches it); Zab's discovery phase fixes that by sending a
//! leader without a quorum of followers, and followers without a leader, back to LOOKING. The
//! simulation models exactly that with a small discovery oracle, and checks that the ensemble
//! settles on one established leader, that the leader is at least as up to date as a quorum of voters,
//! and, on a clean network with simultaneous starts, that the first decision is already final and
//! names the best live voter.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use zk_quorum::election::{ElectionAction, ElectionConfig, ElectionTimings, FastLeaderElection, PeerData};
use zk_quorum::quorum::QuorumVerifier;
use zk_quorum::wire::{Notification, PeerState};

/// How long a leader waits for a quorum of followers, and a follower for its leader, before going
/// back to LOOKING (Apache: initLimit * tickTime; 10 * 2000 ms by the usual kit values, shortened here).
const DISCOVERY_LIMIT_MS: u64 = 4_000;
/// The oracle looks at the ensemble this often.
const ORACLE_TICK_MS: u64 = 50;

#[derive(Debug, Clone, Copy)]
struct NetworkFaults {
    delay_ms: (u64, u64),
    loss: f64,
    duplication: f64,
    /// Servers start at a random time in 0..=this.
    start_spread_ms: u64,
    /// Voters that never start, at most; always fewer than would leave no quorum alive.
    max_down: usize,
}

struct Node {
    sid: i64,
    data: PeerData,
    start_ms: u64,
    fle: Option<FastLeaderElection>,
    decided_at: Option<u64>,
    /// For a leader: how many times it has decided LEADING (its leadership instance).
    instance: u64,
    /// For a leader: sids connected to the current instance.
    followers: BTreeSet<i64>,
    established: bool,
    /// For a learner: the (leader, instance) it is connected to.
    connected_to: Option<(i64, u64)>,
    decisions: Vec<(u64, i64, PeerState)>,
    restarts: u32,
}

struct Delivery {
    at_ms: u64,
    seq: u64,
    to: i64,
    from: i64,
    notification: Notification,
}

impl PartialEq for Delivery {
    fn eq(&self, other: &Self) -> bool {
        (self.at_ms, self.seq) == (other.at_ms, other.seq)
    }
}
impl Eq for Delivery {}
impl PartialOrd for Delivery {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Delivery {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at_ms, self.seq).cmp(&(other.at_ms, other.seq))
    }
}

struct Outcome {
    /// When every live server agreed on one established leader.
    settled_at_ms: Option<u64>,
    leader: Option<i64>,
    nodes: BTreeMap<i64, Node>,
    verifier: QuorumVerifier,
    live: BTreeSet<i64>,
}

fn vote_key(d: &PeerData, sid: i64) -> (i64, i64, i64) {
    (d.current_epoch, d.last_logged_zxid, sid)
}

fn run(seed: u64, faults: NetworkFaults, horizon_ms: u64) -> Outcome {
    let mut rng = StdRng::seed_from_u64(seed);
    let voter_count = [3usize, 5, 7][rng.gen_range(0..3)];
    let observer_count = rng.gen_range(0..=2usize);
    let voters: Vec<i64> = (1..=voter_count as i64).collect();
    let observers: Vec<i64> = (0..observer_count as i64).map(|i| 100 + i).collect();
    let verifier = QuorumVerifier::majority(voters.iter().copied(), observers.iter().copied());
    let down_allowed = faults.max_down.min(voter_count - (voter_count / 2 + 1));
    let down_count = rng.gen_range(0..=down_allowed);
    let mut down = BTreeSet::new();
    while down.len() < down_count {
        down.insert(voters[rng.gen_range(0..voters.len())]);
    }
    let mut nodes = BTreeMap::new();
    for sid in voters.iter().chain(observers.iter()).copied() {
        let current_epoch = rng.gen_range(0..3i64);
        let zxid_epoch = rng.gen_range(0..=current_epoch);
        let data = PeerData { last_logged_zxid: (zxid_epoch << 32) | rng.gen_range(0..4i64), current_epoch };
        let start_ms = rng.gen_range(0..=faults.start_spread_ms);
        nodes.insert(
            sid,
            Node {
                sid,
                data,
                start_ms,
                fle: None,
                decided_at: None,
                instance: 0,
                followers: BTreeSet::new(),
                established: false,
                connected_to: None,
                decisions: Vec::new(),
                restarts: 0,
            },
        );
    }
    let live: BTreeSet<i64> = nodes.keys().copied().filter(|s| !down.contains(s)).collect();
    let timings = ElectionTimings::default();
    let mut queue: BinaryHeap<Reverse<Delivery>> = BinaryHeap::new();
    let mut seq = 0u64;
    // Per (from, to) link: the latest delivery time so far, to keep each link FIFO.
    let mut link_clock: BTreeMap<(i64, i64), u64> = BTreeMap::new();
    let mut now = 0u64;
    let mut next_tick = 0u64;
    let mut settled_at_ms = None;
    let mut leader = None;

    while now <= horizon_ms {
        // Start servers whose time has come.
        for sid in live.iter() {
            let node = nodes.get_mut(sid).unwrap();
            if node.fle.is_none() && node.start_ms <= now {
                let config = ElectionConfig {
                    my_sid: *sid,
                    verifier: verifier.clone(),
                    pending_verifier: None,
                    config_string: Bytes::from_static(b"version=0"),
                    timings,
                    decide_early_when_unanimous: true,
                };
                node.fle = Some(FastLeaderElection::new(config, node.data, now));
            }
        }
        // Deliver what is due.
        while queue.peek().is_some_and(|d| d.0.at_ms <= now) {
            let d = queue.pop().unwrap().0;
            if let Some(fle) = nodes.get_mut(&d.to).and_then(|n| n.fle.as_mut()) {
                fle.handle_notification(d.from, d.notification, now);
            }
        }
        for node in nodes.values_mut() {
            if let Some(fle) = node.fle.as_mut() {
                fle.handle_timeout(now);
            }
        }
        // Collect actions: sends go on the network, decisions to the oracle.
        for node in nodes.values_mut() {
            let Some(fle) = node.fle.as_mut() else { continue };
            while let Some(action) = fle.poll_action() {
                match action {
                    ElectionAction::Send { to, notification } => {
                        assert_ne!(to, node.sid, "seed {seed}: a machine sent to itself over the network");
                        let copies = if rng.gen_bool(faults.loss) {
                            0
                        } else if rng.gen_bool(faults.duplication) {
                            2
                        } else {
                            1
                        };
                        for _ in 0..copies {
                            seq += 1;
                            let drawn = now + rng.gen_range(faults.delay_ms.0..=faults.delay_ms.1);
                            let link = link_clock.entry((node.sid, to)).or_insert(0);
                            let at_ms = drawn.max(*link);
                            *link = at_ms;
                            queue.push(Reverse(Delivery {
                                at_ms,
                                seq,
                                to,
                                from: node.sid,
                                notification: notification.clone(),
                            }));
                        }
                    }
                    ElectionAction::Decided { leader, state, vote } => {
                        assert_eq!(leader, vote.leader);
                        node.decisions.push((now, leader, state));
                        node.decided_at = Some(now);
                        node.connected_to = None;
                        node.followers.clear();
                        node.established = false;
                        if state == PeerState::Leading {
                            node.instance += 1;
                        }
                    }
                }
            }
        }
        if now >= next_tick {
            next_tick = now + ORACLE_TICK_MS;
            discovery_oracle(&mut nodes, &verifier, now);
            if settled_at_ms.is_none() {
                if let Some(l) = settled_leader(&nodes, &live) {
                    settled_at_ms = Some(now);
                    leader = Some(l);
                    break;
                }
            }
        }
        // Jump to the next event.
        let next_delivery = queue.peek().map(|d| d.0.at_ms);
        let next_timeout = nodes.values().filter_map(|n| n.fle.as_ref().and_then(|f| f.poll_timeout())).min();
        let next_start = live.iter().map(|s| &nodes[s]).filter(|n| n.fle.is_none()).map(|n| n.start_ms).min();
        let next =
            [next_delivery, next_timeout, next_start, Some(next_tick)].into_iter().flatten().min().unwrap();
        now = next.max(now + 1).min(horizon_ms + 1);
    }
    Outcome { settled_at_ms, leader, nodes, verifier, live }
}

/// Zab's discovery phase, reduced to what ends an election's outcome: a learner connects to a
/// leader that is leading, a leader with a quorum of connected voters is established, and a leader
/// or learner that is not established within the limit goes back to LOOKING.
fn discovery_oracle(nodes: &mut BTreeMap<i64, Node>, verifier: &QuorumVerifier, now: u64) {
    let leading: BTreeMap<i64, u64> = nodes
        .values()
        .filter(|n| n.fle.as_ref().is_some_and(|f| f.state() == PeerState::Leading))
        .map(|n| (n.sid, n.instance))
        .collect();
    let sids: Vec<i64> = nodes.keys().copied().collect();
    let mut restart = Vec::new();
    for sid in &sids {
        let node = &nodes[sid];
        let Some(fle) = node.fle.as_ref() else { continue };
        let state = fle.state();
        if !matches!(state, PeerState::Following | PeerState::Observing) {
            continue;
        }
        let target = fle.current_vote().leader;
        match (node.connected_to, leading.get(&target)) {
            (Some((l, inst)), Some(cur)) if l == target && inst == *cur => {}
            (Some(_), _) => restart.push(*sid), // the leader went away
            (None, Some(inst)) => {
                let inst = *inst;
                nodes.get_mut(sid).unwrap().connected_to = Some((target, inst));
                nodes.get_mut(&target).unwrap().followers.insert(*sid);
            }
            (None, None) => {
                if now - node.decided_at.unwrap() > DISCOVERY_LIMIT_MS {
                    restart.push(*sid);
                }
            }
        }
    }
    for (sid, _) in leading {
        let node = nodes.get_mut(&sid).unwrap();
        if node.established {
            continue;
        }
        let acks = node.followers.iter().copied().chain([sid]);
        if verifier.contains_quorum(acks) {
            node.established = true;
        } else if now - node.decided_at.unwrap() > DISCOVERY_LIMIT_MS {
            restart.push(sid);
        }
    }
    for sid in restart {
        let node = nodes.get_mut(&sid).unwrap();
        node.restarts += 1;
        node.connected_to = None;
        node.followers.clear();
        node.established = false;
        node.decided_at = None;
        let data = node.data;
        node.fle.as_mut().unwrap().start_election(data, now);
    }
}

/// The leader every live server agrees on, once it is established and all its learners are
/// connected to it.
fn settled_leader(nodes: &BTreeMap<i64, Node>, live: &BTreeSet<i64>) -> Option<i64> {
    let mut leader = None;
    for sid in live {
        let fle = nodes[sid].fle.as_ref()?;
        if fle.state() == PeerState::Looking {
            return None;
        }
        let l = fle.current_vote().leader;
        if *leader.get_or_insert(l) != l {
            return None;
        }
    }
    let l = leader?;
    let leader_node = &nodes[&l];
    if !leader_node.established || leader_node.fle.as_ref()?.state() != PeerState::Leading {
        return None;
    }
    let all_connected =
        live.iter().filter(|s| **s != l).all(|s| nodes[s].connected_to == Some((l, leader_node.instance)));
    all_connected.then_some(l)
}

/// Seeds 0..count (`ZKQ_SIM_SEEDS=<count>` to widen a soak run), or the one in `ZKQ_SIM_SEED`.
fn seeds(default_count: u64) -> Vec<u64> {
    if let Ok(s) = std::env::var("ZKQ_SIM_SEED") {
        return vec![s.parse().expect("ZKQ_SIM_SEED is a number")];
    }
    let count = std::env::var("ZKQ_SIM_SEEDS")
        .map_or(default_count, |c| c.parse().expect("ZKQ_SIM_SEEDS is a number"));
    (0..count).collect()
}

/// Checks every run must pass, whatever the faults.
fn check_common(seed: u64, o: &Outcome, bound_ms: u64) -> i64 {
    let Some(settled) = o.settled_at_ms else {
        let states: Vec<_> = o
            .nodes
            .values()
            .map(|n| (n.sid, n.fle.as_ref().map(|f| f.state()), n.decisions.clone()))
            .collect();
        panic!("seed {seed}: no settled leader within the horizon: {states:?}");
    };
    assert!(settled <= bound_ms, "seed {seed}: settled only at {settled} ms (bound {bound_ms})");
    let leader = o.leader.unwrap();
    assert!(o.verifier.is_voter(leader), "seed {seed}: leader {leader} is not a voter");
    assert!(o.live.contains(&leader), "seed {seed}: leader {leader} never started");
    // The leader is at least as up to date as a quorum of voters (what Zab's recovery relies on).
    let lk = vote_key(&o.nodes[&leader].data, leader);
    let dominated = o.verifier.voters().iter().copied().filter(|s| {
        let d = &o.nodes[s].data;
        (d.current_epoch, d.last_logged_zxid) <= (lk.0, lk.1)
    });
    assert!(o.verifier.contains_quorum(dominated), "seed {seed}: leader {leader} is behind a quorum");
    for sid in &o.live {
        let want = if *sid == leader {
            PeerState::Leading
        } else if o.verifier.is_voter(*sid) {
            PeerState::Following
        } else {
            PeerState::Observing
        };
        assert_eq!(o.nodes[sid].fle.as_ref().unwrap().state(), want, "seed {seed}: state of {sid}");
    }
    leader
}

#[test]
fn clean_network_elects_the_best_live_voter_at_the_first_decision() {
    // Delays below the finalize wait and simultaneous starts: Apache's rules then give every server
    // the best vote before anyone's finalize wait ends.
    let faults =
        NetworkFaults { delay_ms: (1, 90), loss: 0.0, duplication: 0.1, start_spread_ms: 0, max_down: 3 };
    let mut worst_first_decision = 0;
    for seed in seeds(300) {
        let o = run(seed, faults, 120_000);
        let leader = check_common(seed, &o, 2_000);
        let best = o
            .live
            .iter()
            .filter(|s| o.verifier.is_voter(**s))
            .map(|s| vote_key(&o.nodes[s].data, *s))
            .max()
            .unwrap();
        assert_eq!(leader, best.2, "seed {seed}: elected {leader}, best live voter is {}", best.2);
        for node in o.nodes.values().filter(|n| o.live.contains(&n.sid)) {
            assert_eq!(node.restarts, 0, "seed {seed}: {} had to re-elect", node.sid);
            assert_eq!(node.decisions.len(), 1, "seed {seed}: {} decided {:?}", node.sid, node.decisions);
            if o.verifier.is_voter(node.sid) {
                worst_first_decision = worst_first_decision.max(node.decisions[0].0);
            }
        }
    }
    // Voters: within a few message delays plus one finalize wait (none when every voter is up and
    // agrees). Observers take longer: voters answer them with their last decided vote, so an observer
    // joins only at its next re-send after the voters decided (its interval doubles meanwhile).
    assert!(worst_first_decision <= 700, "slowest first decision of a voter at {worst_first_decision} ms");
}

#[test]
fn a_full_ensemble_on_a_clean_network_decides_without_the_finalize_wait() {
    let faults =
        NetworkFaults { delay_ms: (1, 20), loss: 0.0, duplication: 0.0, start_spread_ms: 0, max_down: 0 };
    for seed in seeds(100) {
        let o = run(seed, faults, 60_000);
        check_common(seed, &o, 1_000);
        for sid in o.verifier.voters() {
            // Every voter hears every other within 2 x 20 ms (initial vote, then the best one relayed).
            let (at, _, _) = o.nodes[sid].decisions[0];
            assert!(at < 200, "seed {seed}: voter {sid} decided at {at} ms, after a finalize wait");
        }
    }
}

#[test]
fn late_starters_join_the_established_leader() {
    let faults = NetworkFaults {
        delay_ms: (1, 90),
        loss: 0.0,
        duplication: 0.05,
        start_spread_ms: 5_000,
        max_down: 2,
    };
    for seed in seeds(300) {
        let o = run(seed, faults, 300_000);
        check_common(seed, &o, 60_000);
    }
}

#[test]
fn lossy_reordering_network_still_settles_on_one_leader() {
    let faults = NetworkFaults {
        delay_ms: (1, 400),
        loss: 0.2,
        duplication: 0.1,
        start_spread_ms: 1_000,
        max_down: 3,
    };
    let mut slowest = 0;
    for seed in seeds(300) {
        let o = run(seed, faults, 900_000);
        check_common(seed, &o, 600_000);
        slowest = slowest.max(o.settled_at_ms.unwrap());
    }
    eprintln!("lossy network: slowest settlement at {slowest} ms");
}
