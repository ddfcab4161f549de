//! The server archiving by itself: with `zkrs.backup.to` in its zoo.cfg, a server runs the
//! archiver of `zkrs-server backup --follow` ([`super::archiver`], the same passes) on a thread
//! of its own, every `zkrs.backup.intervalSecs`, and its purge waits for it.
//!
//! - [`start`] takes the archive's lock before the server serves (a second writer of one archive,
//!   a `zkrs-server backup` or another server, is refused there, named), then runs the passes on
//!   the `zk-backup` thread, at background CPU and disk priority, off the request path. The pass
//!   output goes to the server's log (files archived at info, warnings at warn, the lag at
//!   debug). A failed pass is retried at the next interval; an archive no pass can add to any
//!   more (full, written by another backup, or marked as holding transactions the server lost)
//!   is reported once, at error, and left alone.
//! - Each pass archives up to what the server has applied, which the driver answers
//!   ([`ask_driver`], in place of the tool's `--server`): on a standalone server everything
//!   durable, its last sync group included (it applies only what its log has synced), on an
//!   ensemble member what it has applied while it serves as leader, follower or observer (never
//!   a proposal a new leader may truncate away). A member archives its own log into its own
//!   archive (the key's `{myid}` makes the paths differ).
//! - [`ArchiveProgress`] is what the archive has taken ([`Taken`]: its newest archived log zxid
//!   and newest archived snapshot), shared with the snapshot thread's retention, which keeps
//!   every snapshot and log segment the archive has not taken ([`ArchiveProgress::plan`]) until
//!   their bytes pass `zkrs.backup.holdMaxBytes`, and with the reports (`mntr`, the
//!   AdminServer's `monitor`, `/metrics`: [`BackupFigures`]).
//! - What the archive has taken is also kept in `dataDir/zkrs-snap/zkrs-archived`
//!   ([`PROGRESS_FILE`]), written after each pass that moved it: a restarted server's purge
//!   waits from the start, and `zkrs-server purge` on a stopped server keeps the same files.
//!
//! Memory: one archiver (its manifest, at most `MANIFEST_BYTES_MAX`, and its copy buffers), one
//! pass output line (at most [`LINE_BYTES_MAX`]).

use super::archiver::{lag_line, ArchiveLock, ArchiveWriter, Archiver, PassReport};
use super::manifest::Manifest;
use super::BackupError;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tracing::{debug, error, info, warn};
use zk_log::{Storage, StorageRead};

/// How the server archives by itself (`zkrs.backup.*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupSettings {
    /// `zkrs.backup.to`, `{myid}` replaced: a directory or `s3://bucket/prefix`.
    pub to: String,
    /// `zkrs.backup.intervalSecs`: between the starts of two passes.
    pub interval: Duration,
    /// `zkrs.backup.holdMaxBytes`: the most bytes of snapshots and log segments purge keeps for
    /// the archive; 0 = no bound.
    pub hold_max_bytes: u64,
}

/// What an archive has taken of a server's files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Taken {
    /// The newest zxid its log holds (None: no log yet).
    pub log_through: Option<i64>,
    /// The newest start zxid (the name's) among its snapshots (None: none yet).
    pub snapshots_through: Option<i64>,
}

impl Taken {
    /// The lower of `self` and `other`, field by field (None, nothing, the lowest).
    pub fn at_most(self, other: Taken) -> Taken {
        let low = |a: Option<i64>, b: Option<i64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            _ => None,
        };
        Taken {
            log_through: low(self.log_through, other.log_through),
            snapshots_through: low(self.snapshots_through, other.snapshots_through),
        }
    }

    /// What the archive whose manifest is `m` holds.
    pub fn of(m: &Manifest) -> Taken {
        Taken {
            log_through: m.last_log_zxid(),
            snapshots_through: m.snapshots.iter().map(|s| s.start_zxid).max(),
        }
    }

    /// Of the snapshots `all` (by start zxid, oldest first), the oldest `cut` of which a purge
    /// would remove: how many of those it may remove, and the zxid before which it may purge the
    /// log (None: none of it).
    ///
    /// A snapshot may go once the archive holds it or a newer one: the archiver takes the
    /// snapshots it can tie to its log oldest first, so an older one it does not hold by then it
    /// has passed over (it predates the archived log, or a gap in it), and never takes. The log
    /// may go up to the archive's newest zxid: the archiver reads only past it. What is kept is
    /// the oldest kept snapshot's log, as always, and never past that zxid.
    pub fn allow(&self, all: &[(i64, String)], cut: usize) -> (usize, Option<i64>) {
        let cut = cut.min(all.len());
        let n = match self.snapshots_through {
            Some(s) => all[..cut].iter().take_while(|(z, _)| *z <= s).count(),
            None => 0,
        };
        let by_snapshots = all.get(n).map(|(z, _)| z.saturating_add(1));
        let log = match (by_snapshots, self.log_through) {
            (Some(b), Some(l)) => Some(b.min(l.saturating_add(1))),
            _ => None,
        };
        (n, log)
    }
}

/// What retention may remove while an archive lags ([`ArchiveProgress::plan`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// At most this many of the oldest snapshots (past the newest `autopurge.snapRetainCount`).
    pub snapshots: usize,
    /// The log only before this zxid at most (None: none of it).
    pub log_before: Option<i64>,
}

impl Plan {
    /// Nothing held: retention as without an archive.
    pub const FREE: Plan = Plan { snapshots: usize::MAX, log_before: Some(i64::MAX) };
}

/// Retention keeps nothing for the archive while a file system holding the server's snapshots
/// or log has less free than 1/`HOLD_FREE_DIVISOR` of its size (at most
/// [`HOLD_FREE_CAP_BYTES`]): files kept for a lagging archive must not fill the disk the log
/// needs (archiving review, helper-95, finding 1).
pub const HOLD_FREE_DIVISOR: u64 = 20;

/// The most free space [`HOLD_FREE_DIVISOR`] asks for, bytes (4 GiB).
pub const HOLD_FREE_CAP_BYTES: u64 = 4 << 30;

/// Whether `free` bytes of a file system of `total` bytes are too few to keep files for the
/// archive (see [`HOLD_FREE_DIVISOR`]).
pub fn space_short(free: u64, total: u64) -> bool {
    // A file system that reports no size (some FUSE ones) tells nothing (review helper-98).
    total > 0 && (free == 0 || free < (total / HOLD_FREE_DIVISOR).min(HOLD_FREE_CAP_BYTES))
}

/// The bytes available to the server and in all of the file system holding `dir`.
fn space_of(dir: &Path) -> Option<(u64, u64)> {
    let s = rustix::fs::statvfs(dir).ok()?;
    let unit = s.f_frsize.max(1);
    Some((s.f_bavail.saturating_mul(unit), s.f_blocks.saturating_mul(unit)))
}

/// What the server's archive has taken and how its archiver fares, shared by the archiver
/// thread (which writes it), the snapshot thread's retention and the driver's reports.
#[derive(Debug)]
pub struct ArchiveProgress {
    /// `zkrs.backup.to`, as resolved.
    target: String,
    /// `zkrs.backup.holdMaxBytes` (0 = no bound).
    hold_max_bytes: u64,
    /// The server's log directory (`dataLogDir/zkrs-log`), for the bytes of the segments held.
    log_dir: PathBuf,
    /// The server's snapshot directory, when known: its file system's free space counts too.
    snap_dir: Option<PathBuf>,
    /// What the archive has taken, once known (from a pass, or the progress file of an earlier
    /// run into the same archive). Until then nothing is removed for it.
    taken: Mutex<Option<Taken>>,
    /// When the last pass succeeded, ms since the epoch (0: none yet).
    last_success_ms: AtomicI64,
    /// Passes that failed (and failed openings of the archive).
    errors: AtomicU64,
    /// Bytes this process put into the archive.
    archived_bytes: AtomicU64,
    /// Files this process put into the archive.
    archived_files: AtomicU64,
    /// Bytes the last retention kept for the archive.
    held_bytes: AtomicU64,
    /// Retentions that removed files the archive had not taken, past `holdMaxBytes`.
    purges_forced: AtomicU64,
    /// The archive takes nothing more ([`Archiver::closed`]).
    closed: AtomicBool,
    /// A file system of the server's was short of space at the archiver's last look
    /// ([`Self::look_at_space`]).
    short: AtomicBool,
}

/// The archive's figures as `mntr` reports them (the `zk_backup_*` lines).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackupFigures {
    /// Transactions the server has applied that the archive lacks: within one epoch, the
    /// difference of the zxids; across an epoch change, the new epoch's (a lower bound); -1 while
    /// nothing is known of the archive yet.
    pub lag_txns: i64,
    /// The newest zxid the archived log holds (-1: none, or not known yet).
    pub archived_zxid: i64,
    /// When the last pass succeeded, ms since the epoch (0: none since the server started).
    pub last_success_ms: i64,
    /// Passes that failed since the server started.
    pub errors: u64,
    /// Bytes archived since the server started.
    pub archived_bytes: u64,
    /// Files archived since the server started.
    pub archived_files: u64,
    /// Bytes of snapshots and log segments the last retention kept for the archive.
    pub held_bytes: u64,
    /// Retentions that removed files the archive had not taken (`zkrs.backup.holdMaxBytes`).
    pub purges_forced: u64,
    /// Whether the archive takes nothing more (a new one must be started).
    pub closed: bool,
}

/// [`BackupFigures::lag_txns`] for a server at `applied` and an archive that has taken `taken`.
fn lag_txns(applied: i64, taken: Option<Taken>) -> i64 {
    let Some(t) = taken else { return -1 };
    match t.log_through {
        Some(a) if a >= applied => 0,
        Some(a) if a >> 32 == applied >> 32 => applied - a,
        _ => applied & 0xffff_ffff,
    }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

impl ArchiveProgress {
    /// The progress of the archive `target` for the server whose log is in `log_dir`
    /// (`dataLogDir/zkrs-log`), nothing known of it yet.
    pub fn new(target: &str, hold_max_bytes: u64, log_dir: PathBuf) -> ArchiveProgress {
        ArchiveProgress {
            target: target.to_string(),
            hold_max_bytes,
            log_dir,
            snap_dir: None,
            taken: Mutex::new(None),
            last_success_ms: AtomicI64::new(0),
            errors: AtomicU64::new(0),
            archived_bytes: AtomicU64::new(0),
            archived_files: AtomicU64::new(0),
            held_bytes: AtomicU64::new(0),
            purges_forced: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            short: AtomicBool::new(false),
        }
    }

    /// The same, the free space of `snap_dir`'s file system watched too (the log directory's
    /// always is).
    pub fn with_snap_dir(mut self, snap_dir: PathBuf) -> ArchiveProgress {
        self.snap_dir = Some(snap_dir);
        self
    }

    /// A directory of the server's whose file system is short of space to keep files for the
    /// archive, with its free and total bytes.
    fn short_of_space(&self) -> Option<(&Path, u64, u64)> {
        let dirs = std::iter::once(self.log_dir.as_path()).chain(self.snap_dir.as_deref());
        dirs.filter_map(|d| space_of(d).map(|(free, total)| (d, free, total)))
            .find(|(_, free, total)| space_short(*free, *total))
    }

    /// Looks whether a file system of the server's is short of space now (the archiver thread,
    /// before each pass: a hung mount holds that thread, not the driver's).
    pub fn look_at_space(&self) {
        self.short.store(self.short_of_space().is_some(), Ordering::Relaxed);
    }

    /// Whether the last [`Self::look_at_space`] found a file system short of space: the driver
    /// then has retention run again while files are kept for the archive, so they go without
    /// waiting for a snapshot (none comes once the disk is full) or the autopurge timer.
    pub fn space_short_now(&self) -> bool {
        self.short.load(Ordering::Relaxed)
    }

    /// The archive, as configured.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// Bytes the last retention kept for the archive (`zk_backup_held_bytes`).
    pub fn held_bytes(&self) -> u64 {
        self.held_bytes.load(Ordering::Relaxed)
    }

    /// What the archive has taken, once known.
    pub fn taken(&self) -> Option<Taken> {
        *self.taken.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records what the archive has taken (a pass, or the progress file read at start).
    pub fn set_taken(&self, t: Taken) {
        *self.taken.lock().unwrap_or_else(|p| p.into_inner()) = Some(t);
    }

    /// The figures, for a server that has applied through `applied`.
    pub fn figures(&self, applied: i64) -> BackupFigures {
        let taken = self.taken();
        BackupFigures {
            lag_txns: lag_txns(applied, taken),
            archived_zxid: taken.and_then(|t| t.log_through).unwrap_or(-1),
            last_success_ms: self.last_success_ms.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            archived_bytes: self.archived_bytes.load(Ordering::Relaxed),
            archived_files: self.archived_files.load(Ordering::Relaxed),
            held_bytes: self.held_bytes.load(Ordering::Relaxed),
            purges_forced: self.purges_forced.load(Ordering::Relaxed),
            closed: self.closed.load(Ordering::Relaxed),
        }
    }

    /// What retention may remove of the snapshots `all` in `storage` (by start zxid, oldest
    /// first), keeping the newest `retain`, and of the log: everything the archive has taken
    /// ([`Taken::allow`]; nothing while that is not known), unless the files it would keep
    /// for the archive come to more than `zkrs.backup.holdMaxBytes`: then everything, as
    /// without an archive, with an error logged and counted (the archive will lack them). Files
    /// kept are warned of, with their bytes (a lagging archive shows; `zk_backup_held_bytes`).
    pub fn plan<S: Storage>(&self, storage: &S, all: &[(i64, String)], retain: usize) -> Plan {
        let cut = all.len().saturating_sub(retain.max(1));
        let taken = self.taken();
        let (n, log_cap) = match taken {
            Some(t) => t.allow(all, cut),
            None => (0, None),
        };
        let free_before = all.get(cut).map(|(z, _)| z.saturating_add(1));
        let kept_before = match (all.get(n).map(|(z, _)| z.saturating_add(1)), log_cap) {
            (Some(b), Some(c)) => Some(b.min(c)),
            _ => None,
        };
        let snapshots = &all[n..cut];
        let snapshot_bytes: u64 =
            snapshots.iter().map(|(_, name)| storage.open_read(name).map_or(0, |f| f.len())).sum();
        let segments = self.segments_between(kept_before, free_before);
        let segment_bytes: u64 = segments.iter().map(|(_, b)| b).sum();
        let bytes = snapshot_bytes + segment_bytes;
        if snapshots.is_empty() && segments.is_empty() {
            // Nothing held as the directories were listed; the caps stay (a segment the listing
            // missed is not removed past them either).
            self.held_bytes.store(0, Ordering::Relaxed);
            return Plan { snapshots: n, log_before: kept_before };
        }
        let what = format!(
            "{} snapshot(s) and {} log segment(s), {bytes} bytes, that the archive {} has not taken ({})",
            snapshots.len(),
            segments.len(),
            self.target,
            describe(taken)
        );
        if let Some((dir, free, total)) = self.short_of_space() {
            self.purges_forced.fetch_add(1, Ordering::Relaxed);
            self.held_bytes.store(0, Ordering::Relaxed);
            error!(
                "purge removes {what}: the file system of {} has {free} of {total} bytes free, under 1/{HOLD_FREE_DIVISOR} \
                 of it (or {HOLD_FREE_CAP_BYTES} bytes), which the log needs; the archive will lack them, a gap its \
                 restores name (see zk_backup_errors and the archiver's warnings for why it lags)",
                dir.display()
            );
            return Plan::FREE;
        }
        if self.hold_max_bytes > 0 && bytes > self.hold_max_bytes {
            self.purges_forced.fetch_add(1, Ordering::Relaxed);
            self.held_bytes.store(0, Ordering::Relaxed);
            error!(
                "purge removes {what}: keeping them would pass zkrs.backup.holdMaxBytes ({} bytes); the \
                 archive will lack them, a gap its restores name (see zk_backup_errors and the archiver's \
                 warnings for why it lags)",
                self.hold_max_bytes
            );
            return Plan::FREE;
        }
        self.held_bytes.store(bytes, Ordering::Relaxed);
        let bound = match self.hold_max_bytes {
            0 => "zkrs.backup.holdMaxBytes is 0: they are kept for as long as it takes".to_string(),
            b => format!("past zkrs.backup.holdMaxBytes ({b} bytes) they are removed anyway"),
        };
        warn!("purge keeps {what}: they go once it has; {bound}");
        Plan { snapshots: n, log_before: kept_before }
    }

    /// The server's log segments a purge before `free` removes and one before `kept` (None:
    /// no purge) does not, with their sizes.
    fn segments_between(&self, kept: Option<i64>, free: Option<i64>) -> Vec<(i64, u64)> {
        let Some(free) = free else { return Vec::new() };
        let mut segs: Vec<(i64, u64)> = match std::fs::read_dir(&self.log_dir) {
            Ok(rd) => rd
                .flatten()
                .filter_map(|e| {
                    let first = zk_log::format::parse_segment_name(&e.file_name().to_string_lossy())?;
                    Some((first, e.metadata().map_or(0, |m| m.len())))
                })
                .collect(),
            Err(_) => return Vec::new(),
        };
        segs.sort_unstable();
        let firsts: Vec<i64> = segs.iter().map(|(z, _)| *z).collect();
        let freed = zk_log::snapshot::purgeable_segments(&firsts, free);
        let still = kept.map_or_else(Vec::new, |k| zk_log::snapshot::purgeable_segments(&firsts, k));
        segs.into_iter().filter(|(z, _)| freed.contains(z) && !still.contains(z)).collect()
    }
}

/// What `taken` says, for messages.
fn describe(taken: Option<Taken>) -> String {
    let hex = |z: Option<i64>| z.map_or("none".to_string(), |z| format!("{z:#x}"));
    match taken {
        None => "nothing is known of it yet: no pass has succeeded since the server started".to_string(),
        Some(t) => format!(
            "it holds the log through zxid {} and snapshots through {}",
            hex(t.log_through),
            hex(t.snapshots_through)
        ),
    }
}

/// The file in `dataDir/zkrs-snap/` that says what the server's archive has taken: the lines
/// `zkrs-archived 1`, `target=…`, `log_through=…`, `snapshots_through=…` (decimal zxids, or
/// `none`), `at_ms=…`, `end`. Replaced whole (a temporary file, a sync, a rename).
pub const PROGRESS_FILE: &str = "zkrs-archived";

/// The most bytes of [`PROGRESS_FILE`] read.
const PROGRESS_BYTES_MAX: u64 = 64 * 1024;

/// What [`PROGRESS_FILE`] records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// The archive (`zkrs.backup.to` as the server resolved it).
    pub target: String,
    /// What it had taken.
    pub taken: Taken,
    /// When the pass that took it ended, ms since the epoch.
    pub at_ms: i64,
}

/// The progress file in `snap_dir` (`dataDir/zkrs-snap`), if one reads whole; one that does not
/// (torn, edited) is taken as absent.
pub fn read_progress(snap_dir: &Path) -> Option<Progress> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(snap_dir.join(PROGRESS_FILE))
        .ok()?
        .take(PROGRESS_BYTES_MAX)
        .read_to_string(&mut text)
        .ok()?;
    let mut lines = text.lines();
    if lines.next()? != "zkrs-archived 1" {
        return None;
    }
    let mut field = |k: &str| lines.next()?.strip_prefix(k)?.strip_prefix('=').map(str::to_string);
    let zxid = |v: String| if v == "none" { Some(None) } else { v.parse::<i64>().ok().map(Some) };
    let target = field("target")?;
    let log_through = zxid(field("log_through")?)?;
    let snapshots_through = zxid(field("snapshots_through")?)?;
    let at_ms = field("at_ms")?.parse().ok()?;
    if lines.next()? != "end" {
        return None;
    }
    Some(Progress { target, taken: Taken { log_through, snapshots_through }, at_ms })
}

/// Replaces the progress file in `snap_dir` with `p`.
///
/// Errors: it cannot be written, synced or renamed.
pub fn write_progress(snap_dir: &Path, p: &Progress) -> std::io::Result<()> {
    let z = |v: Option<i64>| v.map_or("none".to_string(), |z| z.to_string());
    let text = format!(
        "zkrs-archived 1\ntarget={}\nlog_through={}\nsnapshots_through={}\nat_ms={}\nend\n",
        p.target,
        z(p.taken.log_through),
        z(p.taken.snapshots_through),
        p.at_ms
    );
    let tmp = snap_dir.join(format!("{PROGRESS_FILE}.tmp"));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, snap_dir.join(PROGRESS_FILE))?;
    std::fs::File::open(snap_dir).and_then(|d| d.sync_all())
}

/// At the start of a server that does not archive by itself: removes the progress file an
/// earlier run left, so that `zkrs-server purge` does not keep files for an archive no longer
/// written.
pub fn forget_progress(snap_dir: &Path) {
    let path = snap_dir.join(PROGRESS_FILE);
    if let Some(p) = read_progress(snap_dir) {
        info!(
            "zkrs.backup.to is not set: the purge no longer waits for the archive {} (removing {})",
            p.target,
            path.display()
        );
    }
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => warn!("cannot remove {}: {e}", path.display()),
    }
}

/// Asks the running server how far its archive may go: the zxid it has applied while it serves
/// as leader, follower or observer; an error (why not) otherwise.
pub type AskCommitted = Box<dyn FnMut() -> Result<i64, String> + Send>;

/// An [`AskCommitted`] that asks the driver through its inbox `core`, waiting at most 10 s.
pub fn ask_driver(core: tokio::sync::mpsc::Sender<crate::driver::DriverMsg>) -> AskCommitted {
    Box::new(move || {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        core.blocking_send(crate::driver::DriverMsg::ArchiveCap { reply: tx })
            .map_err(|_| "the server is stopping".to_string())?;
        rx.recv_timeout(Duration::from_secs(10))
            .map_err(|_| "the server did not say how far it has committed within 10 s".to_string())?
    })
}

/// Why an [`AskCommitted`] answered that the server does not serve, as the pass error carries it.
const NOT_SERVING: &str = "the server is not serving as leader, follower or observer";

/// The driver's answer to [`ask_driver`] for a server in `role` that has applied through
/// `applied` (its reported zxid: a leader's new epoch's zero before its first write). A
/// standalone server applies a transaction only once its log has synced it, so what it has
/// applied is durable.
pub fn committed_answer(role: crate::core::Role, applied: i64) -> Result<i64, String> {
    use crate::core::Role;
    match role {
        Role::Leader { .. } | Role::Learner { .. } => Ok(applied),
        Role::Standalone => Ok(applied),
        Role::ReadOnly => Err(format!(
            "{NOT_SERVING} (read-only: its tree holds proposals that may never have been committed)"
        )),
        Role::Down => Err(format!("{NOT_SERVING} (electing or syncing)")),
    }
}

/// The archiver thread's stop signal.
#[derive(Debug, Default)]
struct Stop {
    stopped: Mutex<bool>,
    wake: Condvar,
}

impl Stop {
    /// Waits `d`, or less when stopped; true when stopped.
    fn wait(&self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        let mut stopped = self.stopped.lock().unwrap_or_else(|p| p.into_inner());
        while !*stopped {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            stopped = self.wake.wait_timeout(stopped, left).unwrap_or_else(|p| p.into_inner()).0;
        }
        *stopped
    }

    fn stop(&self) {
        *self.stopped.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.wake.notify_all();
    }
}

/// The running archiver: its progress, and its thread, told to stop when this is dropped (it
/// stops at its next wait; a pass under way finishes, and the archive is usable at any point).
#[derive(Debug)]
pub struct ArchiverHandle {
    progress: Arc<ArchiveProgress>,
    stop: Arc<Stop>,
}

impl ArchiverHandle {
    /// What the archive has taken and how the archiver fares.
    pub fn progress(&self) -> Arc<ArchiveProgress> {
        self.progress.clone()
    }
}

impl Drop for ArchiverHandle {
    fn drop(&mut self) {
        self.stop.stop();
    }
}

/// Starts the server's archiver: `b.to` for the server whose dataDir is `data_dir` and
/// dataLogDir `data_log_dir` (their roots, holding `zkrs-snap` and `zkrs-log`), every pass
/// capped at what `ask` says the server has applied. What the archive had taken is read from the
/// progress file of an earlier run into the same archive, if any; otherwise nothing is purged
/// until the first pass succeeds. Returns once the archive's lock is held, before any pass.
///
/// Errors (the server does not start): the target is not an archive this build writes; the
/// archive's staging directory cannot be made private, or is held by another writer (named).
pub async fn start(
    b: &BackupSettings,
    data_dir: &Path,
    data_log_dir: &Path,
    ask: AskCommitted,
) -> Result<ArchiverHandle, String> {
    let snap_dir = data_dir.join(zk_log::snapshot::SNAP_DIR_NAME);
    let progress = Arc::new(
        ArchiveProgress::new(&b.to, b.hold_max_bytes, data_log_dir.join(zk_log::LOG_DIR_NAME))
            .with_snap_dir(snap_dir.clone()),
    );
    match read_progress(&snap_dir) {
        Some(p) if p.target == b.to => {
            debug!("the archive {} had taken: {}", b.to, describe(Some(p.taken)));
            progress.set_taken(p.taken);
        }
        Some(p) => info!(
            "{} names the archive {}, not {}: nothing is purged for the new one until its first pass",
            snap_dir.join(PROGRESS_FILE).display(),
            p.target,
            b.to
        ),
        None => {}
    }
    let stop = Arc::new(Stop::default());
    let (locked_tx, locked_rx) = tokio::sync::oneshot::channel();
    let job = Job {
        settings: b.clone(),
        data_dir: data_dir.to_path_buf(),
        data_log_dir: data_log_dir.to_path_buf(),
        snap_dir,
        progress: progress.clone(),
        stop: stop.clone(),
        ask: Some(ask),
    };
    std::thread::Builder::new()
        .name("zk-backup".into())
        .spawn(move || {
            crate::snapshots::background_priority();
            let opened = super::target::open(&job.settings.to)
                .and_then(|t| ArchiveLock::take(t, ArchiveWriter::Server, &job.data_dir));
            match opened {
                // A start that gave up waiting (ARCHIVE_OPEN_WAIT) stopped the job: the lock goes.
                Ok(_) if job.stop.wait(Duration::ZERO) => {}
                Ok(lock) => {
                    let _ = locked_tx.send(Ok(()));
                    job.run(lock);
                }
                Err(e) => {
                    let _ = locked_tx.send(Err(e.to_string()));
                }
            }
        })
        .map_err(|e| format!("cannot start the archiver thread: {e}"))?;
    // An archive that does not answer (a hung mount, an object store out of reach) must not hold
    // the server's start for ever (archiving review, helper-95).
    let locked = match tokio::time::timeout(ARCHIVE_OPEN_WAIT, locked_rx).await {
        Ok(r) => r,
        Err(_) => {
            // The thread, once its archive answers, lets the lock go and ends.
            stop.stop();
            return Err(format!(
                "the archive {} did not answer within {ARCHIVE_OPEN_WAIT:?} (zkrs.backup.to)",
                b.to
            ));
        }
    };
    match locked {
        Ok(Ok(())) => {
            info!("archiving into {} every {:?} (zkrs.backup.to)", b.to, b.interval);
            Ok(ArchiverHandle { progress, stop })
        }
        Ok(Err(why)) => Err(why),
        Err(_) => Err("the archiver thread ended before it opened the archive".into()),
    }
}

/// How long a server's start waits for its archive to open and lock.
const ARCHIVE_OPEN_WAIT: Duration = Duration::from_secs(60);

/// What the archiver thread works with.
struct Job {
    settings: BackupSettings,
    data_dir: PathBuf,
    data_log_dir: PathBuf,
    snap_dir: PathBuf,
    progress: Arc<ArchiveProgress>,
    stop: Arc<Stop>,
    ask: Option<AskCommitted>,
}

/// A warning repeated at most this often while it says the same thing.
const REPEAT_WARNING: Duration = Duration::from_secs(300);

impl Job {
    /// The passes, every interval until stopped. The manifest is read (again at each interval
    /// until it reads) once the lock is held.
    fn run(mut self, lock: ArchiveLock) {
        let mut lock = Some(lock);
        let mut archiver: Option<Archiver> = None;
        let mut said: Option<(String, Instant)> = None;
        let not_serving = Arc::new(AtomicBool::new(false));
        loop {
            let started = Instant::now();
            if archiver.is_none() {
                if let Some(l) = lock.take() {
                    match l.read_manifest() {
                        Ok(m) => {
                            // The progress file of an earlier run may describe an archive since
                            // emptied or replaced at the same address (archiving review,
                            // helper-95): what it says is lowered to what the manifest holds. Never
                            // raised here: a manifest holding more may be another history's (a
                            // restored or replaced dataDir, another server's archive), which only
                            // a pass that succeeds vouches for (review helper-98).
                            if let Some(said) = self.progress.taken() {
                                let lower = said.at_most(Taken::of(&m));
                                if lower != said {
                                    warn!(
                                        "backup: the archive {} holds {}, less than {} said ({}); purging no further \
                                         than it holds",
                                        self.settings.to,
                                        describe(Some(lower)),
                                        self.snap_dir.join(PROGRESS_FILE).display(),
                                        describe(Some(said))
                                    );
                                    self.progress.set_taken(lower);
                                }
                            }
                            let mut a = Archiver::from_lock(l, m, &self.data_dir, &self.data_log_dir);
                            if let Some(mut ask) = self.ask.take() {
                                let flag = not_serving.clone();
                                a.set_commit_cap(Box::new(move || {
                                    let answer = ask();
                                    flag.store(
                                        answer.as_ref().is_err_and(|e| e.starts_with(NOT_SERVING)),
                                        Ordering::Relaxed,
                                    );
                                    answer.map_err(BackupError::Refused)
                                }));
                            }
                            archiver = Some(a);
                        }
                        Err(e) => {
                            self.progress.errors.fetch_add(1, Ordering::Relaxed);
                            self.say(&mut said, format!("cannot read the manifest of {}: {e}", l.describe()));
                            lock = Some(l);
                        }
                    }
                }
            }
            self.progress.look_at_space();
            if archiver.is_none() && self.progress.space_short_now() && self.progress.held_bytes() > 0 {
                // No pass asks the driver while the manifest does not read: asked here, it has
                // retention let the kept files go.
                if let Some(ask) = self.ask.as_mut() {
                    let _ = ask();
                }
            }
            if let Some(a) = archiver.as_mut() {
                if self.pass(a, &mut said, &not_serving) {
                    // Closed: nothing more can be archived; the thread waits to be stopped.
                    while !self.stop.wait(Duration::from_secs(3600)) {}
                    return;
                }
            }
            if self.stop.wait(self.settings.interval.saturating_sub(started.elapsed())) {
                return;
            }
        }
    }

    /// One pass; true when the archive takes nothing more.
    fn pass(&self, a: &mut Archiver, said: &mut Option<(String, Instant)>, not_serving: &AtomicBool) -> bool {
        let mut out = PassLog::default();
        let result = a.pass(&mut out);
        out.flush_line();
        match result {
            Ok(r) => {
                self.record(a, &r);
                debug!("{}", lag_line(&r));
                if said.take().is_some() {
                    info!("backup: archiving into {} again", self.settings.to);
                }
                false
            }
            Err(e) if a.closed() => {
                self.progress.errors.fetch_add(1, Ordering::Relaxed);
                self.progress.closed.store(true, Ordering::Relaxed);
                error!(
                    "backup: the archive {} takes nothing more: {e}; start a new archive (another \
                     zkrs.backup.to) and restart the server; until then the purge keeps what this one lacks, \
                     up to zkrs.backup.holdMaxBytes",
                    self.settings.to
                );
                true
            }
            Err(e) if not_serving.load(Ordering::Relaxed) => {
                debug!("backup: the pass waits: {e}");
                false
            }
            Err(e) => {
                self.progress.errors.fetch_add(1, Ordering::Relaxed);
                self.say(
                    said,
                    format!(
                        "a pass into {} failed (retried every {:?}): {e}",
                        self.settings.to, self.settings.interval
                    ),
                );
                false
            }
        }
    }

    /// Logs `msg` as a warning, unless it is what the last one said less than
    /// [`REPEAT_WARNING`] ago (then at debug).
    fn say(&self, said: &mut Option<(String, Instant)>, msg: String) {
        match said {
            Some((m, at)) if *m == msg && at.elapsed() < REPEAT_WARNING => debug!("backup: {msg}"),
            _ => {
                warn!("backup: {msg}");
                *said = Some((msg, Instant::now()));
            }
        }
    }

    /// Records a pass that succeeded: the figures, and what the archive has taken, in memory and
    /// in the progress file when it moved.
    fn record(&self, a: &Archiver, r: &PassReport) {
        let m = a.manifest();
        let bytes: u64 = m
            .logs
            .iter()
            .filter(|l| r.logs.contains(&l.name))
            .map(|l| l.bytes)
            .chain(m.snapshots.iter().filter(|s| r.snapshots.contains(&s.name)).map(|s| s.bytes))
            .sum();
        let p = &self.progress;
        p.archived_bytes.fetch_add(bytes, Ordering::Relaxed);
        p.archived_files.fetch_add((r.logs.len() + r.snapshots.len()) as u64, Ordering::Relaxed);
        let at_ms = now_ms();
        p.last_success_ms.store(at_ms, Ordering::Relaxed);
        let taken = Taken::of(m);
        if p.taken() != Some(taken) {
            p.set_taken(taken);
            let file = Progress { target: self.settings.to.clone(), taken, at_ms };
            if let Err(e) = write_progress(&self.snap_dir, &file) {
                warn!(
                    "backup: cannot write {}: {e} (`zkrs-server purge` on the stopped server would not know what \
                     the archive lacks)",
                    self.snap_dir.join(PROGRESS_FILE).display()
                );
            }
        }
    }
}

/// The most bytes of one line of pass output kept; the rest of a longer line is dropped.
pub const LINE_BYTES_MAX: usize = 8 * 1024;

/// A pass's output, line by line into the server's log: warnings at warn, archived files at
/// info, the rest at debug.
#[derive(Debug, Default)]
struct PassLog {
    line: Vec<u8>,
}

impl PassLog {
    fn flush_line(&mut self) {
        if self.line.is_empty() {
            return;
        }
        let text = String::from_utf8_lossy(&self.line);
        if text.contains("WARNING") {
            warn!("{text}");
        } else if text.starts_with("backup: archived ") {
            info!("{text}");
        } else {
            debug!("{text}");
        }
        self.line.clear();
    }
}

impl Write for PassLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        for &b in buf {
            if b == b'\n' {
                self.flush_line();
            } else if self.line.len() < LINE_BYTES_MAX {
                self.line.push(b);
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snaps(zxids: &[i64]) -> Vec<(i64, String)> {
        zxids.iter().map(|z| (*z, zk_log::snapshot::snapshot_name(*z))).collect()
    }

    #[test]
    fn a_purge_waits_for_what_the_archive_has_not_taken() {
        let all = snaps(&[10, 20, 30, 40, 50]);
        let t = |log: Option<i64>, snap: Option<i64>| Taken { log_through: log, snapshots_through: snap };
        // Everything taken: as without an archive (two of five go, the log before 31).
        assert_eq!(t(Some(60), Some(50)).allow(&all, 2), (2, Some(31)));
        // The snapshots taken through 10 only: 20 stays, and the log it needs.
        assert_eq!(t(Some(60), Some(10)).allow(&all, 2), (1, Some(21)));
        // A newer snapshot taken lets an older one the archiver passed over go.
        assert_eq!(t(Some(60), Some(45)).allow(&all, 2), (2, Some(31)));
        // The log taken through 25 only: purged before 26 at most.
        assert_eq!(t(Some(25), Some(50)).allow(&all, 2), (2, Some(26)));
        // No snapshot and no log taken: nothing goes.
        assert_eq!(t(None, None).allow(&all, 2), (0, None));
        assert_eq!(t(None, Some(50)).allow(&all, 2), (2, None));
        assert_eq!(t(Some(60), Some(50)).allow(&all, 0), (0, Some(11)));
    }

    #[test]
    fn files_are_kept_for_the_archive_only_while_the_disk_has_room() {
        const G: u64 = 1 << 30;
        // A 100 GiB disk: 5 GiB would be a twentieth, capped at 4 GiB.
        assert!(!space_short(4 * G, 100 * G));
        assert!(space_short(4 * G - 1, 100 * G));
        // A 10 GiB disk: a twentieth, 512 MiB.
        assert!(!space_short(G / 2, 10 * G));
        assert!(space_short(G / 2 - 1, 10 * G));
        assert!(space_short(0, 1), "a full disk of any size");
        assert!(!space_short(0, 0), "a file system that reports no size");
        // This test's own directory, on a disk with room (as the machines the tests run on have).
        let dir = tempfile::tempdir().unwrap();
        let (free, total) = space_of(dir.path()).expect("statvfs");
        assert!(free > 0 && total >= free, "{free} of {total}");
    }

    #[test]
    fn what_is_taken_is_only_lowered_by_another_account() {
        let t = |log: Option<i64>, snap: Option<i64>| Taken { log_through: log, snapshots_through: snap };
        assert_eq!(t(Some(9), Some(5)).at_most(t(Some(7), Some(6))), t(Some(7), Some(5)));
        assert_eq!(t(Some(9), Some(5)).at_most(t(None, Some(6))), t(None, Some(5)), "nothing is the lowest");
        assert_eq!(t(Some(9), Some(5)).at_most(t(Some(90), Some(50))), t(Some(9), Some(5)), "never raised");
    }

    #[test]
    fn the_lag_counts_the_transactions_the_archive_lacks() {
        let t = |log: Option<i64>| Some(Taken { log_through: log, snapshots_through: None });
        assert_eq!(lag_txns(0x1_0000_0010, None), -1, "not known yet");
        assert_eq!(lag_txns(0x1_0000_0010, t(Some(0x1_0000_0004))), 12);
        assert_eq!(lag_txns(0x1_0000_0010, t(Some(0x1_0000_0010))), 0);
        assert_eq!(lag_txns(0x2_0000_0003, t(Some(0x1_0000_0010))), 3, "the new epoch's");
        assert_eq!(lag_txns(0x2_0000_0000, t(Some(0x1_0000_0010))), 0, "a leader before its first write");
        assert_eq!(lag_txns(7, t(None)), 7);
    }

    #[test]
    fn retention_keeps_for_the_archive_up_to_the_bound() {
        use zk_log::{Storage, StorageFile};
        let disk = zk_log::FaultStorage::new(7);
        for z in [10i64, 20, 30, 40] {
            let mut f = disk.create(&zk_log::snapshot::snapshot_name(z)).expect("create");
            f.set_len(1000).expect("size");
            f.write_at(0, &[7u8; 1000]).expect("write");
            f.sync().expect("sync");
        }
        let all = zk_log::snapshot::list_snapshots(&disk).expect("list");
        let log_dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(log_dir.path().join(zk_log::format::segment_name(1)), [0u8; 500]).expect("segment");
        std::fs::write(log_dir.path().join(zk_log::format::segment_name(25)), [0u8; 500]).expect("segment");
        std::fs::write(log_dir.path().join(zk_log::format::segment_name(41)), [0u8; 500]).expect("segment");
        let p = ArchiveProgress::new("/archive", 3000, log_dir.path().to_path_buf());
        // Nothing known: nothing goes; two snapshots and the segment from 1 (the only one a
        // purge before 31 removes) held.
        assert_eq!(p.plan(&disk, &all, 2), Plan { snapshots: 0, log_before: None });
        assert_eq!(p.figures(40).held_bytes, 2500);
        assert_eq!(p.figures(40).lag_txns, -1);
        // The archive took everything: as without it.
        p.set_taken(Taken { log_through: Some(45), snapshots_through: Some(40) });
        assert_eq!(p.plan(&disk, &all, 2), Plan { snapshots: 2, log_before: Some(31) });
        assert_eq!(p.figures(45).held_bytes, 0);
        // It took the snapshot at 10 and the log through 22: 20 and the segment from 1 (which
        // holds 23 and 24 too) held.
        p.set_taken(Taken { log_through: Some(22), snapshots_through: Some(10) });
        assert_eq!(p.plan(&disk, &all, 2), Plan { snapshots: 1, log_before: Some(21) });
        assert_eq!(p.figures(45).held_bytes, 1500);
        assert_eq!(p.figures(45).purges_forced, 0);
        // Past the bound: everything goes, and it is counted.
        let tight = ArchiveProgress::new("/archive", 1499, log_dir.path().to_path_buf());
        tight.set_taken(Taken { log_through: Some(22), snapshots_through: Some(10) });
        assert_eq!(tight.plan(&disk, &all, 2), Plan::FREE);
        assert_eq!(tight.figures(45).purges_forced, 1);
    }

    #[test]
    fn the_progress_file_reads_back_and_a_torn_one_is_absent() {
        let dir = tempfile::tempdir().expect("temp dir");
        assert_eq!(read_progress(dir.path()), None);
        let p = Progress {
            target: "s3://bucket/zk/1".into(),
            taken: Taken { log_through: Some(0x1_0000_0005), snapshots_through: None },
            at_ms: 1_796_018_586_101,
        };
        write_progress(dir.path(), &p).expect("write");
        assert_eq!(read_progress(dir.path()), Some(p));
        let path = dir.path().join(PROGRESS_FILE);
        let text = std::fs::read_to_string(&path).expect("read");
        std::fs::write(&path, text.trim_end().trim_end_matches("end")).expect("tear");
        assert_eq!(read_progress(dir.path()), None);
        forget_progress(dir.path());
        assert!(!path.exists());
    }

    #[test]
    fn pass_output_lines_are_bounded() {
        let mut log = PassLog::default();
        log.write_all(&vec![b'x'; LINE_BYTES_MAX * 3]).expect("write");
        assert_eq!(log.line.len(), LINE_BYTES_MAX);
        log.write_all(b"\nbackup: archived log/x\n").expect("write");
        assert!(log.line.is_empty());
    }
}
