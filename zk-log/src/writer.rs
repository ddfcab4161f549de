//! The background log writer: the log on its own thread, fed by a bounded queue, one sync per group.

use crate::error::LogError;
use crate::format::RecordBatch;
use crate::log::SegmentLog;
use crate::storage::Storage;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
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
    /// Prepare the next append (after an inline commit).
    Prepare,
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
    thread: Option<JoinHandle<()>>,
    shared: Arc<Shared<S>>,
}

/// What the writer thread and its owner share.
#[derive(Debug)]
struct Shared<S: Storage> {
    /// The log. The thread holds the lock while it appends and syncs a group (and while it
    /// purges); [`LogWriter::commit_inline`] takes it only when it is free.
    log: Mutex<SegmentLog<S>>,
    /// Batches in the queue, not yet taken by the thread.
    queued: AtomicUsize,
    /// Set while the thread refuses batches after a full disk.
    refusing: AtomicBool,
    /// Set once the thread has stopped after an error.
    stopped: AtomicBool,
}

impl<S: Storage> Shared<S> {
    fn lock(&self) -> MutexGuard<'_, SegmentLog<S>> {
        // A panic while holding the lock leaves the log as consistent as any crash would; the
        // log's own poisoning decides whether it may still be used.
        self.log.lock().unwrap_or_else(|p| p.into_inner())
    }
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
        let shared = Arc::new(Shared {
            log: Mutex::new(log),
            queued: AtomicUsize::new(0),
            refusing: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
        });
        let for_thread = shared.clone();
        let thread = std::thread::Builder::new()
            .name("zk-log-writer".into())
            .spawn(move || run(&for_thread, rx, on_durable, queue_batches_max.max(1)))?;
        Ok(LogWriter { tx: Some(tx), thread: Some(thread), shared })
    }

    /// Queues a batch, waiting while the queue is full.
    ///
    /// Errors: [`LogError::WriterStopped`] if the writer thread has stopped.
    pub fn submit(&self, batch: RecordBatch) -> Result<(), LogError> {
        let tx = self.tx.as_ref().ok_or(LogError::WriterStopped)?;
        self.shared.queued.fetch_add(1, SeqCst);
        tx.send(Job::Batch(batch)).map_err(|_| {
            self.shared.queued.fetch_sub(1, SeqCst);
            LogError::WriterStopped
        })
    }

    /// Appends and syncs `batch` on the caller's thread, if the writer is idle: nothing queued,
    /// nothing being written, not refusing, not stopped. This saves the two thread hand-offs of
    /// a queued batch, which dominate the latency of a lone write; the caller blocks for one
    /// sync. Returns `None` (the batch untouched) when the writer is busy: queue it instead.
    ///
    /// Must be called from the only thread that submits batches, so that nothing can be queued
    /// behind the caller's back. The thread is asked to prepare the next append afterwards.
    ///
    /// Errors: as [`SegmentLog::append`] and [`SegmentLog::sync`] (a full disk leaves the log
    /// usable; any other error poisons it).
    pub fn commit_inline(&self, batch: &RecordBatch) -> Option<Result<i64, LogError>> {
        let sh = &*self.shared;
        if sh.queued.load(SeqCst) != 0 || sh.refusing.load(SeqCst) || sh.stopped.load(SeqCst) {
            return None;
        }
        let mut log = match sh.log.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        let res = log.append(batch).and_then(|()| log.sync()).map(|()| log.durable_zxid());
        drop(log);
        if res.is_ok() {
            // Let the thread take the next append's page fault while the caller acknowledges.
            if let Some(tx) = &self.tx {
                let _ = tx.try_send(Job::Prepare);
            }
        }
        Some(res)
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
        self.shared.queued.fetch_add(1, SeqCst);
        tx.try_send(Job::Batch(batch)).map_err(|e| {
            self.shared.queued.fetch_sub(1, SeqCst);
            match e {
                TrySendError::Full(Job::Batch(b)) => SubmitError::Full(b),
                TrySendError::Disconnected(Job::Batch(b)) => SubmitError::Stopped(b),
                _ => unreachable!("only a batch was sent"),
            }
        })
    }

    /// Stops taking batches, lets the thread make everything already queued durable (reporting it
    /// as usual), and returns the log.
    ///
    /// Errors: [`LogError::WriterStopped`] if the writer thread panicked (the log is lost with it).
    pub fn shutdown(mut self) -> Result<SegmentLog<S>, LogError> {
        self.tx = None;
        let t = self.thread.take().ok_or(LogError::WriterStopped)?;
        t.join().map_err(|_| LogError::WriterStopped)?;
        // The thread is gone; once this handle is dropped too, the log moves out.
        let shared = Arc::clone(&self.shared);
        drop(self);
        match Arc::try_unwrap(shared) {
            Ok(sh) => Ok(sh.log.into_inner().unwrap_or_else(|p| p.into_inner())),
            Err(_) => Err(LogError::WriterStopped),
        }
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

fn run<S: Storage, F>(sh: &Shared<S>, rx: Receiver<Job>, on_durable: F, group_batches_max: usize)
where
    F: FnMut(Result<i64, LogError>),
{
    // A helper thread does the slow file work off the commit path: it prepares spare segment
    // files (starting a segment then costs a rename, not a whole allocation step of zero-filling
    // and a sync) and removes purged segments gradually.
    let storage = sh.lock().storage().clone();
    let (prep_tx, prep_rx) = mpsc::sync_channel::<HelperJob<S>>(HELPER_QUEUE);
    let (spare_tx, spare_rx) = mpsc::sync_channel::<std::io::Result<S::File>>(1);
    let helper = std::thread::Builder::new().name("zk-log-helper".into()).spawn(move || {
        for job in prep_rx {
            match job {
                HelperJob::Spare(prep) => {
                    if spare_tx.send(prep.run()).is_err() {
                        break;
                    }
                }
                HelperJob::Remove(name) => {
                    if let Err(e) = crate::storage::remove_gradually(&storage, &name) {
                        tracing::warn!(
                            "removing purged log segment {name} failed (removed at the next start): {e}"
                        );
                    }
                }
            }
        }
    });
    let (spares, helper) = match helper {
        Ok(h) => (Some(Spares { prep_tx, spare_rx }), Some(h)),
        Err(e) => {
            tracing::warn!("no helper thread for log files ({e}); segments are allocated and removed inline");
            (None, None)
        }
    };
    write_loop(sh, rx, on_durable, group_batches_max, spares.as_ref());
    // Dropping the job queue ends the helper after its current job; joining it keeps it from
    // touching the directory after the log has been handed back.
    drop(spares);
    if let Some(h) = helper {
        let _ = h.join();
    }
}

/// Jobs queued for the helper thread at most (spare requests are one at a time; purges come a few
/// segments per snapshot).
const HELPER_QUEUE: usize = 64;

/// Slow file work for the helper thread.
enum HelperJob<S: Storage> {
    /// Prepare a spare segment file.
    Spare(crate::log::SparePrep<S>),
    /// Remove this (trash) file gradually.
    Remove(String),
}

/// The writer's ends of the channels to the helper thread.
struct Spares<S: Storage> {
    prep_tx: SyncSender<HelperJob<S>>,
    spare_rx: Receiver<std::io::Result<S::File>>,
}

/// Installs a prepared spare if one arrived, and asks for the next when none is there.
fn tend_spares<S: Storage>(log: &mut SegmentLog<S>, spares: Option<&Spares<S>>) {
    let Some(Spares { prep_tx, spare_rx }) = spares else { return };
    if let Ok(res) = spare_rx.try_recv() {
        log.install_spare(res);
    }
    if let Some(job) = log.spare_needed() {
        if prep_tx.try_send(HelperJob::Spare(job)).is_err() {
            log.install_spare(Err(std::io::Error::other("the preparing thread is busy or gone")));
        }
    }
}

fn write_loop<S: Storage, F>(
    sh: &Shared<S>,
    rx: Receiver<Job>,
    mut on_durable: F,
    group_batches_max: usize,
    spares: Option<&Spares<S>>,
) where
    F: FnMut(Result<i64, LogError>),
{
    tend_spares(&mut sh.lock(), spares);
    let take = |job: &Job| {
        if matches!(job, Job::Batch(_)) {
            sh.queued.fetch_sub(1, SeqCst);
        }
    };
    while let Ok(first) = rx.recv() {
        take(&first);
        let first = match first {
            Job::Batch(b) if !sh.refusing.load(SeqCst) => b,
            Job::Batch(b) => {
                tracing::debug!(
                    "dropping a batch from zxid {:?}: the log is refusing after a full disk",
                    b.first_zxid
                );
                continue;
            }
            Job::PurgeBefore(z) => {
                purge(&mut sh.lock(), z, spares);
                continue;
            }
            Job::Prepare => {
                let mut log = sh.lock();
                log.prepare_next();
                tend_spares(&mut log, spares);
                continue;
            }
            Job::Resume => {
                sh.refusing.store(false, SeqCst);
                continue;
            }
        };
        let mut log = sh.lock();
        let mut failed = log.append(&first).err();
        let mut taken = 1;
        let mut purge_after: Option<i64> = None;
        // Everything that queued up while the previous sync ran goes into this sync. Bounded by
        // the queue's capacity so a steady stream cannot postpone the sync forever.
        while failed.is_none() && taken < group_batches_max {
            match rx.try_recv() {
                Ok(job) => {
                    take(&job);
                    match job {
                        Job::Batch(b) => {
                            failed = log.append(&b).err();
                            taken += 1;
                        }
                        Job::PurgeBefore(z) => {
                            purge_after = Some(purge_after.map_or(z, |p: i64| p.max(z)));
                        }
                        // The sync below prepares the next append anyway; a stray resume
                        // changes nothing when not refusing.
                        Job::Prepare | Job::Resume => {}
                    }
                }
                Err(_) => break,
            }
        }
        // Sync what was appended before any failure, so it can still be acknowledged.
        let before = log.durable_zxid();
        if let Err(e) = log.sync() {
            sh.stopped.store(true, SeqCst);
            drop(log);
            on_durable(Err(failed.take().unwrap_or(e)));
            return;
        }
        let durable = log.durable_zxid();
        if let Some(e) = failed {
            if let Some(z) = purge_after {
                purge(&mut log, z, spares);
            }
            drop(log);
            if durable > before {
                on_durable(Ok(durable));
            }
            if e.is_storage_full() {
                tracing::warn!(
                    "transaction log refused a batch: {e}; refusing writes until the server resumes"
                );
                sh.refusing.store(true, SeqCst);
                on_durable(Err(e));
                continue;
            }
            sh.stopped.store(true, SeqCst);
            on_durable(Err(e));
            return;
        }
        drop(log);
        if durable > before {
            on_durable(Ok(durable));
        }
        // While the caller acknowledges, take the next append's page fault, then purge.
        let mut log = sh.lock();
        log.prepare_next();
        tend_spares(&mut log, spares);
        if let Some(z) = purge_after {
            purge(&mut log, z, spares);
        }
    }
}

fn purge<S: Storage>(log: &mut SegmentLog<S>, zxid: i64, spares: Option<&Spares<S>>) {
    match log.purge_before_deferred(zxid) {
        Ok(trashed) if trashed.is_empty() => {}
        Ok(trashed) => {
            let names: Vec<&str> = trashed.iter().map(|(n, _)| n.as_str()).collect();
            tracing::info!("purged {} log segment(s) before zxid 0x{zxid:x}: {names:?}", names.len());
            for (_, trash) in trashed {
                let inline = match spares {
                    Some(sp) => match sp.prep_tx.try_send(HelperJob::Remove(trash)) {
                        Ok(()) => None,
                        Err(
                            TrySendError::Full(HelperJob::Remove(t))
                            | TrySendError::Disconnected(HelperJob::Remove(t)),
                        ) => Some(t),
                        Err(_) => None,
                    },
                    None => Some(trash),
                };
                if let Some(t) = inline {
                    if let Err(e) = log.storage().remove(&t) {
                        tracing::warn!(
                            "removing purged log segment {t} failed (removed at the next start): {e}"
                        );
                    }
                }
            }
        }
        Err(e) => tracing::warn!("purging log segments before zxid 0x{zxid:x} failed (kept): {e}"),
    }
}
