//! The background log writer: the log on its own thread, fed by a bounded queue, one sync per group.

use crate::error::LogError;
use crate::format::RecordBatch;
use crate::log::SegmentLog;
use crate::reader::LogReader;
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

/// What the writer thread reports, in the order of the jobs it did.
///
/// Every report is made after what it describes is durable, and before the writer starts the
/// next job: a `Truncated` or `Reset` report is followed only by `Durable` reports for batches
/// queued after the truncation or reset.
#[derive(Debug)]
pub enum WriterReport {
    /// Every record through this zxid is durable (the log's durable end moved forward).
    Durable(i64),
    /// A [`LogWriter::truncate_after`] is done and on disk: the log now ends at this zxid (the
    /// zxid asked for, or the log's end if that was lower).
    Truncated(i64),
    /// A [`LogWriter::reset_to`] is done and on disk: the log holds no record and continues
    /// above this zxid.
    Reset(i64),
    /// The error that stopped the writer, or a full disk that made it refuse (see
    /// [`LogWriter`]).
    Failed(LogError),
}

impl WriterReport {
    /// The report as the durability-only callback of [`LogWriter::spawn`] sees it: `Ok(z)` for
    /// `Durable(z)`, `Truncated(z)` and `Reset(z)` (in each case the log ends, durably, at `z`;
    /// after a truncation or reset that may be below an earlier report), `Err` for `Failed`.
    pub fn into_durable(self) -> Result<i64, LogError> {
        match self {
            WriterReport::Durable(z) | WriterReport::Truncated(z) | WriterReport::Reset(z) => Ok(z),
            WriterReport::Failed(e) => Err(e),
        }
    }
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
    /// Remove every record above this zxid (Zab TRUNC); a barrier between batches.
    Truncate(i64),
    /// Remove every record; continue above this zxid (Zab SNAP); a barrier between batches.
    Reset(i64),
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
///
/// Truncations and resets (Zab's TRUNC and SNAP: [`LogWriter::truncate_after`],
/// [`LogWriter::reset_to`]) queue with the batches and end a group: the batches before one are
/// synced and reported, then it is done, durably, and reported ([`WriterReport`]), and only then
/// are the batches after it appended. Other threads read the durable records meanwhile through
/// [`LogWriter::reader`], without ever waiting for a sync.
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
    /// Batches, truncations and resets in the queue, not yet taken by the thread (a job is
    /// taken while the thread holds the log's lock).
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
    /// error that stopped the writer: each [`WriterReport`] through
    /// [`WriterReport::into_durable`]. A caller that queues truncations or resets should use
    /// [`Self::spawn_with_reports`], which tells them apart from durability.
    ///
    /// Errors: the thread could not be spawned.
    pub fn spawn<F>(
        log: SegmentLog<S>,
        queue_batches_max: usize,
        mut on_durable: F,
    ) -> std::io::Result<LogWriter<S>>
    where
        F: FnMut(Result<i64, LogError>) + Send + 'static,
    {
        Self::spawn_with_reports(log, queue_batches_max, move |r| on_durable(r.into_durable()))
    }

    /// Starts the writer thread like [`Self::spawn`], with a callback that receives every
    /// [`WriterReport`] in job order, on the writer thread (hand it on; do not block long).
    ///
    /// Errors: the thread could not be spawned.
    pub fn spawn_with_reports<F>(
        log: SegmentLog<S>,
        queue_batches_max: usize,
        on_report: F,
    ) -> std::io::Result<LogWriter<S>>
    where
        F: FnMut(WriterReport) + Send + 'static,
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
            .spawn(move || run(&for_thread, rx, on_report, queue_batches_max.max(1)))?;
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
        // Waking the thread costs the caller a system call (and the thread's cross-CPU wake-up)
        // before it can acknowledge: only when there is something to prepare.
        let prepare = !log.nothing_to_prepare();
        drop(log);
        if res.is_ok() && prepare {
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

    /// Queues a truncation after `zxid` (Zab TRUNC; see [`SegmentLog::truncate_after`]), in
    /// order with batches: everything queued before it is appended, synced and reported first,
    /// then the truncation is done and made durable and reported as
    /// [`WriterReport::Truncated`], and only then is anything queued after it appended. Waits
    /// while the queue is full. Readers stop seeing the removed records before they go.
    ///
    /// Errors: [`LogError::NotInLog`] at once for a negative `zxid`; [`LogError::WriterStopped`]
    /// if the writer thread has stopped. A truncation that fails on the thread (an I/O error,
    /// or a `zxid` below the log's base) is reported as [`WriterReport::Failed`] and stops the
    /// writer.
    pub fn truncate_after(&self, zxid: i64) -> Result<(), LogError> {
        if zxid < 0 {
            return Err(LogError::NotInLog { zxid, first: 0, last: 0 });
        }
        self.send_counted(Job::Truncate(zxid))
    }

    /// Queues a reset to `zxid` (Zab SNAP; see [`SegmentLog::reset_to`]): in order with
    /// batches, like [`Self::truncate_after`]; every segment is removed durably, reported as
    /// [`WriterReport::Reset`], and the batches queued after it may start at any zxid above
    /// `zxid`. The snapshot at `zxid` must be durable before this is called. Waits while the
    /// queue is full.
    ///
    /// Errors: [`LogError::NotInLog`] at once for a negative `zxid`; [`LogError::WriterStopped`]
    /// if the writer thread has stopped. A failure on the thread is reported as
    /// [`WriterReport::Failed`] and stops the writer.
    pub fn reset_to(&self, zxid: i64) -> Result<(), LogError> {
        if zxid < 0 {
            return Err(LogError::NotInLog { zxid, first: 0, last: 0 });
        }
        self.send_counted(Job::Reset(zxid))
    }

    /// Sends a job that orders with batches, counted in `queued` (see `write_loop`).
    fn send_counted(&self, job: Job) -> Result<(), LogError> {
        let tx = self.tx.as_ref().ok_or(LogError::WriterStopped)?;
        self.shared.queued.fetch_add(1, SeqCst);
        tx.send(job).map_err(|_| {
            self.shared.queued.fetch_sub(1, SeqCst);
            LogError::WriterStopped
        })
    }

    /// A read handle on the log's durable records for other threads (see [`LogReader`]); it
    /// keeps working while the writer appends, syncs, rolls, truncates, resets and purges, and
    /// never waits for a sync. Taking it waits for the writer's current group, once.
    pub fn reader(&self) -> LogReader<S> {
        self.shared.lock().reader()
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

    /// Whether the writer thread has stopped after a failure (a failed sync, a write error other
    /// than a full disk, or any failed truncation or reset, a full disk included): nothing more
    /// is written through this writer, and [`Self::resume`] does not bring it back.
    pub fn is_stopped(&self) -> bool {
        self.shared.stopped.load(SeqCst)
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

fn run<S: Storage, F>(sh: &Shared<S>, rx: Receiver<Job>, on_report: F, group_batches_max: usize)
where
    F: FnMut(WriterReport),
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
    write_loop(sh, rx, on_report, group_batches_max, spares.as_ref());
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

/// Runs a truncation or reset job and reports it. Returns false when it failed: the writer
/// then stops, as after any write error (the log is poisoned, or the request was invalid).
fn run_barrier<S: Storage, F>(sh: &Shared<S>, job: Job, on_report: &mut F, spares: Option<&Spares<S>>) -> bool
where
    F: FnMut(WriterReport),
{
    let mut log = sh.lock();
    sh.queued.fetch_sub(1, SeqCst);
    let res = match job {
        Job::Truncate(z) => log.truncate_after(z).map(|()| WriterReport::Truncated(log.last_zxid())),
        Job::Reset(z) => log.reset_deferred(z).map(|trash| {
            for t in trash {
                remove_trash(&log, t, spares);
            }
            WriterReport::Reset(z)
        }),
        _ => unreachable!("only truncations and resets are barriers"),
    };
    if res.is_ok() {
        log.prepare_next();
        tend_spares(&mut log, spares);
    }
    drop(log);
    match res {
        Ok(r) => {
            on_report(r);
            true
        }
        Err(e) => {
            sh.stopped.store(true, SeqCst);
            on_report(WriterReport::Failed(e));
            false
        }
    }
}

/// Most bytes of queued batches merged into one write.
const GROUP_WRITE_BYTES: u64 = 1 << 20;

fn write_loop<S: Storage, F>(
    sh: &Shared<S>,
    rx: Receiver<Job>,
    mut on_report: F,
    group_batches_max: usize,
    spares: Option<&Spares<S>>,
) where
    F: FnMut(WriterReport),
{
    tend_spares(&mut sh.lock(), spares);
    // Jobs that order with batches are counted in `queued` until the thread holds the log's
    // lock to do them, so that an inline commit never slips in ahead of one (it needs both the
    // count at zero and the lock free).
    let take = || {
        sh.queued.fetch_sub(1, SeqCst);
    };
    // A truncation or reset met while gathering a group: it runs once the group is durable.
    let mut barrier: Option<Job> = None;
    loop {
        let next = match barrier.take() {
            Some(job) => job,
            None => match rx.recv() {
                Ok(job) => job,
                Err(_) => return,
            },
        };
        let first = match next {
            Job::Batch(b) if !sh.refusing.load(SeqCst) => b,
            Job::Batch(b) => {
                take();
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
            // Truncations and resets run even while refusing: they only free space, and the
            // owner may need one to recover.
            job @ (Job::Truncate(_) | Job::Reset(_)) => {
                if !run_barrier(sh, job, &mut on_report, spares) {
                    return;
                }
                continue;
            }
        };
        let mut log = sh.lock();
        take();
        let mut failed = None;
        let mut taken = 1;
        let mut purge_after: Option<i64> = None;
        // Everything that queued up while the previous sync ran goes into this sync. Bounded by
        // the queue's capacity so a steady stream cannot postpone the sync forever. A truncation
        // or reset ends the group: what follows it must not be appended before it is done.
        // The group's batches are merged and written with one write (a follower gets a batch per
        // PROPOSAL: one pwrite each was most of its system calls), up to GROUP_WRITE_BYTES.
        let mut group = first;
        while taken < group_batches_max {
            match rx.try_recv() {
                Ok(job) => {
                    match job {
                        Job::Batch(b) => {
                            take();
                            taken += 1;
                            if group.bytes() + b.bytes() <= GROUP_WRITE_BYTES && group.extend_from(&b).is_ok()
                            {
                                continue;
                            }
                            // Too big to merge, or out of order (append names the error).
                            if let Err(e) = log.append(&group) {
                                failed = Some(e);
                                break;
                            }
                            group = b;
                        }
                        Job::PurgeBefore(z) => {
                            purge_after = Some(purge_after.map_or(z, |p: i64| p.max(z)));
                        }
                        // The sync below prepares the next append anyway; a stray resume
                        // changes nothing when not refusing.
                        Job::Prepare | Job::Resume => {}
                        job @ (Job::Truncate(_) | Job::Reset(_)) => {
                            barrier = Some(job);
                            break;
                        }
                    }
                }
                Err(_) => break,
            }
        }
        if failed.is_none() {
            failed = log.append(&group).err();
        }
        drop(group);
        // Sync what was appended before any failure, so it can still be acknowledged.
        let before = log.durable_zxid();
        if let Err(e) = log.sync() {
            sh.stopped.store(true, SeqCst);
            drop(log);
            on_report(WriterReport::Failed(failed.take().unwrap_or(e)));
            return;
        }
        let durable = log.durable_zxid();
        if let Some(e) = failed {
            if let Some(z) = purge_after {
                purge(&mut log, z, spares);
            }
            drop(log);
            if durable > before {
                on_report(WriterReport::Durable(durable));
            }
            if e.is_storage_full() {
                tracing::warn!(
                    "transaction log refused a batch: {e}; refusing writes until the server resumes"
                );
                sh.refusing.store(true, SeqCst);
                on_report(WriterReport::Failed(e));
                continue;
            }
            sh.stopped.store(true, SeqCst);
            on_report(WriterReport::Failed(e));
            return;
        }
        drop(log);
        if durable > before {
            on_report(WriterReport::Durable(durable));
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

/// Hands a trash file to the helper thread for gradual removal, or removes it at once when the
/// helper is busy or gone.
fn remove_trash<S: Storage>(log: &SegmentLog<S>, trash: String, spares: Option<&Spares<S>>) {
    let inline = match spares {
        Some(sp) => match sp.prep_tx.try_send(HelperJob::Remove(trash)) {
            Ok(()) => None,
            Err(
                TrySendError::Full(HelperJob::Remove(t)) | TrySendError::Disconnected(HelperJob::Remove(t)),
            ) => Some(t),
            Err(_) => None,
        },
        None => Some(trash),
    };
    if let Some(t) = inline {
        if let Err(e) = log.storage().remove(&t) {
            tracing::warn!("removing log file {t} failed (removed at the next start): {e}");
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
                remove_trash(log, trash, spares);
            }
        }
        Err(e) => tracing::warn!("purging log segments before zxid 0x{zxid:x} failed (kept): {e}"),
    }
}
