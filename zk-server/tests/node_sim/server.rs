//! One simulated server process: its two disks (the log's, and the one for snapshots and epoch
//! files, as zk-server keeps them in two directories), each a zk-log `FaultStorage`, and the
//! real node (`zk_server::node::Node`) started from them exactly as `zkrs-server` starts: the
//! newest snapshot whose recorded digest checks out, the log replayed over it, the epoch files.
//!
//! The log's writer thread is a queue of jobs that complete after a simulated delay, in order
//! (appends grouped into one sync, as zk-log's writer groups them); the snapshot thread is
//! zk-server's own `SnapshotFiles` behind another queue.

use std::collections::VecDeque;
use std::sync::Arc;

use zk_log::snapshot::remove_stale_temps;
use zk_log::{EpochStore, FaultStorage, LogOptions, RecordBatch, SegmentLog};
use zk_proto::{Txn, TxnDigest, TxnHeader};
use zk_server::config::ServerConfig;
use zk_server::core::{
    CoreConfig, CounterRule, Now, ServerCore, SnapJob, SnapshotSettings, VoterSet, NODES_PER_STEP,
};
use zk_server::node::{LogPosition, Node, ReplicaConfig};
use zk_server::settings::Settings;
use zk_server::snapshots::{self, SnapshotFiles};
use zk_tree::{Recovery, TreeConfig};

use super::world::Keep;

/// Small segments and preallocation steps, so that runs roll and purge segments.
pub const LOG_OPTIONS: LogOptions = LogOptions { prealloc_bytes: 4 << 10, segment_bytes_max: 16 << 10 };

/// A job for the log's thread.
#[derive(Debug)]
pub enum LogJob {
    Append(RecordBatch),
    /// The group written when it started becomes durable.
    Sync,
    Truncate(i64),
    Reset(i64),
}

/// The settings every simulated server starts with.
#[derive(Debug, Clone)]
pub struct ServerSpec {
    /// zoo.cfg lines beyond the ensemble's (snapCount and the like).
    pub extra_cfg: String,
    /// The replica's part.
    pub replica: ReplicaConfig,
}

/// A simulated server process and its disks.
pub struct Server {
    pub sid: i64,
    pub spec: ServerSpec,
    pub log_disk: FaultStorage,
    pub snap_disk: FaultStorage,
    /// Process generation: bumped at every start, so that what was in flight for an earlier
    /// process is dropped.
    pub gen: u64,
    /// The running process (None while down).
    pub proc: Option<Process>,
    /// Why the process stopped by itself (a failure the checks report), if it did.
    pub stopped: Option<String>,
    /// Snapshots this server finished writing, in all its lives.
    pub snapshots_written: u64,
}

/// A running process.
pub struct Process {
    pub node: Node,
    pub log: SegmentLog<zk_log::FaultStorage>,
    pub epochs: EpochStore<FaultStorage>,
    pub snaps: SnapshotFiles<FaultStorage>,
    /// Shared with `snaps`, as the driver's with its snapshot thread: cuts of the log run under it.
    pub fence: std::sync::Arc<snapshots::SnapshotFence>,
    /// When it started, sim ms (its monotonic clock counts from here).
    pub started_ms: u64,
    /// Its wall clock runs this far from the simulation's.
    pub wall_offset_ms: i64,
    /// Log jobs queued, oldest first; the head is under way while `log_busy`.
    pub log_jobs: VecDeque<LogJob>,
    pub log_busy: bool,
    /// Snapshot thread jobs queued, each with the fence's generation when it was handed over;
    /// the head under way while `snap_busy`.
    pub snap_jobs: VecDeque<(SnapJob, u64)>,
    pub snap_busy: bool,
    /// Client connections the core knows, by the core's connection number.
    pub next_client_conn: u64,
    /// When the node's timers are next due, sim ms (cached after every step of the node).
    pub timer: Option<u64>,
    /// After a snapshot received from the leader is written: the snapshots past it go once the
    /// log's reset to it is done, as the driver does.
    pub discard_after_reset: Option<i64>,
    /// A SNAP's log reset is durable and its report on the way (`Ev::ResetReported`).
    pub reset_reported: bool,
}

/// The wall clock the simulation starts at.
pub const WALL_START_MS: i64 = 1_700_000_000_000;

impl Server {
    /// A server with empty disks, down.
    pub fn new(sid: i64, spec: ServerSpec, seed: u64) -> Server {
        Server {
            sid,
            spec,
            log_disk: FaultStorage::new(seed),
            snap_disk: FaultStorage::new(seed ^ 0x5bd1_e995),
            gen: 0,
            proc: None,
            stopped: None,
            snapshots_written: 0,
        }
    }

    /// How this server stores its snapshots: the even-numbered ones compress (snapshot format 2),
    /// the odd ones do not, so every run mixes both formats in one ensemble (a SNAP, which is
    /// the tree re-serialized, not a file, goes between them either way).
    pub fn compression(&self) -> zk_log::snapshot::Compression {
        if self.sid % 2 == 0 {
            zk_log::snapshot::Compression::Zstd { level: 1 }
        } else {
            zk_log::snapshot::Compression::None
        }
    }

    pub fn tree_config(&self, settings: &Settings) -> TreeConfig {
        TreeConfig {
            tick_ms: settings.tick_ms,
            container_max_never_used_ms: settings.container_max_never_used_ms,
            memory_soft_limit_bytes: settings.tree_memory_soft_limit_bytes,
            super_digest: settings.super_digest.clone(),
            tree_digest: true,
            ..TreeConfig::default()
        }
    }

    pub fn settings(&self) -> Settings {
        let text = format!(
            "tickTime={}\ninitLimit={}\nsyncLimit={}\ndataDir=/nonexistent\nclientPort=2181\n{}",
            self.spec.replica.tick_ms,
            self.spec.replica.init_limit,
            self.spec.replica.sync_limit,
            self.spec.extra_cfg
        );
        let cfg = ServerConfig::parse(&text, None).expect("the simulation's zoo.cfg parses");
        Settings::from_config(&cfg).expect("the simulation's settings resolve")
    }

    /// Starts the process at sim time `now_ms`, as zkrs-server starts.
    ///
    /// Errors: the disks do not give a state to start from (the run reports it).
    pub fn start(&mut self, now_ms: u64, wall_offset_ms: i64, seed: u64) -> Result<(), String> {
        assert!(self.proc.is_none(), "a server starts once per life");
        self.gen += 1;
        self.stopped = None;
        let settings = Arc::new(self.settings());
        let tree_cfg = self.tree_config(&settings);
        for name in remove_stale_temps(&self.snap_disk).map_err(|e| e.to_string())? {
            tracing::debug!("removed {name}");
        }
        let mut log =
            SegmentLog::open(self.log_disk.clone(), LOG_OPTIONS).map_err(|e| format!("log: {e}"))?;
        let (db, name) = snapshots::load_newest(&self.snap_disk, tree_cfg.clone())?;
        let mut rec = Recovery::new(db);
        zk_server::log::replay(&mut log, &mut rec, "the log").map_err(|e| format!("replay: {e}"))?;
        let rec = snapshots::verified(&self.snap_disk, tree_cfg, rec, name, |rec| {
            zk_server::log::replay(&mut log, rec, "the log").map_err(|e| e.to_string())
        })?;
        let now = Now { mono_us: 0, wall_ms: WALL_START_MS + now_ms as i64 + wall_offset_ms };
        let replayed = rec.replayed();
        let db = rec.finish(0);
        let epochs = EpochStore::open(self.snap_disk.clone(), log.durable_zxid())
            .map_err(|e| format!("epochs: {e}"))?;
        let cfg = CoreConfig {
            settings: settings.clone(),
            server_id: self.sid as u8,
            voters: VoterSet::solo(self.sid),
            counter_rule: CounterRule::Wrap,
            snapshots: Some(SnapshotSettings {
                snap_count: settings.snap_count,
                snap_size_bytes: settings.snap_size_bytes,
                pace_floor: 0,
                idle_ms: settings.snapshot_idle_ms,
                nodes_per_step: 16,
            }),
            snapshot_now: replayed > 0,
            seed,
            sasl_seed: [7; 32],
        };
        let core = ServerCore::new(cfg, db, now);
        let position = LogPosition { base: log.base_zxid(), durable: log.durable_zxid() };
        let node = Node::ensemble(
            core,
            self.spec.replica.clone(),
            (epochs.accepted(), epochs.current()),
            position,
            now,
        );
        let retain = settings.snap_retain_count as usize;
        let fence = std::sync::Arc::new(snapshots::SnapshotFence::new());
        self.proc = Some(Process {
            node,
            log,
            epochs,
            snaps: SnapshotFiles::new(self.snap_disk.clone(), retain, fence.clone())
                .with_compression(self.compression()),
            fence,
            started_ms: now_ms,
            wall_offset_ms,
            log_jobs: VecDeque::new(),
            log_busy: false,
            snap_jobs: VecDeque::new(),
            snap_busy: false,
            next_client_conn: 1,
            timer: Some(now_ms),
            discard_after_reset: None,
            reset_reported: false,
        });
        Ok(())
    }

    /// The time as this process sees it at sim time `now_ms`.
    pub fn now(&self, now_ms: u64) -> Now {
        let p = self.proc.as_ref().expect("a running process");
        let mono = now_ms.saturating_sub(p.started_ms);
        Now { mono_us: mono * 1000, wall_ms: WALL_START_MS + now_ms as i64 + p.wall_offset_ms }
    }

    /// Power loss: the process ends, and each disk keeps what `keep` says of what was not synced.
    pub fn crash(&mut self, keep: Keep) {
        self.proc = None;
        match keep {
            Keep::Durable => {
                self.log_disk.crash_losing_unsynced();
                self.snap_disk.crash_losing_unsynced();
            }
            Keep::Random => {
                self.log_disk.crash();
                self.snap_disk.crash();
            }
            Keep::Part => {
                // Page writeback out of order: every other page the log's unsynced writes
                // touched reached the disk (the first, the third, ...), so what was not synced is
                // there in part, with holes.
                let mut n = 0u64;
                self.log_disk.crash_keeping_pages(|_, _| {
                    n += 1;
                    n % 2 == 1
                });
                self.snap_disk.crash_losing_unsynced();
            }
            // kill -9: the page cache keeps everything written.
            Keep::All => {}
        }
    }

    /// Gives this server, before its first start, a durable state: its epoch files and a
    /// history, in the log or (`in_snapshot`) all in one snapshot file with the log reset past
    /// it, written through zk-log's `SegmentLog`, `EpochStore` and zk-server's snapshot writer
    /// on its own disks.
    pub fn preload(
        &mut self,
        accepted: u32,
        current: u32,
        hist: &[HistTxn],
        in_snapshot: bool,
    ) -> Result<(), String> {
        assert!(self.proc.is_none() && self.gen == 0, "preloaded before the server first starts");
        let cfg = self.tree_config(&self.settings());
        let mut log =
            SegmentLog::open(self.log_disk.clone(), LOG_OPTIONS).map_err(|e| format!("log: {e}"))?;
        let last = hist.last().map_or(0, |t| t.hdr.zxid);
        if in_snapshot {
            let mut db = zk_tree::Database::new(cfg);
            for t in hist {
                db.apply(&t.hdr, &t.txn);
            }
            snapshots::write_whole(&self.snap_disk, &db, NODES_PER_STEP, self.compression())
                .map_err(|e| format!("snapshot: {e}"))?;
            log.reset_to(last).map_err(|e| format!("reset: {e}"))?;
        } else if !hist.is_empty() {
            let mut batch = RecordBatch::new();
            for t in hist {
                batch.push_digested(&t.hdr, &t.txn, t.digest.as_ref()).map_err(|e| format!("batch: {e}"))?;
            }
            log.append(&batch).map_err(|e| format!("append: {e}"))?;
            log.sync().map_err(|e| format!("sync: {e}"))?;
        }
        let mut epochs =
            EpochStore::open(self.snap_disk.clone(), last).map_err(|e| format!("epochs: {e}"))?;
        epochs.set_accepted(i64::from(accepted)).map_err(|e| format!("acceptedEpoch: {e}"))?;
        epochs.set_current(i64::from(current)).map_err(|e| format!("currentEpoch: {e}"))?;
        Ok(())
    }

    /// The epochs in this server's files as they are now (a restart reads these), read without
    /// opening the store (which would repair them).
    pub fn epoch_files(&self) -> (Option<i64>, Option<i64>) {
        let read = |name: &str| {
            let bytes = self.snap_disk.contents(name)?;
            std::str::from_utf8(&bytes).ok()?.trim().parse().ok()
        };
        (read(zk_log::ACCEPTED_EPOCH_FILE), read(zk_log::CURRENT_EPOCH_FILE))
    }
}

/// One transaction of a preloaded history: as the server's core makes them, prepped by zk-tree
/// against the state before it, with the tree digest it leaves.
#[derive(Debug, Clone)]
pub struct HistTxn {
    pub hdr: TxnHeader,
    pub txn: Txn,
    pub digest: Option<TxnDigest>,
}

/// A history to preload: for each `(epoch, from, to, tag)`, one create of `/{tag}{epoch}.{c}`
/// per counter `c` in `from..=to`, prepped by zk-tree (`Database::prep`) against the tree the
/// transactions before it leave, with the digest the server would stamp. The same records give
/// the same transactions, so histories made apart share their common prefix byte for byte.
pub fn history(cfg: TreeConfig, recs: &[(u32, u32, u32, &str)]) -> Vec<HistTxn> {
    let mut db = zk_tree::Database::new(cfg);
    // The writer's session, as the leader's expiry tracks it (no transaction of its own).
    db.expiry_mut().track(0, 30_000);
    let auth = zk_tree::AuthIds { ids: Vec::new(), is_super: true };
    let acl =
        vec![zk_proto::Acl { perms: 31, id: zk_proto::Id { scheme: "world".into(), id: "anyone".into() } }];
    let mut out = Vec::new();
    for &(epoch, from, to, tag) in recs {
        for c in from..=to {
            let zxid = (i64::from(epoch) << 32) | i64::from(c);
            let path = format!("/{tag}{epoch}.{c}");
            let req = zk_proto::Request::Create(zk_proto::CreateRequest {
                path: path.clone(),
                data: Some(bytes::Bytes::from(path.clone())),
                acl: acl.clone(),
                flags: 0,
            });
            let ctx = zk_tree::RequestCtx { session: 0, cxid: c as i32, auth: &auth };
            let time = WALL_START_MS - 60_000;
            let txn = db.prep(&ctx, &req, zxid, time);
            assert!(!matches!(txn, Txn::Error(_)), "preloaded {path} does not prep: {txn:?}");
            let digest = db
                .pending_digest()
                .map(|tree_digest| TxnDigest { version: zk_tree::digest::DIGEST_VERSION, tree_digest });
            let txn_type = zk_tree::txn_type(zk_proto::OpCode::Create, &txn).code();
            let hdr = TxnHeader { client_id: 0, cxid: c as i32, zxid, time, txn_type };
            db.apply(&hdr, &txn);
            out.push(HistTxn { hdr, txn, digest });
        }
    }
    out
}
