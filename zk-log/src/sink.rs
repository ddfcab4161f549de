//! The seam between a write path and the log: [`TxnSink`] to persist, [`TxnSource`] to read
//! back. Kept here, not in the server, so that both the server and the Zab code can name them
//! without depending on each other; [`crate::LogWriter`] implements both ends.

use crate::error::LogError;
use crate::format::RecordBatch;
use crate::log::LogEntry;
use crate::reader::LogReader;
use crate::storage::Storage;
use crate::writer::{LogWriter, SubmitError};

/// A durability report as the server's core receives it: `Ok(z)` when every transaction through
/// zxid `z` is durable (or, after a truncation or reset the core asked for, the log's new end),
/// or the error that stopped the log (see [`crate::WriterReport::into_durable`]).
pub type DurableReport = Result<i64, LogError>;

/// A queue into the transaction log, in the order the write path hands it work.
///
/// Batches, truncations and resets are done in the order they are queued, each durable before
/// the next starts; their outcome comes back on the report channel the sink was made with.
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
    /// Queues the removal of every record above `zxid` (Zab TRUNC), reported when durable;
    /// batches queued later follow `zxid`. Waits while the queue is full.
    ///
    /// Errors: [`LogError::NotInLog`] for a negative `zxid`; [`LogError::WriterStopped`].
    fn truncate_after(&mut self, zxid: i64) -> Result<(), LogError>;
    /// Queues the removal of every record, after a snapshot at `zxid` was made durable (Zab
    /// SNAP), reported when durable; batches queued later continue above `zxid`. Waits while
    /// the queue is full.
    ///
    /// Errors: [`LogError::NotInLog`] for a negative `zxid`; [`LogError::WriterStopped`].
    fn reset_to(&mut self, zxid: i64) -> Result<(), LogError>;
    /// A handle that reads durable records from another thread while the sink keeps writing.
    fn source(&self) -> Box<dyn TxnSource>;
    /// Whether the sink has stopped for good after a failure (see [`LogWriter::is_stopped`]):
    /// nothing more will be written or reported.
    fn is_stopped(&self) -> bool;
}

/// Reads a log's durable transactions by zxid range, from any thread (a Zab leader's DIFF).
pub trait TxnSource: Send + Sync {
    /// The last durable zxid that can be read (see [`LogReader::durable_zxid`]).
    fn durable_zxid(&self) -> i64;
    /// Reads from above this zxid are answered by the log (see [`LogReader::base_zxid`]).
    fn base_zxid(&self) -> i64;
    /// Up to `max_entries` durable transactions with `from <= zxid <= through`, oldest first
    /// (see [`LogReader::read_range`]).
    ///
    /// Errors: [`LogError::NotInLog`] if `from` was purged or precedes a reset (send a
    /// snapshot instead); [`LogError::Corrupt`] or [`LogError::Io`] if a record cannot be read.
    fn read_range(&self, from: i64, through: i64, max_entries: usize) -> Result<Vec<LogEntry>, LogError>;
    /// The zxid of the oldest durable transaction held, if any, from what the log has published
    /// (no read of the disk; see [`LogReader::first_zxid`]).
    fn first_zxid(&self) -> Option<i64>;
}

impl<S: Storage> TxnSource for LogReader<S> {
    fn durable_zxid(&self) -> i64 {
        LogReader::durable_zxid(self)
    }
    fn base_zxid(&self) -> i64 {
        LogReader::base_zxid(self)
    }
    fn read_range(&self, from: i64, through: i64, max_entries: usize) -> Result<Vec<LogEntry>, LogError> {
        LogReader::read_range(self, from, through, max_entries)
    }
    fn first_zxid(&self) -> Option<i64> {
        LogReader::first_zxid(self)
    }
}

impl<S: Storage> TxnSink for LogWriter<S> {
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
    fn truncate_after(&mut self, zxid: i64) -> Result<(), LogError> {
        LogWriter::truncate_after(self, zxid)
    }
    fn reset_to(&mut self, zxid: i64) -> Result<(), LogError> {
        LogWriter::reset_to(self, zxid)
    }
    fn source(&self) -> Box<dyn TxnSource> {
        Box::new(self.reader())
    }
    fn is_stopped(&self) -> bool {
        LogWriter::is_stopped(self)
    }
}
