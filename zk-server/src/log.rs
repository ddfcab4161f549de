//! Where the write path persists transactions before they are committed.
//!
//! The core hands each batch of new proposals to a [`TxnSink`] and commits them only when the sink
//! reports them durable, through the channel given when the sink was made. With zk-log's
//! [`LogWriter`] batches that arrive while a sync runs go out together in the next one: group
//! commit. Standalone zkrs runs Zab's write path as a quorum of one, so "durable on a quorum" means
//! durable in this server's log.

use std::time::{Duration, Instant};
use tracing::info;
use zk_log::{FileStorage, LogError, LogOptions, LogWriter, RecordBatch, SegmentLog, Storage, SubmitError};
use zk_tree::Recovery;

/// Durability reports: `Ok(z)` when every transaction through zxid `z` is durable, or the error that
/// stopped the log.
pub type DurableReport = Result<i64, LogError>;

/// A queue into the transaction log.
pub trait TxnSink: Send {
    /// Queues a batch without waiting. `Full` hands the batch back: try again after a report.
    fn try_submit(&mut self, batch: RecordBatch) -> Result<(), SubmitError>;
    /// Makes `batch` durable on the caller's thread if the log is idle, returning the zxid now
    /// durable (or the error); `None` when it is busy and the batch must be queued.
    fn commit_inline(&mut self, batch: &RecordBatch) -> Option<Result<i64, LogError>>;
    /// Asks for the log records before `zxid` to be removed (a snapshot covers them).
    fn purge_before(&mut self, zxid: i64);
    /// After a full-disk refusal: the core has taken back every transaction after the last
    /// durable one; batches submitted from now on are written again.
    fn resume(&mut self);
}

impl<S: Storage + Send + 'static> TxnSink for LogWriter<S> {
    fn try_submit(&mut self, batch: RecordBatch) -> Result<(), SubmitError> {
        LogWriter::try_submit(self, batch)
    }
    fn commit_inline(&mut self, batch: &RecordBatch) -> Option<Result<i64, LogError>> {
        LogWriter::commit_inline(self, batch)
    }
    fn purge_before(&mut self, zxid: i64) {
        if let Err(e) = LogWriter::purge_before(self, zxid) {
            tracing::warn!("log purge not queued: {e}");
        }
    }
    fn resume(&mut self) {
        // A stopped writer is noticed at the next submit.
        let _ = LogWriter::resume(self);
    }
}

/// Opens (and recovers) the log in `dir` and replays what it holds after the snapshot `rec` started
/// from, idempotently.
///
/// Errors: the directory cannot be used; the log is corrupt before its tail, has a zxid gap, or was
/// written by a newer format (each names the file and offset); or the log no longer holds the
/// transactions right after the snapshot.
pub fn open_and_replay(
    dir: &std::path::Path,
    opts: LogOptions,
    rec: &mut Recovery,
) -> Result<SegmentLog<FileStorage>, LogError> {
    let storage = FileStorage::open_dir(dir).map_err(|source| LogError::Io {
        op: "open log directory",
        file: dir.display().to_string(),
        source,
    })?;
    let log = SegmentLog::open(storage, opts)?;
    let report = log.recovery();
    if report != &Default::default() {
        info!("log recovery: {report:?}");
    }
    let Some(first) = log.first_zxid() else {
        return Ok(log);
    };
    let start = rec.start_zxid();
    if log.last_zxid() < start {
        return Err(LogError::NotInLog { zxid: start, first, last: log.last_zxid() });
    }
    if log.last_zxid() == start {
        return Ok(log);
    }
    let from = start + 1;
    if first > from {
        // The transactions right after the snapshot are gone: replaying would skip them.
        return Err(LogError::NotInLog { zxid: from, first, last: log.last_zxid() });
    }
    let started = Instant::now();
    let mut last_note = Instant::now();
    for entry in log.read_from(from)? {
        let entry = entry?;
        rec.replay(&entry.header, &entry.txn);
        if last_note.elapsed() >= Duration::from_secs(1) {
            info!(
                "replaying the transaction log: {} transactions, at zxid 0x{:x}",
                rec.replayed(),
                rec.last_zxid()
            );
            last_note = Instant::now();
        }
    }
    info!(
        "replayed {} transactions from {} in {:.2?}; last zxid 0x{:x}",
        rec.replayed(),
        dir.display(),
        started.elapsed(),
        rec.last_zxid()
    );
    Ok(log)
}
