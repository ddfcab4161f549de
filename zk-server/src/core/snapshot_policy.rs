//! When to take a snapshot, how fast to write it, and the one being taken.
//!
//! The core serializes a bounded number of nodes per step between batches of writes and hands
//! each chunk to the snapshot thread (through the driver). The thread has room for
//! [`CHUNK_CREDITS`] chunks; each chunk it finishes comes back as a reusable buffer, which is
//! the credit for the next. So the core never waits on the thread and never queues without
//! bound: when the credits are spent, stepping pauses.

use rand::rngs::StdRng;
use rand::Rng;
use zk_tree::SnapshotCursor;

/// Work for the snapshot thread, in order.
#[derive(Debug)]
pub enum SnapJob {
    /// A snapshot begins.
    Begin {
        /// Its start zxid.
        zxid: i64,
        /// The most it is written at, bytes a second; 0 = no limit.
        pace: u64,
    },
    /// From now on, write the snapshot under way at most this fast, bytes a second: 0 when a
    /// quiet period begins, its pace again when writes come back, and a new pace when the log's
    /// rate has moved ([`SnapshotPolicy::repace`]). Pacing is timing only: a Pace the thread's
    /// queue has no room for is dropped, the snapshot kept.
    Pace(u64),
    /// More content.
    Chunk(Vec<u8>),
    /// The content is complete: finish the file and apply retention.
    Finish,
    /// The snapshot under way is dropped: its temporary file is removed and it is reported
    /// done and not written. The core abandons a snapshot whose database it replaced (an
    /// election's reload, a TRUNC, a SNAP): the rest of it would be read from another tree.
    Abort,
    /// Apply retention only (autopurge.purgeInterval's timer).
    Retain,
}

/// Chunks the snapshot thread holds before the core stops stepping. A chunk of
/// [`NODES_PER_STEP`] nodes of 100 bytes is about 400 KB, so the buffers out at once are a few
/// megabytes of the server's memory while a snapshot is written: enough for the thread never to
/// wait on the core (a step takes well under a millisecond, writing a chunk longer), few enough
/// not to show in the resident size (16 were 8 MiB).
pub const CHUNK_CREDITS: usize = 4;

/// A snapshot an operator asked for is written at least fast enough to be done in about this
/// many seconds if it is the size of the last one (the AdminServer's `snapshot` waits for it at
/// most 600 s; at the 10 MB/s floor a tree of several gigabytes would take longer).
pub const REQUESTED_WITHIN_SECS: u64 = 120;

/// Nodes the core serializes per step: small enough that a step never shows in write latency.
pub const NODES_PER_STEP: usize = 2_000;

/// While a paced snapshot is written, its pace is reckoned again from the log's rate over about
/// this many ms ([`SnapshotPolicy::repace`]).
pub const REPACE_MS: u64 = 2_000;

/// The snapshot settings in force.
#[derive(Debug, Clone, Copy)]
pub struct SnapshotSettings {
    /// Take a snapshot about every this many transactions (snapCount).
    pub snap_count: u64,
    /// ... or once about this many log bytes were written (snapSizeLimitInKb); 0 = off.
    pub snap_size_bytes: u64,
    /// Slowest pace a snapshot is written at, bytes a second; 0 = no limit.
    pub pace_floor: u64,
    /// Take a snapshot once no transaction has been applied for this long, ms, when the log
    /// since the last one is worth it ([`SnapshotPolicy::idle_deadline`]); 0 = off.
    pub idle_ms: u64,
    /// Nodes serialized per step ([`NODES_PER_STEP`] unless a test wants snapshots of small
    /// trees to take many steps).
    pub nodes_per_step: usize,
}

/// Snapshot state of the core.
#[derive(Debug)]
pub struct SnapshotPolicy {
    settings: SnapshotSettings,
    /// The snapshot being stepped, if any.
    pub cursor: Option<SnapshotCursor>,
    /// A snapshot serialized whole, to be finished once the log is durable through this zxid
    /// (what its content reflects).
    pub finish_after: Option<i64>,
    /// A snapshot is being taken or written (until the thread reports it done).
    pub busy: bool,
    /// Buffers the thread is done with, for the next chunks.
    pub buffers: Vec<Vec<u8>>,
    /// Transactions applied since the last snapshot started.
    pub since: u64,
    threshold: u64,
    /// Log bytes handed to the log since the last snapshot started.
    pub bytes_since: u64,
    /// When the last snapshot started (ms, monotonic; the core's start before the first).
    pub since_ms: u64,
    size_threshold: u64,
    /// Bytes serialized so far for the snapshot being taken.
    pub taking_bytes: u64,
    /// Size of the last snapshot taken (its content bytes).
    pub last_bytes: u64,
    /// When the last transaction was applied (ms, monotonic; the core's start before the first).
    pub last_txn_ms: u64,
    /// The snapshot under way is written unpaced for a quiet period (it began in one, or one
    /// came while it was written); the first transaction applied meanwhile paces it again.
    pub unpaced_idle: bool,
    /// The pace of the snapshot under way while writes come, bytes a second (0 = no limit).
    pub pace: u64,
    /// An operator asked for a snapshot now (`csnp`, the AdminServer's `snapshot`): the next
    /// one starts at the next step, whatever the thresholds say.
    requested: bool,
    /// The start zxid of the snapshot being taken or written, until the thread reports it done.
    taking_zxid: Option<i64>,
    /// The start zxid of the last snapshot this server wrote since it started.
    last_written: Option<i64>,
    /// When the last snapshot started (ms, monotonic), if one has since the server started.
    last_started_ms: Option<u64>,
    /// The snapshot under way was asked for by an operator (its pace keeps the floor
    /// [`REQUESTED_WITHIN_SECS`] gives it).
    asked: bool,
    /// Where the log's rate is being measured from for [`SnapshotPolicy::repace`]: when, and
    /// `bytes_since` then.
    window: (u64, u64),
    /// Chunks handed to the thread, and chunks it has handed back (never more than were
    /// handed), since the server started; the difference is the chunks with the thread, which
    /// takes its jobs in order.
    chunks_sent: u64,
    chunks_done: u64,
    /// `chunks_sent` when the last new pace was handed over: that job is still queued until
    /// the thread has handed back the chunk after it.
    repaced_at: Option<u64>,
}

/// What became of an operator's request ([`SnapshotPolicy::request`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requested {
    /// Taken: the snapshot starts at the next step.
    Accepted,
    /// The snapshot at this start zxid is under way: it stands for the request.
    UnderWay(i64),
    /// The last snapshot started less than the minimum interval ago: none is started.
    TooSoon,
}

/// Where the snapshots stand, for an operator's request ([`SnapshotPolicy::status`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotStatus {
    /// The start zxid of the snapshot being taken or written, if one is.
    pub under_way: Option<i64>,
    /// The start zxid of the last snapshot written since the server started, if any.
    pub last_written: Option<i64>,
}

impl SnapshotPolicy {
    /// The policy at start, at `now_ms`; with `now`, the first snapshot is due at once (after a
    /// start that replayed the log, so the next start is fast).
    pub fn new(settings: SnapshotSettings, now: bool, now_ms: u64, rng: &mut StdRng) -> SnapshotPolicy {
        let snap_count = settings.snap_count.max(2);
        SnapshotPolicy {
            settings: SnapshotSettings { snap_count, ..settings },
            cursor: None,
            finish_after: None,
            busy: false,
            buffers: Vec::new(),
            since: 0,
            threshold: if now { 0 } else { roll(snap_count, rng) },
            bytes_since: 0,
            since_ms: now_ms,
            size_threshold: roll_size(settings.snap_size_bytes, rng),
            taking_bytes: 0,
            last_bytes: 0,
            last_txn_ms: now_ms,
            unpaced_idle: false,
            pace: 0,
            requested: false,
            taking_zxid: None,
            last_written: None,
            last_started_ms: None,
            asked: false,
            window: (now_ms, 0),
            chunks_sent: 0,
            chunks_done: 0,
            repaced_at: None,
        }
    }

    /// Asks, at `now_ms`, for a snapshot at the next step, unless one is under way (that one is
    /// the answer) or the last one started less than `min_interval_ms` ago: each one serializes
    /// and syncs the whole tree and lets retention purge the log, so requests in a loop would
    /// keep the disk busy and shrink the log a leader syncs its learners from.
    pub fn request(&mut self, now_ms: u64, min_interval_ms: u64) -> Requested {
        if let Some(zxid) = self.taking_zxid {
            return Requested::UnderWay(zxid);
        }
        if self.last_started_ms.is_some_and(|at| now_ms.saturating_sub(at) < min_interval_ms) {
            return Requested::TooSoon;
        }
        self.requested = true;
        Requested::Accepted
    }

    /// The snapshot under way and the last one written.
    pub fn status(&self) -> SnapshotStatus {
        SnapshotStatus { under_way: self.taking_zxid, last_written: self.last_written }
    }

    /// Nodes serialized per step.
    pub fn nodes_per_step(&self) -> usize {
        self.settings.nodes_per_step.max(1)
    }

    /// Whether the core should step now (a snapshot is under way and the thread has room).
    pub fn can_step(&self) -> bool {
        self.cursor.is_some() && self.chunks_sent - self.chunks_done < CHUNK_CREDITS as u64
    }

    /// A chunk goes to the thread.
    pub fn chunk_sent(&mut self) {
        self.chunks_sent += 1;
    }

    /// The thread handed a chunk back (its buffer, for the next).
    pub fn chunk_done(&mut self, buffer: Vec<u8>) {
        self.chunks_done = (self.chunks_done + 1).min(self.chunks_sent);
        if self.buffers.len() < CHUNK_CREDITS {
            self.buffers.push(buffer);
        }
    }

    /// The pace of the paced snapshot under way, reckoned again at `now_ms` from the log's
    /// rate over the last [`REPACE_MS`] or more, when it rose by more than a sixteenth or fell
    /// by more than a quarter: the caller hands it to the thread. A snapshot begun in a burst
    /// of writes (a bulk load) was paced for that burst, and kept that pace after it, its disk
    /// traffic showing in every sync of the lighter load that followed (at 10,000,000 znodes,
    /// p99 of 60,000 setData a second 2.5 to 3.2 times that of the seconds without a snapshot;
    /// 1.3 to 1.8 times re-paced, bench/RESULTS.md); one begun in a lull fell behind a burst. Paced at twice the log's rate all along, a snapshot is still done about
    /// when the log since it began holds half a snapshot, which is what bounds a restart's
    /// replay ([`SnapshotPolicy::due`]); the pace is raised on a small rise and lowered only on
    /// a large fall, so it never stays much below twice the log's rate.
    ///
    /// None while unpaced (no floor, or written unpaced in a quiet period) and while the last
    /// new pace this gave is still queued: at most one of these is in the thread's queue at a
    /// time.
    pub fn repace(&mut self, now_ms: u64) -> Option<u64> {
        if self.cursor.is_none() || self.pace == 0 || self.unpaced_idle {
            return None;
        }
        if self.repaced_at.is_some_and(|sent| self.chunks_done <= sent) {
            return None;
        }
        let (from_ms, from_bytes) = self.window;
        let elapsed_ms = now_ms.saturating_sub(from_ms);
        if elapsed_ms < REPACE_MS {
            return None;
        }
        self.window = (now_ms, self.bytes_since);
        let mut new = pace(self.settings.pace_floor, self.bytes_since.saturating_sub(from_bytes), elapsed_ms);
        if self.asked {
            new = new.max(self.last_bytes / REQUESTED_WITHIN_SECS);
        }
        let moved =
            if new > self.pace { new - self.pace > self.pace / 16 } else { self.pace - new > self.pace / 4 };
        if !moved {
            return None;
        }
        self.pace = new;
        self.repaced_at = Some(self.chunks_sent);
        Some(new)
    }

    /// Whether a new snapshot should start: enough transactions or log bytes since the last.
    /// Either trigger waits, too, until the log written since the last snapshot is at least half
    /// that snapshot's size: with a large tree, snapCount alone would write a whole tree every
    /// few megabytes of log, and that disk traffic is what every commit's sync waits behind.
    /// Replay at start-up then covers at most about half a snapshot's worth of log.
    /// A snapshot an operator asked for ([`SnapshotPolicy::request`]) is due at once.
    pub fn due(&self) -> bool {
        !self.busy
            && self.cursor.is_none()
            && self.finish_after.is_none()
            && (self.requested
                || ((self.since >= self.threshold || self.bytes_since >= self.size_threshold)
                    && self.bytes_since >= self.last_bytes / 2))
    }

    /// When a quiet period (no transaction applied for `idle_ms`) acts, in ms on the monotonic
    /// clock, if it would: with a paced snapshot under way, it is written unpaced from then on
    /// (there are no syncs for it to slow down); with none, one starts if the log since the last
    /// snapshot holds at least a tenth of snapCount transactions and a sixteenth of that
    /// snapshot's bytes. A restart replays that log after loading the snapshot; a snapshot taken
    /// once the writes have stopped means it replays nothing, and costs one snapshot's writing
    /// per burst of writes.
    pub fn idle_deadline(&self) -> Option<u64> {
        if self.settings.idle_ms == 0 {
            return None;
        }
        let at = self.last_txn_ms.saturating_add(self.settings.idle_ms);
        if self.busy {
            return (!self.unpaced_idle && self.pace != 0).then_some(at);
        }
        let worth =
            self.since >= (self.settings.snap_count / 10).max(1) && self.bytes_since >= self.last_bytes / 16;
        (self.cursor.is_none() && worth).then_some(at)
    }

    /// A transaction was applied at `now_ms`. When that ends the quiet period of a snapshot
    /// being written unpaced, returns the pace the caller gives it again; the log's rate is
    /// measured afresh from then ([`SnapshotPolicy::repace`]), not over the quiet period.
    pub fn applied(&mut self, now_ms: u64) -> Option<u64> {
        self.since += 1;
        self.last_txn_ms = now_ms;
        let resumed = std::mem::take(&mut self.unpaced_idle);
        if resumed {
            self.window = (now_ms, self.bytes_since);
        }
        resumed.then_some(self.pace)
    }

    /// A snapshot starts at `now_ms`: returns its pace, and rolls the next thresholds. One
    /// started by a quiet period (`idle`) is written as fast as the disk takes it: there are no
    /// syncs for it to hold up, until a transaction comes ([`SnapshotPolicy::applied`]).
    pub fn started(&mut self, cursor: SnapshotCursor, now_ms: u64, idle: bool, rng: &mut StdRng) -> u64 {
        let elapsed_ms = now_ms.saturating_sub(self.since_ms);
        self.pace = pace(self.settings.pace_floor, self.bytes_since, elapsed_ms);
        if self.requested && self.pace != 0 {
            // An operator waits on it (the AdminServer's `snapshot` gives up after 600 s): the
            // size of the last one, written within REQUESTED_WITHIN_SECS.
            self.pace = self.pace.max(self.last_bytes / REQUESTED_WITHIN_SECS);
        }
        self.unpaced_idle = idle && self.pace != 0;
        self.asked = self.requested;
        self.window = (now_ms, 0);
        self.repaced_at = None;
        self.since_ms = now_ms;
        self.last_started_ms = Some(now_ms);
        self.taking_zxid = Some(cursor.start_zxid());
        self.requested = false;
        self.cursor = Some(cursor);
        self.busy = true;
        self.since = 0;
        self.bytes_since = 0;
        self.threshold = roll(self.settings.snap_count, rng);
        self.size_threshold = roll_size(self.settings.snap_size_bytes, rng);
        if idle {
            0
        } else {
            self.pace
        }
    }

    /// The database the snapshot under way reads from is being replaced: the cursor goes (it
    /// belongs to that database), and the caller tells the thread to drop the file. Returns
    /// whether there was one to abandon. The policy stays busy until the thread reports it done.
    pub fn abandon(&mut self) -> bool {
        if self.cursor.take().is_some() | self.finish_after.take().is_some() {
            self.taking_bytes = 0;
            self.unpaced_idle = false;
            return true;
        }
        false
    }

    /// The thread finished (or failed) the snapshot. The chunk buffers go with it: the next
    /// snapshot is thousands of transactions away.
    pub fn done(&mut self, ok: bool) {
        self.busy = false;
        self.buffers = Vec::new();
        let taken = self.taking_zxid.take();
        if ok {
            self.last_written = taken.or(self.last_written);
        } else {
            // Try again after another snap_count transactions.
            self.since = 0;
        }
    }
}

/// Apache spreads snapshots of an ensemble's servers apart: a count drawn from
/// [snap_count/2 + 1, snap_count].
fn roll(snap_count: u64, rng: &mut StdRng) -> u64 {
    let half = snap_count / 2;
    half + 1 + rng.gen_range(0..snap_count - half)
}

/// The log size that triggers the next snapshot: in [size/2, size), as Apache draws it.
fn roll_size(size: u64, rng: &mut StdRng) -> u64 {
    let half = size / 2;
    if half == 0 {
        return u64::MAX;
    }
    half + rng.gen_range(0..half)
}

/// The pace, in bytes a second (0 = no limit), for a snapshot starting after `log_bytes` of
/// log were written in `elapsed_ms` since the last one began.
///
/// Written fast, a snapshot takes the disk from the log's syncs (and the core's time, which
/// serializes only as fast as the snapshot thread takes chunks): p99 write latency rose by
/// a tenth to a half while a million-znode snapshot was written at 40 MB/s, and not visibly at
/// 10 MB/s (bench/RESULTS.md). Written slowly, it falls behind a busy log: the next snapshot
/// is due once the log has grown by half a snapshot ([`SnapshotPolicy::due`]), so a snapshot
/// written at twice the log's rate is done about when the next is due. Hence the floor, raised
/// to twice the log's rate since the last snapshot began.
pub fn pace(floor: u64, log_bytes: u64, elapsed_ms: u64) -> u64 {
    if floor == 0 {
        return 0;
    }
    let secs = elapsed_ms as f64 / 1000.0;
    let log_rate = if secs > 0.0 { log_bytes as f64 / secs } else { 0.0 };
    floor.max((2.0 * log_rate).min(u64::MAX as f64) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn snapshot_pace_keeps_up_with_the_log() {
        let floor = 10_000_000;
        // A quiet log: the floor.
        assert_eq!(pace(floor, 1_000_000, 10_000), floor);
        // 22 MB/s of log: twice that, so the snapshot is done when the next is due.
        assert_eq!(pace(floor, 220_000_000, 10_000), 44_000_000);
        // No time measured yet: the floor, never a division by zero.
        assert_eq!(pace(floor, 5, 0), floor);
        // 0 is no limit, whatever the log does.
        assert_eq!(pace(0, 220_000_000, 1000), 0);
        assert_eq!(pace(floor, u64::MAX, 1), u64::MAX);
    }

    /// A snapshot begun in a burst of writes slows down once the burst is over, and one begun
    /// in a lull speeds up with the writes; small moves are left alone, and a new pace waits
    /// until the thread has taken the last one.
    #[test]
    fn a_snapshot_under_way_follows_the_logs_rate() {
        let mut rng = StdRng::seed_from_u64(11);
        let floor = 10_000_000;
        let settings = SnapshotSettings { pace_floor: floor, ..by_count_alone() };
        let mut p = SnapshotPolicy::new(settings, false, 0, &mut rng);
        let db = zk_tree::Database::new(zk_tree::TreeConfig::default());
        // 250 MB of log in 5 s (a bulk load): paced at 100 MB/s.
        p.bytes_since = 250_000_000;
        assert_eq!(p.started(db.snapshot_begin(), 5_000, false, &mut rng), 100_000_000);
        let log = |p: &mut SnapshotPolicy, bytes: u64| p.bytes_since += bytes;
        p.chunk_sent();
        log(&mut p, 1_000_000);
        assert_eq!(p.repace(6_000), None, "under a window: not reckoned yet");
        // 11 MB/s since: 22 MB/s.
        log(&mut p, 21_000_000);
        assert_eq!(p.repace(7_000), Some(22_000_000));
        assert_eq!(p.pace, 22_000_000, "kept for the end of a quiet period");
        p.chunk_sent();
        // The burst again, but the thread has not taken the last pace (the chunk after it).
        log(&mut p, 200_000_000);
        assert_eq!(p.repace(9_000), None, "the last new pace still queued");
        p.chunk_done(Vec::new());
        assert_eq!(p.repace(9_000), None, "that was the chunk before it");
        p.chunk_done(Vec::new());
        assert_eq!(p.repace(9_000), Some(200_000_000), "100 MB/s over the two seconds");
        // Within a quarter: left alone; below the floor: the floor.
        p.chunk_sent();
        p.chunk_done(Vec::new());
        log(&mut p, 160_000_000);
        assert_eq!(p.repace(11_000), None, "a pace of 160 MB/s against 200: a small fall, left alone");
        log(&mut p, 220_000_000);
        assert_eq!(p.repace(13_000), Some(220_000_000), "220 against 200: a rise, taken");
        p.chunk_sent();
        p.chunk_done(Vec::new());
        assert_eq!(p.repace(15_000), Some(floor), "no log for two seconds: the floor");
        // Written unpaced in a quiet period: nothing to reckon until writes come back, and then
        // the rate is measured from their return, not over the quiet period.
        p.unpaced_idle = true;
        p.chunk_sent();
        p.chunk_done(Vec::new());
        assert_eq!(p.repace(20_000), None);
        assert_eq!(p.applied(25_000), Some(floor), "its pace again");
        log(&mut p, 100_000_000);
        assert_eq!(p.repace(26_000), None, "under a window since the writes came back");
        assert_eq!(p.repace(27_000), Some(100_000_000), "50 MB/s since they came back");
        // Serialized whole: nothing to pace.
        p.unpaced_idle = false;
        p.cursor = None;
        assert_eq!(p.repace(30_000), None);
        // An operator's snapshot keeps the pace that has it done in time.
        p.done(true);
        p.last_bytes = 6_000_000_000;
        assert_eq!(p.request(100_000, 0), Requested::Accepted);
        assert_eq!(p.started(db.snapshot_begin(), 100_000, false, &mut rng), 50_000_000);
        assert_eq!(p.repace(110_000), None, "no log: still the asker's pace");
        // Unpaced servers are never paced.
        let mut unpaced = SnapshotPolicy::new(by_count_alone(), false, 0, &mut rng);
        unpaced.started(db.snapshot_begin(), 0, false, &mut rng);
        unpaced.bytes_since = 1 << 30;
        assert_eq!(unpaced.repace(10_000), None);
    }

    /// Snapshots due by transaction count alone, unpaced, none for idleness.
    fn by_count_alone() -> SnapshotSettings {
        SnapshotSettings {
            snap_count: 100_000,
            snap_size_bytes: 0,
            pace_floor: 0,
            idle_ms: 0,
            nodes_per_step: 10,
        }
    }

    #[test]
    fn a_requested_snapshot_is_due_at_once_and_never_doubled() {
        let mut rng = StdRng::seed_from_u64(3);
        let mut p = SnapshotPolicy::new(by_count_alone(), false, 0, &mut rng);
        assert!(!p.due(), "nothing logged yet");
        assert_eq!(p.request(0, 0), Requested::Accepted);
        assert!(p.due(), "asked for: due whatever the thresholds say");
        let db = zk_tree::Database::new(zk_tree::TreeConfig::default());
        let cur = db.snapshot_begin();
        let zxid = cur.start_zxid();
        p.started(cur, 10, false, &mut rng);
        assert_eq!(p.status(), SnapshotStatus { under_way: Some(zxid), last_written: None });
        assert_eq!(p.request(10, 0), Requested::UnderWay(zxid));
        assert!(!p.due(), "one under way stands for the request");
        p.cursor = None;
        p.done(true);
        assert_eq!(p.status(), SnapshotStatus { under_way: None, last_written: Some(zxid) });
        assert!(!p.due(), "the request under way was not kept for later");
        // One abandoned or failed is not written.
        assert_eq!(p.request(20, 0), Requested::Accepted);
        let cur = db.snapshot_begin();
        p.started(cur, 20, false, &mut rng);
        assert!(p.abandon());
        p.done(false);
        assert_eq!(p.status(), SnapshotStatus { under_way: None, last_written: Some(zxid) });
    }

    /// Review of the snapshot command's fixes: a snapshot an operator asked for is written fast
    /// enough to be done within REQUESTED_WITHIN_SECS at the last one's size (at the floor, a
    /// tree of gigabytes took longer than the command waits); others keep their pace, and an
    /// unpaced server stays unpaced.
    #[test]
    fn a_requested_snapshot_is_written_in_time_for_its_asker() {
        let mut rng = StdRng::seed_from_u64(7);
        let floor = 10_000_000;
        let settings = SnapshotSettings { pace_floor: floor, ..by_count_alone() };
        let mut p = SnapshotPolicy::new(settings, false, 0, &mut rng);
        p.last_bytes = 6_000_000_000;
        let db = zk_tree::Database::new(zk_tree::TreeConfig::default());
        assert_eq!(p.started(db.snapshot_begin(), 1_000, false, &mut rng), floor, "not asked for");
        p.cursor = None;
        p.done(true);
        assert_eq!(p.request(100_000, 0), Requested::Accepted);
        assert_eq!(p.started(db.snapshot_begin(), 100_000, false, &mut rng), 50_000_000);
        p.cursor = None;
        p.done(true);
        p.last_bytes = 1_000_000;
        assert_eq!(p.request(200_000, 0), Requested::Accepted);
        assert_eq!(
            p.started(db.snapshot_begin(), 200_000, false, &mut rng),
            floor,
            "a small tree: the floor"
        );
        let mut unpaced = SnapshotPolicy::new(by_count_alone(), false, 0, &mut rng);
        unpaced.last_bytes = 6_000_000_000;
        assert_eq!(unpaced.request(0, 0), Requested::Accepted);
        assert_eq!(unpaced.started(db.snapshot_begin(), 0, false, &mut rng), 0);
    }

    /// Review of the snapshot command, finding 2: requests in a loop start at most one snapshot
    /// per minimum interval, counted from the last snapshot's start (any snapshot's).
    #[test]
    fn requests_start_at_most_one_snapshot_per_interval() {
        let mut rng = StdRng::seed_from_u64(5);
        let mut p = SnapshotPolicy::new(by_count_alone(), false, 0, &mut rng);
        let db = zk_tree::Database::new(zk_tree::TreeConfig::default());
        assert_eq!(p.request(500, 60_000), Requested::Accepted, "none started yet: no interval to wait");
        p.started(db.snapshot_begin(), 1_000, false, &mut rng);
        p.cursor = None;
        p.done(true);
        assert_eq!(p.request(30_000, 60_000), Requested::TooSoon);
        assert!(!p.due(), "a refused request is not kept for later");
        assert_eq!(p.request(60_999, 60_000), Requested::TooSoon);
        assert_eq!(p.request(61_000, 60_000), Requested::Accepted);
        // A snapshot the thresholds started counts too.
        let mut p = SnapshotPolicy::new(by_count_alone(), false, 0, &mut rng);
        p.started(db.snapshot_begin(), 5_000, false, &mut rng);
        p.cursor = None;
        p.done(true);
        assert_eq!(p.request(6_000, 60_000), Requested::TooSoon);
        assert_eq!(p.request(6_000, 0), Requested::Accepted, "0: no minimum");
    }

    #[test]
    fn thresholds_are_drawn_as_apache_draws_them() {
        let mut rng = StdRng::seed_from_u64(7);
        for _ in 0..1000 {
            let c = roll(100_000, &mut rng);
            assert!((50_001..=100_000).contains(&c), "{c}");
            let s = roll_size(4096, &mut rng);
            assert!((2048..4096).contains(&s), "{s}");
        }
        assert_eq!(roll_size(0, &mut rng), u64::MAX, "no size trigger");
    }
}
