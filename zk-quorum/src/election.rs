//! Fast Leader Election (Apache's `FastLeaderElection`, `electionAlg=3`) as a sans-IO state machine.
//!
//! The caller feeds in what arrives (`handle_notification`) and what time it is (`handle_timeout`),
//! asks when to call back (`poll_timeout`), and drains what to do (`poll_action`): send a
//! notification to a peer, or "decided". Nothing here touches a socket or a clock.
//!
//! The rules are Apache ZooKeeper 3.8's, so that zkrs and Apache servers in one ensemble pick the same
//! leader:
//! - a vote is better when its candidate has non-zero weight and a higher (peer epoch, zxid, sid);
//! - each election round has a logical clock; a notification from a higher round moves us to it
//!   (dropping the votes collected so far, re-deciding between its vote and our own initial one), a
//!   lower round is ignored (a LOOKING sender gets our vote back), the same round adopts a better vote;
//!   every change of vote is broadcast to all voters;
//! - once votes equal to ours form a quorum, we wait `finalize_wait_ms` (200) for a better vote: each
//!   other notification restarts that wait and is dropped, a better one resumes the election,
//!   silence decides;
//! - FOLLOWING/LEADING senders are servers already past the election: a newcomer follows their leader
//!   once a quorum of them agree and the leader itself says LEADING;
//! - non-voters (observers) propose `i64::MIN` for leader, zxid and epoch and are never counted; a
//!   notification from one is answered at once with our current vote;
//! - silence for the notification interval (200 ms, doubling to 60 s) re-sends our vote to everyone;
//! - once decided, the machine keeps answering LOOKING peers with the decided vote, the round it was
//!   decided in and the state the server says it is in ([`FastLeaderElection::set_serving`]), as
//!   Apache's receiver answers from its current vote;
//! - during a reconfiguration, the pending configuration's voters take part too and a decision needs
//!   a quorum in both configurations ([`ElectionConfig::pending_verifier`]).
//!
//! One machine serves a server for the life of its process, as Apache keeps one
//! `FastLeaderElection` and its logical clock: [`FastLeaderElection::start_election`] starts the
//! next election on it (after the server led, followed or lost its leader), and
//! [`FastLeaderElection::set_config`] changes the configuration (a reconfiguration, a pending
//! configuration) without losing the clock. Rounds only grow: the round an election starts in is
//! past every round this machine has heard of (its own and every peer's, in any notification), so
//! a notification left over from an earlier election of its sender (still in flight, queued, or
//! re-sent when a connection is re-dialled) is of a lower round and is never counted; a server that
//! joins a settled ensemble keeps its clock (Apache sets it back to the leader's round, which lets
//! the next election of this server reuse a round its peers have used already).
//!
//! Not here (yet): adopting a newer configuration carried in a notification (Apache does, with
//! `reconfigEnabled`, and restarts the election; a caller compares the version of the decoded config
//! with its own, calls [`FastLeaderElection::set_config`] and starts the next election), and
//! Apache's two-server "oracle" quorum option.
//!
//! One deliberate speed-up over Apache: when votes from every voter of the configuration (not just
//! a quorum) equal ours, we decide at once, without the finalize wait. This cannot change the
//! outcome: votes only grow within a round and every voter's vote is at least its own initial vote,
//! so when all voters hold the same vote it is the best initial vote of the whole ensemble and no
//! better one can arrive. The same holds for the voters that can vote at all: the caller may say
//! which peers are down ([`FastLeaderElection::set_peers_down`]: their election port refuses
//! connections), and when every other voter agrees (still a quorum), we decide at once too. A dead
//! leader is thus replaced without the 200 ms wait. Should a server that was down come up with a
//! better vote within what would have been the wait, Apache would pick it and we do not; the
//! choice is still safe (the agreeing quorum holds every committed transaction, and the leader has
//! the newest history among it), and that server follows the established leader. The early
//! decision never rests on a vote of an earlier election: every round of an election is past every
//! round this machine heard of before it started (see below), so each vote counted was cast in an
//! election of its sender that this machine had not heard of before its own began. (A notification
//! of a round never heard of, whose election ended unseen while the network held it back, cannot
//! be told from a fresh one: the wire carries nothing more.)
//!
//! A fourth deviation only changes what a non-voter (an observer) is told while we look: the vote
//! we hold in this round, where Apache sends its last decided vote, which names the leader just
//! lost; an Apache observer counts those answers as votes of this round, follows the dead leader
//! and elects again only once it gives up on it.
//!
//! A fifth deviation only adds messages: non-voters that asked since our last decision are told
//! the next one when it is taken (Apache answers only when asked, so an observer that asked while
//! the voters were still looking, or still following the leader it lost, waits for its next
//! re-send, up to a doubling interval later).
//!
//! A sixth deviation: a server that votes in the pending configuration (a reconfiguration in flight
//! adds it, or keeps it) counts its own agreement in that configuration's quorum when it would
//! follow a leader, since that quorum may need exactly its vote and following is how it gives it
//! (see `has_settled_quorum`). Apache counts only what it hears, and such a server never finds the
//! leader that waits for its ACK, or, restarted with a reconfiguration in its log that its
//! ensemble never committed, the ensemble that goes on without it. The configuration in force
//! still counts only what is heard.
//!
//! A third deviation: during the finalize wait, a LOOKING notification of a higher round resumes the
//! election (its sender started a newer election than the one our quorum voted in; Apache drops it
//! unless its vote is better, decides in the older round, and the sender, possibly the candidate
//! itself, can then neither count our answer nor be counted, until someone gives up).
//!
//! A second deviation only adds messages: a LOOKING peer of this round whose vote is worse than
//! ours gets our vote back at once (Apache stays silent until its silence timer re-sends, 200 ms
//! later). A server that lost the leader a moment after its peer would otherwise miss the peer's
//! vote (it arrived while it still followed) and wait for that re-send.

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;

use crate::config::QuorumConfig;
use crate::quorum::QuorumVerifier;
use crate::wire::{Notification, PeerState};

/// The election's timing knobs, in milliseconds. Defaults are Apache's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElectionTimings {
    /// How long to wait for a better vote once a quorum agrees with ours (Apache: 200).
    pub finalize_wait_ms: u64,
    /// First silence interval after which our vote is re-sent
    /// (`zookeeper.fastleader.minNotificationInterval`, 200).
    pub min_notification_interval_ms: u64,
    /// Cap of the doubling silence interval (`zookeeper.fastleader.maxNotificationInterval`, 60000).
    pub max_notification_interval_ms: u64,
}

impl Default for ElectionTimings {
    fn default() -> Self {
        ElectionTimings {
            finalize_wait_ms: 200,
            min_notification_interval_ms: 200,
            max_notification_interval_ms: 60_000,
        }
    }
}

/// What an election machine needs to know about the ensemble and itself.
#[derive(Debug, Clone)]
pub struct ElectionConfig {
    /// Our server id.
    pub my_sid: i64,
    /// Who votes and what a quorum is.
    pub verifier: QuorumVerifier,
    /// A newer configuration being moved to (Apache's last seen config during a reconfig), if any:
    /// its voters are sent notifications and counted too, and a decision needs a quorum in both.
    pub pending_verifier: Option<QuorumVerifier>,
    /// The config string sent in every notification (Apache compares its version with its own).
    pub config_string: Bytes,
    /// Timing knobs.
    pub timings: ElectionTimings,
    /// Decide without the finalize wait when every voter agrees (zkrs' speed-up; on by default).
    pub decide_early_when_unanimous: bool,
}

impl ElectionConfig {
    /// The configuration for server `my_sid` of `config`, with default timings.
    pub fn new(my_sid: i64, config: &QuorumConfig) -> ElectionConfig {
        ElectionConfig {
            my_sid,
            verifier: QuorumVerifier::from_config(config),
            pending_verifier: None,
            config_string: Bytes::from(config.to_config_string()),
            timings: ElectionTimings::default(),
            decide_early_when_unanimous: true,
        }
    }
}

/// Our own data at the start of an election round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerData {
    /// The zxid of the last transaction in our log.
    pub last_logged_zxid: i64,
    /// Our current epoch (`currentEpoch` file).
    pub current_epoch: i64,
}

/// A vote: a proposed leader and the data it is proposed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vote {
    /// Proposed leader sid.
    pub leader: i64,
    /// The leader's last logged zxid.
    pub zxid: i64,
    /// The election round the vote was cast in.
    pub election_epoch: i64,
    /// The leader's current epoch.
    pub peer_epoch: i64,
    /// The state of the server that cast it.
    pub state: PeerState,
    /// The notification version it came with (0 for votes recorded without one).
    pub version: i32,
}

impl Vote {
    /// The vote a LOOKING notification carries, as this round's votes record it (Apache keeps
    /// no version there).
    fn looking(n: &Notification) -> Vote {
        Vote {
            leader: n.leader,
            zxid: n.zxid,
            election_epoch: n.election_epoch,
            peer_epoch: n.peer_epoch,
            state: PeerState::Looking,
            version: 0,
        }
    }

    /// Apache's vote equality: when either vote is a LOOKING one, all of leader, zxid, election epoch
    /// and peer epoch must match; between votes of servers past the election, leader and peer epoch
    /// (only the leader when exactly one of them has a non-zero version, for rolling upgrades).
    pub fn agrees_with(&self, other: &Vote) -> bool {
        if self.state == PeerState::Looking || other.state == PeerState::Looking {
            self.leader == other.leader
                && self.zxid == other.zxid
                && self.election_epoch == other.election_epoch
                && self.peer_epoch == other.peer_epoch
        } else if (self.version > 0) ^ (other.version > 0) {
            self.leader == other.leader
        } else {
            self.leader == other.leader && self.peer_epoch == other.peer_epoch
        }
    }
}

/// What the caller must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ElectionAction {
    /// Send `notification` to server `to` on the election port (connecting first if needed).
    Send {
        /// Destination sid.
        to: i64,
        /// What to send (encode with [`Notification::encode`]).
        notification: Notification,
    },
    /// The election is over for us: follow, lead or observe `leader`. The machine stays usable to
    /// answer peers that are still looking; tell it where the server stands with
    /// [`FastLeaderElection::set_serving`] when that differs from `state` (a non-voting participant
    /// follows), and once the new epoch is established.
    Decided {
        /// The elected leader's sid.
        leader: i64,
        /// The vote that won, with the round it was decided in (ours when LOOKING peers agreed, the
        /// leader's when we joined a settled ensemble).
        vote: Vote,
        /// Our new state: LEADING, FOLLOWING or OBSERVING.
        state: PeerState,
    },
}

/// The election state machine of one server.
#[derive(Debug)]
pub struct FastLeaderElection {
    config: ElectionConfig,
    state: PeerState,
    logical_clock: i64,
    /// Our own vote at the start of the round (`i64::MIN` triple for a non-voter).
    initial: (i64, i64, i64),
    /// The vote we currently propose: (leader, zxid, peer epoch).
    proposal: (i64, i64, i64),
    /// Votes of this round by sender (Apache's `recvset`).
    round_votes: BTreeMap<i64, Vote>,
    /// Votes of servers past the election (Apache's `outofelection`).
    settled_votes: BTreeMap<i64, Vote>,
    /// Peers the caller knows to be down (their election port refuses connections).
    peers_down: std::collections::BTreeSet<i64>,
    /// The highest election round heard from each peer, in any notification, across every
    /// election of this machine: the next election starts past all of them.
    peer_rounds: BTreeMap<i64, i64>,
    /// The round the current (or last) election started in.
    start_round: i64,
    /// Peers asked again for their vote in this election, with the epoch that made us ask.
    reasked: BTreeMap<i64, i64>,
    /// Non-voters that asked since our last decision (looking, while we looked or while we still
    /// followed a leader about to be lost): told our next decision when it is taken.
    waiting_non_voters: std::collections::BTreeSet<i64>,
    /// The last decided vote (initially our own), what we answer with once out of the election.
    current_vote: Vote,
    notification_interval_ms: u64,
    /// When `handle_timeout` has work to do, while looking.
    deadline_ms: Option<u64>,
    /// A quorum agrees with us and we are in the finalize wait.
    finalizing: bool,
    actions: VecDeque<ElectionAction>,
    /// Our notifications to ourselves, processed like any other (Apache loops them back).
    loopback: VecDeque<Notification>,
}

impl FastLeaderElection {
    /// A machine that starts looking at once (round 1): it proposes itself (or nothing, as a
    /// non-voter) and queues its notifications to every voter.
    pub fn new(config: ElectionConfig, data: PeerData, now_ms: u64) -> FastLeaderElection {
        let my_sid = config.my_sid;
        let mut fle = FastLeaderElection {
            config,
            state: PeerState::Looking,
            logical_clock: 0,
            initial: (i64::MIN, i64::MIN, i64::MIN),
            proposal: (i64::MIN, i64::MIN, i64::MIN),
            round_votes: BTreeMap::new(),
            settled_votes: BTreeMap::new(),
            current_vote: Vote {
                leader: my_sid,
                zxid: data.last_logged_zxid,
                election_epoch: 0,
                peer_epoch: data.current_epoch,
                state: PeerState::Looking,
                version: 0,
            },
            notification_interval_ms: 0,
            deadline_ms: None,
            finalizing: false,
            peers_down: std::collections::BTreeSet::new(),
            peer_rounds: BTreeMap::new(),
            start_round: 0,
            waiting_non_voters: std::collections::BTreeSet::new(),
            reasked: BTreeMap::new(),
            actions: VecDeque::new(),
            loopback: VecDeque::new(),
        };
        fle.start_election(data, now_ms);
        fle
    }

    /// Starts the next election on this machine (after leading or following, after losing the
    /// leader, or to retry): the round moves past every round heard so far (ours and every peer's),
    /// collected votes are dropped, we propose our own initial vote again and broadcast it. Keep
    /// one machine for the life of the process and call this for each election: a new machine
    /// starts from round 1 and cannot tell a vote left over from an earlier election from a fresh
    /// one.
    pub fn start_election(&mut self, data: PeerData, now_ms: u64) {
        self.start_election_voting(data, None, now_ms);
    }

    /// As [`Self::start_election`], but this round's first vote is `candidate` (leader, its last
    /// zxid, its epoch) instead of our own: a leader that handed over to a successor holding the
    /// highest zxid names it at once. The bias lasts this round only: the next election (if the
    /// candidate cannot be reached or elected) starts from our own vote again, so a successor that
    /// died cannot hold the ensemble. A candidate that is not a voter is ignored.
    pub fn start_election_for(&mut self, data: PeerData, candidate: (i64, i64, i64), now_ms: u64) {
        self.start_election_voting(data, Some(candidate), now_ms);
    }

    fn start_election_voting(&mut self, data: PeerData, candidate: Option<(i64, i64, i64)>, now_ms: u64) {
        self.state = PeerState::Looking;
        let heard = self.peer_rounds.values().copied().max().unwrap_or(0);
        self.logical_clock = self.logical_clock.max(heard).saturating_add(1);
        self.start_round = self.logical_clock;
        self.reasked.clear();
        self.round_votes.clear();
        self.settled_votes.clear();
        self.finalizing = false;
        self.loopback.clear();
        // Only the current configuration makes us a candidate, as Apache's initial vote.
        self.initial = if self.config.verifier.is_voter(self.config.my_sid) {
            (self.config.my_sid, data.last_logged_zxid, data.current_epoch)
        } else {
            (i64::MIN, i64::MIN, i64::MIN)
        };
        self.proposal = match candidate {
            Some(c) if self.config.verifier.is_voter(c.0) && self.config.verifier.weight(c.0) > 0 => c,
            _ => self.initial,
        };
        self.notification_interval_ms = self.config.timings.min_notification_interval_ms;
        tracing::info!(
            sid = self.config.my_sid,
            round = self.logical_clock,
            vote = self.proposal.0,
            "looking for a leader"
        );
        self.broadcast();
        self.deadline_ms = Some(now_ms.saturating_add(self.notification_interval_ms));
        self.drain_loopback(now_ms);
    }

    /// Handles a notification from `from_sid` (decode it with [`Notification::decode`]; skip what
    /// does not decode, as Apache does).
    pub fn handle_notification(&mut self, from_sid: i64, n: Notification, now_ms: u64) {
        self.receive(from_sid, n, now_ms);
        self.drain_loopback(now_ms);
    }

    /// Tells the machine the time; acts if a deadline from [`Self::poll_timeout`] has passed:
    /// ends the finalize wait with a decision, or re-sends our vote after silence and doubles the
    /// interval.
    pub fn handle_timeout(&mut self, now_ms: u64) {
        let Some(deadline) = self.deadline_ms else { return };
        if self.state != PeerState::Looking || now_ms < deadline {
            return;
        }
        if self.finalizing {
            let (leader, zxid, peer_epoch) = self.proposal;
            let vote = self.vote_of_round(leader, zxid, peer_epoch);
            self.decide(vote);
        } else {
            tracing::debug!(
                sid = self.config.my_sid,
                interval_ms = self.notification_interval_ms,
                "no notifications; re-sending"
            );
            self.broadcast();
            self.notification_interval_ms = self
                .notification_interval_ms
                .saturating_mul(2)
                .min(self.config.timings.max_notification_interval_ms)
                .max(1);
            self.deadline_ms = Some(now_ms.saturating_add(self.notification_interval_ms));
            self.drain_loopback(now_ms);
        }
    }

    /// When to call [`Self::handle_timeout`] next; `None` once decided (nothing is timed then).
    pub fn poll_timeout(&self) -> Option<u64> {
        if self.state == PeerState::Looking {
            self.deadline_ms
        } else {
            None
        }
    }

    /// The next thing to do, in the order decided.
    pub fn poll_action(&mut self) -> Option<ElectionAction> {
        self.actions.pop_front()
    }

    /// Our state: LOOKING until decided, then the decided state or the one [`Self::set_serving`]
    /// gave.
    pub fn state(&self) -> PeerState {
        self.state
    }

    /// The current election round.
    pub fn logical_clock(&self) -> i64 {
        self.logical_clock
    }

    /// The vote we propose in this round (meaningful while looking).
    pub fn proposal(&self) -> Vote {
        let (leader, zxid, peer_epoch) = self.proposal;
        self.vote_of_round(leader, zxid, peer_epoch)
    }

    /// The last decided vote (our own initial vote before the first decision).
    pub fn current_vote(&self) -> Vote {
        self.current_vote
    }

    /// The configuration the machine runs with.
    pub fn config(&self) -> &ElectionConfig {
        &self.config
    }

    /// Replaces the configuration (a reconfiguration came into force, a pending one appeared or
    /// went) and keeps the logical clock and what was heard of the peers. An election under way
    /// goes on with the votes it has under the new rules; Apache restarts it, which a caller does
    /// with [`Self::start_election`] right after.
    ///
    /// Panics if `config` is another server's (a different `my_sid`): a caller bug.
    pub fn set_config(&mut self, config: ElectionConfig) {
        assert_eq!(config.my_sid, self.config.my_sid, "an election machine serves one server");
        self.config = config;
    }

    /// The server's place now, past the election: LEADING, FOLLOWING or OBSERVING `leader`, with
    /// `peer_epoch` the leader's epoch as this server knows it (the decided vote's until the new
    /// epoch is established, then the new epoch: ZOOKEEPER-1732, so that every member answers a
    /// newcomer with the same vote). LOOKING peers are answered with this state and leader, the
    /// decided vote's zxid and round, as Apache's receiver answers from its current vote.
    ///
    /// A server that learns its leader without an election (a reconfiguration designated one)
    /// calls this while looking, or with a leader other than the decided one: the election under
    /// way ends without a [`ElectionAction::Decided`], and the vote answered names `leader` with
    /// zxid and round -1 (Apache's vote for a designated leader carries no round either).
    ///
    /// Panics if `state` is LOOKING (call [`Self::start_election`]): a caller bug.
    pub fn set_serving(&mut self, state: PeerState, leader: i64, peer_epoch: i64) {
        assert_ne!(state, PeerState::Looking, "set_serving is for a server past its election");
        if self.state == PeerState::Looking || leader != self.current_vote.leader {
            self.current_vote = Vote {
                leader,
                zxid: -1,
                election_epoch: -1,
                peer_epoch,
                state: PeerState::Looking,
                version: 0,
            };
        } else {
            self.current_vote.peer_epoch = peer_epoch;
        }
        self.end_election(state);
    }

    /// Ends the election under way (if any): nothing is timed or collected any more.
    fn end_election(&mut self, state: PeerState) {
        self.state = state;
        self.finalizing = false;
        self.deadline_ms = None;
        self.round_votes.clear();
        self.settled_votes.clear();
        self.loopback.clear();
    }

    /// The round the current (or last) election started in: past every round heard before it.
    pub fn start_round(&self) -> i64 {
        self.start_round
    }

    /// A voter of the current or the pending configuration (Apache's `validVoter`).
    fn is_voter(&self, sid: i64) -> bool {
        self.config.verifier.is_voter(sid)
            || self.config.pending_verifier.as_ref().is_some_and(|p| p.is_voter(sid))
    }

    /// Voters of the current and the pending configuration.
    fn all_voters(&self) -> Vec<i64> {
        let mut voters: Vec<i64> = self.config.verifier.voters().iter().copied().collect();
        if let Some(p) = &self.config.pending_verifier {
            voters.extend(p.voters().iter().copied());
            voters.sort_unstable();
            voters.dedup();
        }
        voters
    }

    /// A quorum in the current configuration, and in the pending one if any.
    fn is_quorum(&self, acks: &[i64]) -> bool {
        self.config.verifier.contains_quorum(acks.iter().copied())
            && self.config.pending_verifier.as_ref().is_none_or(|p| p.contains_quorum(acks.iter().copied()))
    }

    fn vote_of_round(&self, leader: i64, zxid: i64, peer_epoch: i64) -> Vote {
        Vote {
            leader,
            zxid,
            election_epoch: self.logical_clock,
            peer_epoch,
            state: PeerState::Looking,
            version: 0,
        }
    }

    /// Apache's `totalOrderPredicate`: is `new` a better vote than `current`?
    fn is_better(&self, new: (i64, i64, i64), current: (i64, i64, i64)) -> bool {
        if self.config.verifier.weight(new.0) == 0 {
            return false;
        }
        (new.2, new.1, new.0) > (current.2, current.1, current.0)
    }

    fn notification(&self, vote: (i64, i64, i64), election_epoch: i64, state: PeerState) -> Notification {
        Notification {
            state,
            leader: vote.0,
            zxid: vote.1,
            election_epoch,
            peer_epoch: vote.2,
            version: crate::wire::notification::NOTIFICATION_VERSION,
            config: Some(self.config.config_string.clone()),
        }
    }

    fn send(&mut self, to: i64, notification: Notification) {
        self.actions.push_back(ElectionAction::Send { to, notification });
    }

    /// Our proposal to every voter; the copy to ourselves is looped back.
    fn broadcast(&mut self) {
        let n = self.notification(self.proposal, self.logical_clock, PeerState::Looking);
        for sid in self.all_voters() {
            if sid == self.config.my_sid {
                self.loopback.push_back(n.clone());
            } else {
                self.send(sid, n.clone());
            }
        }
    }

    fn drain_loopback(&mut self, now_ms: u64) {
        while let Some(n) = self.loopback.pop_front() {
            self.receive(self.config.my_sid, n, now_ms);
        }
    }

    /// Apache's receiver thread: answers peers that need an answer, passes the rest to the election.
    fn receive(&mut self, from_sid: i64, n: Notification, now_ms: u64) {
        if from_sid != self.config.my_sid {
            let heard = self.peer_rounds.entry(from_sid).or_insert(i64::MIN);
            *heard = (*heard).max(n.election_epoch);
        }
        if !self.is_voter(from_sid) {
            // A non-voter gets our vote right away and is never counted. While looking, that is
            // the vote we hold in this round (zkrs; Apache sends its last decided vote, which
            // names the leader just lost, and the observer follows it until it gives up).
            if n.state == PeerState::Looking {
                self.waiting_non_voters.insert(from_sid);
            }
            let reply = if self.state == PeerState::Looking {
                self.notification(self.proposal, self.logical_clock, PeerState::Looking)
            } else {
                let c = self.current_vote;
                self.notification((c.leader, c.zxid, c.peer_epoch), self.logical_clock, self.state)
            };
            self.send(from_sid, reply);
            return;
        }
        if self.state == PeerState::Looking {
            if n.state == PeerState::Looking && n.election_epoch < self.logical_clock {
                let reply = self.notification(self.proposal, self.logical_clock, PeerState::Looking);
                self.send(from_sid, reply);
            }
            self.look(from_sid, n, now_ms);
        } else if n.state == PeerState::Looking {
            let c = self.current_vote;
            let reply = self.notification((c.leader, c.zxid, c.peer_epoch), c.election_epoch, self.state);
            self.send(from_sid, reply);
        }
    }

    /// One step of Apache's `lookForLeader` loop for a notification from a voter.
    fn look(&mut self, from_sid: i64, n: Notification, now_ms: u64) {
        let offered = (n.leader, n.zxid, n.peer_epoch);
        if self.finalizing {
            let newer_round = n.state == PeerState::Looking && n.election_epoch > self.logical_clock;
            if !newer_round && !self.is_better(offered, self.proposal) {
                if n.state == PeerState::Looking
                    && n.election_epoch == self.logical_clock
                    && self.is_better(self.proposal, offered)
                {
                    self.answer_worse_vote(from_sid);
                }
                // Apache consumes and drops it, and waits the full finalize time again. We only look
                // at it first for the unanimity speed-up: a vote equal to ours joins the round's votes.
                if self.records_agreement(from_sid, &n) && self.decide_if_unanimous() {
                    return;
                }
                self.deadline_ms = Some(now_ms.saturating_add(self.config.timings.finalize_wait_ms));
                return;
            }
            self.finalizing = false;
        }
        // Any notification restarts the silence interval, as Apache's poll returns on it.
        self.deadline_ms = Some(now_ms.saturating_add(self.notification_interval_ms));
        if !self.is_voter(n.leader) {
            tracing::debug!(from_sid, leader = n.leader, "ignoring a vote for a non-voter");
            return;
        }
        match n.state {
            PeerState::Looking => self.look_at_looking_vote(from_sid, &n, now_ms),
            PeerState::Observing => {}
            PeerState::Following | PeerState::Leading => self.look_at_settled_vote(from_sid, &n),
        }
    }

    fn look_at_looking_vote(&mut self, from_sid: i64, n: &Notification, now_ms: u64) {
        if self.initial.1 == -1 || n.zxid == -1 {
            // A server that has not loaded its data (zxid -1) takes no part.
            return;
        }
        let offered = (n.leader, n.zxid, n.peer_epoch);
        if n.election_epoch > self.logical_clock {
            self.logical_clock = n.election_epoch;
            self.round_votes.clear();
            self.proposal = if self.is_better(offered, self.initial) { offered } else { self.initial };
            self.broadcast();
        } else if n.election_epoch < self.logical_clock {
            return;
        } else if self.is_better(offered, self.proposal) {
            self.proposal = offered;
            self.broadcast();
        } else if self.is_better(self.proposal, offered) {
            self.answer_worse_vote(from_sid);
        }
        self.round_votes.insert(from_sid, Vote::looking(n));
        let mine = self.proposal();
        let agreeing: Vec<i64> =
            self.round_votes.iter().filter(|(_, v)| v.agrees_with(&mine)).map(|(sid, _)| *sid).collect();
        if !self.is_quorum(&agreeing) {
            return;
        }
        if !self.decide_if_unanimous() {
            self.finalizing = true;
            self.deadline_ms = Some(now_ms.saturating_add(self.config.timings.finalize_wait_ms));
        }
    }

    /// zkrs's second deviation (messages only): a LOOKING peer of this round that proposes a vote
    /// worse than ours gets ours back at once. Apache sends nothing then, and the peer learns our
    /// vote only when our silence timer re-sends it (200 ms); a peer that started looking a moment
    /// after us (it lost the leader later) would otherwise wait that long. Our vote is current, so
    /// this only brings forward a message Apache would send later.
    fn answer_worse_vote(&mut self, to: i64) {
        if to == self.config.my_sid {
            return;
        }
        let reply = self.notification(self.proposal, self.logical_clock, PeerState::Looking);
        self.send(to, reply);
    }

    /// During the finalize wait: if `n` is a LOOKING vote of this round equal to ours, records it and
    /// returns true. (Apache drops it; recording cannot change the outcome, since only a better vote
    /// can end the wait and a vote equal to a worse proposal never agrees with a better one.)
    fn records_agreement(&mut self, from_sid: i64, n: &Notification) -> bool {
        if n.state != PeerState::Looking || n.election_epoch != self.logical_clock || n.zxid == -1 {
            return false;
        }
        let vote = Vote::looking(n);
        if !vote.agrees_with(&self.proposal()) {
            return false;
        }
        self.round_votes.insert(from_sid, vote);
        true
    }

    /// Tells the machine which peers are down (connections to their election port refused), for
    /// the early decision (see the module docs). While it waits to finalize, a change may let it
    /// decide at once.
    pub fn set_peers_down(&mut self, down: std::collections::BTreeSet<i64>) {
        if down == self.peers_down {
            return;
        }
        self.peers_down = down;
        if self.state == PeerState::Looking && self.finalizing {
            let _ = self.decide_if_unanimous();
        }
    }

    /// zkrs' speed-up: decides at once when the vote of this round of every voter that is not
    /// known to be down equals ours, and those voters are a quorum.
    fn decide_if_unanimous(&mut self) -> bool {
        if !self.config.decide_early_when_unanimous {
            return false;
        }
        let mine = self.proposal();
        let live: Vec<i64> = self
            .all_voters()
            .into_iter()
            .filter(|v| *v == self.config.my_sid || !self.peers_down.contains(v))
            .collect();
        let unanimous = self.is_quorum(&live)
            && live.iter().all(|v| self.round_votes.get(v).is_some_and(|vote| vote.agrees_with(&mine)));
        if unanimous {
            self.decide(mine);
        }
        unanimous
    }

    fn look_at_settled_vote(&mut self, from_sid: i64, n: &Notification) {
        let theirs = Vote {
            leader: n.leader,
            zxid: n.zxid,
            election_epoch: n.election_epoch,
            peer_epoch: n.peer_epoch,
            state: n.state,
            version: n.version,
        };
        if n.election_epoch == self.logical_clock {
            // Apache records these in the round's votes without the version.
            self.round_votes.insert(from_sid, Vote { version: 0, ..theirs });
            if self.has_settled_quorum(&self.round_votes, &theirs) {
                self.decide(Vote { state: PeerState::Looking, version: 0, ..theirs });
                return;
            }
        }
        self.settled_votes.insert(from_sid, theirs);
        self.reask_older_epochs(&theirs);
        if self.has_settled_quorum(&self.settled_votes, &theirs) {
            // The decided vote carries the leader's round (what we answer newcomers with, as
            // Apache); our clock never goes back, so our next election's round is one nobody used.
            self.logical_clock = self.logical_clock.max(n.election_epoch);
            self.decide(Vote { state: PeerState::Looking, version: 0, ..theirs });
        }
    }

    /// ZOOKEEPER-1732 moves a settled server's vote to the new epoch once it is established there,
    /// so answers collected around that moment disagree on the epoch of one leader and no quorum
    /// of them agrees. Peers whose recorded vote names `theirs`'s leader with an older epoch are
    /// asked again at once (they answer with their vote as it is now), rather than at our next
    /// re-send, up to a doubling interval later (zkrs; Apache waits for the re-send).
    fn reask_older_epochs(&mut self, theirs: &Vote) {
        let older: Vec<i64> = self
            .settled_votes
            .iter()
            .chain(self.round_votes.iter())
            .filter(|(_, v)| v.leader == theirs.leader && v.peer_epoch < theirs.peer_epoch)
            .map(|(sid, _)| *sid)
            .filter(|sid| *sid != self.config.my_sid)
            .collect();
        for sid in older {
            // Once per peer and epoch: each answer that raises the epoch asks only those behind it.
            if self.reasked.get(&sid).is_some_and(|e| *e >= theirs.peer_epoch) {
                continue;
            }
            self.reasked.insert(sid, theirs.peer_epoch);
            let n = self.notification(self.proposal, self.logical_clock, PeerState::Looking);
            self.send(sid, n);
        }
    }

    /// A quorum of `votes` agrees with `vote`, and the leader it names is known to lead (or is us, in
    /// the same round).
    ///
    /// A server that votes in the pending configuration adds its own agreement to that
    /// configuration's quorum when it would follow; the configuration in force counts only the
    /// votes received (Apache's election counts only those, for both). The pending quorum may need
    /// its vote, and the only way to give it is to follow the leader and ACK:
    /// - a server that votes only in the pending configuration (a reconfiguration adds it, and the
    ///   current one gives it no vote, so its proposal is never counted): a lone voter adding it
    ///   needs both, and without this it looks for a leader forever and the reconfiguration never
    ///   commits (node simulation, seed 40239 of `reconfig`);
    /// - a voter restarted with a reconfiguration in its log its ensemble never committed (one
    ///   promoting an observer, whose OBSERVING answers count for nobody): the ensemble goes on
    ///   under the configuration in force, and without its own agreement this server never
    ///   reaches the pending quorum and never rejoins (found while writing the scenario of seed
    ///   180514; `reconfig_a_voter_restarted_with_an_uncommitted_promotion_rejoins`).
    ///
    /// Following decides nothing: the leader still needs both quorums' ACKs for NEWLEADER and
    /// every commit, and a leader is still chosen only with the votes it hears.
    fn has_settled_quorum(&self, votes: &BTreeMap<i64, Vote>, vote: &Vote) -> bool {
        let heard: Vec<i64> =
            votes.iter().filter(|(_, v)| v.agrees_with(vote)).map(|(sid, _)| *sid).collect();
        let me = self.config.my_sid;
        let pending_quorum = self.config.pending_verifier.as_ref().is_none_or(|p| {
            let mut agreeing = heard.clone();
            if vote.leader != me && p.is_voter(me) && !agreeing.contains(&me) {
                agreeing.push(me);
            }
            p.contains_quorum(agreeing.iter().copied())
        });
        if !(self.config.verifier.contains_quorum(heard.iter().copied()) && pending_quorum) {
            return false;
        }
        if vote.leader != self.config.my_sid {
            votes.get(&vote.leader).is_some_and(|v| v.state == PeerState::Leading)
        } else {
            self.logical_clock == vote.election_epoch
        }
    }

    /// Ends the election with `vote`, which carries the round it was decided in (ours for a vote
    /// of LOOKING peers, the leader's for a settled ensemble joined).
    fn decide(&mut self, vote: Vote) {
        let state = if vote.leader == self.config.my_sid {
            PeerState::Leading
        } else if self.config.verifier.is_voter(self.config.my_sid) {
            PeerState::Following
        } else {
            PeerState::Observing
        };
        tracing::info!(
            sid = self.config.my_sid,
            leader = vote.leader,
            round = self.logical_clock,
            ?state,
            "election decided"
        );
        self.current_vote = vote;
        self.end_election(state);
        self.actions.push_back(ElectionAction::Decided { leader: vote.leader, vote, state });
        for to in std::mem::take(&mut self.waiting_non_voters) {
            let reply =
                self.notification((vote.leader, vote.zxid, vote.peer_epoch), self.logical_clock, state);
            self.send(to, reply);
        }
    }
}

/// What the acceptor of an election connection does with it, given the sid the initiator sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcceptedConnection {
    /// The initiator has the larger sid: keep the connection (it replaces any older one).
    Keep,
    /// The initiator has the smaller sid: close it and dial the initiator back ourselves.
    CloseAndDialBack,
    /// The initiator claims our own sid: a configuration error; close it.
    Close,
}

/// Apache's connection rule, acceptor side: only a connection initiated by the larger sid survives.
pub fn on_accepted_connection(my_sid: i64, initiator_sid: i64) -> AcceptedConnection {
    match initiator_sid.cmp(&my_sid) {
        std::cmp::Ordering::Greater => AcceptedConnection::Keep,
        std::cmp::Ordering::Less => AcceptedConnection::CloseAndDialBack,
        std::cmp::Ordering::Equal => AcceptedConnection::Close,
    }
}

/// Apache's connection rule, initiator side: after sending the handshake, we keep the connection only
/// if our sid is the larger; otherwise we close it and the peer dials us back.
pub fn keeps_initiated_connection(my_sid: i64, acceptor_sid: i64) -> bool {
    my_sid > acceptor_sid
}

#[cfg(test)]
mod tests;
