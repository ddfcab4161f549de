//! Zab after the election: discovery, synchronisation and broadcast, as two sans-IO state machines
//! speaking Apache ZooKeeper 3.8's quorum-port packets.
//!
//! - [`Leader`] runs one connection per learner (Apache's `LearnerHandler`s) plus the leader's own
//!   phases: it fixes the new epoch once a quorum (the leader included) has sent FOLLOWERINFO, waits
//!   for a quorum of ACKEPOCHs, syncs each learner (DIFF, TRUNC or SNAP), and is established once a
//!   quorum has acknowledged NEWLEADER; then it forwards proposals, commits and pings.
//! - [`Learner`] is a follower or an observer of one leader: FOLLOWERINFO/OBSERVERINFO, ACKEPOCH,
//!   the sync stream, the NEWLEADER acknowledgement, then logging, acknowledging and committing.
//!
//! Transactions are opaque here: a proposal is a zxid and the PROPOSAL packet's data (the jute
//! TxnHeader and txn). The server around the machines owns the database, the log and the sockets; it
//! feeds events in (`handle_packet`, `durable`, `epoch_persisted`, `handle_timeout`, ...) and drains
//! actions out (`poll_action`) **in order**: an action that persists something comes before the
//! action that sends the packet depending on it, because the machines hold the send back until the
//! caller reports the write done. This "persist before send" rule is what closes the data-loss bugs
//! of ZAB-FACTS §5 (ZK-3911, -4643, -4646, -4685, -3642, -2832): see [`Learner`] for the order at
//! NEWLEADER.
//!
//! Malformed or out-of-phase input never panics: the connection it came on is closed (one
//! `tracing::warn` line) and the machine keeps its role.
//!
//! What the server must keep true around the machines (the simulation in `tests/zab_sim.rs` models
//! exactly this):
//! - at the start of each role (after an election) its database holds every record of its log, as
//!   Apache's reload does: a DIFF sync treats the learner's log, not only what it applied, as its
//!   history;
//! - when a role ends, pending log and epoch writes are finished (or, for a snapshot being
//!   installed, finished or dropped whole) before [`LocalState`] is read for the next one;
//! - a crash between the synced records and `currentEpoch` (the order ZK-4643 requires) can leave
//!   `currentEpoch` below the epoch of the last logged zxid when the sync carried records of an
//!   epoch the server never joined: Apache 3.8 refuses to start then; starting with the lower
//!   epoch only ranks the server lower in elections, which is safe. `acceptedEpoch` always covers
//!   every logged record.
//!
//! Two deliberate departures from Apache, both invisible on the wire: a leader steps down when a
//! learner has accepted a later epoch than the one it leads (Apache sends such a learner back to the
//! election forever, so it never rejoins until the leader fails); and a learner holds live traffic
//! that arrives between NEWLEADER and its NEWLEADER ACK, so that no record of the new epoch reaches
//! its log before `currentEpoch` does.

mod leader;
mod learner;
#[cfg(test)]
mod tests;

pub use leader::{Leader, LeaderAction, LearnerCounts};
pub use learner::{Learner, LearnerAction};

use bytes::Bytes;

use crate::quorum::QuorumVerifier;

/// A quorum-port TCP connection, in the server's numbering.
pub type ConnId = u64;

/// What both machines need to know about the ensemble and their timing.
#[derive(Debug, Clone)]
pub struct ZabConfig {
    /// Our server id.
    pub my_sid: i64,
    /// Who votes and what a quorum is.
    pub verifier: QuorumVerifier,
    /// Apache's `tickTime`, in milliseconds.
    pub tick_ms: u64,
    /// Apache's `initLimit`, in ticks: each discovery and sync wait, and a learner's silence before
    /// it is up to date.
    pub init_limit: u64,
    /// Apache's `syncLimit`, in ticks: how long a synced peer may stay silent.
    pub sync_limit: u64,
    /// The data of NEWLEADER: the quorum config string (`version=0` unless reconfig is on).
    pub config_string: Bytes,
    /// How many of the latest committed proposals the leader keeps in memory to sync learners by
    /// DIFF (Apache's `commitLogCount`, 500).
    pub committed_log_max: usize,
    /// `reconfigEnabled`: a leader takes followers that are not voters of its configuration
    /// (servers about to be added), as non-voting followers.
    pub reconfig_enabled: bool,
    /// A configuration proposed and not known to be committed (a reconfiguration in the new
    /// leader's log): until the leader is established, every quorum (epoch, NEWLEADER) must be
    /// one of both, as Apache's leader counts its last seen configuration; `config_string` is
    /// then that configuration's, which NEWLEADER carries to the learners.
    pub pending_verifier: Option<QuorumVerifier>,
    /// Apache's `zookeeper.snapshotSizeFactor` (0.33): a leader sends a learner a snapshot rather
    /// than a DIFF from its log once the log's records for it would pass this share of the
    /// database's size ([`Leader::set_database_bytes`]). Above 1: the default; 0: no bound;
    /// negative: no DIFF from the log at all (only from the in-memory window), as in Apache.
    pub snapshot_size_factor: f64,
    /// A learner's sync goes out in pieces of at most this many PROPOSAL data bytes, each once its
    /// connection has room ([`Leader::conn_drained`]), so that no sync overflows a bounded outbox.
    pub sync_piece_bytes: u64,
    /// ... and at most this many packets.
    pub sync_piece_packets: usize,
}

impl ZabConfig {
    /// A configuration with Apache's defaults for the window (500) and an empty config string.
    pub fn new(
        my_sid: i64,
        verifier: QuorumVerifier,
        tick_ms: u64,
        init_limit: u64,
        sync_limit: u64,
    ) -> Self {
        ZabConfig {
            my_sid,
            verifier,
            tick_ms,
            init_limit,
            sync_limit,
            config_string: Bytes::new(),
            committed_log_max: DEFAULT_COMMITTED_LOG_MAX,
            reconfig_enabled: false,
            pending_verifier: None,
            snapshot_size_factor: DEFAULT_SNAPSHOT_SIZE_FACTOR,
            sync_piece_bytes: DEFAULT_SYNC_PIECE_BYTES,
            sync_piece_packets: DEFAULT_SYNC_PIECE_PACKETS,
        }
    }

    /// `initLimit * tickTime`.
    pub fn init_ms(&self) -> u64 {
        self.tick_ms.saturating_mul(self.init_limit).max(1)
    }

    /// `syncLimit * tickTime`.
    pub fn sync_ms(&self) -> u64 {
        self.tick_ms.saturating_mul(self.sync_limit).max(1)
    }
}

/// The configuration a reconfig transaction installs: the data of the SetDataTxn of a PROPOSAL
/// whose TxnHeader is of type reconfig (16). None for any other transaction, or bytes that do
/// not decode.
pub fn reconfig_data(payload: &Bytes) -> Option<Bytes> {
    use zk_proto::jute::{Jute, Reader};
    let mut r = Reader::new(payload.clone());
    let hdr = zk_proto::TxnHeader::read(&mut r).ok()?;
    if hdr.txn_type != zk_proto::OpCode::Reconfig.code() {
        return None;
    }
    zk_proto::SetDataTxn::read(&mut r).ok()?.data
}

/// Apache's `zookeeper.snapshotSizeFactor` default.
pub const DEFAULT_SNAPSHOT_SIZE_FACTOR: f64 = 0.33;

/// [`ZabConfig::sync_piece_bytes`] by default: 1 MiB.
pub const DEFAULT_SYNC_PIECE_BYTES: u64 = 1 << 20;

/// [`ZabConfig::sync_piece_packets`] by default: far below a 16,384-packet outbox.
pub const DEFAULT_SYNC_PIECE_PACKETS: usize = 1024;

/// Apache's `commitLogCount` default.
pub const DEFAULT_COMMITTED_LOG_MAX: usize = 500;

/// At most this many proposals a learner holds uncommitted, and at most this many requests it queues
/// before it is up to date; more means a broken leader or server, and the learner disconnects.
pub const MAX_LEARNER_QUEUE: usize = 1 << 20;

/// The server's durable state when Zab starts (after an election).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalState {
    /// The `acceptedEpoch` file.
    pub accepted_epoch: u32,
    /// The `currentEpoch` file.
    pub current_epoch: u32,
    /// The zxid of the last record in the log (0 for an empty history).
    pub last_logged_zxid: i64,
    /// The zxid of the oldest record the log still holds, if any: the leader can sync a learner from
    /// the log (not a snapshot) only from there on.
    pub first_logged_zxid: Option<i64>,
}

/// The epoch half of a zxid.
pub fn epoch_of(zxid: i64) -> u32 {
    (zxid >> 32) as u32
}

/// The counter half of a zxid.
pub fn counter_of(zxid: i64) -> u32 {
    zxid as u32
}

/// The zxid `epoch << 32 | counter`.
pub fn make_zxid(epoch: u32, counter: u32) -> i64 {
    (i64::from(epoch) << 32) | i64::from(counter)
}

/// The largest epoch a zxid can carry and stay positive.
pub const MAX_EPOCH: u32 = i32::MAX as u32;
