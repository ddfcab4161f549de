//! Snapshots of the database: loading the newest one at start, rebuilding the database from
//! disk at a role change, and taking new ones without stalling writes.
//!
//! A snapshot is fuzzy: the core serializes a bounded number of nodes between batches of writes
//! (`Database::snapshot_step`), so the nodes it captures may reflect different zxids. Restarting
//! from it replays every logged transaction after its start zxid, idempotently
//! (`zk_tree::Recovery`), which converges to the exact state. The bytes go to a thread of their own
//! that writes the file (temp file, fsync, rename), keeps the newest `autopurge.snapRetainCount`
//! snapshots, and reports which log segments are no longer needed. What the thread does with
//! each job is [`SnapshotFiles`], which the node simulation runs too, over its own disks.

use crate::backup::continuous::ArchiveProgress;
use crate::core::{SnapJob, CHUNK_CREDITS};
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::{debug, info, warn};
use zk_log::snapshot::{
    list_snapshots, read_snapshot, remove_stale_temps, retain_newest_to_trash_at_most, Compression,
    SnapshotWriter,
};
use zk_log::{AppendMode, FileStorage, LogError, Storage};
use zk_tree::{
    Database, Decoded, RecordRun, RecordRuns, Recovery, SnapshotDecoder, SnapshotError, SnapshotLoader,
    TreeConfig,
};

/// What the snapshot thread reports.
#[derive(Debug)]
pub enum SnapshotReport {
    /// A chunk was written; its buffer comes back for reuse.
    ChunkDone(Vec<u8>),
    /// A snapshot was finished (or abandoned).
    Done {
        /// Whether it was written.
        ok: bool,
        /// Log records before this zxid are covered by the snapshots kept.
        purge_logs_before: Option<i64>,
    },
    /// A retention pass finished.
    Retained {
        /// Log records before this zxid are covered by the snapshots kept.
        purge_logs_before: Option<i64>,
    },
}

/// Opens the snapshot directory, removing temp files of snapshots a crash interrupted.
///
/// Snapshots are written with `pwrite`, not through the file's mapping: pages stored through a
/// mapping stay in the process's resident memory (RssFile) until it is dropped, 16 MB and more
/// while a snapshot of a million znodes was written (bench/RESULTS.md, 2026-11-25).
///
/// Errors: the directory cannot be created, locked or listed.
pub fn open_dir(dir: &Path) -> Result<FileStorage, LogError> {
    let storage = FileStorage::open_dir_with(dir, AppendMode::Pwrite).map_err(|source| LogError::Io {
        op: "open snapshot directory",
        file: dir.display().to_string(),
        source,
    })?;
    for name in remove_stale_temps(&storage)? {
        warn!("removed {name}: a snapshot interrupted by a crash");
    }
    Ok(storage)
}

/// The database in the newest valid snapshot (and that snapshot's file name), or a fresh one
/// when there is none. Torn or corrupt snapshots are skipped with a warning; one from a newer
/// format stops start-up.
///
/// Each snapshot is read once, in three stages on threads of their own: `zk-snap-read` reads the
/// file, checks every chunk's checksum and cuts the content into runs of whole records;
/// `zk-snap-dec{i}` decode the runs; this thread builds the tree from them in order. A snapshot
/// found damaged part way is dropped and the next older one loaded.
///
/// The database is not yet checked against the digest its snapshot recorded: that needs the log
/// replayed after it ([`verified`]).
///
/// Errors: the snapshot cannot be read, or its content does not load.
pub fn load_newest<S: Storage>(storage: &S, cfg: TreeConfig) -> Result<(Database, Option<String>), String> {
    load_newest_before(storage, cfg, i64::MAX)
}

/// [`load_newest`] among the snapshots that start before `before`.
fn load_newest_before<S: Storage>(
    storage: &S,
    cfg: TreeConfig,
    before: i64,
) -> Result<(Database, Option<String>), String> {
    for (_, name) in
        list_snapshots(storage).map_err(|e| e.to_string())?.into_iter().rev().filter(|(z, _)| *z < before)
    {
        match load_one(storage, &name, cfg.clone()) {
            Ok(db) => return Ok((db, Some(name))),
            Err(Fail::Skip(why)) => warn!("skipping snapshot {}: {why}", storage.display_name(&name)),
            Err(Fail::Stop(why)) => return Err(format!("snapshot {name}: {why}")),
        }
    }
    Ok((Database::new(cfg), None))
}

/// The suffix a snapshot whose recorded digest did not check out is renamed with: kept for an
/// operator to look at, never loaded again (the name no longer parses as a snapshot's).
pub const MISMATCH_SUFFIX: &str = ".mismatch";

/// Checks a snapshot loaded and replayed: `rec` was made from the snapshot `name` and has had
/// the log after it replayed by `replay`. A snapshot that recorded the tree digest it had to
/// reproduce, and does not, lacks something the tree had (or has something it did not): it is
/// renamed aside ([`MISMATCH_SUFFIX`]) and the next older snapshot is loaded and replayed in
/// its place, and so on. Returns the recovery to finish.
///
/// Errors: what `replay` or loading an older snapshot returns.
pub fn verified<S: Storage>(
    storage: &S,
    cfg: TreeConfig,
    mut rec: Recovery,
    mut name: Option<String>,
    mut replay: impl FnMut(&mut Recovery) -> Result<(), String>,
) -> Result<Recovery, String> {
    loop {
        let Some(current) = name.take() else { return Ok(rec) };
        match rec.snapshot_check() {
            zk_tree::SnapshotCheck::Verified { zxid, .. } => {
                debug!("snapshot {current} reproduced its recorded digest at 0x{zxid:x}");
                return Ok(rec);
            }
            zk_tree::SnapshotCheck::Unverifiable { why: why @ zk_tree::Unverifiable::NoEndState { .. } } => {
                // Written before snapshots recorded their digest (a zkrs before this one): loaded
                // as it is. Such a file may be one a snapshot under way finished over a replaced
                // database (the review's F1); the next snapshot replaces it.
                warn!(
                    "snapshot {} records no digest ({why}): loaded unchecked; the next snapshot \
                     taken replaces it",
                    storage.display_name(&current)
                );
                return Ok(rec);
            }
            zk_tree::SnapshotCheck::Unverifiable { why } => {
                debug!("snapshot {current} not checked against a digest: {why}");
                return Ok(rec);
            }
            zk_tree::SnapshotCheck::Mismatch { zxid, want, got } => {
                tracing::error!(
                    "snapshot {} and the log after it give a tree whose digest at 0x{zxid:x} is {got:x}, \
                     where the snapshot recorded {want:x}: the snapshot is not the tree it was taken \
                     from; it is renamed aside with {MISMATCH_SUFFIX} and an older one loaded",
                    storage.display_name(&current)
                );
                let start = zk_log::snapshot::parse_snapshot_name(&current).unwrap_or(i64::MAX);
                let aside = format!("{current}{MISMATCH_SUFFIX}");
                storage
                    .rename(&current, &aside)
                    .and_then(|()| storage.sync_dir())
                    .map_err(|e| format!("cannot rename {current} aside: {e}"))?;
                let (db, older) = load_newest_before(storage, cfg.clone(), start)?;
                rec = Recovery::new(db);
                replay(&mut rec)?;
                name = older;
            }
        }
    }
}

/// Removes (durably, through the trash) every snapshot taken past `cut`: after the log is cut
/// there, or reset to a snapshot received at `cut`, they hold transactions gone from the
/// ensemble's history (ZOOKEEPER-2832). Returns the trash files to delete, which the caller
/// removes off its own thread ([`remove_trash`]): deleting a large file at once holds up the
/// disk.
///
/// Errors: the directory cannot be listed, or a snapshot cannot be moved away.
pub fn discard_after<S: Storage>(storage: &S, cut: i64) -> Result<Vec<String>, String> {
    let mut trash = Vec::new();
    for (zxid, name) in list_snapshots(storage).map_err(|e| e.to_string())? {
        if zxid > cut {
            info!("removing snapshot {name}: it is past the truncation at 0x{cut:x}");
            trash.push(zk_log::move_to_trash(storage, &name).map_err(|e| format!("{name}: {e}"))?);
        }
    }
    Ok(trash)
}

/// Deletes trash files [`discard_after`] left, gradually (a failure is logged: the next start
/// removes what is left).
pub fn remove_trash<S: Storage>(storage: &S, trash: &[String]) {
    for name in trash {
        if let Err(e) = zk_log::remove_gradually(storage, name) {
            warn!("cannot remove {}: {e}", storage.display_name(name));
        }
    }
}

/// Why a snapshot did not load: skip it (damaged: try an older one) or stop start-up.
#[derive(Debug)]
enum Fail {
    Skip(String),
    Stop(String),
}

/// Runs queued for each decoding thread, and decoded runs queued for the loader from each.
const READ_AHEAD_CHUNKS: usize = 4;

/// The most threads decoding a snapshot's runs: past three, the one thread building the tree
/// from what they decode is the bound.
const DECODE_THREADS_MAX: usize = 3;

/// Loads snapshot `name`. Three stages, each on threads of its own: one reads the file (every
/// chunk checked) and cuts the content into runs of whole records ([`RecordRuns`]); up to
/// [`DECODE_THREADS_MAX`] threads (no more than the cores) decode the runs, taking them in turn;
/// this thread builds the tree from the decoded runs, taken from the decoders in the same turn,
/// so in the content's order. Every queue between them is bounded.
fn load_one<S: Storage>(storage: &S, name: &str, cfg: TreeConfig) -> Result<Database, Fail> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, DECODE_THREADS_MAX);
    load_one_on(storage, name, cfg, threads)
}

/// [`load_one`] with `threads` decoding threads (at least one).
fn load_one_on<S: Storage>(
    storage: &S,
    name: &str,
    cfg: TreeConfig,
    threads: usize,
) -> Result<Database, Fail> {
    assert!(threads >= 1, "a snapshot needs a decoding thread");
    let t0 = Instant::now();
    let first = SnapshotDecoder::with_digest(cfg.tree_digest);
    // The reader hands run k to decoder k % threads; each hands what it decoded to the loader.
    let mut to_decoders = Vec::with_capacity(threads);
    let mut from_decoders = Vec::with_capacity(threads);
    let mut decoders = Vec::with_capacity(threads);
    // Emptied buffers go back: runs' to the reader, decoded runs' to their decoder.
    let (spent_runs_tx, spent_runs_rx) = sync_channel::<Vec<u8>>(threads * READ_AHEAD_CHUNKS);
    let mut spent_decoded = Vec::with_capacity(threads);
    for i in 0..threads {
        let (run_tx, run_rx) = sync_channel::<Result<RecordRun, SnapshotError>>(READ_AHEAD_CHUNKS);
        let (out_tx, out_rx) = sync_channel::<Result<Decoded, SnapshotError>>(READ_AHEAD_CHUNKS);
        let (back_tx, back_rx) = sync_channel::<Decoded>(READ_AHEAD_CHUNKS);
        let mut decoder = first.sibling();
        let spent = spent_runs_tx.clone();
        let spawned = std::thread::Builder::new().name(format!("zk-snap-dec{i}")).spawn(move || {
            for run in run_rx.iter() {
                let decoded = run.and_then(|run| {
                    let d = decoder.decode_run(&run, back_rx.try_recv().unwrap_or_default());
                    let _ = spent.try_send(run.into_buffer());
                    d
                });
                let stop = decoded.is_err();
                // The loader gone (it stopped on an error) ends this thread, and so the reader.
                if out_tx.send(decoded).is_err() || stop {
                    return;
                }
            }
        });
        decoders.push(spawned.map_err(|e| Fail::Stop(format!("cannot start a decoding thread: {e}")))?);
        to_decoders.push(run_tx);
        from_decoders.push(out_rx);
        spent_decoded.push(back_tx);
    }
    drop(spent_runs_tx);
    let (st, nm) = (storage.clone(), name.to_string());
    let reader = std::thread::Builder::new()
        .name("zk-snap-read".into())
        .spawn(move || {
            let mut runs = RecordRuns::new();
            let mut turn = 0usize;
            read_snapshot(&st, &nm, &mut |chunk| {
                // Content that does not cut is handed over as such, in its turn: the loader
                // stops on it after what came before.
                let run = runs.cut(chunk, spent_runs_rx.try_recv().unwrap_or_default());
                let stop = run.is_err();
                to_decoders[turn % to_decoders.len()].send(run).map_err(|_| "loading stopped".to_string())?;
                turn += 1;
                if stop {
                    return Err("the content does not decode".into());
                }
                Ok(())
            })
        })
        .map_err(|e| Fail::Stop(format!("cannot start the reading thread: {e}")))?;
    let mut loader = SnapshotLoader::new(cfg);
    let mut content_error = None;
    let mut last_note = Instant::now();
    // Run k comes from decoder k % threads. A decoder's queue closes once the reader is done
    // (or failed) and the decoder has handed over every run it was given: the run due then
    // does not exist, and neither does any after it.
    for turn in 0.. {
        let Ok(decoded) = from_decoders[turn % threads].recv() else { break };
        let fed = decoded.and_then(|mut d| loader.feed_decoded_mut(&mut d).map(|()| d));
        match fed {
            // A full queue (the decoder ahead) drops it here instead.
            Ok(d) => {
                let _ = spent_decoded[turn % threads].try_send(d);
            }
            Err(e) => {
                content_error = Some(e);
                break;
            }
        }
        if last_note.elapsed() >= Duration::from_secs(1) {
            info!("loading snapshot {name}: {} nodes so far", loader.nodes_loaded());
            last_note = Instant::now();
        }
    }
    // If the loader stopped first, this makes the decoders' next sends fail: they stop, and
    // then so does the reader.
    drop(from_decoders);
    // Every thread joined before any failure is reported.
    let read = reader.join();
    let decoders_panicked = decoders.into_iter().map(|d| d.join()).filter(Result::is_err).count();
    let read = read.map_err(|_| Fail::Stop("the reading thread panicked".into()))?;
    if decoders_panicked > 0 {
        return Err(Fail::Stop(format!("{decoders_panicked} snapshot decoding thread(s) panicked")));
    }
    if let Some(e) = content_error {
        // The checksums held so far: the content itself is wrong.
        return Err(Fail::Stop(e.to_string()));
    }
    let info = match read {
        Ok(info) => info,
        Err(e @ LogError::Corrupt { .. }) => return Err(Fail::Skip(e.to_string())),
        Err(e) => return Err(Fail::Stop(e.to_string())),
    };
    let nodes = loader.nodes_loaded();
    let db = loader.finish().map_err(|e| Fail::Stop(e.to_string()))?;
    info!("loaded snapshot {} ({nodes} nodes, {} bytes) in {:.2?}", info.name, info.file_bytes, t0.elapsed());
    Ok(db)
}

/// Writes `db` whole as a snapshot file on the calling thread, `nodes_per_step` nodes a chunk,
/// stored as `compression` says (import, and a learner installing a leader's snapshot: nothing
/// is served meanwhile, so compressing here holds up nobody).
///
/// Errors: the file cannot be created, written or made durable.
pub fn write_whole<S: Storage>(
    storage: &S,
    db: &Database,
    nodes_per_step: usize,
    compression: Compression,
) -> Result<zk_log::snapshot::SnapshotInfo, LogError> {
    let mut cur = db.snapshot_begin();
    let mut w = SnapshotWriter::create_with(storage, cur.start_zxid(), compression)?;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let done = db.snapshot_step(&mut cur, &mut buf, nodes_per_step);
        w.write(&buf)?;
        if done {
            return w.finish();
        }
    }
}

/// Starts the snapshot thread and returns its job queue. It hands every chunk's buffer back once
/// written (the core reuses it, and counts it as room for the next chunk), and reports when a
/// snapshot is done and which log records older snapshots no longer need, through `report`.
///
/// The queue has room for every chunk the core may have out ([`CHUNK_CREDITS`]) plus the few
/// control jobs around them, so handing it a job never waits (changes of pace aside, which the
/// driver drops when there is no room).
///
/// Snapshots are stored as `compression` says; the compression runs on the thread, at its lowered
/// priority, never on the core's.
///
/// Errors: the thread could not be spawned.
pub fn spawn_writer(
    storage: FileStorage,
    retain: usize,
    compression: Compression,
    fence: Arc<SnapshotFence>,
    archive: Option<Arc<ArchiveProgress>>,
    report: impl Fn(SnapshotReport) + Send + 'static,
) -> std::io::Result<SnapshotQueue> {
    let (tx, rx) = sync_channel(CHUNK_CREDITS + 4);
    let thread_fence = fence.clone();
    std::thread::Builder::new()
        .name("zk-snapshot".into())
        .spawn(move || run(storage, retain, compression, thread_fence, archive, rx, report))?;
    Ok(SnapshotQueue { tx, fence })
}

/// The snapshot thread's job queue. Each job goes with the fence's generation at the moment it
/// is handed over: the cuts run on the thread that hands the jobs over, so that is where the
/// order between a snapshot's beginning and a cut is known. Read on the snapshot thread, a
/// Begin still queued behind slow work (a retention removing large files, a disk busy at the
/// thread's idle priority) would take the generation of a cut made after it, and a snapshot of
/// the tree before that cut could land after it (review of issue 29, helper-20, finding 2).
#[derive(Debug)]
pub struct SnapshotQueue {
    tx: SyncSender<(SnapJob, u64)>,
    fence: Arc<SnapshotFence>,
}

impl SnapshotQueue {
    /// Hands `job` over without waiting; a Begin stamped with the fence's generation now (the
    /// only one read: reading it takes the fence, which the thread holds while a snapshot lands
    /// or retention runs, and the other jobs need not wait for that).
    ///
    /// Errors: the queue is full, or the thread is gone; the job comes back.
    pub fn try_send(&self, job: SnapJob) -> Result<(), TrySendError<SnapJob>> {
        let generation = if matches!(job, SnapJob::Begin { .. }) { self.fence.generation() } else { 0 };
        self.tx.try_send((job, generation)).map_err(|e| match e {
            TrySendError::Full((job, _)) => TrySendError::Full(job),
            TrySendError::Disconnected((job, _)) => TrySendError::Disconnected(job),
        })
    }
}

/// Keeps a snapshot begun before the log was cut (TRUNC, a snapshot received from the leader)
/// from landing after the cut.
///
/// The core abandons a snapshot under way when its database is replaced, but once the last
/// chunk is out the snapshot thread still has to finish the file (sync, rename), and may do so,
/// at its idle disk priority, after the driver has listed the snapshots for a cut: the file then
/// appears beside a log reset below it, and the next reload serves a tree that log does not
/// continue (review of issue 29, finding 2). Each cut runs under this fence and starts a new
/// generation; a snapshot finishes only under the fence, and only in the generation it began
/// in, otherwise its file is dropped. So every snapshot either lands before a cut looks at the
/// directory, or not at all. Retention chooses and moves aside old snapshots under it too, so
/// that a cut never picks a snapshot retention is taking away.
#[derive(Debug, Default)]
pub struct SnapshotFence {
    state: std::sync::Mutex<FenceState>,
}

#[derive(Debug, Default)]
struct FenceState {
    /// Cuts so far.
    generation: u64,
    /// A log reset to this snapshot (one received from the leader) is under way, and the
    /// snapshots past it are not removed yet: retention waits, or, counting those among the
    /// newest, it could remove the one the log will start from.
    resync_base: Option<i64>,
}

impl SnapshotFence {
    /// A fence in its first generation.
    pub fn new() -> SnapshotFence {
        SnapshotFence::default()
    }

    /// Runs `cut` (listing, removing or writing snapshots for a cut of the log) with no snapshot
    /// finishing meanwhile; snapshots begun before it will not finish.
    pub fn cut<R>(&self, cut: impl FnOnce() -> R) -> R {
        let mut g = self.hold();
        g.generation += 1;
        cut()
    }

    /// A cut that writes the snapshot a log reset will start from (`write` returns its zxid):
    /// retention removes nothing until [`SnapshotFence::reset_done`] (review of issue 29,
    /// helper-20: between the write and the removal of the snapshots past it, which waits for
    /// the reset to be durable, retention could count those among the newest and take it away).
    pub fn cut_for_reset<E>(&self, write: impl FnOnce() -> Result<i64, E>) -> Result<i64, E> {
        let mut g = self.hold();
        g.generation += 1;
        let picked = write();
        if let Ok(zxid) = &picked {
            g.resync_base = Some(*zxid);
        }
        picked
    }

    /// A cut that removes the snapshots past a reset's start (`cut`): the reset is over, and
    /// retention runs again.
    pub fn reset_done<R>(&self, cut: impl FnOnce() -> R) -> R {
        let mut g = self.hold();
        g.generation += 1;
        g.resync_base = None;
        cut()
    }

    /// The generation the fence is in: a snapshot begun now may finish only while it still is.
    /// Read it where the cuts are ordered, when the snapshot's Begin is handed over.
    pub fn generation(&self) -> u64 {
        self.hold().generation
    }

    /// The fence held (no cut runs meanwhile). A panic elsewhere while it was held leaves the
    /// state as it was: it is taken as it stands.
    fn hold(&self) -> std::sync::MutexGuard<'_, FenceState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The most a snapshot is written at (the core picks it: `snapshot_policy::pace`).
///
/// A snapshot is hundreds of megabytes for a large tree; written as fast as the disk takes it,
/// it keeps the disk busy for a second or two, and every log sync meanwhile waits behind its
/// writes: with the log and the snapshots on one disk, p99 write latency doubled while a
/// snapshot of a million znodes was written (bench/RESULTS.md). Written at a bounded rate it
/// takes longer, but leaves the disk, and the core's time (the core serializes only as fast as
/// this thread takes chunks), to the clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pace {
    bytes_per_second: u64,
}

impl Pace {
    /// At most `bytes_per_second`; 0 is no limit.
    pub fn new(bytes_per_second: u64) -> Pace {
        Pace { bytes_per_second }
    }

    /// How long to wait, `elapsed` into a snapshot with `written` bytes written, to stay at the
    /// pace (zero when behind it, or unpaced).
    pub fn delay(&self, written: u64, elapsed: Duration) -> Duration {
        if self.bytes_per_second == 0 {
            return Duration::ZERO;
        }
        let due = Duration::from_secs_f64(written as f64 / self.bytes_per_second as f64);
        due.saturating_sub(elapsed)
    }
}

/// Lowers the calling thread's CPU and disk priority: its work (writing a snapshot, removing old
/// files) may take longer, but must not hold up the core or the log's syncs, which clients wait on.
#[allow(unsafe_code)] // setpriority and ioprio_set have no safe wrapper in libc.
pub(crate) fn background_priority() {
    // SAFETY: plain syscalls about the calling thread (tid from gettid); no memory is passed.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        if libc::setpriority(libc::PRIO_PROCESS, tid, 10) != 0 {
            debug!("could not lower the CPU priority of a background thread");
        }
        // ioprio_set(IOPRIO_WHO_PROCESS, tid, IOPRIO_CLASS_IDLE << 13): the block layer serves
        // this thread's writes when nothing else waits (the scheduler's aging keeps it moving).
        if libc::syscall(libc::SYS_ioprio_set, 1, tid, 3 << 13) != 0 {
            debug!("could not lower the disk priority of a background thread");
        }
    }
}

fn run(
    storage: FileStorage,
    retain: usize,
    compression: Compression,
    fence: Arc<SnapshotFence>,
    archive: Option<Arc<ArchiveProgress>>,
    rx: Receiver<(SnapJob, u64)>,
    report: impl Fn(SnapshotReport),
) {
    background_priority();
    let mut files = SnapshotFiles::new(storage, retain, fence).with_compression(compression);
    files.archive = archive;
    // The pace's reckoning for the snapshot under way: when it (last) started, content bytes
    // taken since. Content, not the bytes stored: compressed or not, the core serializes the tree
    // at the same rate (its steps wait on this thread's pace), and the log's rate it is raised
    // to is measured the same way; a compressed snapshot then puts fewer bytes a second on the
    // disk, for the same time.
    let mut pace = Pace::new(0);
    let mut paced_from = Instant::now();
    let mut written = 0u64;
    while let Ok((job, generation)) = rx.recv() {
        match &job {
            SnapJob::Begin { pace: bytes_per_second, .. } | SnapJob::Pace(bytes_per_second) => {
                pace = Pace::new(*bytes_per_second);
                paced_from = Instant::now();
                written = 0;
            }
            SnapJob::Chunk(bytes) => written += bytes.len() as u64,
            _ => {}
        }
        let chunk = matches!(job, SnapJob::Chunk(_));
        let out = files.run(job, generation);
        if chunk {
            let wait = pace.delay(written, paced_from.elapsed());
            if !wait.is_zero() {
                std::thread::sleep(wait);
            }
        }
        if let Some(r) = out {
            report(r);
        }
    }
}

/// What the snapshot thread does with each job, on any storage: the file of the snapshot under
/// way, retention after each one finished. Pacing is the caller's.
#[derive(Debug)]
pub struct SnapshotFiles<S: Storage> {
    storage: S,
    retain: usize,
    /// Cuts of the log the snapshot under way must not land after.
    fence: Arc<SnapshotFence>,
    /// The snapshot being written, when it began, and the fence's generation then.
    current: Option<(SnapshotWriter<S>, Instant, u64)>,
    /// The snapshot under way failed (it is reported as not written when it finishes).
    failed: bool,
    /// How new snapshots store their chunks.
    compression: Compression,
    /// The archive the server archives into by itself: retention keeps what it has not taken
    /// ([`ArchiveProgress::plan`]).
    archive: Option<Arc<ArchiveProgress>>,
}

impl<S: Storage> SnapshotFiles<S> {
    /// Snapshots in `storage`, the newest `retain` kept, none landing after a cut `fence` saw
    /// ([`SnapshotFence`]).
    pub fn new(storage: S, retain: usize, fence: Arc<SnapshotFence>) -> SnapshotFiles<S> {
        SnapshotFiles {
            storage,
            retain,
            fence,
            current: None,
            failed: false,
            compression: Compression::None,
            archive: None,
        }
    }

    /// The same, keeping what the server's archive has not taken yet ([`ArchiveProgress::plan`]).
    pub fn with_archive(mut self, archive: Arc<ArchiveProgress>) -> SnapshotFiles<S> {
        self.archive = Some(archive);
        self
    }

    /// The same, writing snapshots stored as `compression` says (uncompressed by default).
    pub fn with_compression(mut self, compression: Compression) -> SnapshotFiles<S> {
        self.compression = compression;
        self
    }

    /// Carries out `job`, handed over when the fence was in `generation` (only a Begin's
    /// counts: the snapshot finishes only if the fence is still in it); returns the report it
    /// makes, if any.
    pub fn run(&mut self, job: SnapJob, generation: u64) -> Option<SnapshotReport> {
        match job {
            SnapJob::Begin { zxid, .. } => {
                if let Some((w, _, _)) = self.current.take() {
                    w.abort();
                }
                self.failed = false;
                self.current = match SnapshotWriter::create_with(&self.storage, zxid, self.compression) {
                    Ok(w) => Some((w, Instant::now(), generation)),
                    Err(e) => {
                        warn!("cannot start a snapshot at zxid 0x{zxid:x}: {e}");
                        self.failed = true;
                        None
                    }
                };
                None
            }
            SnapJob::Pace(_) => None,
            SnapJob::Chunk(bytes) => {
                if let Some((w, _, _)) = self.current.as_mut() {
                    if let Err(e) = w.write(&bytes) {
                        warn!("snapshot abandoned: {e}");
                        if let Some((w, _, _)) = self.current.take() {
                            w.abort();
                        }
                        self.failed = true;
                    }
                }
                // Back to the core for the next step: the credit for another chunk.
                Some(SnapshotReport::ChunkDone(bytes))
            }
            SnapJob::Finish => {
                let mut purge_before = None;
                if let Some((mut w, t0, began)) = self.current.take() {
                    // The slow part (the file's sync) outside the fence, so that a cut, which
                    // the driver makes on its own thread, never waits on it.
                    if let Err(e) = w.seal() {
                        warn!("snapshot could not be finished: {e}");
                        return Some(SnapshotReport::Done { ok: false, purge_logs_before: None });
                    }
                    // Under the fence: no cut looks at the directory while the file lands.
                    let generation = self.fence.hold();
                    if generation.generation != began {
                        drop(generation);
                        info!("snapshot {} dropped: the log was cut while it was written", w.name());
                        w.abort();
                        return Some(SnapshotReport::Done { ok: false, purge_logs_before: None });
                    }
                    let finished = w.finish();
                    drop(generation);
                    match finished {
                        Ok(info) => {
                            info!(
                                "snapshot {} written: {} bytes in {:.2?}",
                                info.name,
                                info.file_bytes,
                                t0.elapsed()
                            );
                            purge_before =
                                retention(&self.storage, self.retain, &self.fence, self.archive.as_deref());
                        }
                        Err(e) => {
                            warn!("snapshot could not be finished: {e}");
                            self.failed = true;
                        }
                    }
                }
                Some(SnapshotReport::Done { ok: !self.failed, purge_logs_before: purge_before })
            }
            SnapJob::Abort => {
                if let Some((w, _, _)) = self.current.take() {
                    info!("snapshot {} abandoned", w.name());
                    w.abort();
                }
                self.failed = false;
                Some(SnapshotReport::Done { ok: false, purge_logs_before: None })
            }
            SnapJob::Retain => Some(SnapshotReport::Retained {
                purge_logs_before: retention(
                    &self.storage,
                    self.retain,
                    &self.fence,
                    self.archive.as_deref(),
                ),
            }),
        }
    }
}

/// Rebuilds the database as this server's disk has it: the newest snapshot that loads, then
/// every logged transaction after it, read through `source` (the log's own reader, while its
/// writer runs).
///
/// Errors: the log no longer holds the transactions right after the snapshot (a snapshot that
/// did not load left an older one whose successors were purged, or the log was reset past it):
/// replaying would skip them, so nothing is rebuilt; or a record cannot be read.
pub fn rebuild<S: Storage>(
    storage: &S,
    cfg: TreeConfig,
    source: &dyn zk_log::TxnSource,
) -> Result<Database, String> {
    let (db, name) = load_newest(storage, cfg.clone())?;
    let mut rec = Recovery::new(db);
    replay_source(&mut rec, source)?;
    let rec = verified(storage, cfg, rec, name, |rec| replay_source(rec, source))?;
    Ok(rec.finish(0))
}

/// The database exactly as of one committed zxid, rebuilt from disk while the server runs (the
/// AdminServer's `snapshot` serves it): the newest snapshot starting at or below `through`,
/// with the log after it replayed from `source` through `through`, or through the snapshot's
/// end zxid if that is later (a snapshot is finished only once the log holds its end, and its
/// nodes may have been captured as late as that end, so the tree is whole only from there on).
/// The caller picks `through` among the transactions committed and durable here. Nothing on
/// disk changes: a snapshot whose recorded digest does not check out is refused, not renamed
/// aside (the running server's own load decides that).
///
/// Memory: one copy of the tree, beside the server's own.
///
/// `stop` is asked between batches of the log: once it says so, the copy is given up (the
/// asker went away).
///
/// Errors: no snapshot, the log no longer (or not yet) holds the transactions needed, a record
/// does not read back, the snapshot does not reproduce its recorded digest, or `stop`.
pub fn consistent_copy<S: Storage>(
    storage: &S,
    cfg: TreeConfig,
    source: &dyn zk_log::TxnSource,
    through: i64,
    stop: &dyn Fn() -> bool,
) -> Result<Database, String> {
    let (db, name) = load_newest_before(storage, cfg, through.saturating_add(1))?;
    let Some(name) = name else {
        return Err(format!("no snapshot at or below zxid 0x{through:x} to start from"));
    };
    let mut rec = Recovery::new(db);
    let end = match rec.snapshot_check() {
        zk_tree::SnapshotCheck::Verified { zxid, .. } | zk_tree::SnapshotCheck::Mismatch { zxid, .. } => zxid,
        zk_tree::SnapshotCheck::Unverifiable { why } => match why {
            zk_tree::Unverifiable::NoDigest { end_zxid }
            | zk_tree::Unverifiable::LogEndsBefore { end_zxid, .. }
            | zk_tree::Unverifiable::EndZxidMissing { end_zxid, .. } => end_zxid,
            zk_tree::Unverifiable::NoSnapshot | zk_tree::Unverifiable::NoEndState { .. } => rec.start_zxid(),
        },
    };
    let target = through.max(end);
    let base = source.base_zxid();
    if rec.start_zxid() < base {
        return Err(format!(
            "snapshot {name} starts at 0x{:x}, but the log starts after 0x{base:x}",
            rec.start_zxid()
        ));
    }
    let mut from = rec.start_zxid() + 1;
    while from <= target {
        if stop() {
            return Err(COPY_STOPPED.into());
        }
        let entries = source.read_range(from, target, CONSISTENT_READ_ENTRIES).map_err(|e| e.to_string())?;
        let Some(last) = entries.last().map(|e| e.header.zxid) else { break };
        for e in &entries {
            rec.replay(&e.header, &e.txn);
        }
        from = last + 1;
    }
    if rec.last_zxid() < target {
        return Err(format!(
            "the log holds transactions only through 0x{:x}, not through 0x{target:x}",
            rec.last_zxid()
        ));
    }
    match rec.snapshot_check() {
        zk_tree::SnapshotCheck::Mismatch { zxid, want, got } => {
            return Err(format!(
                "snapshot {name} and the log after it give digest {got:x} at 0x{zxid:x}, where it recorded {want:x}"
            ))
        }
        zk_tree::SnapshotCheck::Unverifiable { why: why @ zk_tree::Unverifiable::EndZxidMissing { .. } } => {
            return Err(format!("snapshot {name}: {why:?}"))
        }
        _ => {}
    }
    debug!(
        "a copy of the tree at 0x{target:x} rebuilt from snapshot {name} and {} transactions",
        rec.replayed()
    );
    Ok(rec.finish(0))
}

/// [`consistent_copy`]'s error when its `stop` said so.
pub const COPY_STOPPED: &str = "the copy was given up: its asker went away";

/// Log records read at a time by [`consistent_copy`].
const CONSISTENT_READ_ENTRIES: usize = 4096;

/// Replays what `source` holds after the snapshot `rec` started from.
fn replay_source(rec: &mut Recovery, source: &dyn zk_log::TxnSource) -> Result<(), String> {
    let last = source.durable_zxid();
    let base = source.base_zxid();
    if rec.start_zxid() < base {
        return Err(format!(
            "the newest snapshot that loads starts at 0x{:x}, but the log starts after 0x{base:x}: \
             the transactions between are gone",
            rec.start_zxid()
        ));
    }
    let mut from = rec.start_zxid().max(base) + 1;
    let mut progress = crate::log::ReplayProgress::start();
    let mut scratch = zk_tree::WarmScratch::default();
    while from <= last {
        let entries = source.read_range(from, last, 100_000).map_err(|e| e.to_string())?;
        let Some(end) = entries.last().map(|e| e.header.zxid) else { break };
        for chunk in entries.chunks(crate::log::WARM_AHEAD) {
            rec.warm(chunk.iter().map(|e| &e.txn), &mut scratch);
            for e in chunk {
                rec.replay(&e.header, &e.txn);
                progress.note(rec);
            }
        }
        from = end + 1;
    }
    progress.done(rec, "the log");
    Ok(())
}

/// Keeps the newest `retain` snapshots; returns the zxid before which the log is no longer needed.
/// The old ones are chosen and moved aside under `fence`, so that a cut of the log never lists
/// a snapshot retention is taking away (it could reset the log to a snapshot then gone), and cut
/// down after it, which may take a while for large files. With `archive`, the snapshots and the
/// log it has not taken yet are kept too ([`ArchiveProgress::plan`]).
fn retention<S: Storage>(
    storage: &S,
    retain: usize,
    fence: &SnapshotFence,
    archive: Option<&ArchiveProgress>,
) -> Option<i64> {
    // Planned before the fence is taken (it reads the files' sizes, and a cut on the driver's
    // thread must not wait on that): a cut meanwhile removes or adds only snapshots newer than
    // the oldest ones the plan lets go.
    let plan = match archive {
        None => crate::backup::continuous::Plan::FREE,
        Some(a) => match list_snapshots(storage) {
            Ok(all) => a.plan(storage, &all, retain),
            Err(e) => {
                warn!("snapshot retention failed: {e}");
                return None;
            }
        },
    };
    let held = fence.hold();
    if let Some(base) = held.resync_base {
        debug!("snapshot retention waits: a log reset to snapshot 0x{base:x} is under way");
        return None;
    }
    let moved = retain_newest_to_trash_at_most(storage, retain, plan.snapshots);
    drop(held);
    match moved {
        Ok((r, trash)) => {
            for name in &r.removed {
                info!("removed old snapshot {name}");
            }
            remove_trash(storage, &trash);
            match (r.purge_logs_before, plan.log_before) {
                (Some(p), Some(cap)) => Some(p.min(cap)),
                _ => None,
            }
        }
        Err(e) => {
            warn!("snapshot retention failed: {e}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pace_waits_until_the_bytes_are_due() {
        let p = Pace::new(40_000_000);
        // 40 MB due after a second: 10 MB written at 100 ms waits 150 ms.
        assert_eq!(p.delay(10_000_000, Duration::from_millis(100)), Duration::from_millis(150));
        assert_eq!(p.delay(10_000_000, Duration::from_millis(250)), Duration::ZERO);
        assert_eq!(p.delay(10_000_000, Duration::from_secs(3)), Duration::ZERO, "behind: no wait");
        assert_eq!(p.delay(0, Duration::ZERO), Duration::ZERO);
        assert_eq!(Pace::new(0).delay(u64::MAX, Duration::ZERO), Duration::ZERO, "unpaced");
    }

    #[test]
    fn discarding_after_a_cut_keeps_the_older_snapshots() {
        use zk_log::snapshot::{list_snapshots, snapshot_name};
        use zk_log::{Storage, StorageFile};
        let dir = tempfile::tempdir().expect("temp dir");
        let storage = open_dir(dir.path()).expect("open");
        let zxids = [0x1_0000_0003_i64, 0x2_0000_0001, 0x3_0000_0005];
        for z in zxids {
            let mut f = storage.create(&snapshot_name(z)).expect("create");
            f.sync().expect("sync");
        }
        let on_disk =
            || -> Vec<i64> { list_snapshots(&storage).expect("list").into_iter().map(|(z, _)| z).collect() };
        let trash = discard_after(&storage, 0x2_0000_0004).expect("discard");
        assert_eq!(on_disk(), zxids[..2], "moved to the trash at once");
        remove_trash(&storage, &trash);
        assert_eq!(on_disk(), zxids[..2]);
        discard_after(&storage, 0x2_0000_0001).expect("discard");
        assert_eq!(on_disk(), zxids[..2], "the one at the cut stays");
        discard_after(&storage, 0x1_0000_0000).expect("discard");
        assert!(on_disk().is_empty(), "none left");
    }

    /// Review of the three-stage load, finding 2: the pipeline's own failure paths, with one,
    /// two and three decoding threads. A snapshot of several chunks loads whole; a chunk damaged
    /// part way (its checksum fails) skips it for the older one; behind good checksums, a node
    /// record that does not decode (in a decoder) or a record longer than any limit (in the
    /// reader's cut) stops the load. Each returns, every thread joined, instead of hanging.
    #[test]
    fn the_load_fails_the_same_way_with_one_two_or_three_decoders() {
        use zk_log::snapshot::{snapshot_name, SnapshotWriter, CHUNK_BYTES, SNAP_HEADER_BYTES};
        use zk_proto::{CreateTxn, OpCode, Txn, TxnHeader};
        let nodes = 30_000i64;
        let mut db = Database::new(TreeConfig::default());
        for z in 1..=nodes {
            let hdr =
                TxnHeader { client_id: 1, cxid: z as i32, zxid: z, time: z, txn_type: OpCode::Create.code() };
            let txn = Txn::Create(CreateTxn {
                path: format!("/n{z:06}"),
                data: Some(bytes::Bytes::from(vec![b'v'; 200])),
                acl: vec![],
                ephemeral: false,
                parent_cversion: z as i32,
            });
            db.apply(&hdr, &txn);
        }
        let mut cur = db.snapshot_begin();
        let mut content = Vec::new();
        while !db.snapshot_step(&mut cur, &mut content, 1_000) {}
        let chunk = CHUNK_BYTES as usize;
        assert!(content.len() > 5 * chunk, "several chunks: {} bytes", content.len());
        // The first node record in chunk `c` (from 0): `u8 tag | u32 length | u8 flags | u32 path
        // length | ...`. Chunk c is run c, which decoder c % threads decodes.
        let node_in = |c: usize| {
            let mut at = 0;
            while content[at] != 4 || at < c * chunk {
                at += 5 + u32::from_le_bytes(content[at + 1..at + 5].try_into().expect("4 bytes")) as usize;
            }
            at
        };
        let dir = tempfile::tempdir().expect("temp dir");
        let storage = open_dir(dir.path()).expect("open");
        let empty = Database::new(TreeConfig::default());
        let older = write_whole(&storage, &empty, 100, Compression::None).expect("older").name;
        let newer = dir.path().join(snapshot_name(nodes));
        let write = |content: &[u8]| -> String {
            let _ = std::fs::remove_file(&newer);
            let mut w = SnapshotWriter::create(&storage, nodes).expect("create");
            w.write(content).expect("write");
            w.finish().expect("finish").name
        };
        let load = |name: &str, threads: usize| {
            load_one_on(&storage, name, TreeConfig::default(), threads).map(|db| db.node_count())
        };
        for threads in 1..=3 {
            let name = write(&content);
            let loaded = load_one_on(&storage, &name, TreeConfig::default(), threads).expect("loads whole");
            assert_eq!(loaded.node_count(), db.node_count(), "{threads} decoders");
            assert_eq!(loaded.approximate_data_size(), db.approximate_data_size(), "{threads} decoders");
            for c in 2..=4 {
                // A byte of chunk c's stored content flipped: its checksum fails.
                write(&content);
                let mut file = std::fs::read(&newer).expect("read");
                file[SNAP_HEADER_BYTES as usize + c * (8 + chunk) + 1_000] ^= 0x40;
                std::fs::write(&newer, &file).expect("write");
                let skipped = load(&name, threads);
                assert!(matches!(skipped, Err(Fail::Skip(_))), "{threads} decoders, chunk {c}: {skipped:?}");
                // Behind good checksums: a node's path longer than its record (found by the
                // decoder), a record longer than any (found by the reader's cut).
                let at = node_in(c);
                let mut undecodable = content.clone();
                undecodable[at + 6..at + 10].copy_from_slice(&0xFFFF_FF00u32.to_le_bytes());
                let mut overlong = content.clone();
                overlong[at + 1..at + 5].copy_from_slice(&u32::MAX.to_le_bytes());
                for bad in [undecodable, overlong] {
                    write(&bad);
                    let stopped = load(&name, threads);
                    assert!(
                        matches!(&stopped, Err(Fail::Stop(why)) if why.contains("malformed")),
                        "{threads} decoders, chunk {c}: {stopped:?}"
                    );
                }
            }
        }
        // Through the newest-first walk: the damaged chunk falls back to the older snapshot.
        let name = write(&content);
        let mut file = std::fs::read(&newer).expect("read");
        file[SNAP_HEADER_BYTES as usize + 2 * (8 + chunk) + 77] ^= 1;
        std::fs::write(&newer, &file).expect("write");
        let (_, loaded) = load_newest(&storage, TreeConfig::default()).expect("falls back");
        assert_eq!(loaded, Some(older), "not {name}");
    }

    /// Review of h-zstd, finding 1: a newer snapshot whose format 2 header is intact but names a
    /// codec this build does not know stops the load, naming the codec, instead of being skipped
    /// for the older snapshot; the same header damaged is skipped.
    #[test]
    fn an_unknown_codec_stops_the_load_instead_of_falling_back() {
        use zk_log::snapshot::snapshot_name;
        let dir = tempfile::tempdir().expect("temp dir");
        let storage = open_dir(dir.path()).expect("open");
        let db = Database::new(TreeConfig::default());
        let older = write_whole(&storage, &db, 100, Compression::None).expect("older").name;
        let other = tempfile::tempdir().expect("temp dir");
        let packed =
            write_whole(&open_dir(other.path()).expect("open"), &db, 100, Compression::Zstd { level: 1 })
                .expect("compressed");
        let mut bytes = std::fs::read(other.path().join(&packed.name)).expect("read");
        let newer = dir.path().join(snapshot_name(9));
        bytes[16..24].copy_from_slice(&9u64.to_le_bytes());
        bytes[28..32].copy_from_slice(&2u32.to_le_bytes());
        let crc = crc32fast::hash(&bytes[0..36]);
        bytes[36..40].copy_from_slice(&crc.to_le_bytes());
        std::fs::write(&newer, &bytes).expect("write");
        let err = load_newest(&storage, TreeConfig::default()).map(|(_, name)| name).expect_err("stops");
        assert!(err.contains("compression codec 2, unknown to this zkrs"), "{err}");
        bytes[36] ^= 1;
        std::fs::write(&newer, &bytes).expect("write");
        let (_, loaded) = load_newest(&storage, TreeConfig::default()).expect("damage is skipped");
        assert_eq!(loaded, Some(older));
    }

    /// Review of the snapshot command, finding 10: the copy is given up between batches of the
    /// log once its asker is gone.
    #[test]
    fn a_consistent_copy_stops_when_asked() {
        struct Log;
        impl zk_log::TxnSource for Log {
            fn durable_zxid(&self) -> i64 {
                10
            }
            fn base_zxid(&self) -> i64 {
                0
            }
            fn read_range(&self, _: i64, _: i64, _: usize) -> Result<Vec<zk_log::LogEntry>, LogError> {
                Ok(Vec::new())
            }
            fn first_zxid(&self) -> Option<i64> {
                Some(1)
            }
        }
        let disk = zk_log::FaultStorage::new(3);
        let fence = Arc::new(SnapshotFence::new());
        let mut files = SnapshotFiles::new(disk.clone(), 3, fence.clone());
        let db = Database::new(TreeConfig::default());
        let mut cur = db.snapshot_begin();
        let zxid = cur.start_zxid();
        let mut buf = Vec::new();
        while !db.snapshot_step(&mut cur, &mut buf, usize::MAX) {}
        let g = fence.generation();
        files.run(SnapJob::Begin { zxid, pace: 0 }, g);
        files.run(SnapJob::Chunk(buf), g);
        assert!(matches!(files.run(SnapJob::Finish, g), Some(SnapshotReport::Done { ok: true, .. })));
        let stopped = consistent_copy(&disk, TreeConfig::default(), &Log, zxid + 5, &|| true);
        assert_eq!(stopped.err().as_deref(), Some(COPY_STOPPED));
        let short = consistent_copy(&disk, TreeConfig::default(), &Log, zxid + 5, &|| false);
        assert!(short.err().is_some_and(|e| e.contains("only through")), "not stopped: it reads the log");
        assert!(consistent_copy(&disk, TreeConfig::default(), &Log, zxid, &|| false).is_ok());
    }

    /// Review of issue 29, finding 2: a snapshot whose last chunk is out finishes only if no
    /// cut of the log ran since it began; otherwise its file is dropped, so it never lands
    /// beside a log reset below it. One begun after the cut finishes as usual.
    #[test]
    fn a_snapshot_begun_before_a_cut_does_not_land_after_it() {
        use zk_log::snapshot::list_snapshots;
        let disk = zk_log::FaultStorage::new(3);
        let fence = Arc::new(SnapshotFence::new());
        let mut files = SnapshotFiles::new(disk.clone(), 3, fence.clone());
        let done = |r: Option<SnapshotReport>| match r {
            Some(SnapshotReport::Done { ok, .. }) => ok,
            other => panic!("not a Done report: {other:?}"),
        };
        let g = fence.generation();
        files.run(SnapJob::Begin { zxid: 0x10, pace: 0 }, g);
        files.run(SnapJob::Chunk(vec![7; 100]), g);
        assert!(fence.cut(|| list_snapshots(&disk).expect("list")).is_empty());
        let g = fence.generation();
        assert!(!done(files.run(SnapJob::Finish, g)), "dropped: a cut ran while it was written");
        assert!(list_snapshots(&disk).expect("list").is_empty());
        // Review of issue 29 (helper-20), finding 2: a Begin handed over before a cut but run by
        // the thread only after it (queued behind slow work) is of the generation it was handed
        // over in, and is dropped too.
        let queued = fence.generation();
        fence.cut(|| discard_after(&disk, 0x8).expect("discard"));
        let g = fence.generation();
        files.run(SnapJob::Begin { zxid: 0x18, pace: 0 }, queued);
        files.run(SnapJob::Chunk(vec![7; 100]), g);
        assert!(!done(files.run(SnapJob::Finish, g)), "dropped: begun before the cut");
        assert!(list_snapshots(&disk).expect("list").is_empty());
        files.run(SnapJob::Begin { zxid: 0x20, pace: 0 }, g);
        files.run(SnapJob::Chunk(vec![7; 100]), g);
        assert!(done(files.run(SnapJob::Finish, g)), "no cut since it began");
        let left: Vec<i64> = list_snapshots(&disk).expect("list").into_iter().map(|(z, _)| z).collect();
        assert_eq!(left, [0x20]);
    }

    /// Review of issue 29 (helper-20), finding 3: between the write of a snapshot received from
    /// the leader, which the log is reset to, and the removal of the snapshots past it,
    /// retention removes nothing (counting those among the newest, it would take the received
    /// one); after, it runs again.
    #[test]
    fn retention_keeps_the_snapshot_a_reset_starts_from() {
        use zk_log::snapshot::list_snapshots;
        let disk = zk_log::FaultStorage::new(4);
        let fence = Arc::new(SnapshotFence::new());
        let mut files = SnapshotFiles::new(disk.clone(), 2, fence.clone());
        let mut take = |zxid: i64| {
            let g = fence.generation();
            files.run(SnapJob::Begin { zxid, pace: 0 }, g);
            files.run(SnapJob::Chunk(vec![7; 100]), g);
            match files.run(SnapJob::Finish, g) {
                Some(SnapshotReport::Done { ok, .. }) => assert!(ok, "0x{zxid:x} written"),
                other => panic!("not a Done report: {other:?}"),
            }
        };
        let on_disk =
            || -> Vec<i64> { list_snapshots(&disk).expect("list").into_iter().map(|(z, _)| z).collect() };
        take(0x10);
        take(0x20);
        let received = |zxid: i64| -> Result<i64, String> {
            use zk_log::{Storage, StorageFile};
            let mut f = disk.create(&zk_log::snapshot::snapshot_name(zxid)).map_err(|e| e.to_string())?;
            f.sync().map_err(|e| e.to_string())?;
            Ok(zxid)
        };
        let base = fence.cut_for_reset(|| received(0x15)).expect("written");
        assert_eq!(base, 0x15);
        take(0x30);
        assert_eq!(on_disk(), [0x10, 0x15, 0x20, 0x30], "retention waits for the reset");
        let trash = fence.reset_done(|| discard_after(&disk, 0x15)).expect("discard");
        remove_trash(&disk, &trash);
        assert_eq!(on_disk(), [0x10, 0x15]);
        take(0x40);
        take(0x50);
        assert_eq!(on_disk(), [0x40, 0x50], "retention runs again");
    }

    /// Retention keeps what the server's archive has not taken: every snapshot while nothing is
    /// known of it (and no log purge), then only those newer than its newest snapshot, and the
    /// log purge never past its newest zxid. Without the archive the same runs remove them.
    #[test]
    fn retention_keeps_what_the_archive_has_not_taken() {
        use crate::backup::continuous::{ArchiveProgress, Taken};
        use zk_log::snapshot::list_snapshots;
        let disk = zk_log::FaultStorage::new(8);
        let fence = Arc::new(SnapshotFence::new());
        let log_dir = tempfile::tempdir().expect("temp dir");
        let archive = Arc::new(ArchiveProgress::new("/archive", 0, log_dir.path().to_path_buf()));
        let mut files = SnapshotFiles::new(disk.clone(), 2, fence.clone()).with_archive(archive.clone());
        let mut take = |zxid: i64| {
            let g = fence.generation();
            files.run(SnapJob::Begin { zxid, pace: 0 }, g);
            files.run(SnapJob::Chunk(vec![7; 100]), g);
            match files.run(SnapJob::Finish, g) {
                Some(SnapshotReport::Done { ok: true, purge_logs_before }) => purge_logs_before,
                other => panic!("0x{zxid:x} not written: {other:?}"),
            }
        };
        let on_disk =
            || -> Vec<i64> { list_snapshots(&disk).expect("list").into_iter().map(|(z, _)| z).collect() };
        for z in [0x10, 0x20, 0x30] {
            assert_eq!(take(z), None, "no log purge while nothing is known of the archive");
        }
        assert_eq!(on_disk(), [0x10, 0x20, 0x30]);
        archive.set_taken(Taken { log_through: Some(0x25), snapshots_through: Some(0x10) });
        assert_eq!(take(0x40), Some(0x21), "0x20 is kept, and its log");
        assert_eq!(on_disk(), [0x20, 0x30, 0x40]);
        archive.set_taken(Taken { log_through: Some(0x25), snapshots_through: Some(0x40) });
        assert_eq!(take(0x50), Some(0x26), "the log not past the archive's newest zxid");
        assert_eq!(on_disk(), [0x40, 0x50]);
        archive.set_taken(Taken { log_through: Some(0x55), snapshots_through: Some(0x50) });
        assert_eq!(take(0x60), Some(0x51), "as without an archive");
        assert_eq!(on_disk(), [0x50, 0x60]);
    }

    /// F7: the database rebuilt at a role change never skips a range of the log: when the
    /// newest snapshot that loads starts before where the log starts (the one after it was
    /// damaged, and the log purged up to it), the rebuild is refused, as start-up refuses it.
    #[test]
    fn a_rebuild_refuses_a_gap_between_the_snapshot_and_the_log() {
        let log_disk = zk_log::FaultStorage::new(1);
        let snap_disk = zk_log::FaultStorage::new(2);
        let mut log = zk_log::SegmentLog::open(log_disk, zk_log::LogOptions::default()).expect("open");
        // The log continues above 0x100 (a snapshot there was installed, then lost).
        log.reset_to(0x100).expect("reset");
        let reader = log.reader();
        let err = rebuild(&snap_disk, TreeConfig::default(), &reader).expect_err("a gap");
        assert!(err.contains("the transactions between are gone"), "{err}");
        // With a snapshot at the log's start, it rebuilds.
        let mut db = Database::new(TreeConfig::default());
        let hdr = zk_proto::TxnHeader {
            client_id: 1,
            cxid: 0,
            zxid: 0x100,
            time: 0,
            txn_type: zk_proto::OpCode::CreateSession.code(),
        };
        let txn = db.prep_create_session(1, 30_000);
        db.apply(&hdr, &txn);
        write_whole(&snap_disk, &db, 16, Compression::Zstd { level: 1 }).expect("snapshot");
        let rebuilt = rebuild(&snap_disk, TreeConfig::default(), &reader).expect("rebuilds");
        assert_eq!(rebuilt.last_applied_zxid(), 0x100);
    }
}
