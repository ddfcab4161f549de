//! The background log writer: the log on its own thread, fed by a bounded queue, one sync per group.

use crate::error::LogError;
use crate::format::RecordBatch;
use crate::log::SegmentLog;
use crate::storage::Storage;
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::thread::JoinHandle;

/// Why [`LogWriter::try_submit`] did not take a batch; the batch is handed back.
#[derive(Debug)]
pub enum SubmitError {
    /// The queue is full; try again after a durability report.
    Full(RecordBatch),
    /// The writer has stopped (after an error); nothing more will be made durable.
    Stopped(RecordBatch),
}

/// Work for the writer thread.
#[derive(Debug)]
enum Job {
    /// Append and make durable.
    Batch(RecordBatch),
    /// Remove segments wholly before this zxid (after a snapshot made them unneeded).
    PurgeBefore(i64),
    /// The caller has dealt with the batches refused for a full disk: take batches again.
    Resume,
}

/// Owns a [`SegmentLog`] on a dedicated thread and makes queued batches durable.
///
/// The thread takes every batch waiting in the queue, appends them all, syncs once, and then
/// reports "durable through zxid Z" to the callback given at construction. Batches that arrive
/// while a sync runs wait in the queue and go out together in the next sync: that is the group
/// commit. The callback runs on the writer thread, in zxid order, so it should only hand the
/// news on (send on a channel, wake the core) and never block for long.
///
/// A full disk ([`LogError::is_storage_full`]) is reported through the callback once, after the
/// durability of everything appended before it; the thread then keeps running but refuses: it
/// drops every batch it is given (they would follow the refused one, leaving a zxid gap) until
/// the caller, having taken back the refused transactions, calls [`LogWriter::resume`]. Purges
/// still run meanwhile, since they free space. The log itself stays usable; the next batch after
/// `resume` tries to reserve space again.
///
/// After any other error the callback receives it once and the thread stops: batches queued
/// behind the failed one are dropped unwritten, [`LogWriter::submit`] returns
/// [`LogError::WriterStopped`], and [`LogWriter::shutdown`] hands the log back.
#[derive(Debug)]
pub struct LogWriter<S: Storage> {
    tx: Option<SyncSender<Job>>,
    thread: Option<JoinHandle<SegmentLog<S>>>,
}

impl<S: Storage> LogWriter<S> {
    /// Starts the writer thread (named `zk-log-writer`) with a queue of at most
    /// `queue_batches_max` batches (at least 1).
    ///
    /// `on_durable` receives `Ok(z)` each time every record through zxid `z` is durable, or the
    /// error that stopped the writer.
    ///
    /// Errors: the thread could not be spawned.
    pub fn spawn<F>(
        log: SegmentLog<S>,
        queue_batches_max: usize,
        on_durable: F,
    ) -> std::io::Result<LogWriter<S>>
    where
        F: FnMut(Result<i64, LogError>) + Send + 'static,
    {
        let (tx, rx) = mpsc::sync_channel(queue_batches_max.max(1));
        let thread = std::thread::Builder::new()
            .name("zk-log-writer".into())
            .spawn(move || run(log, rx, on_durable, queue_batches_max.max(1)))?;
        Ok(LogWriter { tx: Some(tx), thread: Some(thread) })
    }

    /// Queues a batch, waiting while the queue is full.
    ///
    /// Errors: [`LogError::WriterStopped`] if the writer thread has stopped.
    pub fn submit(&self, batch: RecordBatch) -> Result<(), LogError> {
        let tx = self.tx.as_ref().ok_or(LogError::WriterStopped)?;
        tx.send(Job::Batch(batch)).map_err(|_| LogError::WriterStopped)
    }

    /// Asks the writer thread to remove the segments wholly before `zxid`
    /// ([`SegmentLog::purge_before`]) between two syncs; waits while the queue is full. The outcome
    /// is logged (a failed purge leaves files behind and is tried again with the next request).
    ///
    /// Errors: [`LogError::WriterStopped`] if the writer thread has stopped.
    pub fn purge_before(&self, zxid: i64) -> Result<(), LogError> {
        let tx = self.tx.as_ref().ok_or(LogError::WriterStopped)?;
        tx.send(Job::PurgeBefore(zxid)).map_err(|_| LogError::WriterStopped)
    }

    /// Ends the refusal that follows a full disk: batches queued after this call are written
    /// again. The caller must have taken back every transaction after the last durable zxid, and
    /// the next batch must follow that zxid. Waits while the queue is full (a refusing writer
    /// empties it quickly, dropping batches).
    ///
    /// Errors: [`LogError::WriterStopped`] if the writer thread has stopped.
    pub fn resume(&self) -> Result<(), LogError> {
        let tx = self.tx.as_ref().ok_or(LogError::WriterStopped)?;
        tx.send(Job::Resume).map_err(|_| LogError::WriterStopped)
    }

    /// Queues a batch if there is room, without waiting.
    ///
    /// Errors: [`SubmitError::Full`] or [`SubmitError::Stopped`], with the batch.
    pub fn try_submit(&self, batch: RecordBatch) -> Result<(), SubmitError> {
        let Some(tx) = self.tx.as_ref() else { return Err(SubmitError::Stopped(batch)) };
        tx.try_send(Job::Batch(batch)).map_err(|e| match e {
            TrySendError::Full(Job::Batch(b)) => SubmitError::Full(b),
            TrySendError::Disconnected(Job::Batch(b)) => SubmitError::Stopped(b),
            _ => unreachable!("only a batch was sent"),
        })
    }

    /// Stops taking batches, lets the thread make everything already queued durable (reporting it
    /// as usual), and returns the log.
    ///
    /// Errors: [`LogError::WriterStopped`] if the writer thread panicked (the log is lost with it).
    pub fn shutdown(mut self) -> Result<SegmentLog<S>, LogError> {
        self.tx = None;
        let t = self.thread.take().ok_or(LogError::WriterStopped)?;
        t.join().map_err(|_| LogError::WriterStopped)
    }
}

impl<S: Storage> Drop for LogWriter<S> {
    fn drop(&mut self) {
        // Closing the queue ends the thread after it has synced what was queued; waiting for it
        // keeps the log's files from being used by two owners at once.
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run<S: Storage, F>(
    mut log: SegmentLog<S>,
    rx: Receiver<Job>,
    mut on_durable: F,
    group_batches_max: usize,
) -> SegmentLog<S>
where
    F: FnMut(Result<i64, LogError>),
{
    // Set after a full disk: batches are dropped until the caller resumes.
    let mut refusing = false;
    while let Ok(first) = rx.recv() {
        let first = match first {
            Job::Batch(b) if !refusing => b,
            Job::Batch(b) => {
                tracing::debug!(
                    "dropping a batch from zxid {:?}: the log is refusing after a full disk",
                    b.first_zxid
                );
                continue;
            }
            Job::PurgeBefore(z) => {
                purge(&mut log, z);
                continue;
            }
            Job::Resume => {
                refusing = false;
                continue;
            }
        };
        let mut failed = log.append(&first).err();
        let mut taken = 1;
        let mut purge_after: Option<i64> = None;
        // Everything that queued up while the previous sync ran goes into this sync. Bounded by
        // the queue's capacity so a steady stream cannot postpone the sync forever.
        while failed.is_none() && taken < group_batches_max {
            match rx.try_recv() {
                Ok(Job::Batch(b)) => {
                    failed = log.append(&b).err();
                    taken += 1;
                }
                Ok(Job::PurgeBefore(z)) => {
                    purge_after = Some(purge_after.map_or(z, |p: i64| p.max(z)));
                }
                // Only meaningful while refusing; a stray one changes nothing.
                Ok(Job::Resume) => {}
                Err(_) => break,
            }
        }
        // Sync what was appended before any failure, so it can still be acknowledged.
        let before = log.durable_zxid();
        match log.sync() {
            Ok(()) => {
                if log.durable_zxid() > before {
                    on_durable(Ok(log.durable_zxid()));
                }
            }
            Err(e) => {
                on_durable(Err(failed.take().unwrap_or(e)));
                return log;
            }
        }
        if let Some(z) = purge_after {
            purge(&mut log, z);
        }
        if let Some(e) = failed {
            if e.is_storage_full() {
                tracing::warn!(
                    "transaction log refused a batch: {e}; refusing writes until the server resumes"
                );
                on_durable(Err(e));
                refusing = true;
                continue;
            }
            on_durable(Err(e));
            return log;
        }
    }
    log
}

fn purge<S: Storage>(log: &mut SegmentLog<S>, zxid: i64) {
    match log.purge_before(zxid) {
        Ok(removed) if removed.is_empty() => {}
        Ok(removed) => {
            tracing::info!("purged {} log segment(s) before zxid 0x{zxid:x}: {removed:?}", removed.len())
        }
        Err(e) => tracing::warn!("purging log segments before zxid 0x{zxid:x} failed (kept): {e}"),
    }
}
