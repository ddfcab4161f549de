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
use zk_tree::Database;

/// Durability reports: `Ok(z)` when every transaction through zxid `z` is durable, or the error that
/// stopped the log.
pub type DurableReport = Result<i64, LogError>;

/// A queue into the transaction log.
pub trait TxnSink: Send {
    /// Queues a batch without waiting. `Full` hands the batch back: try again after a report.
    fn try_submit(&mut self, batch: RecordBatch) -> Result<(), SubmitError>;
}

impl<S: Storage + Send + 'static> TxnSink for LogWriter<S> {
    fn try_submit(&mut self, batch: RecordBatch) -> Result<(), SubmitError> {
        LogWriter::try_submit(self, batch)
    }
}

/// Opens (and recovers) the log in `dir`, replaying every transaction it holds into `db`.
///
/// Errors: the directory cannot be used, or the log is corrupt before its tail, has a zxid gap, or
/// was written by a newer format; each names the file and offset.
pub fn open_and_replay(
    dir: &std::path::Path,
    opts: LogOptions,
    db: &mut Database,
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
    let started = Instant::now();
    let mut last_note = Instant::now();
    let mut n: u64 = 0;
    for entry in log.read_from(first)? {
        let entry = entry?;
        if entry.header.zxid <= db.last_applied_zxid() {
            continue;
        }
        db.apply(&entry.header, &entry.txn);
        n += 1;
        if last_note.elapsed() >= Duration::from_secs(1) {
            info!("replaying the transaction log: {n} transactions, at zxid 0x{:x}", entry.header.zxid);
            last_note = Instant::now();
        }
    }
    info!(
        "replayed {n} transactions from {} in {:.2?}; last zxid 0x{:x}",
        dir.display(),
        started.elapsed(),
        db.last_applied_zxid()
    );
    Ok(log)
}
