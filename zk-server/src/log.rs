//! Where the write path persists transactions before they are committed.
//!
//! The core hands each batch of new proposals to a [`TxnSink`] and commits them only when the sink
//! reports them durable, through the channel given when the sink was made. With zk-log's
//! `LogWriter` batches that arrive while a sync runs go out together in the next one: group
//! commit. Standalone zkrs runs Zab's write path as a quorum of one, so "durable on a quorum" means
//! durable in this server's log.

use std::time::{Duration, Instant};
use tracing::info;
use zk_log::{AppendMode, FileStorage, LogError, LogOptions, SegmentLog};
use zk_tree::Recovery;

// The seam lives in zk-log, so that the Zab code can name it without depending on zk-server.
pub use zk_log::{DurableReport, TxnSink};

/// Opens (and recovers) the log in `dir`, appending as `mode` says (txnLog.appendMode), and replays
/// what it holds after the snapshot `rec` started from, idempotently.
///
/// Errors: the directory cannot be used; the log is corrupt before its tail, has a zxid gap, or was
/// written by a newer format (each names the file and offset); or the log no longer holds the
/// transactions right after the snapshot. A log that ends before the snapshot is reset to it
/// (zk-log's `SegmentLog::reconcile_with_snapshot`).
pub fn open_and_replay(
    dir: &std::path::Path,
    mode: AppendMode,
    opts: LogOptions,
    rec: &mut Recovery,
) -> Result<SegmentLog<FileStorage>, LogError> {
    let storage = FileStorage::open_dir_with(dir, mode).map_err(|source| LogError::Io {
        op: "open log directory",
        file: dir.display().to_string(),
        source,
    })?;
    let mut log = SegmentLog::open(storage, opts)?;
    info!("transaction log appends with {mode} (txnLog.appendMode)");
    let report = log.recovery();
    if report != &Default::default() {
        info!("log recovery: {report:?}");
    }
    // Fits the log to the snapshot: errors if transactions right after it are missing (replaying
    // would skip them); resets a log that ends before it (the next append follows the snapshot).
    let Some(from) = log.reconcile_with_snapshot(rec.start_zxid())? else {
        return Ok(log);
    };
    let mut progress = ReplayProgress::start();
    for entry in log.read_from(from)? {
        let entry = entry?;
        rec.replay(&entry.header, &entry.txn);
        progress.note(rec);
    }
    progress.done(rec, &dir.display().to_string());
    Ok(log)
}

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

    /// After each replayed transaction: a line when a second has passed since the last.
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
