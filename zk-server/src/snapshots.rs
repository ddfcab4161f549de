//! Snapshots of the database: loading the newest one at start, and taking new ones without
//! stalling writes.
//!
//! A snapshot is fuzzy: the core serializes a bounded number of nodes between batches of writes
//! (`Database::snapshot_step`), so the nodes it captures may reflect different zxids. Restarting
//! from it replays every logged transaction after its start zxid, idempotently
//! (`zk_tree::Recovery`), which converges to the exact state. The bytes go to a thread of their own
//! that writes the file (temp file, fsync, rename), keeps the newest `autopurge.snapRetainCount`
//! snapshots, and reports which log segments are no longer needed.

use crate::core::CoreMsg;
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::time::Instant;
use tokio::sync::mpsc;
use tracing::{info, warn};
use zk_log::snapshot::{latest_valid, read_snapshot, remove_stale_temps, retain_newest, SnapshotWriter};
use zk_log::{FileStorage, LogError};
use zk_tree::{Database, SnapshotLoader, TreeConfig};

/// Chunks queued for the snapshot thread before the core stops stepping for a while.
pub const CHUNK_QUEUE: usize = 16;

/// Nodes the core serializes per step: small enough that a step never shows in write latency.
pub const NODES_PER_STEP: usize = 2_000;

/// Work for the snapshot thread.
#[derive(Debug)]
pub enum SnapJob {
    /// A snapshot starting at this zxid begins.
    Begin(i64),
    /// More content.
    Chunk(Vec<u8>),
    /// The content is complete: finish the file and apply retention.
    Finish,
    /// Apply retention only (autopurge.purgeInterval's timer).
    Retain,
}

/// Opens the snapshot directory, removing temp files of snapshots a crash interrupted.
///
/// Errors: the directory cannot be created, locked or listed.
pub fn open_dir(dir: &Path) -> Result<FileStorage, LogError> {
    let storage = FileStorage::open_dir(dir).map_err(|source| LogError::Io {
        op: "open snapshot directory",
        file: dir.display().to_string(),
        source,
    })?;
    for name in remove_stale_temps(&storage)? {
        warn!("removed {name}: a snapshot interrupted by a crash");
    }
    Ok(storage)
}

/// The database in the newest valid snapshot, or a fresh one when there is none. Torn or corrupt
/// snapshots are skipped with a warning; one from a newer format stops start-up.
///
/// Errors: the snapshot cannot be read, or its content does not load.
pub fn load_newest(storage: &FileStorage, cfg: TreeConfig) -> Result<Database, String> {
    let Some(info) = latest_valid(storage).map_err(|e| e.to_string())? else {
        return Ok(Database::new(cfg));
    };
    let t0 = Instant::now();
    let mut loader = SnapshotLoader::new(cfg);
    read_snapshot(storage, &info.name, &mut |chunk| loader.feed(chunk).map_err(|e| e.to_string()))
        .map_err(|e| format!("snapshot {}: {e}", info.name))?;
    let nodes = loader.nodes_loaded();
    let db = loader.finish().map_err(|e| format!("snapshot {}: {e}", info.name))?;
    info!("loaded snapshot {} ({nodes} nodes, {} bytes) in {:.2?}", info.name, info.file_bytes, t0.elapsed());
    Ok(db)
}

/// Starts the snapshot thread. It tells the core when a snapshot is done and which log records
/// older snapshots no longer need (`CoreMsg::SnapshotDone`).
///
/// Errors: the thread could not be spawned.
pub fn spawn_writer(
    storage: FileStorage,
    retain: usize,
    core: mpsc::Sender<CoreMsg>,
) -> std::io::Result<SyncSender<SnapJob>> {
    let (tx, rx) = sync_channel(CHUNK_QUEUE);
    std::thread::Builder::new().name("zk-snapshot".into()).spawn(move || run(storage, retain, rx, core))?;
    Ok(tx)
}

fn run(storage: FileStorage, retain: usize, rx: Receiver<SnapJob>, core: mpsc::Sender<CoreMsg>) {
    let mut current: Option<(SnapshotWriter<FileStorage>, Instant)> = None;
    let mut failed = false;
    while let Ok(job) = rx.recv() {
        match job {
            SnapJob::Begin(zxid) => {
                failed = false;
                current = match SnapshotWriter::create(&storage, zxid) {
                    Ok(w) => Some((w, Instant::now())),
                    Err(e) => {
                        warn!("cannot start a snapshot at zxid 0x{zxid:x}: {e}");
                        failed = true;
                        None
                    }
                };
            }
            SnapJob::Chunk(bytes) => {
                if let Some((w, _)) = current.as_mut() {
                    if let Err(e) = w.write(&bytes) {
                        warn!("snapshot abandoned: {e}");
                        current = None;
                        failed = true;
                    }
                }
            }
            SnapJob::Finish => {
                let mut purge_before = None;
                if let Some((w, t0)) = current.take() {
                    match w.finish() {
                        Ok(info) => {
                            info!(
                                "snapshot {} written: {} bytes in {:.2?}",
                                info.name,
                                info.file_bytes,
                                t0.elapsed()
                            );
                            purge_before = retention(&storage, retain);
                        }
                        Err(e) => {
                            warn!("snapshot could not be finished: {e}");
                            failed = true;
                        }
                    }
                }
                let _ = core
                    .blocking_send(CoreMsg::SnapshotDone { ok: !failed, purge_logs_before: purge_before });
            }
            SnapJob::Retain => {
                let purge_logs_before = retention(&storage, retain);
                let _ = core.blocking_send(CoreMsg::Retained { purge_logs_before });
            }
        }
    }
}

/// Keeps the newest `retain` snapshots; returns the zxid before which the log is no longer needed.
fn retention(storage: &FileStorage, retain: usize) -> Option<i64> {
    match retain_newest(storage, retain) {
        Ok(r) => {
            for name in &r.removed {
                info!("removed old snapshot {name}");
            }
            r.purge_logs_before
        }
        Err(e) => {
            warn!("snapshot retention failed: {e}");
            None
        }
    }
}
