//! The proposer: assigns zxids, keeps the proposals not yet committed, and commits them in zxid
//! order once a quorum of voters has each one durable.
//!
//! One counting rule for every shape of ensemble, zk-quorum's [`AckLedger`] over a
//! [`VoterSet`] (the rule every simulator counts with too): the server's own log reporting
//! "durable through Z" is its ACK of everything through Z, and a follower's ACK is the same
//! fact about its log. A standalone server is a voter set of one, so its own durability is a
//! quorum. Every voter logs proposals in zxid order, so an ACK of Z covers every earlier
//! proposal too.

use super::zxid::Zxid;
use std::collections::{BTreeMap, VecDeque};
use zk_proto::{Txn, TxnDigest, TxnHeader};

pub use zk_quorum::quorum::{AckLedger, ServerId, VoterSet};

/// A proposal awaiting commit.
#[derive(Debug, Clone)]
pub struct Proposal {
    /// Its header (zxid, session, cxid, time, type).
    pub hdr: TxnHeader,
    /// The transaction.
    pub txn: Txn,
    /// Issued by the server itself (session expiry, container reaping): nobody waits for it.
    pub internal: bool,
    /// The tree digest once it applies: the leader's prediction, logged and proposed after the
    /// txn (Apache's trailer), and checked at apply.
    pub digest: Option<TxnDigest>,
}

impl Proposal {
    /// A proposal with no digest yet.
    pub fn new(hdr: TxnHeader, txn: Txn, internal: bool) -> Proposal {
        Proposal { hdr, txn, internal, digest: None }
    }
}

/// The proposal counter ran out within the epoch: an ensemble leader must start a new epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochExhausted(pub Zxid);

/// How zxids advance past the last counter of an epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterRule {
    /// As a standalone Apache server: a plain 64-bit increment, into the next epoch.
    Wrap,
    /// As an ensemble leader: the epoch is exhausted; a new election must pick a new epoch.
    StopAtEpochEnd,
}

/// Zxid assignment plus the proposals in flight and the ACKs they have.
#[derive(Debug)]
pub struct Proposer {
    last: Zxid,
    rule: CounterRule,
    /// Each voter's cumulative ACK, and the voters.
    ledger: AckLedger,
    /// Proposed, not yet committed, in zxid order.
    in_flight: VecDeque<Proposal>,
    /// How many of `in_flight` (from the front) were handed to this server's log.
    handed_to_log: usize,
    /// Everything through this zxid is committed.
    committed: i64,
}

impl Proposer {
    /// A proposer whose last zxid (assigned and committed) is `last`.
    pub fn new(last: i64, voters: VoterSet, rule: CounterRule) -> Proposer {
        Proposer {
            last: Zxid::from_i64(last),
            rule,
            ledger: AckLedger::new(voters),
            in_flight: VecDeque::new(),
            handed_to_log: 0,
            committed: last,
        }
    }

    /// The voters.
    pub fn voters(&self) -> &VoterSet {
        self.ledger.voters()
    }

    /// The voters, to change them at a reconfiguration.
    pub fn voters_mut(&mut self) -> &mut VoterSet {
        self.ledger.voters_mut()
    }

    /// For each voter, the highest zxid it has durable.
    pub fn acked(&self) -> &BTreeMap<ServerId, i64> {
        self.ledger.acked()
    }

    /// Voter `sid` holds durably nothing past `to` any more (its sync with this leader started,
    /// by TRUNC or SNAP or DIFF): no proposal may commit counting an ACK it no longer backs.
    pub fn reset_ack(&mut self, sid: ServerId, to: i64) {
        self.ledger.reset(sid, to);
    }

    /// The last zxid assigned.
    pub fn last_zxid(&self) -> Zxid {
        self.last
    }

    /// Everything through this zxid is committed.
    pub fn committed(&self) -> i64 {
        self.committed
    }

    /// Assigns the next zxid.
    ///
    /// Errors: [`EpochExhausted`] under [`CounterRule::StopAtEpochEnd`] when the counter is
    /// at its end; nothing is assigned.
    pub fn next_zxid(&mut self) -> Result<Zxid, EpochExhausted> {
        let next = match self.rule {
            CounterRule::Wrap => self.last.next_wrapping(),
            CounterRule::StopAtEpochEnd => self.last.next_in_epoch().ok_or(EpochExhausted(self.last))?,
        };
        self.last = next;
        Ok(next)
    }

    /// Adds a proposal with the zxid [`Self::next_zxid`] just gave.
    pub fn propose(&mut self, p: Proposal) {
        debug_assert!(self.in_flight.back().is_none_or(|b| b.hdr.zxid < p.hdr.zxid));
        self.in_flight.push_back(p);
    }

    /// Proposals not yet handed to this server's log, oldest first.
    pub fn unhanded(&self) -> impl Iterator<Item = &Proposal> {
        self.in_flight.iter().skip(self.handed_to_log)
    }

    /// How many proposals are with the log and not yet committed.
    pub fn handed(&self) -> usize {
        self.handed_to_log
    }

    /// Marks every proposal so far as handed to the log.
    pub fn mark_all_handed(&mut self) {
        self.handed_to_log = self.in_flight.len();
    }

    /// Proposals not yet committed.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Voter `sid` has everything through `zxid` durable. Returns the new commit point if it
    /// moved. ACKs from non-voters, and stale ACKs, change nothing.
    pub fn ack(&mut self, sid: ServerId, zxid: i64) -> Option<i64> {
        if !self.ledger.ack(sid, zxid) {
            return None;
        }
        let before = self.committed;
        // Committed proposals wait at the front until applied: start past them.
        let first = self.in_flight.partition_point(|p| p.hdr.zxid <= before);
        let zxids = self.in_flight.range(first..).map(|p| p.hdr.zxid);
        let to = self.ledger.committable(zxids)?;
        debug_assert!(to > before, "a commit point only moves forward");
        self.committed = to;
        Some(to)
    }

    /// Takes the oldest proposal if it is committed (apply it next).
    pub fn pop_committed(&mut self) -> Option<Proposal> {
        if self.in_flight.front().is_some_and(|p| p.hdr.zxid <= self.committed) {
            self.handed_to_log = self.handed_to_log.saturating_sub(1);
            return self.in_flight.pop_front();
        }
        None
    }

    /// Takes back every proposal not yet committed (the log refused them): the zxid counter
    /// returns to the last committed zxid, and nothing counts as handed to the log.
    pub fn take_back_uncommitted(&mut self) -> Vec<Proposal> {
        let mut out = Vec::new();
        while let Some(p) = self.in_flight.pop_back() {
            if p.hdr.zxid <= self.committed {
                self.in_flight.push_back(p);
                break;
            }
            out.push(p);
        }
        out.reverse();
        self.handed_to_log = self.handed_to_log.min(self.in_flight.len());
        self.last = Zxid::from_i64(self.committed);
        self.ledger.reset_all(self.committed);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zk_proto::{ErrorTxn, OpCode};
    use zk_quorum::quorum::QuorumVerifier;

    fn prop(z: Zxid) -> Proposal {
        Proposal {
            hdr: TxnHeader {
                client_id: 1,
                cxid: 1,
                zxid: z.to_i64(),
                time: 0,
                txn_type: OpCode::Error.code(),
            },
            txn: Txn::Error(ErrorTxn { err: 0 }),
            internal: false,
            digest: None,
        }
    }

    fn propose(p: &mut Proposer, n: usize) -> Vec<i64> {
        (0..n)
            .map(|_| {
                let z = p.next_zxid().expect("zxid");
                p.propose(prop(z));
                z.to_i64()
            })
            .collect()
    }

    #[test]
    fn a_solo_voter_commits_what_its_log_made_durable() {
        let mut p = Proposer::new(0x5, VoterSet::solo(1), CounterRule::Wrap);
        let z = propose(&mut p, 3);
        assert_eq!(z, [6, 7, 8]);
        p.mark_all_handed();
        assert_eq!(p.ack(1, 7), Some(7));
        assert_eq!(p.pop_committed().map(|p| p.hdr.zxid), Some(6));
        assert_eq!(p.pop_committed().map(|p| p.hdr.zxid), Some(7));
        assert!(p.pop_committed().is_none(), "8 is not durable yet");
        assert_eq!(p.handed(), 1);
        assert_eq!(p.ack(1, 7), None, "a stale report changes nothing");
    }

    #[test]
    fn three_voters_commit_on_two_acks_in_order() {
        let mut p = Proposer::new(0x1_0000_0000, VoterSet::new(1, [2, 3]), CounterRule::StopAtEpochEnd);
        let z = propose(&mut p, 2);
        assert_eq!(p.ack(2, z[1]), None, "one voter of three");
        assert_eq!(p.ack(9, z[1]), None, "not a voter");
        assert_eq!(p.ack(1, z[0]), Some(z[0]), "me and 2 have the first");
        assert_eq!(p.ack(1, z[1]), Some(z[1]));
        assert_eq!(p.pop_committed().map(|p| p.hdr.zxid), Some(z[0]));
        assert_eq!(p.pop_committed().map(|p| p.hdr.zxid), Some(z[1]));
    }

    #[test]
    fn a_reconfiguration_needs_both_quorums_from_its_zxid_on() {
        let mut p = Proposer::new(0x1_0000_0000, VoterSet::new(1, [2, 3]), CounterRule::StopAtEpochEnd);
        let z = propose(&mut p, 3);
        // The second proposal moves to voters 1, 4, 5.
        p.voters_mut().begin_transition(z[1], QuorumVerifier::majority([1, 4, 5], []));
        assert!(p.voters().is_voter(4) && !p.voters().is_solo());
        assert_eq!(p.ack(1, z[2]), None);
        assert_eq!(p.ack(2, z[2]), Some(z[0]), "1 and 2: the old quorum alone commits only the first");
        assert_eq!(p.ack(4, z[2]), Some(z[2]), "1 and 4 make the new one");
        p.voters_mut().finish_transition();
        assert!(!p.voters().is_voter(2) && p.voters().transition().is_none());
    }

    #[test]
    fn an_exhausted_epoch_stops_a_leader_but_not_a_standalone_server() {
        let end = Zxid { epoch: 4, counter: Zxid::LAST_COUNTER }.to_i64();
        let mut leader = Proposer::new(end, VoterSet::new(1, [2, 3]), CounterRule::StopAtEpochEnd);
        assert_eq!(leader.next_zxid(), Err(EpochExhausted(Zxid::from_i64(end))));
        // A standalone server counts on as a plain long, through 0xffffffff into the next epoch.
        let mut solo = Proposer::new(end, VoterSet::solo(0), CounterRule::Wrap);
        assert_eq!(solo.next_zxid(), Ok(Zxid { epoch: 4, counter: u32::MAX }));
        assert_eq!(solo.next_zxid(), Ok(Zxid { epoch: 5, counter: 0 }));
    }

    #[test]
    fn refused_proposals_are_taken_back_and_their_zxids_reused() {
        let mut p = Proposer::new(10, VoterSet::solo(0), CounterRule::Wrap);
        propose(&mut p, 3);
        p.mark_all_handed();
        assert_eq!(p.ack(0, 11), Some(11));
        let back = p.take_back_uncommitted();
        assert_eq!(back.iter().map(|p| p.hdr.zxid).collect::<Vec<_>>(), [12, 13]);
        assert_eq!(p.handed(), 1);
        assert_eq!(p.next_zxid().map(Zxid::to_i64), Ok(12));
    }
}
