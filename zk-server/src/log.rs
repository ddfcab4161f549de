//! Where the write path persists transactions before they are committed.
//!
//! The core hands each batch of new proposals to a [`TxnSink`] and commits them only when the sink
//! reports them durable, through the channel given when the sink was made. With zk-log's
//! `LogWriter` batches that arrive while a sync runs go out together in the next one: group
//! commit. Standalone zkrs runs Zab's write path as a quorum of one, so "durable on a quorum" means
//! durable in this server's log.

use std::time::{Duration, Instant};
use tracing::info;
use zk_log::{AppendMode, FileStorage, LogError, LogOptions, SegmentLog, Storage};
use zk_tree::Recovery;

// The seam lives in zk-log, so that the Zab code can name it without depending on zk-server.
pub use zk_log::{DurableReport, TxnSink};

/// Opens (and recovers) the log in `dir`, appending as `mode` says (txnLog.appendMode): the scan
/// that checks every record, which needs no database, so start-up runs it beside the snapshot
/// load.
///
/// Errors: the directory cannot be used; the log is corrupt before its tail, has a zxid gap, or was
/// written by a newer format (each names the file and offset).
pub fn open(
    dir: &std::path::Path,
    mode: AppendMode,
    opts: LogOptions,
) -> Result<SegmentLog<FileStorage>, LogError> {
    let storage = FileStorage::open_dir_with(dir, mode).map_err(|source| LogError::Io {
        op: "open log directory",
        file: dir.display().to_string(),
        source,
    })?;
    let log = SegmentLog::open(storage, opts)?;
    info!("transaction log appends with {mode} (txnLog.appendMode)");
    let report = log.recovery();
    if report != &Default::default() {
        info!("log recovery: {report:?}");
    }
    Ok(log)
}

/// Replays what the opened `log` (named `what` in the progress lines) holds after the snapshot
/// `rec` started from, idempotently.
///
/// Errors: the log no longer holds the transactions right after the snapshot, or a record read
/// back does not check out. A log that ends before the snapshot is reset to it (zk-log's
/// `SegmentLog::reconcile_with_snapshot`).
pub fn replay<S: Storage + Sync>(
    log: &mut SegmentLog<S>,
    rec: &mut Recovery,
    what: &str,
) -> Result<(), LogError>
where
    S::File: Sync,
{
    // Fits the log to the snapshot: errors if transactions right after it are missing (replaying
    // would skip them); resets a log that ends before it (the next append follows the snapshot).
    let Some(from) = log.reconcile_with_snapshot(rec.start_zxid())? else {
        return Ok(());
    };
    let mut progress = ReplayProgress::start();
    let records = log.read_from(from)?;
    // Two stages on two threads: one reads each record back, checks its checksum and decodes it;
    // this one applies them in order. The channel holds a bounded number of decoded records.
    // Applied batches go back to the reading thread to be freed there: freeing what another
    // thread allocated is the allocator's slow path, and this thread is the replay's bottleneck.
    type Batch = Vec<Result<zk_log::LogEntry, LogError>>;
    let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(REPLAY_QUEUE);
    let (done_tx, done_rx) = std::sync::mpsc::sync_channel::<Batch>(REPLAY_QUEUE);
    let applied = std::thread::scope(|s| -> Result<(), LogError> {
        let reading = std::thread::Builder::new().name("zk-log-replay".into()).spawn_scoped(s, move || {
            let mut batch = Vec::with_capacity(REPLAY_BATCH);
            for entry in records {
                let failed = entry.is_err();
                batch.push(entry);
                if batch.len() == REPLAY_BATCH || failed {
                    let full = std::mem::replace(&mut batch, Vec::with_capacity(REPLAY_BATCH));
                    // A failed read is the last thing sent: the applying side stops on it.
                    if tx.send(full).is_err() || failed {
                        return;
                    }
                    while done_rx.try_recv().is_ok() {}
                }
            }
            let _ = tx.send(batch);
            drop(tx);
            // Until the applying side is through (it drops its sender then).
            while done_rx.recv().is_ok() {}
        });
        if let Err(e) = reading {
            return Err(LogError::Io {
                op: "start the replay's reading thread",
                file: what.to_string(),
                source: e,
            });
        }
        // Owned here, so that it is dropped when this closure returns (by error too), which
        // lets the reading thread's last wait end before the scope joins it.
        let done_tx = done_tx;
        let mut scratch = zk_tree::WarmScratch::default();
        for mut batch in rx {
            let mut failed = None;
            for (c, chunk) in batch.chunks(WARM_AHEAD).enumerate() {
                // The look-ups of the next few transactions first, their cache misses together.
                rec.warm(chunk.iter().filter_map(|e| e.as_ref().ok()).map(|e| &e.txn), &mut scratch);
                for (i, entry) in chunk.iter().enumerate() {
                    match entry {
                        Ok(entry) => {
                            rec.replay(&entry.header, &entry.txn);
                        }
                        Err(_) => {
                            failed = Some(c * WARM_AHEAD + i);
                            break;
                        }
                    }
                }
                if failed.is_some() {
                    break;
                }
            }
            if let Some(Err(e)) = failed.map(|i| batch.swap_remove(i)) {
                return Err(e);
            }
            progress.note(rec);
            // A full queue back (the reading thread gone or behind) frees it here instead.
            let _ = done_tx.try_send(batch);
        }
        Ok(())
    });
    applied?;
    progress.done(rec, what);
    Ok(())
}

/// Decoded records a replay's reading thread hands over at a time.
const REPLAY_BATCH: usize = 256;
/// Transactions whose look-ups are read ahead together before they are applied
/// (`zk_tree::Recovery::warm`): enough for their cache misses to overlap, few enough that what
/// they bring in is still cached when they are applied.
pub(crate) const WARM_AHEAD: usize = 32;
/// Batches in flight between the replay's two threads (up to 4,096 decoded records).
const REPLAY_QUEUE: usize = 16;

/// Progress of a log replay for the person waiting on it: a line a second, and one at the end.
pub struct ReplayProgress {
    started: Instant,
    last_note: Instant,
}

impl ReplayProgress {
    /// A replay starts now.
    pub fn start() -> ReplayProgress {
        ReplayProgress { started: Instant::now(), last_note: Instant::now() }
    }

    /// After each replayed transaction or batch of them: a line when a second has passed since
    /// the last.
    pub fn note(&mut self, rec: &Recovery) {
        if self.last_note.elapsed() >= Duration::from_secs(1) {
            info!(
                "replaying the transaction log: {} transactions, at zxid 0x{:x}",
                rec.replayed(),
                rec.last_zxid()
            );
            self.last_note = Instant::now();
        }
    }

    /// The replay from `what` ended.
    pub fn done(self, rec: &Recovery, what: &str) {
        info!(
            "replayed {} transactions from {what} in {:.2?}; last zxid 0x{:x}",
            rec.replayed(),
            self.started.elapsed(),
            rec.last_zxid()
        );
    }
}
