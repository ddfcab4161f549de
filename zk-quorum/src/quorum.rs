//! Quorum verifiers: which sids vote, and which sets of them form a quorum.
//!
//! Two rules, as Apache ZooKeeper 3.8 has them:
//! - majority: a set is a quorum when it holds more than half of the voters
//!   (`acks > floor(voters / 2)`);
//! - hierarchical: voters sit in groups and carry weights (default 1, 0 allowed); a group is won when
//!   the acked weight in it is more than half its total weight, and a set is a quorum when it wins
//!   more than half of the groups whose total weight is not zero.
//!
//! Only voters count: sids of observers or of servers outside the configuration are ignored, so a
//! caller can pass any ack set as it is.
//!
//! On top of the verifiers, the commit rule itself: [`VoterSet`] (whose ACKs count, including
//! both configurations of a reconfiguration) and [`AckLedger`] (each voter's cumulative ACK, and
//! the highest in-flight proposal that may commit), one rule for the server and the simulators.

use std::collections::{BTreeMap, BTreeSet};

use crate::config::{LearnerType, QuorumConfig};

/// How acks are counted.
#[derive(Debug, Clone, PartialEq, Eq)]
enum QuorumRule {
    Majority,
    Hierarchical {
        group_of: BTreeMap<i64, i64>,
        weight: BTreeMap<i64, i64>,
        group_weight: BTreeMap<i64, i64>,
        /// Groups whose total weight is not zero: only they can be won.
        nonzero_groups: usize,
    },
}

/// A quorum configuration as the protocol asks questions of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumVerifier {
    voters: BTreeSet<i64>,
    observers: BTreeSet<i64>,
    version: i64,
    rule: QuorumRule,
}

impl QuorumVerifier {
    /// The verifier a parsed configuration describes (hierarchical if it has groups).
    pub fn from_config(config: &QuorumConfig) -> QuorumVerifier {
        let mut voters = BTreeSet::new();
        let mut observers = BTreeSet::new();
        for s in config.servers.values() {
            match s.learner_type {
                LearnerType::Participant => voters.insert(s.sid),
                LearnerType::Observer => observers.insert(s.sid),
            };
        }
        let rule = match &config.hierarchy {
            None => QuorumRule::Majority,
            Some(h) => {
                let mut group_of = BTreeMap::new();
                let mut group_weight = BTreeMap::new();
                for (gid, members) in &h.groups {
                    let mut total = 0i64;
                    for m in members {
                        group_of.insert(*m, *gid);
                        // Only voters carry weight: an observer listed in a group adds nothing.
                        if voters.contains(m) {
                            total = total.saturating_add(h.weights.get(m).copied().unwrap_or(1));
                        }
                    }
                    group_weight.insert(*gid, total);
                }
                let nonzero_groups = group_weight.values().filter(|w| **w != 0).count();
                let weight = voters.iter().map(|v| (*v, h.weights.get(v).copied().unwrap_or(1))).collect();
                QuorumRule::Hierarchical { group_of, weight, group_weight, nonzero_groups }
            }
        };
        QuorumVerifier { voters, observers, version: config.version, rule }
    }

    /// A majority verifier over `voters` and `observers`, version 0: handy where no addresses matter.
    pub fn majority(voters: impl IntoIterator<Item = i64>, observers: impl IntoIterator<Item = i64>) -> Self {
        let voters: BTreeSet<i64> = voters.into_iter().collect();
        let observers = observers.into_iter().filter(|o| !voters.contains(o)).collect();
        QuorumVerifier { voters, observers, version: 0, rule: QuorumRule::Majority }
    }

    /// Whether the distinct voters among `acks` form a quorum. Non-voters are ignored; an empty set is
    /// never a quorum.
    pub fn contains_quorum(&self, acks: impl IntoIterator<Item = i64>) -> bool {
        let acked: BTreeSet<i64> = acks.into_iter().filter(|s| self.voters.contains(s)).collect();
        if acked.is_empty() {
            return false;
        }
        match &self.rule {
            QuorumRule::Majority => acked.len() > self.voters.len() / 2,
            QuorumRule::Hierarchical { group_of, weight, group_weight, nonzero_groups } => {
                let mut acked_weight: BTreeMap<i64, i64> = BTreeMap::new();
                for sid in &acked {
                    if let Some(gid) = group_of.get(sid) {
                        *acked_weight.entry(*gid).or_insert(0) += weight.get(sid).copied().unwrap_or(0);
                    }
                }
                let won = acked_weight
                    .iter()
                    .filter(|(gid, w)| **w > group_weight.get(gid).copied().unwrap_or(0) / 2)
                    .count();
                won > nonzero_groups / 2
            }
        }
    }

    /// [`Self::contains_quorum`] for sids known to be distinct (a map's keys): a majority is
    /// counted without building a set, as a leader does on every ACK.
    pub fn contains_quorum_distinct(&self, acks: impl IntoIterator<Item = i64>) -> bool {
        match &self.rule {
            QuorumRule::Majority => {
                let n = acks.into_iter().filter(|s| self.voters.contains(s)).count();
                n > 0 && n > self.voters.len() / 2
            }
            QuorumRule::Hierarchical { .. } => self.contains_quorum(acks),
        }
    }

    /// Whether `sid` votes (a participant; weight-0 participants included).
    pub fn is_voter(&self, sid: i64) -> bool {
        self.voters.contains(&sid)
    }

    /// Every voter, ascending.
    pub fn voters(&self) -> &BTreeSet<i64> {
        &self.voters
    }

    /// Every observer, ascending.
    pub fn observers(&self) -> &BTreeSet<i64> {
        &self.observers
    }

    /// A candidate's weight in elections: 1 for any sid under a majority rule (as Apache), the
    /// configured weight (default 1) under a hierarchical one, 0 for a sid the hierarchy does not
    /// know. A weight-0 candidate never wins a vote comparison.
    pub fn weight(&self, sid: i64) -> i64 {
        match &self.rule {
            QuorumRule::Majority => 1,
            QuorumRule::Hierarchical { weight, .. } => weight.get(&sid).copied().unwrap_or(0),
        }
    }

    /// The configuration's version.
    pub fn version(&self) -> i64 {
        self.version
    }
}

/// A server id (myid).
pub type ServerId = i64;

/// The voters whose ACKs commit a proposal, and the rule that says when they are a quorum
/// (majority, or Apache's hierarchical groups and weights: [`QuorumVerifier`] decides).
///
/// During a reconfiguration the set holds the next configuration's verifier too, from the
/// reconfiguration's zxid on: every proposal from that zxid on needs a quorum of both, as Apache's
/// leader counts them. One rule for a standalone server (a voter set of one), an ensemble, and an
/// ensemble in the middle of a reconfiguration; the server and every simulator count with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VoterSet {
    me: ServerId,
    verifier: QuorumVerifier,
    /// The next configuration and the zxid of the reconfiguration that proposed it.
    next: Option<(i64, QuorumVerifier)>,
}

impl VoterSet {
    /// Just this server: standalone.
    pub fn solo(me: ServerId) -> VoterSet {
        VoterSet { me, verifier: QuorumVerifier::majority([me], []), next: None }
    }

    /// This server and the other voters, by majority (observers are not voters).
    pub fn new(me: ServerId, voters: impl IntoIterator<Item = ServerId>) -> VoterSet {
        let mut v: Vec<ServerId> = voters.into_iter().collect();
        v.push(me);
        VoterSet { me, verifier: QuorumVerifier::majority(v, []), next: None }
    }

    /// This server under the ensemble's own verifier (which may be hierarchical).
    pub fn with_verifier(me: ServerId, verifier: QuorumVerifier) -> VoterSet {
        VoterSet { me, verifier, next: None }
    }

    /// A reconfiguration at `zxid` proposes `next`: from `zxid` on, proposals need a quorum of
    /// both configurations.
    pub fn begin_transition(&mut self, zxid: i64, next: QuorumVerifier) {
        self.next = Some((zxid, next));
    }

    /// The reconfiguration committed: its configuration alone counts from now on.
    pub fn finish_transition(&mut self) {
        if let Some((_, next)) = self.next.take() {
            self.verifier = next;
        }
    }

    /// The reconfiguration under way, if any: its zxid.
    pub fn transition(&self) -> Option<i64> {
        self.next.as_ref().map(|(z, _)| *z)
    }

    /// This server's id.
    pub fn me(&self) -> ServerId {
        self.me
    }

    /// The configuration in force (the next one is [`Self::transition`]'s).
    pub fn verifier(&self) -> &QuorumVerifier {
        &self.verifier
    }

    /// Whether this server is the only voter (the inline-commit fast path is valid only then).
    pub fn is_solo(&self) -> bool {
        self.next.is_none() && self.verifier.voters().len() == 1 && self.verifier.is_voter(self.me)
    }

    /// Whether `sid` votes (in the configuration, or in the next one during a reconfiguration).
    pub fn is_voter(&self, sid: ServerId) -> bool {
        self.verifier.is_voter(sid) || self.next.as_ref().is_some_and(|(_, v)| v.is_voter(sid))
    }

    /// Whether the voters among `sids` form a quorum for proposal `zxid`: of the configuration,
    /// and of the next one too when `zxid` comes at or after the reconfiguration.
    /// The sids are distinct (the keys of the acknowledgements).
    pub fn is_quorum_at<'a>(&self, zxid: i64, sids: impl Iterator<Item = &'a ServerId> + Clone) -> bool {
        self.verifier.contains_quorum_distinct(sids.clone().copied())
            && self
                .next
                .as_ref()
                .filter(|(z, _)| zxid >= *z)
                .is_none_or(|(_, v)| v.contains_quorum_distinct(sids.copied()))
    }
}

/// The leader's cumulative ACKs: for each voter, the highest zxid its log holds durably. Every
/// voter logs proposals in zxid order, so an ACK of Z covers every earlier proposal too; the
/// leader's own log reporting "durable through Z" is its ACK, recorded here like a follower's.
///
/// A follower's ACK is only as good as its log: when its sync with this leader starts, what it
/// holds past the sync's point may be cut (TRUNC) or replaced (SNAP), so the leader clamps it
/// ([`Self::reset`], on [`crate::zab::LeaderAction::AckReset`]).
#[derive(Debug, Clone)]
pub struct AckLedger {
    voters: VoterSet,
    acked: BTreeMap<ServerId, i64>,
}

impl AckLedger {
    /// An empty ledger counting for `voters` (one per leadership: no ACK of an earlier epoch).
    pub fn new(voters: VoterSet) -> AckLedger {
        AckLedger { voters, acked: BTreeMap::new() }
    }

    /// The voters.
    pub fn voters(&self) -> &VoterSet {
        &self.voters
    }

    /// The voters, to change them at a reconfiguration.
    pub fn voters_mut(&mut self) -> &mut VoterSet {
        &mut self.voters
    }

    /// For each voter, the highest zxid it has durable.
    pub fn acked(&self) -> &BTreeMap<ServerId, i64> {
        &self.acked
    }

    /// Voter `sid` has everything through `zxid` durable. Returns whether that raised its ACK:
    /// ACKs of non-voters, and ACKs no higher than the one recorded, change nothing.
    pub fn ack(&mut self, sid: ServerId, zxid: i64) -> bool {
        if !self.voters.is_voter(sid) {
            return false;
        }
        let e = self.acked.entry(sid).or_insert(i64::MIN);
        if zxid <= *e {
            return false;
        }
        *e = zxid;
        true
    }

    /// Voter `sid` holds durably nothing past `to` any more (its sync with this leader starts):
    /// its ACK is lowered to `to` if it was higher.
    pub fn reset(&mut self, sid: ServerId, to: i64) {
        if let Some(e) = self.acked.get_mut(&sid) {
            *e = (*e).min(to);
        }
    }

    /// Every ACK is lowered to `to` (proposals past it were taken back).
    pub fn reset_all(&mut self, to: i64) {
        for e in self.acked.values_mut() {
            *e = (*e).min(to);
        }
    }

    /// The highest of `in_flight` (proposed, not committed, ascending) that may commit now: each
    /// up to it has a quorum of voters whose ACK covers it, counted against the voter set at its
    /// zxid. None when the first has no quorum.
    pub fn committable(&self, in_flight: impl IntoIterator<Item = i64>) -> Option<i64> {
        let mut committed = None;
        let mut prev = i64::MIN;
        for z in in_flight {
            assert!(z > prev, "in-flight zxids must ascend: {z:#x} after {prev:#x}");
            prev = z;
            let have = self.acked.iter().filter(move |&(_, &a)| a >= z).map(|(s, _)| s);
            if !self.voters.is_quorum_at(z, have) {
                break;
            }
            committed = Some(z);
        }
        committed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Hierarchy, ServerAddress, ServerSpec};
    use proptest::prelude::*;

    fn spec(sid: i64, learner_type: LearnerType) -> ServerSpec {
        ServerSpec {
            sid,
            addresses: vec![ServerAddress { host: "h".into(), quorum_port: 1, election_port: 2 }],
            learner_type,
            client: None,
        }
    }

    #[test]
    fn majority_counts_distinct_voters_only() {
        let q = QuorumVerifier::majority([1, 2, 3, 4], [9]);
        assert!(!q.contains_quorum([1, 2]));
        assert!(!q.contains_quorum([1, 1, 2, 2, 9, 10]));
        assert!(q.contains_quorum([1, 2, 3]));
        assert!(!q.contains_quorum([]));
        let q3 = QuorumVerifier::majority([1, 2, 3], []);
        assert!(q3.contains_quorum([2, 3]));
        assert!(!q3.contains_quorum([3]));
        assert!(q.is_voter(4) && !q.is_voter(9));
        assert_eq!(q.observers().iter().copied().collect::<Vec<_>>(), vec![9]);
        assert_eq!(q.weight(i64::MIN), 1);
    }

    #[test]
    fn from_config_splits_voters_and_observers() {
        let c = QuorumConfig::majority([spec(1, LearnerType::Participant), spec(2, LearnerType::Observer)]);
        let q = QuorumVerifier::from_config(&c);
        assert!(q.contains_quorum([1]));
        assert!(!q.contains_quorum([2]));
    }

    #[test]
    fn hierarchical_needs_a_majority_of_weighted_groups() {
        // Groups {1,2,3}, {4,5,6}, {7,8,9}; server 9 has weight 0; group {10} has weight 0 in total.
        let text = "server.1=h:1:2\nserver.2=h:1:2\nserver.3=h:1:2\nserver.4=h:1:2\nserver.5=h:1:2\n\
                    server.6=h:1:2\nserver.7=h:1:2\nserver.8=h:1:2\nserver.9=h:1:2\nserver.10=h:1:2\n\
                    group.1=1:2:3\ngroup.2=4:5:6\ngroup.3=7:8:9\ngroup.4=10\nweight.9=0\nweight.10=0";
        let q = QuorumVerifier::from_config(&QuorumConfig::parse(text).unwrap());
        // Three groups count (the fourth weighs 0): two won groups make a quorum.
        assert!(q.contains_quorum([1, 2, 4, 5]));
        assert!(!q.contains_quorum([1, 2, 4]));
        // Group 3 weighs 2 (7, 8): one of them is not more than half.
        assert!(!q.contains_quorum([1, 2, 7, 9]));
        assert!(q.contains_quorum([1, 2, 7, 8]));
        assert!(!q.contains_quorum([10, 9, 1, 2]));
        assert_eq!(q.weight(9), 0);
        assert_eq!(q.weight(1), 1);
        assert_eq!(q.weight(42), 0);
    }

    #[test]
    fn a_solo_voter_commits_what_its_log_made_durable() {
        let mut l = AckLedger::new(VoterSet::solo(1));
        assert!(l.voters().is_solo());
        assert!(l.ack(1, 7));
        assert_eq!(l.committable([6, 7, 8]), Some(7), "8 is not durable yet");
        assert!(!l.ack(1, 7), "a stale report changes nothing");
    }

    #[test]
    fn three_voters_commit_on_two_acks_in_order() {
        let mut l = AckLedger::new(VoterSet::new(1, [2, 3]));
        let z = [0x1_0000_0001, 0x1_0000_0002];
        assert!(l.ack(2, z[1]));
        assert_eq!(l.committable(z), None, "one voter of three");
        assert!(!l.ack(9, z[1]), "not a voter");
        assert!(l.ack(1, z[0]));
        assert_eq!(l.committable(z), Some(z[0]), "me and 2 have the first");
        assert!(l.ack(1, z[1]));
        assert_eq!(l.committable(z), Some(z[1]));
    }

    #[test]
    fn a_reconfiguration_needs_both_quorums_from_its_zxid_on() {
        let mut l = AckLedger::new(VoterSet::new(1, [2, 3]));
        let z = [0x1_0000_0001, 0x1_0000_0002, 0x1_0000_0003];
        // The second proposal moves to voters 1, 4, 5.
        l.voters_mut().begin_transition(z[1], QuorumVerifier::majority([1, 4, 5], []));
        assert!(l.voters().is_voter(4) && !l.voters().is_solo());
        l.ack(1, z[2]);
        l.ack(2, z[2]);
        assert_eq!(l.committable(z), Some(z[0]), "1 and 2: the old quorum alone commits only the first");
        l.ack(4, z[2]);
        assert_eq!(l.committable(z), Some(z[2]), "1 and 4 make the new one");
        l.voters_mut().finish_transition();
        assert!(!l.voters().is_voter(2) && l.voters().transition().is_none());
    }

    /// Review F3: a follower's ACK does not outlive the truncation its sync starts with.
    #[test]
    fn a_reset_follower_counts_again_only_once_it_acks_again() {
        let mut l = AckLedger::new(VoterSet::new(1, [2, 3]));
        let z = 0x2_0000_0005;
        l.ack(2, z);
        l.reset(2, 0x2_0000_0004);
        l.ack(1, z);
        assert_eq!(l.committable([z]), None, "2 truncated z: only the leader has it");
        assert_eq!(l.acked()[&2], 0x2_0000_0004);
        l.reset(3, 0);
        assert!(!l.acked().contains_key(&3), "a reset records nothing");
        assert!(l.ack(2, z));
        assert_eq!(l.committable([z]), Some(z));
        l.reset_all(0x2_0000_0001);
        assert_eq!(l.committable([z]), None);
    }

    fn arb_verifier() -> impl Strategy<Value = QuorumVerifier> {
        prop_oneof![
            (1usize..8).prop_map(|n| QuorumVerifier::majority((1..=n as i64).collect::<Vec<_>>(), [100])),
            // Up to 9 voters spread over up to 4 groups, weights 0..3.
            (proptest::collection::vec((0i64..4, 0i64..4), 1..10)).prop_map(|placement| {
                let mut servers = Vec::new();
                let mut h = Hierarchy::default();
                for (i, (gid, w)) in placement.iter().enumerate() {
                    let sid = i as i64 + 1;
                    servers.push(spec(sid, LearnerType::Participant));
                    h.groups.entry(*gid).or_default().insert(sid);
                    h.weights.insert(sid, *w);
                }
                let mut c = QuorumConfig::majority(servers);
                c.hierarchy = Some(h);
                QuorumVerifier::from_config(&c)
            }),
        ]
    }

    proptest! {
        #[test]
        fn any_two_quorums_share_a_weighted_voter(q in arb_verifier(), a in any::<u16>(), b in any::<u16>()) {
            let pick = |mask: u16| (0..16).filter(|i| mask & (1 << i) != 0).map(|i| i as i64 + 1).collect::<Vec<_>>();
            let (qa, qb) = (pick(a), pick(b));
            if q.contains_quorum(qa.iter().copied()) && q.contains_quorum(qb.iter().copied()) {
                let shared = qa.iter().any(|s| qb.contains(s) && q.is_voter(*s) && q.weight(*s) > 0);
                prop_assert!(shared, "{qa:?} and {qb:?} are disjoint quorums");
            }
        }

        #[test]
        fn quorums_are_monotone(q in arb_verifier(), a in any::<u16>(), extra in any::<u16>()) {
            let pick = |mask: u16| (0..16).filter(|i| mask & (1 << i) != 0).map(|i| i as i64 + 1).collect::<Vec<_>>();
            prop_assert_eq!(q.contains_quorum(pick(a)), q.contains_quorum_distinct(pick(a)));
            if q.contains_quorum(pick(a)) {
                prop_assert!(q.contains_quorum(pick(a | extra)));
            }
        }
    }
}
