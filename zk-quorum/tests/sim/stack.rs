//! The real stack behind [`Store`]: zk-log's `SegmentLog`, snapshot files and `EpochStore`, each
//! on a `FaultStorage` disk (the log on one, snapshots and epoch files on another, as zk-server
//! keeps them in two directories), and zk-tree's `Database`.
//!
//! As zk-server does: PROPOSAL data is the jute TxnHeader followed by the txn; a learner decodes
//! it and logs the pair; a commit applies it to the database; a SNAP ships
//! `Database::apache_snap_to_vec` and is loaded with `ApacheSnapLoader`, written as a snapshot
//! file before the log is reset to it; the database is the newest valid snapshot plus the log
//! replayed over it, and a truncation first removes the snapshots past its cut (ZK-2832).
//!
//! A crash is `FaultStorage::crash` on both disks (or, for scripted cases, the loss of
//! everything unsynced); a restart reopens the log (recovery cuts a torn tail) and the epoch
//! files.

use std::fmt::Write as _;

use bytes::{Bytes, BytesMut};
use rand::rngs::StdRng;
use zk_log::snapshot::{list_snapshots, read_snapshot, retain_newest, SnapshotWriter};
use zk_log::{EpochStore, FaultStorage, LogError, LogOptions, RecordBatch, SegmentLog, CURRENT_EPOCH_FILE};
use zk_proto::{Jute, OpCode, Reader, Request, Txn, TxnHeader};
use zk_quorum::wire::ForwardedRequest;
use zk_quorum::zab::epoch_of;
use zk_tree::apache_snap::ApacheSnapLoader;
use zk_tree::{AuthIds, Database, Outcome, Recovery, RequestCtx, SnapshotLoader, TreeConfig};

use super::client::{Done, Reply};
use super::{Hist, Keep, Store, R};

/// Small segments and preallocation steps, so runs roll and purge segments.
const LOG_OPTIONS: LogOptions = LogOptions { prealloc_bytes: 4 << 10, segment_bytes_max: 8 << 10 };

/// Snapshots kept after a purge.
const SNAPSHOTS_KEPT: usize = 2;

fn tree_config() -> TreeConfig {
    TreeConfig { tick_ms: 100, ..TreeConfig::default() }
}

fn e<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> String {
    move |err| format!("{what}: {err}")
}

/// The PROPOSAL data of a transaction, as zk-server builds it: jute header, then the txn.
pub fn payload(hdr: &TxnHeader, txn: &Txn) -> Bytes {
    let mut b = BytesMut::with_capacity(128);
    hdr.write(&mut b);
    txn.encode(&mut b);
    b.freeze()
}

fn decode(payload: &Bytes) -> Result<(TxnHeader, Txn), String> {
    zk_log::format::decode_payload(payload.clone()).map_err(e("undecodable proposal"))
}

/// The session of writes nobody waits for (background writes, preloaded histories).
const SERVER_SESSION: i64 = 0;

/// The leader's prep of a request, as zk-server's core does it: a createSession for a new
/// session, `Database::prep` for the rest. The first write of [`SERVER_SESSION`] creates it.
fn prep_txn(
    db: &mut Database,
    zxid: i64,
    wall_ms: i64,
    req: &ForwardedRequest,
) -> Result<(TxnHeader, Txn), String> {
    let fresh_server_session = req.session_id == SERVER_SESSION && !db.sessions().contains(SERVER_SESSION);
    let (op, txn) = if req.op == OpCode::CreateSession.code() || fresh_server_session {
        let timeout = req.body.get(..4).map_or(30_000, |b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]));
        let timeout = if fresh_server_session { 30_000 } else { timeout };
        (OpCode::CreateSession, db.prep_create_session(req.session_id, timeout))
    } else {
        let request = Request::decode(req.op, &mut Reader::new(req.body.clone())).map_err(e("request"))?;
        let op = OpCode::from_i32(req.op).ok_or("unknown op")?;
        let auth = AuthIds::default();
        let ctx = RequestCtx { session: req.session_id, cxid: req.cxid, auth: &auth };
        (op, db.prep(&ctx, &request, zxid, wall_ms))
    };
    let txn_type = zk_tree::txn_type(op, &txn).code();
    Ok((TxnHeader { client_id: req.session_id, cxid: req.cxid, zxid, time: wall_ms, txn_type }, txn))
}

/// See the module doc.
#[derive(Debug)]
pub struct StackStore {
    log_disk: FaultStorage,
    snap_disk: FaultStorage,
    /// None while crashed.
    log: Option<SegmentLog<FaultStorage>>,
    epochs: Option<EpochStore<FaultStorage>>,
    db: Database,
    loader: Option<ApacheSnapLoader>,
    received: Option<Database>,
}

impl StackStore {
    fn log(&mut self) -> Result<&mut SegmentLog<FaultStorage>, String> {
        self.log.as_mut().ok_or_else(|| "the log is not open".to_string())
    }

    fn log_ref(&self) -> &SegmentLog<FaultStorage> {
        self.log.as_ref().expect("the log is open while the server is up")
    }

    fn epoch_store(&mut self) -> Result<&mut EpochStore<FaultStorage>, String> {
        self.epochs.as_mut().ok_or_else(|| "the epoch files are not open".to_string())
    }

    /// Writes `db` as a snapshot file, durably.
    fn write_snapshot(&self, db: &Database) -> R {
        let mut cur = db.snapshot_begin();
        let mut w = SnapshotWriter::create(&self.snap_disk, cur.start_zxid()).map_err(e("snapshot"))?;
        let mut buf = Vec::new();
        // Bounded: each step writes at least one node of a finite tree.
        for _ in 0..1_000_000 {
            buf.clear();
            let done = db.snapshot_step(&mut cur, &mut buf, 64);
            w.write(&buf).map_err(e("snapshot write"))?;
            if done {
                w.finish().map_err(e("snapshot finish"))?;
                return Ok(());
            }
        }
        Err("snapshot writer does not end".into())
    }

    /// The newest snapshot that reads back whole (torn ones are skipped), or a fresh database.
    fn load_newest(&self) -> Result<Database, String> {
        for (_, name) in list_snapshots(&self.snap_disk).map_err(e("list snapshots"))?.into_iter().rev() {
            let mut loader = SnapshotLoader::new(tree_config());
            let read = read_snapshot(&self.snap_disk, &name, &mut |chunk| {
                loader.feed(chunk).map_err(|err| err.to_string())
            });
            match read {
                Ok(_) => return loader.finish().map_err(e("snapshot content")),
                Err(LogError::Corrupt { .. }) => continue,
                Err(err) => return Err(format!("snapshot {name}: {err}")),
            }
        }
        Ok(Database::new(tree_config()))
    }

    fn apply_all(hist: &Hist) -> Result<Database, String> {
        let mut db = Database::new(tree_config());
        for (_, p) in hist {
            let (hdr, txn) = decode(p)?;
            db.apply(&hdr, &txn);
        }
        Ok(db)
    }
}

/// A canonical dump of a database: every node (path, data, stat) and every session, sorted.
pub fn dump(db: &Database) -> String {
    let mut nodes: Vec<(&str, &zk_tree::node::Node)> = db.tree().iter().collect();
    nodes.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = String::new();
    for (path, n) in nodes {
        let _ = writeln!(
            out,
            "{path} {:?} {:?}",
            n.data_bytes(),
            n.client_stat(false, db.tree().num_children(n))
        );
    }
    for (s, t) in db.sessions().iter() {
        let _ = writeln!(out, "session {s:#x} {t}");
    }
    out
}

impl Store for StackStore {
    fn open(_sid: i64, seed: u64) -> Self {
        let log_disk = FaultStorage::new(seed);
        let snap_disk = FaultStorage::new(seed ^ 0x5bd1_e995);
        let log = SegmentLog::open(log_disk.clone(), LOG_OPTIONS).expect("a new log opens");
        let epochs = EpochStore::open(snap_disk.clone(), 0).expect("new epoch files open");
        StackStore {
            log_disk,
            snap_disk,
            log: Some(log),
            epochs: Some(epochs),
            db: Database::new(tree_config()),
            loader: None,
            received: None,
        }
    }

    fn epochs(&self) -> (u32, u32) {
        let ep = self.epochs.as_ref().expect("the epoch files are open while the server is up");
        (ep.accepted() as u32, ep.current() as u32)
    }

    fn last_zxid(&self) -> i64 {
        self.log_ref().last_zxid()
    }

    fn durable_zxid(&self) -> i64 {
        self.log_ref().durable_zxid()
    }

    fn logged(&self) -> Hist {
        let log = self.log_ref();
        let Some(first) = log.first_zxid() else { return Vec::new() };
        let iter = log.read_from(first).expect("the log reads from its first record");
        iter.map(|r| {
            let entry = r.expect("a recovered log reads back");
            (entry.header.zxid, payload(&entry.header, &entry.txn))
        })
        .collect()
    }

    fn append(&mut self, zxid: i64, payload: Bytes) -> R {
        let (hdr, txn) = decode(&payload)?;
        if hdr.zxid != zxid {
            return Err(format!("proposal {zxid:#x} carries a header of {:#x}", hdr.zxid));
        }
        let batch = RecordBatch::encode(&[(&hdr, &txn)]).map_err(e("encode"))?;
        self.log()?.append(&batch).map_err(e("append"))
    }

    fn sync(&mut self) -> R {
        self.log()?.sync().map_err(e("sync"))
    }

    fn set_epoch(&mut self, accepted: bool, epoch: u32) -> R {
        let ep = self.epoch_store()?;
        let r = if accepted { ep.set_accepted(i64::from(epoch)) } else { ep.set_current(i64::from(epoch)) };
        r.map_err(e("epoch file"))
    }

    fn truncate(&mut self, zxid: i64, now_ms: u64) -> Result<bool, String> {
        // Snapshots past the cut hold transactions the ensemble dropped (ZK-2832).
        let mut kept = 0;
        for (z, name) in list_snapshots(&self.snap_disk).map_err(e("list snapshots"))? {
            if z > zxid {
                let trash = zk_log::move_to_trash(&self.snap_disk, &name).map_err(e("remove snapshot"))?;
                zk_log::remove_gradually(&self.snap_disk, &trash).map_err(e("remove snapshot"))?;
            } else {
                kept = kept.max(z);
            }
        }
        let log = self.log()?;
        let complete = zxid >= log.base_zxid();
        if complete {
            log.truncate_after(zxid).map_err(e("truncate"))?;
        } else {
            // The records up to `zxid` were only in a snapshot that also held later ones (a SNAP
            // from a leader whose epoch never became established): back to the newest snapshot
            // left, from which the server syncs again. zk-server's driver reports the log's
            // NotInLog here as a log failure instead (see the report).
            log.reset_to(kept).map_err(e("reset"))?;
        }
        self.reload(now_ms)?;
        Ok(complete)
    }

    fn receive(&mut self, zxid: i64) {
        self.loader = Some(ApacheSnapLoader::new(tree_config(), zxid));
        self.received = None;
    }

    fn feed(&mut self, bytes: &[u8]) -> Result<bool, String> {
        let loader = self.loader.as_mut().ok_or("snapshot bytes with no snapshot announced")?;
        let fed = loader.feed(bytes).map_err(e("SNAP stream"))?;
        if !fed.done {
            return Ok(false);
        }
        if fed.consumed != bytes.len() {
            return Err(format!("{} bytes after the SNAP stream's end", bytes.len() - fed.consumed));
        }
        let loader = self.loader.take().ok_or("no loader")?;
        self.received = Some(loader.finish().map_err(e("SNAP stream"))?);
        Ok(true)
    }

    fn install(&mut self, zxid: i64, live: bool) -> R {
        let db = self.received.take().ok_or("no snapshot received")?;
        if db.last_applied_zxid() != zxid {
            return Err(format!("snapshot of {zxid:#x} loaded at {:#x}", db.last_applied_zxid()));
        }
        // Durable before the log forgets what it replaces (ZK-3642), then the reset.
        self.write_snapshot(&db)?;
        self.log()?.reset_to(zxid).map_err(e("reset"))?;
        retain_newest(&self.snap_disk, SNAPSHOTS_KEPT).map_err(e("retain snapshots"))?;
        if live {
            self.db = db;
        }
        Ok(())
    }

    fn snapshot(&self, zxid: i64) -> Result<Bytes, String> {
        if self.db.last_applied_zxid() != zxid {
            return Err(format!(
                "snapshot of {zxid:#x} asked with the database at {:#x}",
                self.db.last_applied_zxid()
            ));
        }
        Ok(Bytes::from(self.db.apache_snap_to_vec()))
    }

    fn commit(&mut self, zxid: i64, payload: &Bytes) -> Result<Option<Done>, String> {
        let (hdr, txn) = decode(payload)?;
        if hdr.zxid != zxid {
            return Err(format!("commit {zxid:#x} carries a header of {:#x}", hdr.zxid));
        }
        let applied = self.db.apply(&hdr, &txn);
        let reply = match applied.outcome {
            Outcome::Created { .. } => Reply::Created,
            Outcome::SetData { stat } => Reply::Set(stat.version),
            Outcome::SessionCreated | Outcome::SessionClosed => Reply::Session,
            Outcome::Error(code) => Reply::Error(code.code()),
            other => return Err(format!("unexpected outcome {other:?} of {zxid:#x}")),
        };
        Ok(Some(Done { session: hdr.client_id, cxid: hdr.cxid, reply }))
    }

    fn applied_zxid(&self) -> i64 {
        self.db.last_applied_zxid()
    }

    fn reload(&mut self, now_ms: u64) -> R {
        let db = self.load_newest()?;
        let mut rec = Recovery::new(db);
        let log = self.log()?;
        if let Some(from) = log.reconcile_with_snapshot(rec.start_zxid()).map_err(e("reconcile"))? {
            for entry in log.read_from(from).map_err(e("read log"))? {
                let entry = entry.map_err(e("read log"))?;
                rec.replay(&entry.header, &entry.txn);
            }
        }
        self.db = rec.finish(now_ms);
        Ok(())
    }

    fn crash(&mut self, keep: Keep, _rng: &mut StdRng) {
        // The disks draw their own losses from their seeds.
        if keep == Keep::All {
            if let Some(log) = self.log.as_mut() {
                let _ = log.sync();
            }
        }
        for disk in [&self.log_disk, &self.snap_disk] {
            match keep {
                Keep::Durable => disk.crash_losing_unsynced(),
                _ => disk.crash(),
            }
        }
        self.log = None;
        self.epochs = None;
        self.loader = None;
        self.received = None;
        self.db = Database::new(tree_config());
    }

    fn restart(&mut self, now_ms: u64) -> Result<bool, String> {
        let _ = now_ms;
        let log = SegmentLog::open(self.log_disk.clone(), LOG_OPTIONS).map_err(e("log recovery"))?;
        let snap_last = list_snapshots(&self.snap_disk).map_err(e("list"))?.last().map_or(0, |s| s.0);
        let last = log.last_zxid().max(snap_last);
        self.log = Some(log);
        let mut repaired = false;
        let epochs = match EpochStore::open(self.snap_disk.clone(), last) {
            Ok(ep) => ep,
            Err(LogError::Epoch { .. }) => {
                // currentEpoch is below the last record's epoch: the crash fell between the
                // durable sync of a leader's records of a newer epoch and the currentEpoch write
                // that follows them (ZK-4643's order). zk-server refuses to start here, as
                // Apache 3.8 does; an operator repairs it by raising currentEpoch to the epoch of
                // the last record, which is what this does (and counts).
                let epoch = epoch_of(last).to_string();
                zk_log::replace_file(&self.snap_disk, CURRENT_EPOCH_FILE, epoch.as_bytes())
                    .map_err(e("repair currentEpoch"))?;
                repaired = true;
                EpochStore::open(self.snap_disk.clone(), last).map_err(e("epoch files"))?
            }
            Err(err) => return Err(format!("epoch files: {err}")),
        };
        self.epochs = Some(epochs);
        Ok(repaired)
    }

    fn purge(&mut self) -> R {
        let zxid = self.db.last_applied_zxid();
        if zxid == 0 || self.loader.is_some() {
            return Ok(());
        }
        let db = std::mem::replace(&mut self.db, Database::new(tree_config()));
        let written = self.write_snapshot(&db);
        self.db = db;
        written?;
        retain_newest(&self.snap_disk, SNAPSHOTS_KEPT).map_err(e("retain snapshots"))?;
        let oldest = list_snapshots(&self.snap_disk).map_err(e("list"))?.first().map_or(0, |s| s.0);
        self.log()?.purge_before(oldest).map_err(e("purge"))?;
        Ok(())
    }

    fn prep(&mut self, zxid: i64, wall_ms: i64, req: &ForwardedRequest) -> Result<Bytes, String> {
        let (hdr, txn) = prep_txn(&mut self.db, zxid, wall_ms, req)?;
        Ok(payload(&hdr, &txn))
    }

    fn read(&mut self, path: &str) -> Option<Reply> {
        Some(match self.db.get_data(path, &AuthIds::default(), None) {
            Ok((data, stat)) => {
                let v = data.and_then(|d| std::str::from_utf8(&d).ok()?.parse().ok()).unwrap_or(0);
                Reply::Data(v, stat.version)
            }
            Err(code) => Reply::Error(code.code()),
        })
    }

    fn dump(&self) -> String {
        dump(&self.db)
    }

    fn reference_dump(chain: &Hist) -> String {
        match Self::apply_all(chain) {
            Ok(db) => dump(&db),
            Err(err) => err,
        }
    }

    fn make_hist(recs: &[(i64, String)]) -> Hist {
        let mut db = Database::new(tree_config());
        let mut out = Vec::new();
        for (zxid, tag) in recs {
            let mut body = BytesMut::new();
            zk_proto::CreateRequest {
                path: format!("/{tag}"),
                data: Some(Bytes::from(tag.clone())),
                acl: super::client::open_acl(),
                flags: 0,
            }
            .write(&mut body);
            let req =
                ForwardedRequest { session_id: 0, cxid: 0, op: OpCode::Create.code(), body: body.freeze() };
            let (hdr, txn) = prep_txn(&mut db, *zxid, 0, &req).expect("a preloaded create preps");
            assert!(!matches!(txn, Txn::Error(_)), "preloaded {tag} does not prep: {txn:?}");
            db.apply(&hdr, &txn);
            out.push((*zxid, payload(&hdr, &txn)));
        }
        out
    }

    fn preload(&mut self, accepted: u32, current: u32, hist: &Hist, purged: bool) -> R {
        self.set_epoch(true, accepted)?;
        self.set_epoch(false, current)?;
        let Some(last) = hist.last().map(|r| r.0) else { return Ok(()) };
        if purged {
            let db = Self::apply_all(hist)?;
            self.write_snapshot(&db)?;
            self.log()?.reset_to(last).map_err(e("reset"))?;
        } else {
            for (z, p) in hist {
                self.append(*z, p.clone())?;
            }
            self.sync()?;
        }
        Ok(())
    }

    fn check_applied(&self, chain: &Hist) -> R {
        let z = self.db.last_applied_zxid();
        let last = chain.last().map_or(0, |r| r.0);
        if z != 0 && z <= last && !chain.iter().any(|r| r.0 == z) {
            return Err(format!("the database is at {z:#x}, which the chain skips"));
        }
        Ok(())
    }
}
