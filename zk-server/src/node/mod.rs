//! One server as one deterministic state machine: the server core ([`ServerCore`]: clients,
//! the write path, the database) and, in an ensemble, its [`Replica`] (elections, leading or
//! learning with zk-quorum's Zab machines, reloads, configurations), composed into a [`Node`].
//!
//! The node is sans-IO like its parts. Everything it hears arrives as an [`Input`] with the time
//! ([`Now`]); everything it wants done leaves as an [`Output`], in order: frames for clients,
//! batches for the log, packets and notifications for peers, dials, epoch files, reloads, log
//! reads. The result of each one that has a result comes back as another [`Input`]. The driver
//! (`driver.rs`) carries outputs out and never decides; the simulator
//! (`zk-server/tests/node_sim`) carries the same outputs out against simulated disks and
//! networks, so a seed exercises exactly the code that runs in production.
//!
//! Within the node, the core's quorum actions (proposals, commits, forwarded requests, sync
//! answers, a step down) go to the replica, and the replica's role changes and events go to the
//! core, without leaving it: the driver sees only what touches the world.
#![deny(clippy::disallowed_methods)]

pub mod replica;

pub use replica::{
    HandoverAnswer, LeadershipAnswer, LogPosition, RecoveryAnswer, ReplicaConfig, ReplicaCounters,
    ReplicaGauges,
};

use crate::core::{Action, Event, Now, ServerCore};
use bytes::Bytes;
use replica::Replica;
use std::collections::{BTreeSet, VecDeque};
use zk_quorum::config::QuorumConfig;
use zk_quorum::wire::{Notification, QuorumPacket};
use zk_tree::Database;

/// A quorum-port connection, numbered by the node (the driver keeps the socket under that
/// number).
pub type PeerConn = u64;

/// Which epoch file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EpochFile {
    /// `acceptedEpoch`.
    Accepted,
    /// `currentEpoch`.
    Current,
}

/// What the node hears.
#[derive(Debug)]
pub enum Input {
    /// For the server core: clients' connections and requests, the snapshot thread's reports.
    /// Log reports go through the variants below, which the replica hears too.
    Core(Event),
    /// The log has every record through `zxid` durable.
    Durable {
        /// The zxid.
        zxid: i64,
    },
    /// The log could not make a batch durable.
    LogFailed {
        /// Why.
        error: zk_log::LogError,
    },
    /// The log was cut after `zxid` ([`Output::TruncateLog`]), durably.
    LogTruncated {
        /// The zxid.
        zxid: i64,
    },
    /// The log was reset to continue above `zxid` ([`Output::InstallSnapshot`]), durably.
    LogReset {
        /// The zxid.
        zxid: i64,
    },
    /// The answer to [`Output::Reload`]: the database rebuilt from the newest snapshot and the
    /// whole log on disk, where the log stands, and the log's last committed records (the
    /// newest `window` of them, as PROPOSAL data) for a leader's DIFF window.
    Reloaded {
        /// The database, or why it could not be rebuilt.
        result: Result<Box<Database>, String>,
        /// Where the log stands.
        log: LogPosition,
        /// The log's newest records, oldest first.
        recent: Vec<(i64, Bytes)>,
    },
    /// The answer to [`Output::PersistEpoch`].
    EpochWritten {
        /// Which file.
        file: EpochFile,
        /// Whether it is durable.
        result: Result<(), String>,
    },
    /// The answer to [`Output::ReadLog`].
    LogRead {
        /// The request's id.
        req: u64,
        /// What the log gave.
        read: LogRead,
    },
    /// A notification on the election port.
    Notification {
        /// The sender.
        from: i64,
        /// What it said.
        notification: Notification,
    },
    /// The peers whose election port refuses connections now.
    PeersDown(BTreeSet<i64>),
    /// A server connected to the quorum port (set up: TLS and SASL done) and is held as `conn`
    /// until [`Output::AdmitLearner`] or [`Output::ClosePeer`].
    LearnerConnected {
        /// The number the driver gave it.
        conn: PeerConn,
    },
    /// The answer to [`Output::Dial`].
    Dialed {
        /// The connection.
        conn: PeerConn,
        /// Connected and set up, or why not.
        result: Result<(), String>,
    },
    /// A packet on a quorum connection.
    Packet {
        /// The connection.
        conn: PeerConn,
        /// The packet.
        packet: QuorumPacket,
    },
    /// The snapshot stream that followed a SNAP on `conn`, loaded (by the connection's reader).
    SnapshotReceived {
        /// The connection.
        conn: PeerConn,
        /// The database it holds, or why it did not load.
        result: Result<Box<Database>, String>,
    },
    /// A quorum connection ended.
    PeerClosed {
        /// The connection.
        conn: PeerConn,
        /// Why, for the log.
        why: String,
    },
    /// Everything queued for `conn` was written ([`Output::WatchDrain`]).
    PeerDrained {
        /// The connection.
        conn: PeerConn,
    },
}

/// What the node asks for, in order.
#[derive(Debug)]
pub enum Output {
    /// A server core action that touches the world: frames for clients, log batches, snapshot
    /// jobs, purges, a stop. The core's quorum actions never appear here (the node hands them
    /// to its replica).
    Core(Action),
    /// Send a notification on the election port (newest wins per peer).
    SendNotification {
        /// To whom.
        to: i64,
        /// What.
        notification: Notification,
    },
    /// Write a packet on a quorum connection; a connection that cannot take it is closed (and
    /// reported as [`Input::PeerClosed`]).
    SendPacket {
        /// The connection.
        conn: PeerConn,
        /// The packet.
        packet: QuorumPacket,
    },
    /// Write raw bytes (the snapshot stream after SNAP) on a quorum connection.
    SendRaw {
        /// The connection.
        conn: PeerConn,
        /// The bytes.
        bytes: Bytes,
    },
    /// Report [`Input::PeerDrained`] once everything queued for `conn` has been written.
    WatchDrain {
        /// The connection.
        conn: PeerConn,
    },
    /// Start reading and writing the connection held since [`Input::LearnerConnected`].
    AdmitLearner {
        /// The connection.
        conn: PeerConn,
    },
    /// Close a quorum connection (held, admitted or dialled); no [`Input::PeerClosed`] follows.
    ClosePeer {
        /// The connection.
        conn: PeerConn,
    },
    /// Connect to `leader`'s quorum port (TLS and SASL as configured) as connection `conn`;
    /// answer with [`Input::Dialed`]. A SNAP on it is loaded by the connection's reader into a
    /// database configured as the node's own.
    Dial {
        /// The number for the connection.
        conn: PeerConn,
        /// The leader's server id.
        leader: i64,
    },
    /// Write an epoch file durably (temporary file, sync, rename, directory sync); answer with
    /// [`Input::EpochWritten`].
    PersistEpoch {
        /// Which file.
        file: EpochFile,
        /// The epoch.
        epoch: u32,
    },
    /// Rebuild the database from the newest snapshot whose digest checks out and every logged
    /// record after it; answer with [`Input::Reloaded`] carrying the newest `window` records.
    Reload {
        /// Records wanted for the DIFF window.
        window: usize,
    },
    /// Read the log for a DIFF (the anchor at or before `from`, then every record through
    /// `through`, at most `max_records`); answer with [`Input::LogRead`].
    ReadLog {
        /// The request's id, echoed.
        req: u64,
        /// The learner's last zxid.
        from: i64,
        /// The last record wanted.
        through: i64,
        /// The most records to read; past it the answer is [`LogRead::TooBig`].
        max_records: usize,
        /// The most PROPOSAL bytes after the anchor worth a DIFF; past it the answer is
        /// [`LogRead::TooBig`] (stop reading there). None: no bound.
        max_bytes: Option<u64>,
    },
    /// TRUNC: remove (durably) every snapshot taken past `after`, then cut the log after it,
    /// in order with the batches queued before; reported as [`Input::LogTruncated`]. The
    /// snapshots go first so that a crash between the two cannot bring back a cut transaction
    /// from a snapshot.
    TruncateLog {
        /// The last zxid kept.
        after: i64,
    },
    /// SNAP received: write the database (the node's, now the received one) as a snapshot
    /// file, whole and durably, then reset the log to continue above `zxid`; reported as
    /// [`Input::LogReset`]. Once the reset is durable, the snapshots past `zxid` are removed
    /// (durably): they hold a history the leader's does not continue (a learner ahead of its
    /// leader, synced by SNAP after a TRUNC below its log's start). Until then a restart takes
    /// the newest of them, as if the SNAP had not come, never a mix.
    InstallSnapshot {
        /// The snapshot's zxid.
        zxid: i64,
    },
    /// This configuration is in force: the election port's peers and the quorum addresses
    /// follow it, the client listener moves to the address it gives this server (if any), and
    /// it is written beside zoo.cfg (`zoo.cfg.dynamic.<version>`, zoo.cfg naming it).
    InstallConfig(Box<QuorumConfig>),
}

/// What a log read for a DIFF gave ([`Output::ReadLog`]).
#[derive(Debug)]
pub enum LogRead {
    /// The anchor (the last record at or before the learner's last zxid) and every record
    /// after it through the end of the range, as PROPOSAL data.
    Records(Vec<(i64, Bytes)>),
    /// The range holds more than the read allows: a snapshot is cheaper.
    TooBig,
    /// The log no longer reaches back that far (purged, or reset past it).
    Missing,
}

/// A server: its core and, in an ensemble, its replica. See the module docs.
#[derive(Debug)]
pub struct Node {
    core: ServerCore,
    replica: Option<Replica>,
    out: VecDeque<Output>,
}

impl Node {
    /// A standalone server.
    pub fn standalone(core: ServerCore) -> Node {
        Node { core, replica: None, out: VecDeque::new() }
    }

    /// An ensemble member starting at `now`: it stops serving and looks for a leader. `log`
    /// is where its log stands, `epochs` its (acceptedEpoch, currentEpoch).
    pub fn ensemble(
        core: ServerCore,
        cfg: ReplicaConfig,
        epochs: (i64, i64),
        log: LogPosition,
        now: Now,
    ) -> Node {
        let mut node = Node { core, replica: None, out: VecDeque::new() };
        let replica = Replica::start(cfg, epochs, log, node.core.database(), now);
        node.replica = Some(replica);
        node.settle(now);
        node
    }

    /// The server core (read-only).
    pub fn core(&self) -> &ServerCore {
        &self.core
    }

    /// The server core, for what the driver asks of it directly (counters it resets).
    pub fn core_mut(&mut self) -> &mut ServerCore {
        &mut self.core
    }

    /// The database (read-only).
    pub fn database(&self) -> &Database {
        self.core.database()
    }

    /// The replica, in an ensemble.
    pub fn replica(&self) -> Option<&Replica> {
        self.replica.as_ref()
    }

    /// The replica, to reset its counters (`srst`).
    pub fn replica_mut(&mut self) -> Option<&mut Replica> {
        self.replica.as_mut()
    }

    /// Handles one input.
    pub fn handle(&mut self, now: Now, input: Input) {
        match input {
            Input::Core(ev) => {
                debug_assert!(
                    matches!(
                        ev,
                        Event::Connect { .. }
                            | Event::Request { .. }
                            | Event::Closed { .. }
                            | Event::AuthFailed
                            | Event::SnapshotChunkDone { .. }
                            | Event::SnapshotDone { .. }
                            | Event::Retained { .. }
                            | Event::SnapshotThreadGone
                            | Event::SnapshotNow
                            | Event::ArchiveMoved
                            | Event::Restore { .. }
                    ),
                    "only a client's or the snapshot thread's input reaches the core unsettled: {ev:?}"
                );
                // A client's input changes nothing the replica acts on: what the core decides
                // reaches the replica through `poll_action`, which settles it, and the sessions
                // the input touched are taken before the replica's next input or timeout. No
                // settle here: reads paid for one per request (with the core's output passed
                // through the peers' dispatch, about 3% of the servers' samples under gets in an
                // ensemble; bench/RESULTS.md, 2026-11-30, seventh session).
                self.core.handle(now, ev);
                return;
            }
            Input::Durable { zxid } => {
                self.core.handle(now, Event::Durable { zxid });
                if let Some(r) = self.replica.as_mut() {
                    r.durable(zxid, now);
                }
            }
            Input::LogFailed { error } => {
                if let Some(r) = self.replica.as_mut() {
                    r.log_failed(&error);
                }
                self.core.handle(now, Event::LogFailed { error });
            }
            // Standalone, a reset is a restore's install (an ensemble's is the replica's).
            Input::LogReset { zxid } if self.replica.is_none() => {
                self.core.handle(now, Event::LogReset { zxid });
            }
            other => match self.replica.as_mut() {
                Some(r) => r.handle(now, other, &mut self.core),
                None => tracing::debug!("an ensemble input reached a standalone server; ignored: {other:?}"),
            },
        }
        self.settle(now);
    }

    /// Runs what is due at `now` (the core's timers and the replica's).
    pub fn handle_timeout(&mut self, now: Now) {
        self.core.handle_timeout(now);
        if let Some(r) = self.replica.as_mut() {
            r.handle_timeout(now, &mut self.core);
        }
        self.settle(now);
    }

    /// When [`Self::handle_timeout`] is next due, in monotonic ms (now or earlier: at once).
    pub fn poll_timeout(&self) -> Option<u64> {
        let core = self.core.poll_timeout();
        let replica = self.replica.as_ref().and_then(Replica::poll_timeout);
        match (core, replica) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The next output, in order.
    ///
    /// The core's actions are taken one at a time: quorum actions go to the replica (whose
    /// outputs queue here, in order with the core's), everything else is returned.
    pub fn poll_action(&mut self, now: Now) -> Option<Output> {
        loop {
            if let Some(o) = self.out.pop_front() {
                return Some(o);
            }
            if let Some(o) = self.replica.as_mut().and_then(Replica::poll_output) {
                return Some(o);
            }
            let Some(action) = self.core.poll_action() else {
                // Last, the proposals a learner gathered from the packets handled since the
                // previous poll, as one log batch.
                let core = &mut self.core;
                if self.replica.as_mut().is_some_and(|r| r.flush_learner_batch(core)) {
                    continue;
                }
                return None;
            };
            match self.replica.as_mut() {
                Some(r) => {
                    if let Some(a) = r.core_action(now, action, &mut self.core) {
                        return Some(Output::Core(a));
                    }
                    self.settle(now);
                }
                None => {
                    return Some(Output::Core(match action {
                        // A standalone server leaves no role for a full disk: it stops.
                        Action::StepDown { reason, .. } => Action::Stop { reason },
                        a => a,
                    }));
                }
            }
        }
    }

    /// An operator asks this server, a leader, to hand its leadership over (`ydld`, the
    /// AdminServer's `ydld`, SIGTERM): to `to`, or to its most caught-up voting follower. The
    /// replica decides and runs it (see `Replica::hand_over`); the answer says what it does.
    pub fn hand_over(&mut self, now: Now, to: Option<i64>) -> HandoverAnswer {
        let Some(r) = self.replica.as_mut() else { return HandoverAnswer::Standalone };
        let answer = r.hand_over(now, to, &mut self.core);
        self.settle(now);
        answer
    }

    /// An operator asks this server to lead (`rqld`): a follower asks its leader to hand over
    /// to it.
    pub fn request_leadership(&mut self, now: Now) -> LeadershipAnswer {
        let Some(r) = self.replica.as_mut() else { return LeadershipAnswer::Standalone };
        let answer = r.request_leadership(now, &mut self.core);
        self.settle(now);
        answer
    }

    /// An operator asks this server to recover its ensemble alone after the quorum was lost for
    /// good (`rcvr`, the AdminServer's `force_recovery`): without `token`, or with one that does
    /// not match, the answer describes what would happen and gives the token that confirms it;
    /// with it, the server becomes the only voter of a new configuration and leads alone (see
    /// [`zk_quorum::recovery`]).
    pub fn recover(&mut self, now: Now, token: Option<&str>) -> RecoveryAnswer {
        let Some(r) = self.replica.as_mut() else {
            return RecoveryAnswer::Refused("standalone: no ensemble to recover".into());
        };
        let answer = r.recover(now, token, &mut self.core);
        self.settle(now);
        answer
    }

    /// Whether a handover of this server's leadership is under way.
    pub fn handover_under_way(&self) -> bool {
        self.replica.as_ref().is_some_and(Replica::handover_under_way)
    }

    /// Whether this server leads an established epoch or follows a leader it is up to date
    /// with: the driver then takes the peers' packets that arrived together before stepping
    /// (a follower logs them as one batch). Around an election or a sync each input keeps a
    /// step of its own.
    pub fn in_broadcast(&self) -> bool {
        self.replica.as_ref().is_some_and(Replica::in_broadcast)
    }

    /// After an input: the replica's events for the core, the sessions the core's clients
    /// touched (for the leader), the synced followers (for reconfiguration).
    fn settle(&mut self, now: Now) {
        if let Some(r) = self.replica.as_mut() {
            r.settle(now, &mut self.core);
        }
    }
}
