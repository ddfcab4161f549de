//! `zkrs-server restore`: a fresh data directory holding the tree as of a chosen point, from an
//! archive.
//!
//! The plan: the point is a zxid (`--zxid`), the last transaction before the first one stamped
//! later than a time (`--time`), or the newest archived transaction. The start is the newest
//! archived snapshot that is exact at or before the point (a snapshot is fuzzy: it is exact
//! once replayed through the end zxid it recorded), or an empty tree when the archived log goes
//! back to the server's first transaction. Every transaction after the snapshot's start zxid
//! through the point is replayed from the archived log, which must hold all of them: a gap is
//! an error naming it.
//!
//! What is checked: each file's size and CRC-32 against the manifest as it is fetched; every
//! chunk of the snapshot and every record of the segments (their own checksums, zxid order);
//! the tree digest the snapshot recorded, once the replay stands at its end zxid; and, from
//! there on, the tree digest each logged transaction carries (an ensemble's records do; a
//! standalone server's carry none). The result is written as one snapshot at the point, with
//! no log: the server started on the directory loads it and continues after it.

use super::manifest::{LogFile, Manifest, SnapFile, LOG_PREFIX, MANIFEST_KEY, SNAP_PREFIX};
use super::segment::SegmentReader;
use super::target::{sync_dir, ArchiveTarget};
use super::time::format_time_ms;
use super::{io_err, BackupError};
use crate::tools::Progress;
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};
use zk_log::FileStorage;
use zk_proto::Acl;
use zk_tree::snapshot::{ContentParser, ContentRecord};
use zk_tree::{ContentBuilder, Database, Recovery, SnapshotCheck, SnapshotLoader, TreeConfig, Unverifiable};

/// Which state to restore.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// The newest archived transaction.
    Newest,
    /// The state right after this zxid (or the last transaction before it, when no transaction
    /// has this zxid, as between two epochs).
    Zxid(i64),
    /// The state after the last transaction that precedes the first one stamped later than
    /// this time (ms since the epoch, the leader's clock).
    Time(i64),
}

/// What a restore did and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreReport {
    /// The zxid of the restored state.
    pub zxid: i64,
    /// The archived snapshot it started from (None: an empty tree).
    pub snapshot: Option<String>,
    /// Transactions replayed over it.
    pub replayed: u64,
    /// Nodes in the restored tree (the system nodes included).
    pub nodes: u64,
    /// What was checked, one line each.
    pub checks: Vec<String>,
    /// The snapshot file written.
    pub written: PathBuf,
    /// What the operator should check (transaction times out of order around a `--time`
    /// point), one line each; also printed.
    pub warnings: Vec<String>,
}

/// The tree settings a restore replays with: the tree digest kept, so that every digest the
/// archive holds can be compared.
fn replay_config() -> TreeConfig {
    TreeConfig { tree_digest: true, extended_types_enabled: true, ..TreeConfig::default() }
}

fn hex(z: i64) -> String {
    format!("{z:#x}")
}

/// The most names of what a data directory holds that a refusal lists.
const HELD_NAMES_MAX: usize = 10;

/// Checks that `out` (and `log_out`, a separate dataLogDir) can take the result, changing
/// nothing: `out` must be absent or hold nothing but the [`STAGING_NAME`] a killed restore left
/// (this one removes it and builds again), and `log_out`, when it is another directory, must hold
/// no `zkrs-log` (the server would replay it over the restored tree). A restore never writes over
/// data: the refusal names what is there and how to go on.
fn check_out(out: &Path, log_out: Option<&Path>) -> Result<(), BackupError> {
    let mut held: Vec<String> = match std::fs::read_dir(out) {
        Ok(entries) => entries
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .filter(|n| !matches!(n, Ok(n) if n == STAGING_NAME))
            .take(HELD_NAMES_MAX + 1)
            .collect::<Result<_, _>>()
            .map_err(io_err(out))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(io_err(out)(e)),
    };
    held.sort();
    let aside = held.iter().any(|n| n.contains(BEFORE_RESTORE));
    if held.len() > HELD_NAMES_MAX {
        held.truncate(HELD_NAMES_MAX);
        held.push("…".to_string());
    }
    let old_log = log_out
        .filter(|l| !same_dir(l, out))
        .map(|l| l.join(zk_log::LOG_DIR_NAME))
        .filter(|l| std::fs::symlink_metadata(l).is_ok());
    let mut what = Vec::new();
    if !held.is_empty() {
        what.push(format!("{} is not empty (it holds {})", out.display(), held.join(", ")));
    }
    if let Some(l) = &old_log {
        what.push(format!("{} exists", l.display()));
    }
    if what.is_empty() {
        return Ok(());
    }
    Err(BackupError::Refused(format!(
        "{}: nothing was changed. A restore writes only into an empty (or absent) data directory, and a \
         separate dataLogDir holding no {log}, never over data: stop the server if one runs there, then \
         either restore into a new directory (--data-dir, and --data-log-dir for a separate log) and point \
         dataDir (and dataLogDir) at it, or move the old {snap} and {log} (and whatever else is there) out \
         of those directories yourself and run the restore again. Whichever: the server started on the \
         result must not keep an old dataLogDir holding {log} (it would replay that log over the restored \
         tree, and refuses to start): point dataLogDir at an empty directory too, or move its {log} away{aside}",
        what.join(", and "),
        snap = zk_log::snapshot::SNAP_DIR_NAME,
        log = zk_log::LOG_DIR_NAME,
        aside = if aside { BEFORE_RESTORE_NOTE } else { "" },
    )))
}

/// The part of the names under which an earlier build's `restore --force` moved the data it
/// replaced aside (`zkrs-snap.before-restore-<ms>`, `zkrs-log.before-restore-<ms>`).
const BEFORE_RESTORE: &str = ".before-restore-";

/// What a refusal adds when the directory holds [`BEFORE_RESTORE`] names.
const BEFORE_RESTORE_NOTE: &str = " (the *.before-restore-* directories hold the data an earlier build's \
     `restore --force` moved aside: to go back to it, move zkrs-snap.before-restore-<ms> back to zkrs-snap, \
     and zkrs-log.before-restore-<ms> to zkrs-log, yourself)";

/// Creates `out` and whichever of its ancestors are missing, and syncs the parent of each one
/// created (so that a power loss does not take away a directory the restore said it wrote
/// into). Returns the directories created, outermost first. A component found to exist when it
/// is created (`a/..` once `a` is made, or a directory another process made meanwhile) is taken
/// as it is, as `create_dir_all` takes it, and is not counted as created.
fn create_out(out: &Path) -> Result<Vec<PathBuf>, BackupError> {
    let mut missing = Vec::new();
    let mut at = Some(out);
    while let Some(d) = at.filter(|d| !d.as_os_str().is_empty()) {
        match std::fs::symlink_metadata(d) {
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => missing.push(d.to_path_buf()),
            Err(e) => return Err(io_err(d)(e)),
        }
        at = d.parent();
    }
    missing.reverse();
    let mut created = Vec::new();
    for d in &missing {
        match std::fs::create_dir(d) {
            Ok(()) => created.push(d.clone()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && d.is_dir() => {}
            Err(e) => {
                remove_created(&created);
                return Err(io_err(d)(e));
            }
        }
    }
    for d in &created {
        let parent = d.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if let Err(e) = step("sync parent").and_then(|_| sync_dir(parent)) {
            remove_created(&created);
            return Err(e);
        }
    }
    Ok(created)
}

/// Removes the directories [`create_out`] created (outermost first in `created`), innermost
/// first, each only if empty, and syncs the parent of the last one removed. Failures are left:
/// a directory that holds something stays.
fn remove_created(created: &[PathBuf]) {
    let mut removed = None;
    for d in created.iter().rev() {
        if std::fs::remove_dir(d).is_err() {
            break;
        }
        removed = Some(d);
    }
    if let Some(parent) = removed.and_then(|d| d.parent()).filter(|p| !p.as_os_str().is_empty()) {
        let _ = sync_dir(parent);
    }
}

/// Creates the staging directory `staging` in `out` unless a killed restore left it. Returns
/// whether it created it.
///
/// Errors: [`BackupError::Refused`] when something other than a directory has its name;
/// [`BackupError::Io`].
fn make_staging(staging: &Path) -> Result<bool, BackupError> {
    match std::fs::create_dir(staging) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => match std::fs::symlink_metadata(staging) {
            Ok(m) if m.is_dir() => Ok(false),
            _ => Err(leftover_refused(staging, "it is not a directory")),
        },
        Err(e) => Err(io_err(staging)(e)),
    }
}

/// The refusal of a restore that cannot remove `what`, which a restore that did not finish left
/// in its staging directory (or is that directory).
fn leftover_refused(what: &Path, why: impl std::fmt::Display) -> BackupError {
    BackupError::Refused(format!(
        "cannot remove {}, which a restore that did not finish left ({why}): nothing of it may stay under \
         the new result; remove it yourself (as the user that ran that restore) and run the restore again",
        what.display()
    ))
}

/// The file a restore locks, in its staging directory ([`lock_staging`]).
const LOCK_NAME: &str = "restore.lock";

/// Why [`lock_staging`] took no lock.
enum LockRefused {
    /// Another restore holds it: the directory, and whatever this restore created, are its.
    Held(BackupError),
    /// The lock file could not be opened or locked.
    Failed(BackupError),
}

/// Takes the restore's lock on the data directory `out`: an exclusive `flock` on [`LOCK_NAME`]
/// (created if missing) in its staging directory `staging`, held while the returned file is open. A
/// second restore into the same directory is refused ([`LockRefused::Held`]), changing nothing,
/// while the first holds it.
///
/// Where: a regular file opened for reading and writing, because NFS emulates `flock` with a
/// byte-range lock, which needs a descriptor open for writing (a directory's descriptor is
/// read-only); inside the staging directory, which is where a restore works and what a server
/// refuses to start beside ([`unfinished_restore`]), so the data directory holds no other entry.
/// A restore clears what a killed one left in the staging directory but for this file
/// ([`clear_staging`]), and only the holder removes the directory, lock file and all, as it
/// finishes: one that got the lock then checks that the name still leads to the file it locked,
/// and is refused otherwise (the holder finished in between).
///
/// Where the file system has no locks to give (`ENOLCK`, `EOPNOTSUPP`, `ENOSYS`), the restore goes
/// on unlocked (None), with a warning in `warnings`.
fn lock_staging(out: &Path, staging: &Path, warnings: &mut Vec<String>) -> Result<Option<File>, LockRefused> {
    use std::os::unix::fs::MetadataExt;
    let p = staging.join(LOCK_NAME);
    let held = || {
        LockRefused::Held(BackupError::Refused(format!(
            "another zkrs-server restore is writing into {} (it holds the lock {}): nothing was changed; wait \
             for it to finish (or stop it) and look at what it left",
            out.display(),
            p.display()
        )))
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&p)
        .map_err(|e| LockRefused::Failed(io_err(&p)(e)))?;
    match try_lock_exclusive(&file) {
        Ok(true) => {}
        Ok(false) => return Err(held()),
        Err(e) => {
            return match e.raw_os_error() {
                Some(libc::ENOLCK | libc::EOPNOTSUPP | libc::ENOSYS) => {
                    warnings.push(format!(
                        "cannot lock {} ({e}): the file system gives no locks here, so a second restore \
                         into {} at the same time is not refused; make sure none runs",
                        p.display(),
                        out.display()
                    ));
                    Ok(None)
                }
                _ => Err(LockRefused::Failed(io_err(&p)(e))),
            };
        }
    }
    let same = match (file.metadata(), std::fs::symlink_metadata(&p)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    };
    if !same {
        return Err(held());
    }
    Ok(Some(file))
}

/// Takes an exclusive `flock` on `file` without waiting: false when another open file holds it
/// (`EWOULDBLOCK`).
///
/// Errors: the other errors of `flock` (tests inject them).
#[allow(unsafe_code)] // flock has no safe wrapper at the MSRV (File::try_lock is from Rust 1.89).
fn try_lock_exclusive(file: &File) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    if let Some(errno) = injected_lock_errno() {
        return Err(std::io::Error::from_raw_os_error(errno));
    }
    // SAFETY: flock on a descriptor `file` owns and keeps open through the call; no memory is passed.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        return Ok(false);
    }
    Err(e)
}

/// The errno a test makes the restore's `flock` fail with.
#[cfg(test)]
fn injected_lock_errno() -> Option<i32> {
    INJECTED_ERRNO.with(|e| e.get().filter(|(what, _)| *what == "flock").map(|(_, n)| n))
}

#[cfg(not(test))]
fn injected_lock_errno() -> Option<i32> {
    None
}

/// Removes what a killed restore left in the staging directory, all but the lock file
/// ([`lock_staging`]).
///
/// Errors: [`BackupError::Refused`] naming what cannot be removed.
fn clear_staging(staging: &Path) -> Result<(), BackupError> {
    let entries = std::fs::read_dir(staging).map_err(|e| leftover_refused(staging, e))?;
    for e in entries {
        let e = e.map_err(|e| leftover_refused(staging, e))?;
        if e.file_name() == LOCK_NAME {
            continue;
        }
        let p = e.path();
        let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
        let removed = if is_dir { std::fs::remove_dir_all(&p) } else { std::fs::remove_file(&p) };
        removed.map_err(|e| leftover_refused(&p, e))?;
    }
    Ok(())
}

/// Renames `from` to `to` unless `to` exists (`renameat2` with `RENAME_NOREPLACE`: a rename
/// onto an empty directory would replace it). Returns false, renaming nothing, where the file
/// system or kernel does not support it (`EINVAL`, `ENOSYS`), or a sandbox forbids the call
/// (`EPERM`, as older container seccomp profiles answer system calls they do not know).
#[allow(unsafe_code)] // renameat2 has no safe wrapper in std or libc.
fn rename_noreplace(from: &Path, to: &Path) -> std::io::Result<bool> {
    use std::os::unix::ffi::OsStrExt;
    let f = std::ffi::CString::new(from.as_os_str().as_bytes())?;
    let t = std::ffi::CString::new(to.as_os_str().as_bytes())?;
    let errno = match injected_rename_errno() {
        Some(errno) => errno,
        None => {
            // SAFETY: both pointers are to NUL-terminated strings that live through the call;
            // AT_FDCWD makes relative paths relative to the working directory, as std::fs::rename
            // does.
            let rc = unsafe {
                libc::renameat2(
                    libc::AT_FDCWD,
                    f.as_ptr(),
                    libc::AT_FDCWD,
                    t.as_ptr(),
                    libc::RENAME_NOREPLACE,
                )
            };
            if rc == 0 {
                return Ok(true);
            }
            std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
        }
    };
    match errno {
        libc::EINVAL | libc::ENOSYS | libc::EPERM => Ok(false),
        _ => Err(std::io::Error::from_raw_os_error(errno)),
    }
}

/// The errno a test makes `renameat2` fail with.
#[cfg(test)]
fn injected_rename_errno() -> Option<i32> {
    INJECTED_ERRNO.with(|e| e.get().filter(|(what, _)| *what == "renameat2").map(|(_, n)| n))
}

#[cfg(not(test))]
fn injected_rename_errno() -> Option<i32> {
    None
}

/// Whether two spellings name one directory (a relative path, a link): compared canonical
/// where both exist.
fn same_dir(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// The file a restore leaves in the snapshot directory (`zkrs-snap`) of the data directory it
/// builds, naming the restore point ([`RestoreMarker`]). It is inside `zkrs-snap` so that the one
/// rename that puts the restored snapshot in place puts it in place too (see [`restore`]), and goes
/// when that directory is wiped. `zkrs-server backup` reads it: an archive whose newest zxid is
/// past the point holds a history the restored server no longer has, and is not continued. (A
/// restore by an earlier build left it in the data directory itself, where
/// [`RestoreMarker::read`] looks too.)
pub const RESTORE_MARKER: &str = "zkrs-restored";

/// The most bytes of a restore marker read.
const RESTORE_MARKER_BYTES_MAX: u64 = 4096;

/// What a restore marker says: the point restored and when, and which start of a server first
/// took the restored data directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestoreMarker {
    /// The zxid the data directory was restored to.
    pub zxid: i64,
    /// When the restore finished (ms since the epoch, this host's clock).
    pub at_ms: i64,
    /// A random number the first start of a server on the restored data directory drew (with
    /// an empty log) and wrote here and into the copy of the marker it keeps in its log
    /// directory ([`crate::backup::restored_log`]): a log is this data directory's only while
    /// the two agree. None until a server has started there (and in a marker an earlier build
    /// wrote).
    pub first_start: Option<u64>,
}

impl RestoreMarker {
    /// The marker's identity, as an archive records the restore it goes on from
    /// ([`Manifest::after_restore`]): the same for every copy of the restored data directory.
    pub fn id(&self) -> String {
        format!("{}@{}", hex(self.zxid), self.at_ms)
    }

    /// The marker's text.
    fn text(&self) -> String {
        let mut t = format!(
            "# Written by zkrs-server restore: this data directory was restored to zxid {} at {}.\n\
             # An archive holding transactions past that zxid is not continued by zkrs-server backup:\n\
             # start a new archive for this server.\n\
             zxid={}\nrestored_at_ms={}\n",
            hex(self.zxid),
            format_time_ms(self.at_ms),
            hex(self.zxid),
            self.at_ms
        );
        if let Some(n) = self.first_start {
            t.push_str(&format!(
                "# Written by the first start of a server on it, also into the copy of this file in its\n\
                 # dataLogDir's {}/: the server replays only a log whose copy says the same.\n\
                 first_start={n:#018x}\n",
                zk_log::LOG_DIR_NAME
            ));
        }
        t
    }

    /// Reads the marker of the data directory `data_dir`, if any: in its `zkrs-snap`, else (an
    /// earlier build's restore) in `data_dir` itself.
    ///
    /// Errors: [`BackupError::Io`]; [`BackupError::Damaged`] for a marker without its two
    /// values, or with a `first_start` line that does not parse.
    pub fn read(data_dir: &Path) -> Result<Option<RestoreMarker>, BackupError> {
        Ok(Self::read_located(data_dir)?.map(|(_, m)| m))
    }

    /// [`Self::read`], with the path of the file it read.
    ///
    /// Errors: as [`Self::read`].
    pub fn read_located(data_dir: &Path) -> Result<Option<(PathBuf, RestoreMarker)>, BackupError> {
        for p in [
            data_dir.join(zk_log::snapshot::SNAP_DIR_NAME).join(RESTORE_MARKER),
            data_dir.join(RESTORE_MARKER),
        ] {
            if let Some(m) = Self::read_file(&p)? {
                return Ok(Some((p, m)));
            }
        }
        Ok(None)
    }

    /// Reads the marker file `p` (a data directory's, or the copy a log directory keeps); None
    /// when there is no such file.
    ///
    /// Errors: as [`Self::read`].
    pub fn read_file(p: &Path) -> Result<Option<RestoreMarker>, BackupError> {
        use std::io::Read;
        let f = match File::open(p) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(p)(e)),
        };
        let mut bytes = Vec::new();
        f.take(RESTORE_MARKER_BYTES_MAX).read_to_end(&mut bytes).map_err(io_err(p))?;
        let text = String::from_utf8_lossy(&bytes);
        let value = |key: &str| text.lines().find_map(|l| l.trim().strip_prefix(key));
        let hex_value = |key: &str| value(key).map(|h| u64::from_str_radix(h, 16).ok());
        let zxid = hex_value("zxid=0x").flatten().and_then(|z| i64::try_from(z).ok());
        let at_ms = value("restored_at_ms=").and_then(|t| t.parse::<i64>().ok());
        let damaged = |why: &str| BackupError::Damaged { key: p.display().to_string(), why: why.into() };
        let first_start = match hex_value("first_start=0x") {
            None => None,
            Some(Some(n)) => Some(n),
            Some(None) => {
                return Err(damaged("a restore marker whose `first_start=0x…` line does not parse"))
            }
        };
        match (zxid, at_ms) {
            (Some(zxid), Some(at_ms)) => Ok(Some(RestoreMarker { zxid, at_ms, first_start })),
            _ => Err(damaged("a restore marker without its `zxid=0x…` and `restored_at_ms=` lines")),
        }
    }

    /// Writes the marker as `p` under a temporary name first, synced, then renamed; the caller
    /// syncs the directory.
    fn write_file(&self, p: &Path) -> Result<(), BackupError> {
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let tmp = p.with_file_name(format!("{name}.tmp"));
        let mut f = File::create(&tmp).map_err(io_err(&tmp))?;
        f.write_all(self.text().as_bytes()).and_then(|_| f.sync_all()).map_err(io_err(&tmp))?;
        std::fs::rename(&tmp, p).map_err(io_err(p))
    }

    /// Writes the marker into `dir` (see [`Self::write_file`]).
    fn write(&self, dir: &Path) -> Result<(), BackupError> {
        self.write_file(&dir.join(RESTORE_MARKER))
    }

    /// Replaces the marker file `p` durably: written under a temporary name and synced, renamed,
    /// and its directory synced.
    ///
    /// Errors: [`BackupError::Io`]; the old file then stays as it was, or, when only the
    /// directory's sync failed, the new one may not survive a power loss.
    pub fn replace(&self, p: &Path) -> Result<(), BackupError> {
        self.write_file(p)?;
        let dir = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        sync_dir(dir)
    }
}

/// The epoch of the archive `m`'s newest zxid (0 for an empty archive).
fn archive_epoch(m: &Manifest) -> u32 {
    zk_quorum::zab::epoch_of(m.newest_zxid().unwrap_or(0).max(0))
}

/// Seconds from the Unix epoch to 2026-01-01T00:00:00Z, the origin of [`ensemble_epoch`]'s clock.
const EPOCH_CLOCK_ORIGIN_SECS: u64 = 1_767_225_600;

/// The epoch an ensemble's restore (`--ensemble`) writes into both epoch files: the highest of
/// [`zk_quorum::recovery::EPOCH_JUMP`] above the newest epoch of the archive `m` (its newest
/// zxid's), the seconds since 2026-01-01 at `now_unix_secs` (so that a later rollback from the
/// same archive outranks the members of an earlier one, which would have had to elect more than
/// once a second to get past it; and a forced recovery's jump from an epoch the archive never
/// saw is outrun the same way, given the time), and one more than `above` (the highest
/// `acceptedEpoch` the operator read on the members that are not given the restore).
///
/// Errors: [`BackupError::Refused`] when that is past [`zk_quorum::recovery::EPOCH_MAX`] (with
/// room for the epoch the restored members then lead).
pub fn ensemble_epoch(m: &Manifest, now_unix_secs: u64, above: u32) -> Result<u32, BackupError> {
    use zk_quorum::recovery::{EPOCH_JUMP, EPOCH_MAX};
    let newest = u64::from(archive_epoch(m));
    let clock = now_unix_secs.saturating_sub(EPOCH_CLOCK_ORIGIN_SECS);
    let e = (newest + u64::from(EPOCH_JUMP)).max(clock).max(u64::from(above) + 1);
    u32::try_from(e).ok().filter(|e| *e < EPOCH_MAX).ok_or_else(|| {
        BackupError::Refused(format!(
            "--ensemble: epoch {e} (the archive's newest epoch {newest}, --epoch-above {above}) is too close to \
             the end of the epoch space"
        ))
    })
}

/// Writes `acceptedEpoch` and `currentEpoch` into `snap_dir` as `epoch`, each under a temporary
/// name, synced, then renamed (the caller syncs the directory).
fn write_epoch_files(snap_dir: &Path, epoch: u32) -> Result<(), BackupError> {
    for name in [zk_log::ACCEPTED_EPOCH_FILE, zk_log::CURRENT_EPOCH_FILE] {
        let p = snap_dir.join(name);
        let tmp = snap_dir.join(format!("{name}.tmp"));
        let mut f = File::create(&tmp).map_err(io_err(&tmp))?;
        f.write_all(epoch.to_string().as_bytes()).and_then(|_| f.sync_all()).map_err(io_err(&tmp))?;
        std::fs::rename(&tmp, &p).map_err(io_err(&p))?;
    }
    Ok(())
}

/// The directory, in the data directory, a restore fetches into and builds its result in. Only
/// a restore creates it, only in a data directory that held nothing else, and removes it once
/// the result is in place: a data directory holding it and no `zkrs-snap` is a restore's that
/// did not finish ([`unfinished_restore`]). It also holds the file a restore locks while it runs
/// (`restore.lock`), so that a second restore into the directory is refused.
pub const STAGING_NAME: &str = ".restore-staging";

/// Whether `data_dir` holds what a restore that did not finish (killed, or failed without
/// cleaning up) left: its [`STAGING_NAME`], and no `zkrs-snap` or one holding no snapshot file
/// (as `zkrs-server purge` or a server refused part-way may have created). Returns the staging
/// directory. A server does not start there ([`crate::server::StartError::UnfinishedRestore`]):
/// the operator meant the directory to hold the restored data, and an empty tree served in its
/// place would look like data lost. Once `zkrs-snap` holds a snapshot, the restore's result is
/// whole (see [`restore`]: the one rename that commits it brings the snapshot in, and a server
/// keeps one there from then on) and a staging directory left beside it is ignored (and removed
/// at the server's start, [`remove_staging_beside_result`]).
pub fn unfinished_restore(data_dir: &Path) -> Option<PathBuf> {
    let staging = data_dir.join(STAGING_NAME);
    if std::fs::symlink_metadata(&staging).is_err() {
        return None;
    }
    let snaps = data_dir.join(zk_log::snapshot::SNAP_DIR_NAME);
    let holds_a_snapshot = std::fs::read_dir(snaps).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.file_name().to_str().and_then(zk_log::snapshot::parse_snapshot_name).is_some())
    });
    (!holds_a_snapshot).then_some(staging)
}

/// What `data_dir` holds besides the [`STAGING_NAME`] and an empty `zkrs-snap` (at most
/// ten names, sorted), for the refusal of a start on an unfinished restore: a restore run
/// again refuses a directory holding anything else.
pub fn unfinished_restore_others(data_dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(data_dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n != STAGING_NAME)
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    if names.len() > HELD_NAMES_MAX {
        names.truncate(HELD_NAMES_MAX);
        names.push("…".to_string());
    }
    names
}

/// The advice a start refused on an unfinished restore gives about `others`
/// ([`unfinished_restore_others`]): what to move away before the restore runs again.
pub fn unfinished_restore_advice(others: &[String]) -> String {
    if others.is_empty() {
        return String::new();
    }
    format!(
        "; dataDir also holds {}, and a restore writes only into a directory holding nothing else: move \
         those away first{}",
        others.join(", "),
        if others.iter().any(|n| n.contains(BEFORE_RESTORE)) { BEFORE_RESTORE_NOTE } else { "" }
    )
}

/// Removes the [`STAGING_NAME`] a restore left in `data_dir` beside its committed result (killed
/// between its commit and the removal, or failing to remove it), at a server's start: left there,
/// it would count as an unfinished restore ([`unfinished_restore`]) should `zkrs-snap` ever hold no
/// snapshot again, and refuse that start. Only once `zkrs-snap` holds a snapshot, and not while a
/// restore holds its lock file in it (`restore.lock`; a restore running there now fails at its
/// commit anyway). Returns the directory removed, if any.
///
/// Errors: [`BackupError::Refused`] while a restore holds the lock; [`BackupError::Io`].
pub fn remove_staging_beside_result(data_dir: &Path) -> Result<Option<PathBuf>, BackupError> {
    let staging = data_dir.join(STAGING_NAME);
    match std::fs::symlink_metadata(&staging) {
        Ok(m) if m.is_dir() => {}
        // Not there, or not a restore's (a restore refuses to build over it, naming it).
        _ => return Ok(None),
    }
    if unfinished_restore(data_dir).is_some() {
        return Ok(None);
    }
    let lock = staging.join(LOCK_NAME);
    let _held = match std::fs::OpenOptions::new().read(true).write(true).open(&lock) {
        // A file system that gives no locks: no restore can hold one either.
        Ok(f) => match try_lock_exclusive(&f) {
            Ok(false) => {
                return Err(BackupError::Refused(format!(
                    "{} is locked by a zkrs-server restore running in {}: left as it is",
                    staging.display(),
                    data_dir.display()
                )))
            }
            Ok(true) | Err(_) => Some(f),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_err(&lock)(e)),
    };
    std::fs::remove_dir_all(&staging).map_err(io_err(&staging))?;
    sync_dir(data_dir)?;
    Ok(Some(staging))
}

/// One step of a restore's end ([`restore`], [`install`]): tests record the steps, look at the
/// directories as a kill right before a step would leave them, and make one fail.
fn step(what: &str) -> Result<(), BackupError> {
    #[cfg(test)]
    {
        KILL_POINTS.with(|k| {
            if let Some(watch) = k.borrow_mut().as_mut() {
                watch(what);
            }
        });
        let fail = INSTALL_STEPS.with(|s| {
            let mut s = s.borrow_mut();
            s.0.push(what.to_string());
            s.1.as_deref() == Some(what)
        });
        if fail {
            return Err(BackupError::Io {
                path: what.to_string(),
                source: std::io::Error::other("failure injected by a test"),
            });
        }
    }
    let _ = what;
    Ok(())
}

/// What [`KILL_POINTS`] calls.
#[cfg(test)]
type KillWatch = Box<dyn FnMut(&str)>;

#[cfg(test)]
thread_local! {
    /// The steps taken, and the one to fail.
    static INSTALL_STEPS: std::cell::RefCell<(Vec<String>, Option<String>)> =
        const { std::cell::RefCell::new((Vec::new(), None)) };
    /// Called before each step (with its name), to look at the directories as a restore killed
    /// there would leave them.
    static KILL_POINTS: std::cell::RefCell<Option<KillWatch>> =
        const { std::cell::RefCell::new(None) };
    /// A system call (`"flock"`, `"renameat2"`) to fail, and the errno it fails with.
    static INJECTED_ERRNO: std::cell::Cell<Option<(&'static str, i32)>> =
        const { std::cell::Cell::new(None) };
}

/// Puts the result built in `staging` in place in `out`. The result is `staging/zkrs-snap`,
/// holding the restored snapshot (written, synced and renamed to its name, its directory synced,
/// by the snapshot writer) and the [`RESTORE_MARKER`] (written, synced and renamed there).
///
/// Steps: sync `staging/zkrs-snap` (the marker's rename) and `staging` (the entry of
/// `zkrs-snap`), so that everything the result holds is durable before it moves; rename
/// `staging/zkrs-snap` to `out/zkrs-snap`; sync `out`. ([`restore`] then removes the staging
/// directory, empty by then, and syncs `out` again.)
///
/// The rename of `zkrs-snap` is the commit point, the only change a server or `zkrs-server
/// backup` reads: it moves the snapshot and the marker in together (a directory's rename takes
/// its entries with it, all or none, and they were durable before it). Killed or losing power
/// before it is durable, `out` holds nothing but the staging directory, which a server refuses
/// to start on ([`unfinished_restore`]) and the next restore removes and builds again; once it
/// is, `out` holds the whole result. `out` is synced right after it, so that the restore says
/// done only once the commit is durable. Nothing is written in a separate dataLogDir ([`check_out`]
/// found no `zkrs-log` there): the server creates its log when it starts.
fn install(staging: &Path, out: &Path) -> Result<(), BackupError> {
    let built = staging.join(zk_log::snapshot::SNAP_DIR_NAME);
    let snaps = out.join(zk_log::snapshot::SNAP_DIR_NAME);
    step("sync staged zkrs-snap")?;
    sync_dir(&built)?;
    step("sync staging")?;
    sync_dir(staging)?;
    step("commit")?;
    // A plain rename onto a directory that holds nothing would replace it: whatever took the
    // name since the directory was found empty (a server started meanwhile) stays, and the
    // restore fails.
    let appeared = || {
        BackupError::Refused(format!(
            "{} appeared while the restore ran (a server started there?): the restored data was not \
             moved in",
            snaps.display()
        ))
    };
    match rename_noreplace(&built, &snaps) {
        Ok(true) => {}
        // No RENAME_NOREPLACE here: checked again, then renamed (a window of microseconds).
        Ok(false) => {
            if std::fs::symlink_metadata(&snaps).is_ok() {
                return Err(appeared());
            }
            std::fs::rename(&built, &snaps).map_err(io_err(&snaps))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Err(appeared()),
        Err(e) => return Err(io_err(&snaps)(e)),
    }
    step("sync out")?;
    sync_dir(out).map_err(|e| {
        BackupError::Refused(format!(
            "the restored data is in {}, but syncing {} after moving it in failed ({e}): a power loss may \
             undo it; check the disk before starting a server there (to restore again, move {} away first)",
            snaps.display(),
            out.display(),
            snaps.display()
        ))
    })?;
    Ok(())
}

/// The zxid a point stands for in this archive. For a time, warnings go to `warnings` when
/// transaction times are not in order around the point (they are the proposing leaders' wall
/// clocks, which need not agree, nor only go forward).
fn resolve_point(
    m: &Manifest,
    point: Point,
    target: &dyn ArchiveTarget,
    staging: &Path,
    warnings: &mut Vec<String>,
) -> Result<i64, BackupError> {
    let log_newest = m.last_log_zxid();
    // Past the archived log, only the state a snapshot is exact at on its own (no transaction to
    // replay: its end is its start, and it needs no proof from the log) is held: as a snapshot
    // at the log's base marker is archived (a SNAP's or a restore's point).
    let on_its_own = |s: &&SnapFile| s.exact_from() == Some(s.start_zxid) && !needs_proof(s);
    let snap_points: Vec<i64> = m
        .snapshots
        .iter()
        .filter(|s| log_newest.is_none_or(|l| s.start_zxid > l))
        .filter(on_its_own)
        .map(|s| s.start_zxid)
        .collect();
    let newest = match log_newest {
        Some(l) => Some(snap_points.iter().copied().max().map_or(l, |s| s.max(l))),
        None => m.snapshots.iter().filter_map(|s| s.exact_from()).max(),
    };
    let Some(newest) = newest else {
        return Err(BackupError::Refused(format!("{}: the archive holds no file yet", target.describe())));
    };
    match point {
        Point::Newest => Ok(newest),
        Point::Zxid(z) if z > newest || log_newest.is_some_and(|l| z > l && !snap_points.contains(&z)) => {
            Err(BackupError::Refused(format!(
                "zxid {} is past the newest archived transaction, {}{}: the segment holding it is not archived \
                 yet (the server's open segment is archived once the server starts the next)",
                hex(z),
                hex(log_newest.unwrap_or(newest)),
                if newest > log_newest.unwrap_or(newest) {
                    format!(" (past it, an archived snapshot holds the state at zxid {} only)", hex(newest))
                } else {
                    String::new()
                }
            )))
        }
        Point::Zxid(z) => Ok(z),
        Point::Time(t) => {
            // The first segment holding a transaction stamped later than t; the point is the
            // transaction before that one.
            let Some(i) = m.logs.iter().position(|l| l.summary.max_time_ms > t) else {
                let last = m.logs.last();
                return Err(BackupError::Refused(format!(
                    "{} is past the newest archived transaction ({}), so later transactions before it may \
                     not be archived yet: give --zxid {} to restore that one",
                    format_time_ms(t),
                    last.map_or("none".into(), |l| format!(
                        "zxid {} at {}",
                        hex(l.summary.last_zxid),
                        format_time_ms(l.summary.last_time_ms)
                    )),
                    hex(newest)
                )));
            };
            let seg = &m.logs[i];
            let mut before = if i > 0 { Some(m.logs[i - 1].summary.last_zxid) } else { None };
            let mut order = TimeOrder::default();
            for l in &m.logs[..i] {
                order.segment(l);
            }
            let local = fetch_log(target, seg, staging)?;
            let mut r = open_log(&local, target, seg)?;
            let mut later_one = false;
            while let Some(rec) = next_log_record(&mut r, target, seg)? {
                let (z, at) = (rec.header.zxid, rec.header.time);
                if later_one {
                    order.after_point(z, at, t);
                } else if at > t {
                    later_one = true;
                } else {
                    order.record(z, at);
                    before = Some(z);
                }
            }
            let _ = std::fs::remove_file(&local);
            // The point falls between two segments: unless the later one continues the
            // earlier, the transactions between them are not archived, and any of them may be
            // stamped at or before the time.
            let in_seg = before.is_some_and(|b| b >= seg.summary.first_zxid);
            if let (Some(prev), false) = (i.checked_sub(1).map(|p| &m.logs[p]), in_seg) {
                if !seg.continues(prev.summary.last_zxid) {
                    return Err(BackupError::Gap {
                        after: prev.summary.last_zxid,
                        before: seg.summary.first_zxid,
                        why: format!(
                            "{} falls between {} and {}, and transactions between them may be stamped \
                             before it{}",
                            format_time_ms(t),
                            prev.name,
                            seg.name,
                            held_before(seg)
                        ),
                    });
                }
            }
            for l in &m.logs[i + 1..] {
                if l.summary.first_time_ms <= t {
                    order.after_point(l.summary.first_zxid, l.summary.first_time_ms, t);
                }
            }
            warnings.extend(order.warnings(t));
            before.ok_or_else(|| {
                BackupError::Refused(format!(
                    "{} is before the first archived transaction (zxid {} at {})",
                    format_time_ms(t),
                    hex(seg.summary.first_zxid),
                    format_time_ms(seg.summary.first_time_ms)
                ))
            })
        }
    }
}

/// Whether transaction times go forward up to a `--time` point, and none after it is stamped
/// at or before the time.
#[derive(Debug, Default)]
struct TimeOrder {
    /// The latest time so far, and its zxid.
    latest: Option<(i64, i64)>,
    /// The first step back before the point: (zxid, its time, the later time before it).
    step_back: Option<(i64, i64, i64)>,
    /// The first transaction after the point stamped at or before the time: (zxid, time).
    early_after: Option<(i64, i64)>,
}

impl TimeOrder {
    /// A transaction before the point, in zxid order.
    fn record(&mut self, zxid: i64, time_ms: i64) {
        if let Some((latest, _)) = self.latest {
            if time_ms < latest && self.step_back.is_none() {
                self.step_back = Some((zxid, time_ms, latest));
            }
        }
        if self.latest.is_none_or(|(latest, _)| time_ms > latest) {
            self.latest = Some((time_ms, zxid));
        }
    }

    /// A whole archived segment before the point, from its manifest entry: a step back inside
    /// it (its latest time is not its last) or from the segment before.
    fn segment(&mut self, l: &LogFile) {
        self.record(l.summary.first_zxid, l.summary.first_time_ms);
        if l.summary.max_time_ms > l.summary.last_time_ms && self.step_back.is_none() {
            self.step_back = Some((l.summary.last_zxid, l.summary.last_time_ms, l.summary.max_time_ms));
        }
        self.record(l.summary.last_zxid, l.summary.max_time_ms);
    }

    /// A transaction after the point, stamped at `time_ms`.
    fn after_point(&mut self, zxid: i64, time_ms: i64, t: i64) {
        if time_ms <= t && self.early_after.is_none() {
            self.early_after = Some((zxid, time_ms));
        }
    }

    fn warnings(&self, t: i64) -> Vec<String> {
        let mut w = Vec::new();
        if let Some((z, at, latest)) = self.step_back {
            w.push(format!(
                "transaction times go backwards before the chosen point: zxid {} is stamped {}, after one \
                 stamped {} (times are the proposing leaders' wall clocks, which need not agree across \
                 leaders nor only go forward); --time restores the transactions before the first one \
                 stamped later than {}; to be sure which, give --zxid",
                hex(z),
                format_time_ms(at),
                format_time_ms(latest),
                format_time_ms(t)
            ));
        }
        if let Some((z, at)) = self.early_after {
            w.push(format!(
                "zxid {}, after the chosen point, is stamped {}, not later than {}: it is not restored (a \
                 leader's clock went backwards); give --zxid to restore past it",
                hex(z),
                format_time_ms(at),
                format_time_ms(t)
            ));
        }
        w
    }
}

fn fetch_log(target: &dyn ArchiveTarget, l: &LogFile, staging: &Path) -> Result<PathBuf, BackupError> {
    let local = staging.join(&l.name);
    target.fetch(&format!("{LOG_PREFIX}{}", l.name), l.bytes, l.crc32, &local)?;
    Ok(local)
}

fn open_log(
    local: &Path,
    target: &dyn ArchiveTarget,
    l: &LogFile,
) -> Result<SegmentReader<BufReader<File>>, BackupError> {
    let key = target.show(&format!("{LOG_PREFIX}{}", l.name));
    let f = File::open(local).map_err(io_err(local))?;
    let r = SegmentReader::open(&key, BufReader::new(f)).map_err(|d| BackupError::Damaged {
        key: key.clone(),
        why: format!("{} at offset {}", d.why, d.offset),
    })?;
    if r.first_zxid() != l.summary.first_zxid {
        return Err(BackupError::Damaged {
            key,
            why: format!(
                "starts at zxid {}, the manifest says {}",
                hex(r.first_zxid()),
                hex(l.summary.first_zxid)
            ),
        });
    }
    Ok(r)
}

fn next_log_record(
    r: &mut SegmentReader<BufReader<File>>,
    target: &dyn ArchiveTarget,
    l: &LogFile,
) -> Result<Option<super::segment::SegmentRecord>, BackupError> {
    r.next_record().map_err(|d| BackupError::Damaged {
        key: target.show(&format!("{LOG_PREFIX}{}", l.name)),
        why: format!("{} at offset {}", d.why, d.offset),
    })
}

/// The segments holding the transactions after `start` through `point`, checked to hold all
/// of them: the first holds the one after `start`, and each of the others continues the one
/// before it ([`LogFile::continues`]: by the zxid the server's log held before it, so a missing
/// end of an epoch is noticed). A point past the last of them, before the next archived one,
/// restores to that last one's end only when the next one continues it: otherwise the point
/// lies in a gap, and transactions before it may be missing.
///
/// Errors: [`BackupError::Gap`] naming the first missing range; a point before it still
/// restores.
fn plan_segments<'m>(
    m: &'m Manifest,
    start: i64,
    point: i64,
    target: &dyn ArchiveTarget,
) -> Result<Vec<&'m LogFile>, BackupError> {
    if point <= start {
        return Ok(Vec::new());
    }
    let needed: Vec<&LogFile> =
        m.logs.iter().filter(|l| l.summary.last_zxid > start && l.summary.first_zxid <= point).collect();
    let Some(first) = needed.first() else {
        return Err(BackupError::Gap {
            after: start,
            before: point,
            why: "no archived segment holds them".into(),
        });
    };
    if first.summary.first_zxid > start && !first.continues(start) {
        return Err(BackupError::Gap {
            after: start,
            before: first.summary.first_zxid,
            why: format!(
                "before {}{}",
                target.show(&format!("{LOG_PREFIX}{}", first.name)),
                held_before(first)
            ),
        });
    }
    for w in needed.windows(2) {
        if !w[1].continues(w[0].summary.last_zxid) {
            return Err(BackupError::Gap {
                after: w[0].summary.last_zxid,
                before: w[1].summary.first_zxid,
                why: format!("between {} and {}{}", w[0].name, w[1].name, held_before(w[1])),
            });
        }
    }
    // A point past the last segment needed lies between it and the next one: the restore
    // stops at the last one's end, which is the state at the point only when nothing lies
    // between (as between two epochs, the next one recording that end as what came before it).
    let last_needed = needed[needed.len() - 1];
    let last = last_needed.summary.last_zxid;
    if point > last {
        let Some(next) = m.logs.iter().find(|l| l.summary.first_zxid > last) else {
            // Past the archived log (a point only a snapshot at it holds, which needs no plan).
            return Err(BackupError::Gap {
                after: last,
                before: point,
                why: format!("the archived log ends at zxid {} ({})", hex(last), last_needed.name),
            });
        };
        if !next.continues(last) {
            return Err(BackupError::Gap {
                after: last,
                before: next.summary.first_zxid,
                why: format!(
                    "zxid {} lies between {} and {}{}",
                    hex(point),
                    last_needed.name,
                    next.name,
                    held_before(next)
                ),
            });
        }
    }
    Ok(needed)
}

/// The links between archived segments the plan `segments` (from `start` to `point`) relies on
/// that an older manifest did not record but that were inferred from zxid order
/// ([`LogFile::prev_inferred`]), named in one line (None: none).
fn inferred_links(m: &Manifest, start: i64, point: i64, segments: &[&LogFile]) -> Option<String> {
    let mut relied: Vec<&LogFile> = segments
        .iter()
        .enumerate()
        .filter(|(i, l)| *i > 0 || l.summary.first_zxid > start)
        .map(|(_, l)| *l)
        .collect();
    // A point past the last one holds there only because the next one continues it.
    if let Some(last) = segments.last().map(|l| l.summary.last_zxid).filter(|l| point > *l) {
        relied.extend(m.logs.iter().find(|l| l.summary.first_zxid > last));
    }
    let inferred: Vec<&LogFile> = relied.into_iter().filter(|l| l.prev_inferred).collect();
    let first = inferred.first()?;
    Some(format!(
        "{} archived segment(s) are taken to follow the one before them by zxid order alone ({} after zxid {}{}): \
         the archive was written with a manifest of version 3 or older, which did not record what the server's \
         log held before them, so a log reset below the archive and purged up to there would not have been \
         told apart (restore a point before {} to rely on recorded links only)",
        inferred.len(),
        first.name,
        hex(first.prev_zxid.unwrap_or_default()),
        if inferred.len() > 1 { ", first" } else { "" },
        hex(first.summary.first_zxid)
    ))
}

/// What the server's log held before an archived segment, for a gap's message.
fn held_before(l: &LogFile) -> String {
    match l.prev_zxid {
        Some(p) => format!("; the server's log held zxid {} before it", hex(p)),
        None => "; what the server's log held before it had been purged when it was archived".into(),
    }
}

/// The newest archived snapshot a restore to `zxid` can start from: one that recorded the
/// zxid it is exact at (its end), at or before `zxid`. Those that recorded none are passed
/// over (which transactions after their start they hold is unknown), and so is an ensemble
/// member's whose end is its start unless `proven` shows it exact ([`needs_proof`]): each one
/// passed over that would have been chosen is named in `notes`.
///
/// Errors: those of `proven`.
fn base_snapshot<'m>(
    m: &'m Manifest,
    zxid: i64,
    notes: &mut Vec<String>,
    proven: &mut dyn FnMut(&SnapFile) -> Result<bool, BackupError>,
) -> Result<Option<&'m SnapFile>, BackupError> {
    for s in m.snapshots.iter().rev().filter(|s| s.start_zxid <= zxid) {
        match s.exact_from() {
            Some(e) if e <= zxid => {
                if !needs_proof(s) || proven(s)? {
                    return Ok(Some(s));
                }
                notes.push(format!(
                    "snapshot {} is an ensemble member's that ends at its start zxid {}, as one received \
                     from the leader (fuzzy) does, and the archived log does not show its tree digest to \
                     be the state after {}: not used",
                    s.name,
                    hex(s.start_zxid),
                    hex(s.start_zxid)
                ));
            }
            Some(_) => {}
            None => notes.push(format!(
                "snapshot {} records no end zxid, so which transactions after its start zxid {} it holds is \
                 unknown: not used",
                s.name,
                hex(s.start_zxid)
            )),
        }
    }
    Ok(None)
}

/// Whether a snapshot is exact only once shown to be: an ensemble member's whose end zxid is
/// its start. A member writes such a snapshot from a leader's SNAP, which the leader read from
/// its tree while writes went on, so the tree it holds need not be the state at any zxid; the
/// member's own periodic snapshots record the zxid it had applied when it finished (past the
/// start while writes go on) and are exact once replayed through it.
fn needs_proof(s: &SnapFile) -> bool {
    s.member && s.end_zxid == Some(s.start_zxid)
}

/// Whether the archived log shows `s` exact at its end zxid: the record of that zxid is
/// archived and carries the tree digest `s` recorded (the digest the leader's tree had right
/// after that transaction).
fn proven_by_the_log(
    m: &Manifest,
    s: &SnapFile,
    target: &dyn ArchiveTarget,
    staging: &Path,
) -> Result<bool, BackupError> {
    let (Some(end), Some(digest)) = (s.end_zxid, s.tree_digest) else { return Ok(false) };
    let Some(l) = m.logs.iter().find(|l| l.summary.first_zxid <= end && end <= l.summary.last_zxid) else {
        return Ok(false);
    };
    let local = fetch_log(target, l, staging)?;
    let mut r = open_log(&local, target, l)?;
    let mut found = None;
    while let Some(rec) = next_log_record(&mut r, target, l)? {
        if rec.header.zxid >= end {
            found = (rec.header.zxid == end).then(|| rec.digest.map(|d| d.tree_digest));
            break;
        }
    }
    let _ = std::fs::remove_file(&local);
    Ok(found == Some(Some(digest)))
}

/// Restores the archive at `target` into `out` (a data directory: the snapshot goes into its
/// `zkrs-snap`), as of `point`, the whole tree or only `subtree` with its ancestors. `log_out`
/// is the server's dataLogDir when it has a separate one. A restore never writes over data:
/// `out` must be empty or absent (a staging directory a killed restore left is removed and built
/// again) and `log_out` must hold no `zkrs-log` (the server would replay it over the restored
/// tree); otherwise it is refused and nothing changes. The result, the snapshot
/// at the point with a [`RESTORE_MARKER`] naming it beside it, is built and synced in a staging
/// directory and moved in by one rename, `staging/zkrs-snap` to `out/zkrs-snap`, the commit
/// point, the data directory synced right after: a restore that fails leaves `out` empty (or
/// absent, when it created it), and one killed leaves either nothing but the staging directory,
/// which a server refuses to start on ([`unfinished_restore`]), or the whole result. The restore
/// holds a lock in the staging directory while it runs, so a second restore into `out` is
/// refused (where the file system gives no locks, it warns and goes on). Progress lines, at most
/// one a second plus a summary of what was checked, go to `progress`.
///
/// Errors: [`BackupError::Refused`] for a non-empty `out` or a `zkrs-log` in `log_out`, another
/// restore running in `out`, a point outside the archive, a subtree that does not exist at the
/// point; [`BackupError::Gap`] when
/// the archived log lacks transactions the restore needs; [`BackupError::Damaged`] naming the
/// file for a missing or damaged archived file or a digest that does not match;
/// [`BackupError::Io`].
pub fn restore(
    target: &dyn ArchiveTarget,
    out: &Path,
    log_out: Option<&Path>,
    point: Point,
    subtree: Option<&str>,
    progress: &mut dyn Write,
) -> Result<RestoreReport, BackupError> {
    restore_with(target, out, log_out, point, subtree, None, progress)
}

/// [`restore`]; with `ensemble` (`Some(above)`, `above` 0 when the operator gave no
/// `--epoch-above`), for an ensemble rolled back as a whole (`zkrs-server restore --ensemble`):
/// the result also holds both epoch files (`acceptedEpoch`, `currentEpoch`) at
/// [`ensemble_epoch`], so that members started on copies of it outrank every member of the
/// old history, which may have gone on a few elections past the archive: an old member started
/// on its old data then follows them and is given the restored tree, instead of giving them its
/// own (backup review 16). Not for one member rebuilt beside a live ensemble: it would outrank
/// the live members and, leading, cut their newer writes; an empty data directory rebuilds a
/// member.
///
/// Errors: as [`restore`]; [`BackupError::Refused`] when the epoch cannot jump that far.
pub fn restore_with(
    target: &dyn ArchiveTarget,
    out: &Path,
    log_out: Option<&Path>,
    point: Point,
    subtree: Option<&str>,
    ensemble: Option<u32>,
    progress: &mut dyn Write,
) -> Result<RestoreReport, BackupError> {
    let mut progress = Progress::new(progress);
    if let Some(p) = subtree {
        if zk_proto::path::validate_path(p).is_err()
            || p == "/"
            || p == "/zookeeper"
            || p.starts_with("/zookeeper/")
        {
            return Err(BackupError::Refused(format!(
                "--subtree {p}: give an absolute path of a node other than / and the /zookeeper system nodes"
            )));
        }
    }
    let m = target.read_manifest()?.ok_or_else(|| BackupError::Damaged {
        key: target.show(MANIFEST_KEY),
        why: "no manifest: not an archive, or nothing archived yet".into(),
    })?;
    let now_secs =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let epoch = ensemble.map(|above| ensemble_epoch(&m, now_secs, above)).transpose()?;
    // What the plan can be checked for without fetching anything (a --zxid or the newest point)
    // is checked before anything is created; a --time point needs a segment fetched.
    if !matches!(point, Point::Time(_)) {
        let zxid = resolve_point(&m, point, target, &out.join(STAGING_NAME), &mut Vec::new())?;
        refuse_rewritten(&m, zxid)?;
    }
    check_out(out, log_out)?;
    let created = create_out(out)?;
    // Every failure from here removes the directories this restore created (if they are empty,
    // as a failure before the commit leaves them), but for one: another restore holds the lock,
    // and the directory, with whatever this one created in it, is its.
    let staging = out.join(STAGING_NAME);
    let made_staging = match make_staging(&staging) {
        Ok(made) => made,
        Err(e) => {
            remove_created(&created);
            return Err(e);
        }
    };
    let mut warnings = Vec::new();
    let lock = match lock_staging(out, &staging, &mut warnings) {
        Ok(lock) => lock,
        Err(LockRefused::Held(e)) => return Err(e),
        Err(LockRefused::Failed(e)) => {
            if made_staging {
                let _ = std::fs::remove_dir_all(&staging);
            }
            remove_created(&created);
            return Err(e);
        }
    };
    for w in &warnings {
        progress.say(format!("restore: WARNING: {w}"));
    }
    let r = restore_locked(target, &m, out, log_out, point, subtree, epoch, made_staging, &mut progress);
    if r.is_err() {
        remove_created(&created);
    }
    // Released only now: the staging directory, lock file and all, is gone (or, a removal having
    // failed, named in the output).
    drop(lock);
    r.map(|mut r| {
        r.warnings.splice(0..0, warnings);
        r
    })
}

/// [`restore`], under its lock on `out` (or unlocked, where the file system gives no locks), in
/// the staging directory it locked in (`made_staging`: which it created).
#[allow(clippy::too_many_arguments)]
fn restore_locked(
    target: &dyn ArchiveTarget,
    m: &Manifest,
    out: &Path,
    log_out: Option<&Path>,
    point: Point,
    subtree: Option<&str>,
    epoch: Option<u32>,
    made_staging: bool,
    progress: &mut Progress<'_>,
) -> Result<RestoreReport, BackupError> {
    let staging = out.join(STAGING_NAME);
    // Again, under the lock: a restore that held it may have finished in between.
    if let Err(e) = check_out(out, log_out) {
        if made_staging {
            let _ = std::fs::remove_dir_all(&staging);
        }
        return Err(e);
    }
    clear_staging(&staging)?;
    // The staging directory's entry is durable before anything is built in it: a power loss
    // then leaves it, which a server refuses to start on, not an empty directory.
    let result = step("sync out (staging created)")
        .and_then(|_| sync_dir(out))
        .and_then(|_| restore_staged(target, m, out, &staging, point, subtree, progress))
        .and_then(|r| {
            step("mark")?;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis());
            let at_ms = i64::try_from(now).unwrap_or(i64::MAX);
            let snap_dir = staging.join(zk_log::snapshot::SNAP_DIR_NAME);
            RestoreMarker { zxid: r.zxid, at_ms, first_start: None }.write(&snap_dir)?;
            if let Some(e) = epoch {
                write_epoch_files(&snap_dir, e)?;
                let newest = archive_epoch(m);
                progress.say(format!(
                    "restore: epoch files at {e} (--ensemble: the highest of the archive's newest epoch {newest} + \
                     {}, the seconds since 2026-01-01 on this host's clock, and --epoch-above + 1); every member \
                     not given this restore must hold a lower acceptedEpoch",
                    zk_quorum::recovery::EPOCH_JUMP
                ));
            }
            install(&staging, out)?;
            Ok(r)
        });
    // The staging directory goes whatever happened, its lock file with it (still held: see
    // [`lock_staging`]): after a failure, `out` is left as it was found (and [`restore`] removes
    // it when it created it); after the commit, the staging directory holds nothing else. A kill
    // before its removal is durable leaves it beside the result, which a server ignores and
    // removes at its next start ([`remove_staging_beside_result`]).
    let removed = step("remove staging")
        .and_then(|_| std::fs::remove_dir_all(&staging).map_err(io_err(&staging)))
        .and_then(|_| step("sync out (staging removed)"))
        .and_then(|_| sync_dir(out));
    let r = result?;
    if let Err(e) = removed {
        progress.say(format!(
            "restore: removing {} failed ({e}); the restored data is in place, and the server ignores it              (and removes it when it starts)",
            staging.display()
        ));
    }
    progress.say(format!(
        "restore: done: {} nodes at zxid {} ({} txns replayed) -> {}",
        r.nodes,
        hex(r.zxid),
        r.replayed,
        r.written.display()
    ));
    Ok(r)
}

/// Refuses a point past the one after which the archive's transactions were lost by the server's
/// log ([`Manifest::rewritten_after`]).
fn refuse_rewritten(m: &Manifest, zxid: i64) -> Result<(), BackupError> {
    match m.rewritten_after.filter(|p| zxid > *p) {
        Some(p) => Err(BackupError::Refused(format!(
            "the archive holds transactions after zxid {} that the server's log later lost (they were never \
             committed; the backup marked them when it found out): no point after {} is restored",
            hex(p),
            hex(p)
        ))),
        None => Ok(()),
    }
}

fn restore_staged(
    target: &dyn ArchiveTarget,
    m: &Manifest,
    out: &Path,
    staging: &Path,
    point: Point,
    subtree: Option<&str>,
    progress: &mut Progress<'_>,
) -> Result<RestoreReport, BackupError> {
    let mut warnings = Vec::new();
    let zxid = resolve_point(m, point, target, staging, &mut warnings)?;
    for w in &warnings {
        progress.say(format!("restore: WARNING: {w}"));
    }
    refuse_rewritten(m, zxid)?;
    let mut notes = Vec::new();
    let snap = base_snapshot(m, zxid, &mut notes, &mut |s| proven_by_the_log(m, s, target, staging))?;
    for n in &notes {
        progress.say(format!("restore: {n}"));
    }
    // An archive written before the archiver learnt that a purged log need not have a base
    // marker may claim to start at the server's first transaction with a first piece that
    // cannot be it (not the first of an epoch).
    let from_start = m.log_from_start
        && m.logs.first().is_some_and(|l| l.prev_zxid == Some(0) && l.summary.first_zxid & 0xffff_ffff == 1);
    if snap.is_none() && !from_start {
        let oldest = m
            .snapshots
            .iter()
            .find_map(|s| s.exact_from().map(|e| (s, e)))
            .map_or("none that recorded its end".to_string(), |(s, e)| {
                format!("{} (exact from {})", s.name, hex(e))
            });
        return Err(BackupError::Refused(format!(
            "no archived snapshot is exact at or before zxid {} (oldest: {oldest}), and the archived log does \
             not go back to the server's first transaction",
            hex(zxid)
        )));
    }
    let start = snap.map_or(0, |s| s.start_zxid);
    let segments = plan_segments(m, start, zxid, target)?;
    if let Some(w) = inferred_links(m, start, zxid, &segments) {
        progress.say(format!("restore: WARNING: {w}"));
        warnings.push(w);
    }
    progress.say(format!(
        "restore: to zxid {} from {} and {} archived segments",
        hex(zxid),
        snap.map_or("an empty tree".to_string(), |s| format!(
            "snapshot {} (start {}, exact from {})",
            s.name,
            hex(s.start_zxid),
            hex(s.exact_from().unwrap_or(s.start_zxid))
        )),
        segments.len()
    ));
    let mut checks = Vec::new();
    let cfg = replay_config();
    let db = match snap {
        None => Database::new(cfg.clone()),
        Some(s) => {
            let key = format!("{SNAP_PREFIX}{}", s.name);
            let local = staging.join(&s.name);
            target.fetch(&key, s.bytes, s.crc32, &local)?;
            checks.push(format!("{}: size and CRC-32 as the manifest says", target.show(&key)));
            let storage = FileStorage::open_dir(staging).map_err(io_err(staging))?;
            let mut loader = SnapshotLoader::new(cfg.clone());
            let mut content_err = None;
            let read = zk_log::snapshot::read_snapshot(&storage, &s.name, &mut |chunk| {
                if let Err(e) = loader.feed(chunk) {
                    content_err = Some(e.to_string());
                    return Err("content does not load".into());
                }
                let n = loader.nodes_loaded();
                progress.tick(|| format!("restore: {n} of {} nodes loaded", s.nodes));
                Ok(())
            });
            let damaged = |why: String| BackupError::Damaged { key: target.show(&key), why };
            if let Some(e) = content_err {
                return Err(damaged(e));
            }
            let info = read.map_err(|e| damaged(e.to_string()))?;
            let db = loader.finish().map_err(|e| damaged(e.to_string()))?;
            drop(storage);
            let _ = std::fs::remove_file(&local);
            checks.push(format!("{}: {} chunk checksums and the trailer", target.show(&key), info.chunks));
            db
        }
    };
    let exact_from = snap.and_then(|s| s.exact_from()).unwrap_or(0);
    let mut rec = Recovery::new(db);
    let mut digests = 0u64;
    let mut records = 0u64;
    for l in &segments {
        let local = fetch_log(target, l, staging)?;
        let key = target.show(&format!("{LOG_PREFIX}{}", l.name));
        let mut r = open_log(&local, target, l)?;
        while let Some(entry) = next_log_record(&mut r, target, l)? {
            records += 1;
            let z = entry.header.zxid;
            if z > zxid {
                break;
            }
            if !rec.replay(&entry.header, &entry.txn) {
                continue;
            }
            if let (Some(want), true) = (entry.digest, z >= exact_from) {
                let got = rec.database().tree_digest();
                if got != Some(want.tree_digest) {
                    return Err(BackupError::Damaged {
                        key,
                        why: format!(
                            "after zxid {} the tree digest is {:x}, the log records {:x}: the archive does not \
                             replay to the state the server had",
                            hex(z),
                            got.unwrap_or_default(),
                            want.tree_digest
                        ),
                    });
                }
                digests += 1;
            }
            let n = rec.replayed();
            progress.tick(|| format!("restore: {n} txns replayed (zxid {})", hex(z)));
        }
        let _ = std::fs::remove_file(&local);
    }
    if !segments.is_empty() {
        checks.push(format!(
            "{} archived segment(s): size and CRC-32 as the manifest says; {records} record checksums \
             and zxid order",
            segments.len()
        ));
    }
    match rec.snapshot_check() {
        SnapshotCheck::Verified { zxid: e, digest } => {
            checks.push(format!("snapshot's tree digest {digest:x} reproduced at its end zxid {}", hex(e)))
        }
        SnapshotCheck::Mismatch { zxid: e, want, got } => {
            let name = snap.map_or(String::new(), |s| target.show(&format!("{SNAP_PREFIX}{}", s.name)));
            return Err(BackupError::Damaged {
                key: name,
                why: format!(
                    "replayed through its end zxid {}, it gives tree digest {got:x}, not the {want:x} it recorded",
                    hex(e)
                ),
            });
        }
        // The replay never stood at the snapshot's end: the tree may hold transactions past the
        // point that the snapshot took in while it was written. (An end whose counter is 0 is
        // an epoch's start, no transaction: nothing is missing there.)
        SnapshotCheck::Unverifiable {
            why:
                why @ (Unverifiable::EndZxidMissing { end_zxid, .. }
                | Unverifiable::LogEndsBefore { end_zxid, .. }),
        } if end_zxid & 0xffff_ffff != 0 => {
            let name = snap.map_or(String::new(), |s| target.show(&format!("{SNAP_PREFIX}{}", s.name)));
            return Err(BackupError::Damaged {
                key: name,
                why: format!(
                    "the replay over it never stood at its end zxid, so it is not known exact: {why}"
                ),
            });
        }
        SnapshotCheck::Unverifiable { why } if snap.is_some() => {
            checks.push(format!("snapshot's tree digest not checked: {why}"))
        }
        SnapshotCheck::Unverifiable { .. } => {}
    }
    checks.push(if digests > 0 {
        format!("{digests} transaction tree digests matched the replayed tree")
    } else {
        "no transaction tree digest to check (a standalone server's log records none)".to_string()
    });
    let replayed = rec.replayed();
    let restored = rec.last_zxid();
    let mut db = rec.finish(0);
    if let Some(p) = subtree {
        if db.tree().get(p).is_none() {
            return Err(BackupError::Refused(format!(
                "--subtree {p}: no such node at zxid {}",
                hex(restored)
            )));
        }
        db = keep_subtree(&db, p, &cfg)?;
        checks.push(format!("kept {p} and its ancestors; /zookeeper as a fresh server has it"));
    }
    let built = staging.join(zk_log::snapshot::SNAP_DIR_NAME);
    let snap_dir = out.join(zk_log::snapshot::SNAP_DIR_NAME);
    let storage = crate::snapshots::open_dir(&built).map_err(|e| BackupError::Refused(e.to_string()))?;
    // Format 1, which every zkrs reads: the server writes its later snapshots under its own
    // `snapshot.compression`.
    let written = crate::snapshots::write_whole(&storage, &db, 16_384, zk_log::snapshot::Compression::None)
        .map_err(|e| BackupError::Refused(e.to_string()))?;
    drop(storage);
    let report = RestoreReport {
        zxid: restored,
        snapshot: snap.map(|s| s.name.clone()),
        replayed,
        nodes: db.tree().len() as u64,
        checks,
        written: snap_dir.join(&written.name),
        warnings,
    };
    for c in &report.checks {
        progress.say(format!("restore: checked: {c}"));
    }
    Ok(report)
}

/// Whether `path` is kept when restoring `subtree`: the subtree, its ancestors (the root
/// included), and nothing under /zookeeper (added from a fresh tree).
fn kept(path: &str, subtree: &str) -> bool {
    if path == "/zookeeper" || path.starts_with("/zookeeper/") {
        return false;
    }
    let under = path == subtree || path.strip_prefix(subtree).is_some_and(|r| r.starts_with('/'));
    let ancestor = path == "/" || subtree.strip_prefix(path).is_some_and(|r| r.starts_with('/'));
    under || ancestor
}

/// A database holding `subtree`, its ancestors with their own data, ACL and stat (cversion
/// included, so sequential names under them continue), every session, and the /zookeeper
/// system nodes of a fresh tree. Streams the content through a bounded buffer.
fn keep_subtree(db: &Database, subtree: &str, cfg: &TreeConfig) -> Result<Database, BackupError> {
    let mut builder = ContentBuilder::new(db.last_applied_zxid(), db.tree().len() as u64);
    let mut loader = SnapshotLoader::new(cfg.clone());
    let fail = |e: zk_tree::SnapshotError| BackupError::Refused(format!("rebuilding the subtree: {e}"));
    let copy = |source: &Database,
                keep: &dyn Fn(&str) -> bool,
                sessions: bool,
                builder: &mut ContentBuilder,
                loader: &mut SnapshotLoader|
     -> Result<(), BackupError> {
        let mut parser = ContentParser::new();
        let mut acls: HashMap<u32, Vec<Acl>> = HashMap::new();
        let mut cur = source.snapshot_begin();
        let mut buf = Vec::new();
        loop {
            buf.clear();
            let done = source.snapshot_step(&mut cur, &mut buf, 16_384);
            parser
                .feed(&buf, &mut |r| {
                    match r {
                        ContentRecord::Acl { index, acl } => {
                            acls.insert(index, acl);
                        }
                        ContentRecord::Session { id, timeout_ms } if sessions => {
                            builder.session(id, timeout_ms)
                        }
                        ContentRecord::Node(n) if keep(n.path) => {
                            let acl = acls.get(&n.acl).map_or(&[][..], |a| a.as_slice());
                            builder.node(n.path, n.data, acl, &n.stat);
                        }
                        _ => {}
                    }
                    Ok(())
                })
                .map_err(fail)?;
            loader.feed(&builder.take()).map_err(fail)?;
            if done {
                return Ok(());
            }
        }
    };
    copy(db, &|p| kept(p, subtree), true, &mut builder, &mut loader)?;
    let fresh = Database::new(cfg.clone());
    copy(&fresh, &|p| p == "/zookeeper" || p.starts_with("/zookeeper/"), false, &mut builder, &mut loader)?;
    loader.feed(&builder.finish()).map_err(fail)?;
    loader.finish().map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backup::target::DirTarget;
    use crate::backup::test_log::{create_at, Fixture};

    fn snap(start: i64, end: Option<i64>) -> SnapFile {
        SnapFile {
            name: zk_log::snapshot::snapshot_name(start),
            bytes: 1,
            crc32: 0,
            start_zxid: start,
            end_zxid: end,
            tree_digest: None,
            nodes: 1,
            member: false,
        }
    }

    /// An ensemble's restore outranks the archive's newest epoch by the jump, an earlier
    /// rollback's members by the clock, and what the operator read by one.
    #[test]
    fn an_ensemble_restore_outranks_the_archive_the_clock_and_the_operator() {
        use zk_quorum::recovery::{EPOCH_JUMP, EPOCH_MAX};
        let mut m = Manifest::default();
        m.add_snapshot(snap(0x7_0000_0003, Some(0x7_0000_0009)));
        let origin = EPOCH_CLOCK_ORIGIN_SECS;
        assert_eq!(ensemble_epoch(&m, origin, 0).unwrap(), 7 + EPOCH_JUMP);
        assert_eq!(ensemble_epoch(&m, 0, 0).unwrap(), 7 + EPOCH_JUMP, "a clock before the origin");
        // A day after the origin: the clock is past the jump.
        assert_eq!(ensemble_epoch(&m, origin + 86_400, 0).unwrap(), 86_400);
        // A second rollback an hour after the first, from the same archive: above the first's
        // epoch (and the elections its ensemble held, fewer than one a second).
        let first = ensemble_epoch(&m, origin + 86_400, 0).unwrap();
        assert!(ensemble_epoch(&m, origin + 90_000, 0).unwrap() > first + 3_000);
        assert_eq!(ensemble_epoch(&m, origin, 5_000_000).unwrap(), 5_000_001);
        assert!(matches!(ensemble_epoch(&m, origin, EPOCH_MAX - 1), Err(BackupError::Refused(_))));
        assert!(matches!(ensemble_epoch(&m, origin + (1 << 32), 0), Err(BackupError::Refused(_))));
    }

    /// A snapshot that recorded no end zxid is fuzzy to an unknown extent: it is never a base,
    /// and the restore says it passed it over.
    #[test]
    fn a_snapshot_without_a_recorded_end_is_no_base() {
        let mut m = Manifest::default();
        m.add_snapshot(snap(5, Some(7)));
        m.add_snapshot(snap(10, None));
        m.add_snapshot(snap(30, Some(35)));
        let mut notes = Vec::new();
        assert_eq!(
            base_snapshot(&m, 20, &mut notes, &mut |_| Ok(true)).unwrap().map(|s| s.start_zxid),
            Some(5)
        );
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].contains("records no end zxid") && notes[0].contains(&m.snapshots[1].name),
            "{notes:?}"
        );
        let mut notes = Vec::new();
        assert_eq!(
            base_snapshot(&m, 32, &mut notes, &mut |_| Ok(true)).unwrap().map(|s| s.start_zxid),
            Some(5),
            "30 is exact only from 35"
        );
        assert_eq!(
            base_snapshot(&m, 35, &mut notes, &mut |_| Ok(true)).unwrap().map(|s| s.start_zxid),
            Some(30)
        );
        assert_eq!(
            base_snapshot(&m, 6, &mut notes, &mut |_| Ok(true)).unwrap().map(|s| s.start_zxid),
            None,
            "5 is exact only from 7"
        );
        let mut only_unended = Manifest::default();
        only_unended.add_snapshot(snap(10, None));
        assert!(base_snapshot(&only_unended, 20, &mut notes, &mut |_| Ok(true)).unwrap().is_none());
    }

    /// A member's snapshot that ends at its start (as one received from a leader does) is a
    /// base only when shown exact; one whose end is past its start needs no proof.
    #[test]
    fn a_members_snapshot_ending_at_its_start_needs_proof() {
        let mut m = Manifest::default();
        m.add_snapshot(SnapFile { member: true, ..snap(5, Some(7)) });
        m.add_snapshot(SnapFile { member: true, ..snap(10, Some(10)) });
        let mut notes = Vec::new();
        let mut asked = Vec::new();
        let got = base_snapshot(&m, 20, &mut notes, &mut |s| {
            asked.push(s.start_zxid);
            Ok(false)
        })
        .unwrap();
        assert_eq!((got.map(|s| s.start_zxid), asked), (Some(5), vec![10]));
        assert!(notes.len() == 1 && notes[0].contains("ends at its start zxid 0xa"), "{notes:?}");
        let got = base_snapshot(&m, 20, &mut Vec::new(), &mut |_| Ok(true)).unwrap();
        assert_eq!(got.map(|s| s.start_zxid), Some(10));
        m.snapshots[1].member = false;
        let got = base_snapshot(&m, 20, &mut Vec::new(), &mut |_| Ok(false)).unwrap();
        assert_eq!(got.map(|s| s.start_zxid), Some(10), "a standalone server's is its own");
    }

    /// An archive of 1..=5 (6 waits in the last sync group).
    fn archived_1_to_5() -> Fixture {
        let mut f = Fixture::new();
        f.commit(1..=5);
        f.commit(6..=6);
        f.archiver().pass(&mut Vec::new()).unwrap();
        f
    }

    /// The names in `dir`, sorted.
    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// Every file under `dir` (relative path) with its bytes, and every directory (None).
    fn contents(dir: &Path) -> Vec<(PathBuf, Option<Vec<u8>>)> {
        let mut v = Vec::new();
        let mut todo = vec![dir.to_path_buf()];
        while let Some(d) = todo.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                let rel = p.strip_prefix(dir).unwrap().to_path_buf();
                if e.file_type().unwrap().is_dir() {
                    v.push((rel, None));
                    todo.push(p);
                } else {
                    v.push((rel, Some(std::fs::read(&p).unwrap())));
                }
            }
        }
        v.sort();
        v
    }

    /// Copies the tree `from` to `to`.
    fn copy_tree(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for (rel, bytes) in contents(from) {
            match bytes {
                None => std::fs::create_dir_all(to.join(rel)).unwrap(),
                Some(b) => std::fs::write(to.join(rel), b).unwrap(),
            }
        }
    }

    /// A data directory that holds anything is refused, naming what it holds and how to go on,
    /// and nothing in it changes (no staging directory either); one holding only the empty
    /// `zkrs-snap` and `zkrs-log` of a server that failed to start is refused the same way.
    #[test]
    fn a_data_dir_holding_anything_is_refused_and_left_as_it_was() {
        let f = archived_1_to_5();
        let target = DirTarget::new(f.archive.clone());
        let out = f.dir.path().join("out");
        std::fs::create_dir_all(out.join("zkrs-snap")).unwrap();
        std::fs::create_dir_all(out.join("zkrs-log")).unwrap();
        std::fs::write(out.join("zkrs-snap").join("snapshot.0000000000000001"), b"old snapshot").unwrap();
        std::fs::write(out.join("zkrs-log").join("log.0000000000000001"), b"old log").unwrap();
        std::fs::write(out.join("myid"), b"1").unwrap();
        let before = contents(&out);
        let e = restore(&target, &out, None, Point::Newest, None, &mut Vec::new()).unwrap_err();
        let said = e.to_string();
        assert!(matches!(e, BackupError::Refused(_)), "{said}");
        assert!(
            said.contains(&format!("{} is not empty (it holds myid, zkrs-log, zkrs-snap)", out.display())),
            "{said}"
        );
        assert!(said.contains("stop the server"), "{said}");
        assert!(said.contains("restore into a new directory"), "{said}");
        assert!(said.contains("move the old zkrs-snap and zkrs-log"), "{said}");
        assert_eq!(contents(&out), before, "the refused restore changed {}", out.display());
        let empty = f.dir.path().join("empty");
        std::fs::create_dir_all(empty.join("zkrs-snap")).unwrap();
        std::fs::create_dir_all(empty.join("zkrs-log")).unwrap();
        let e = restore(&target, &empty, Some(&empty), Point::Newest, None, &mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("(it holds zkrs-log, zkrs-snap)"), "{e}");
        assert_eq!(names(&empty), ["zkrs-log", "zkrs-snap"]);
    }

    /// A separate dataLogDir holding a `zkrs-log` (the server would replay it over the restored
    /// tree) is refused, and neither directory changes (the absent data directory is not even
    /// created); one holding anything else is taken and left as it was: a restore writes nothing
    /// there.
    #[test]
    fn a_separate_log_dir_holding_a_log_is_refused_and_left_as_it_was() {
        let f = archived_1_to_5();
        let target = DirTarget::new(f.archive.clone());
        let out = f.dir.path().join("out");
        let logs = f.dir.path().join("logs");
        std::fs::create_dir_all(logs.join("zkrs-log")).unwrap();
        std::fs::write(logs.join("zkrs-log").join("log.0000000000000001"), b"old log").unwrap();
        std::fs::write(logs.join("other"), b"x").unwrap();
        let before = contents(&logs);
        let e = restore(&target, &out, Some(&logs), Point::Newest, None, &mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains(&format!("{} exists", logs.join("zkrs-log").display())), "{e}");
        assert!(!out.exists(), "the refused restore created {}", out.display());
        assert_eq!(contents(&logs), before);
        std::fs::remove_dir_all(logs.join("zkrs-log")).unwrap();
        let before = contents(&logs);
        let r = restore(&target, &out, Some(&logs), Point::Newest, None, &mut Vec::new()).unwrap();
        assert_eq!(r.zxid, 5);
        assert_eq!(contents(&logs), before);
        assert_eq!(names(&out), ["zkrs-snap"]);
    }

    /// A dataLogDir given as another spelling of the data directory (a link to it) is the data
    /// directory: an empty one is taken, and holds the result with the marker naming the point
    /// in its `zkrs-snap`.
    #[test]
    fn a_log_dir_spelt_otherwise_is_the_data_dir() {
        let f = archived_1_to_5();
        let target = DirTarget::new(f.archive.clone());
        let out = f.dir.path().join("out");
        std::fs::create_dir_all(&out).unwrap();
        let link = f.dir.path().join("link");
        std::os::unix::fs::symlink(&out, &link).unwrap();
        let mut said = Vec::new();
        let r = restore(&target, &out, Some(&link), Point::Zxid(3), None, &mut said).unwrap();
        assert_eq!(r.zxid, 3, "{}", String::from_utf8_lossy(&said));
        assert!(r.written.exists());
        assert_eq!(names(&out), ["zkrs-snap"]);
        assert!(out.join("zkrs-snap").join(RESTORE_MARKER).exists());
        assert_eq!(RestoreMarker::read(&out).unwrap().unwrap().zxid, 3);
    }

    /// The staging directory a killed restore left is the one thing a data directory may hold:
    /// it is removed and built again, and none of what it held comes into the result.
    #[test]
    fn a_killed_restores_staging_directory_is_removed_and_built_again() {
        let f = archived_1_to_5();
        let target = DirTarget::new(f.archive.clone());
        let out = f.dir.path().join("out");
        let staged = out.join(STAGING_NAME).join("zkrs-snap");
        std::fs::create_dir_all(&staged).unwrap();
        std::fs::write(staged.join("snapshot.0000000000000063"), b"half written").unwrap();
        std::fs::write(out.join(STAGING_NAME).join("log.0000000000000001"), b"fetched").unwrap();
        let r = restore(&target, &out, None, Point::Newest, None, &mut Vec::new()).unwrap();
        assert_eq!(r.zxid, 5);
        assert_eq!(names(&out), ["zkrs-snap"]);
        assert!(!out.join("zkrs-snap").join("snapshot.0000000000000063").exists());
        assert!(r.written.exists());
    }

    /// A restore that fails at any step before its commit leaves the data directory as it
    /// found it: an empty one empty, and one it created (with its missing parent) not there at
    /// all (nothing a server would start on with an empty tree); it says no "done", and the
    /// next restore goes through. A point outside the archive is refused before anything is
    /// created.
    #[test]
    fn a_restore_failing_before_its_commit_leaves_the_directory_as_it_was() {
        let f = archived_1_to_5();
        let target = DirTarget::new(f.archive.clone());
        let steps = [
            "sync parent",
            "sync out (staging created)",
            "mark",
            "sync staged zkrs-snap",
            "sync staging",
            "commit",
        ];
        for (fail, existed) in steps.iter().flat_map(|s| [(*s, false), (*s, true)]) {
            let parent = f.dir.path().join(format!("p-{}-{existed}", fail.replace(' ', "-")));
            let out = parent.join("out");
            if existed {
                std::fs::create_dir_all(&out).unwrap();
            }
            INSTALL_STEPS.with(|s| *s.borrow_mut() = (Vec::new(), Some(fail.to_string())));
            let mut said = Vec::new();
            let e = restore(&target, &out, None, Point::Newest, None, &mut said);
            let taken = INSTALL_STEPS.with(|s| std::mem::take(&mut *s.borrow_mut()).0);
            if !taken.iter().any(|t| t == fail) {
                // Nothing was created, so there was no parent to sync.
                assert!(existed && fail == "sync parent", "{fail}: not reached: {taken:?}");
                std::fs::remove_dir_all(&parent).unwrap();
                continue;
            }
            let e = e.unwrap_err();
            assert!(e.to_string().contains("failure injected"), "{fail}: {e}");
            if existed {
                assert!(names(&out).is_empty(), "{fail}: {:?}", names(&out));
            } else {
                assert!(
                    !parent.exists(),
                    "{fail}: the failed restore left {}: {:?}",
                    parent.display(),
                    names(&parent)
                );
            }
            assert!(!String::from_utf8_lossy(&said).contains("restore: done"), "{fail}");
            let r = restore(&target, &out, None, Point::Newest, None, &mut Vec::new()).unwrap();
            assert_eq!(r.zxid, 5, "{fail}");
        }
        let out = f.dir.path().join("not-yet").join("out");
        INSTALL_STEPS.with(|s| *s.borrow_mut() = (Vec::new(), None));
        let e = restore(&target, &out, None, Point::Zxid(99), None, &mut Vec::new()).unwrap_err();
        let taken = INSTALL_STEPS.with(|s| std::mem::take(&mut *s.borrow_mut()).0);
        assert!(e.to_string().contains("past the newest archived transaction"), "{e}");
        assert!(taken.is_empty(), "a point outside the archive was found only after {taken:?}");
        assert!(!f.dir.path().join("not-yet").exists(), "a refused point created the directory");
    }

    /// `zkrs-server purge` (zkCleanup from cron) on a data directory a killed restore left
    /// creates nothing, and a `zkrs-snap` holding no snapshot beside the staging directory (as
    /// an earlier purge, or a start refused part-way, made) still counts as an unfinished
    /// restore: the start is refused, not served with an empty tree.
    #[test]
    fn purge_on_an_unfinished_restore_leaves_it_refused() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("data");
        std::fs::create_dir_all(d.join(STAGING_NAME).join("zkrs-snap")).unwrap();
        assert!(unfinished_restore(&d).is_some());
        let r = crate::tools::purge(&d, &d, 3).unwrap();
        assert!(r.snapshots_kept.is_empty());
        assert_eq!(names(&d), [STAGING_NAME]);
        assert!(unfinished_restore(&d).is_some(), "purge made the staging leftover look finished");
        std::fs::create_dir_all(d.join("zkrs-snap")).unwrap();
        std::fs::write(d.join("zkrs-snap").join("LOCK"), b"").unwrap();
        assert!(unfinished_restore(&d).is_some(), "an empty zkrs-snap beside the staging directory");
        std::fs::write(d.join("zkrs-snap").join("snapshot.0000000000000004"), b"x").unwrap();
        assert!(unfinished_restore(&d).is_none(), "a snapshot is there: the restore committed");
    }

    /// An empty `zkrs-snap` made between the check that the name is free and the commit (a
    /// server started meanwhile) is not replaced by the rename: the restore fails and says so.
    #[test]
    fn an_empty_zkrs_snap_made_before_the_commit_is_not_replaced() {
        let f = archived_1_to_5();
        let target = DirTarget::new(f.archive.clone());
        let out = f.dir.path().join("out");
        let watched = out.clone();
        KILL_POINTS.with(|k| {
            *k.borrow_mut() = Some(Box::new(move |step: &str| {
                if step == "commit" {
                    std::fs::create_dir(watched.join("zkrs-snap")).unwrap();
                }
            }))
        });
        let r = restore(&target, &out, None, Point::Zxid(4), None, &mut Vec::new());
        KILL_POINTS.with(|k| *k.borrow_mut() = None);
        let e = r.expect_err("the restore replaced a zkrs-snap that appeared while it ran");
        assert!(e.to_string().contains("appeared while the restore ran"), "{e}");
        assert!(names(&out.join("zkrs-snap")).is_empty());
    }

    /// A second restore into a data directory while one runs there (here started when the
    /// first is at its commit) is refused, changing nothing; the first finishes with its own
    /// snapshot and marker.
    #[test]
    fn a_second_restore_into_the_directory_is_refused_while_one_runs() {
        let f = archived_1_to_5();
        let target = DirTarget::new(f.archive.clone());
        let out = f.dir.path().join("out");
        let (archive, out_b) = (f.archive.clone(), out.clone());
        let second = std::rc::Rc::new(std::cell::RefCell::new(None));
        let seen = second.clone();
        KILL_POINTS.with(|k| {
            *k.borrow_mut() = Some(Box::new(move |step: &str| {
                if step != "commit" || seen.borrow().is_some() {
                    return;
                }
                let (archive, into) = (archive.clone(), out_b.clone());
                let before = contents(&out_b);
                let b = std::thread::spawn(move || {
                    restore(&DirTarget::new(archive), &into, None, Point::Zxid(2), None, &mut Vec::new())
                        .map(|r| r.zxid)
                        .map_err(|e| e.to_string())
                })
                .join()
                .unwrap();
                assert_eq!(contents(&out_b), before, "the refused restore changed the directory");
                *seen.borrow_mut() = Some(b);
            }))
        });
        let a = restore(&target, &out, None, Point::Zxid(4), None, &mut Vec::new());
        KILL_POINTS.with(|k| *k.borrow_mut() = None);
        let b = second.borrow_mut().take().expect("the second restore ran");
        let e = b.expect_err("a second restore ran beside the first");
        assert!(e.contains("another zkrs-server restore is writing into"), "{e}");
        assert_eq!(a.unwrap().zxid, 4);
        let storage = crate::snapshots::open_dir(&out.join("zkrs-snap")).unwrap();
        let (db, _) = crate::snapshots::load_newest(&storage, TreeConfig::default()).unwrap();
        assert_eq!(db.last_applied_zxid(), 4);
        assert_eq!(RestoreMarker::read(&out).unwrap().map(|m| m.zxid), Some(4));
    }

    /// A staging directory a killed restore left that cannot be removed (here a file of that
    /// name, which removing as a directory fails on) fails the restore, naming it, instead of
    /// building into what is left of it.
    #[test]
    fn a_staging_leftover_that_cannot_be_removed_fails_the_restore() {
        let f = archived_1_to_5();
        let target = DirTarget::new(f.archive.clone());
        let out = f.dir.path().join("out");
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join(STAGING_NAME), b"not a directory").unwrap();
        let e = restore(&target, &out, None, Point::Zxid(4), None, &mut Vec::new()).unwrap_err();
        let want = format!("cannot remove {}", out.join(STAGING_NAME).display());
        assert!(e.to_string().contains(&want), "want `{want}`: {e}");
        assert_eq!(names(&out), [STAGING_NAME]);
    }

    /// A restore killed right before any step of its end (copies of the directory as each kill
    /// would leave it) leaves either nothing but its staging directory, which a server refuses to
    /// start on and the next restore takes, or the whole result: the snapshot at the point, as
    /// the server loads it, with the marker naming the point. The steps sync everything the
    /// result holds before the commit (the rename of `zkrs-snap`), and the data directory right
    /// after it, so a power loss leaves one of the states a kill leaves.
    #[test]
    fn a_restore_killed_at_any_step_leaves_no_data_or_the_whole_result() {
        let f = archived_1_to_5();
        let target = DirTarget::new(f.archive.clone());
        let out = f.dir.path().join("out");
        let kills = f.dir.path().join("kills");
        let (watched_out, watched_kills) = (out.clone(), kills.clone());
        let mut n = 0;
        KILL_POINTS.with(|k| {
            *k.borrow_mut() = Some(Box::new(move |step: &str| {
                let copy = watched_kills.join(format!("{n}-{}", step.replace(' ', "-")));
                copy_tree(&watched_out, &copy);
                n += 1;
            }))
        });
        INSTALL_STEPS.with(|s| *s.borrow_mut() = (Vec::new(), None));
        let r = restore(&target, &out, None, Point::Zxid(4), None, &mut Vec::new());
        KILL_POINTS.with(|k| *k.borrow_mut() = None);
        let steps = INSTALL_STEPS.with(|s| std::mem::take(&mut *s.borrow_mut()).0);
        let r = r.unwrap();
        assert_eq!(
            steps,
            [
                "sync parent",
                "sync out (staging created)",
                "mark",
                "sync staged zkrs-snap",
                "sync staging",
                "commit",
                "sync out",
                "remove staging",
                "sync out (staging removed)"
            ]
        );
        copy_tree(&out, &kills.join("finished"));
        let (mut refused, mut whole) = (0, 0);
        for e in std::fs::read_dir(&kills).unwrap().flatten() {
            let copy = e.path();
            let at = e.file_name().to_string_lossy().into_owned();
            if at == "0-sync-parent" {
                // Killed right after creating the data directory, before its staging directory:
                // the directory is empty, as before the restore (its parent not yet synced).
                assert!(names(&copy).is_empty(), "{:?}", names(&copy));
                continue;
            }
            if let Some(staging) = unfinished_restore(&copy) {
                assert_eq!(staging, copy.join(STAGING_NAME));
                assert_eq!(names(&copy), [STAGING_NAME], "killed before {at}");
                let again = restore(&target, &copy, None, Point::Zxid(4), None, &mut Vec::new());
                assert_eq!(again.unwrap().zxid, 4, "killed before {at}, then restored again");
                refused += 1;
                continue;
            }
            let storage = crate::snapshots::open_dir(&copy.join("zkrs-snap")).unwrap();
            let (db, _) = crate::snapshots::load_newest(&storage, TreeConfig::default()).unwrap();
            assert_eq!(db.last_applied_zxid(), 4, "killed before {at}: {:?}", names(&copy));
            assert_eq!(db.tree().len() as u64, r.nodes, "killed before {at}");
            let marker = RestoreMarker::read(&copy).unwrap();
            assert_eq!(marker.map(|m| m.zxid), Some(4), "killed before {at}: the marker");
            whole += 1;
        }
        assert_eq!((refused, whole), (5, 4), "states left by a kill at each step");
    }

    /// A lock that fails other than by being held (here EIO, and EBADF as NFS answers a lock on a
    /// read-only descriptor) fails the restore and leaves the directory as it found it: one it
    /// created not there, one that existed empty. Where the file system gives no locks (ENOLCK,
    /// EOPNOTSUPP) the restore goes on unlocked and warns.
    #[test]
    fn a_lock_that_fails_leaves_nothing_and_one_not_given_is_warned_of() {
        let f = archived_1_to_5();
        let target = DirTarget::new(f.archive.clone());
        for (errno, existed) in [(libc::EIO, false), (libc::EIO, true), (libc::EBADF, false)] {
            let parent = f.dir.path().join(format!("p-{errno}-{existed}"));
            let out = parent.join("out");
            if existed {
                std::fs::create_dir_all(&out).unwrap();
            }
            INJECTED_ERRNO.with(|e| e.set(Some(("flock", errno))));
            let r = restore(&target, &out, None, Point::Newest, None, &mut Vec::new());
            INJECTED_ERRNO.with(|e| e.set(None));
            let e = r.expect_err("the restore went on without its lock");
            assert!(e.to_string().contains(LOCK_NAME), "{e}");
            if existed {
                assert!(names(&out).is_empty(), "{errno}: {:?}", names(&out));
            } else {
                assert!(!parent.exists(), "{errno}: the failed restore left {:?}", names(&parent));
            }
        }
        for errno in [libc::ENOLCK, libc::EOPNOTSUPP] {
            let out = f.dir.path().join(format!("unlocked-{errno}"));
            INJECTED_ERRNO.with(|e| e.set(Some(("flock", errno))));
            let mut said = Vec::new();
            let r = restore(&target, &out, None, Point::Newest, None, &mut said);
            INJECTED_ERRNO.with(|e| e.set(None));
            let r = r.unwrap();
            assert_eq!(r.zxid, 5);
            assert!(r.warnings.iter().any(|w| w.contains("gives no locks here")), "{:?}", r.warnings);
            assert!(String::from_utf8_lossy(&said).contains("restore: WARNING: cannot lock"));
            assert_eq!(names(&out), ["zkrs-snap"]);
        }
    }

    /// Where `renameat2` is forbidden (EPERM, as an older container seccomp profile answers) or
    /// unsupported, the commit falls back to a check and a plain rename.
    #[test]
    fn a_forbidden_renameat2_falls_back_to_a_plain_rename() {
        let f = archived_1_to_5();
        let target = DirTarget::new(f.archive.clone());
        for errno in [libc::EPERM, libc::EINVAL, libc::ENOSYS] {
            let out = f.dir.path().join(format!("out-{errno}"));
            INJECTED_ERRNO.with(|e| e.set(Some(("renameat2", errno))));
            let r = restore(&target, &out, None, Point::Zxid(4), None, &mut Vec::new());
            INJECTED_ERRNO.with(|e| e.set(None));
            assert_eq!(r.map(|r| r.zxid).map_err(|e| e.to_string()), Ok(4), "{errno}");
            assert_eq!(RestoreMarker::read(&out).unwrap().map(|m| m.zxid), Some(4));
        }
        let out = f.dir.path().join("out-eio");
        INJECTED_ERRNO.with(|e| e.set(Some(("renameat2", libc::EIO))));
        let r = restore(&target, &out, None, Point::Zxid(4), None, &mut Vec::new());
        INJECTED_ERRNO.with(|e| e.set(None));
        assert!(r.is_err(), "an I/O error at the commit is not a missing feature");
        assert!(!out.exists());
    }

    /// A --data-dir spelt through `..` and a directory that is not there yet (which
    /// `create_dir_all` took) is restored into, and a failed restore there removes what it
    /// created.
    #[test]
    fn a_data_dir_through_dotdot_is_restored() {
        let f = archived_1_to_5();
        let target = DirTarget::new(f.archive.clone());
        let out = f.dir.path().join("a").join("..").join("out");
        let r = restore(&target, &out, None, Point::Newest, None, &mut Vec::new());
        assert_eq!(r.map(|r| r.zxid).map_err(|e| e.to_string()), Ok(5));
        assert_eq!(names(&f.dir.path().join("out")), ["zkrs-snap"]);
        let out = f.dir.path().join("b").join("..").join("out-b");
        INSTALL_STEPS.with(|s| *s.borrow_mut() = (Vec::new(), Some("commit".into())));
        let r = restore(&target, &out, None, Point::Newest, None, &mut Vec::new());
        INSTALL_STEPS.with(|s| *s.borrow_mut() = (Vec::new(), None));
        assert!(r.is_err());
        assert!(!f.dir.path().join("b").exists() && !f.dir.path().join("out-b").exists());
    }

    /// A staging directory left beside a committed result (a kill right after the commit) is
    /// removed at a server's start, unless a restore holds its lock; one without a committed
    /// result beside it (an unfinished restore) is left for the refusal.
    #[test]
    fn a_staging_directory_beside_a_result_is_removed() {
        let f = archived_1_to_5();
        let target = DirTarget::new(f.archive.clone());
        let out = f.dir.path().join("out");
        restore(&target, &out, None, Point::Newest, None, &mut Vec::new()).unwrap();
        let staging = out.join(STAGING_NAME);
        std::fs::create_dir_all(staging.join("zkrs-snap")).unwrap();
        let held = File::create(staging.join(LOCK_NAME)).unwrap();
        assert!(try_lock_exclusive(&held).unwrap());
        let e = remove_staging_beside_result(&out).unwrap_err();
        assert!(e.to_string().contains("locked by a zkrs-server restore"), "{e}");
        assert!(staging.exists());
        drop(held);
        assert_eq!(remove_staging_beside_result(&out).unwrap(), Some(staging.clone()));
        assert_eq!(names(&out), ["zkrs-snap"]);
        assert_eq!(remove_staging_beside_result(&out).unwrap(), None);
        let unfinished = f.dir.path().join("unfinished");
        std::fs::create_dir_all(unfinished.join(STAGING_NAME)).unwrap();
        assert_eq!(remove_staging_beside_result(&unfinished).unwrap(), None);
        assert!(unfinished_restore(&unfinished).is_some());
    }

    /// A marker without its values is named as damaged, not taken as no marker; one an earlier
    /// build left in the data directory itself is read there.
    #[test]
    fn a_damaged_restore_marker_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(RestoreMarker::read(dir.path()).unwrap(), None);
        std::fs::write(dir.path().join(RESTORE_MARKER), "zxid=0x4\nrestored_at_ms=7\n").unwrap();
        assert_eq!(
            RestoreMarker::read(dir.path()).unwrap(),
            Some(RestoreMarker { zxid: 4, at_ms: 7, first_start: None })
        );
        let snaps = dir.path().join(zk_log::snapshot::SNAP_DIR_NAME);
        std::fs::create_dir_all(&snaps).unwrap();
        std::fs::write(snaps.join(RESTORE_MARKER), "zxid=0x4\n").unwrap();
        let e = RestoreMarker::read(dir.path()).unwrap_err();
        assert!(e.to_string().contains("a restore marker without"), "{e}");
        std::fs::write(snaps.join(RESTORE_MARKER), "zxid=0x4\nrestored_at_ms=7\nfirst_start=0xzz\n").unwrap();
        let e = RestoreMarker::read(dir.path()).unwrap_err();
        assert!(e.to_string().contains("`first_start=0x…` line does not parse"), "{e}");
        // A first start's marker round-trips, and keeps the restore's identity.
        let m = RestoreMarker { zxid: 0x1_0000_0004, at_ms: 7, first_start: Some(u64::MAX - 1) };
        m.replace(&snaps.join(RESTORE_MARKER)).unwrap();
        let (p, read) = RestoreMarker::read_located(dir.path()).unwrap().unwrap();
        assert_eq!((p, read), (snaps.join(RESTORE_MARKER), m));
        assert_eq!(read.id(), RestoreMarker { first_start: None, ..m }.id());
    }

    /// Times are the leaders' wall clocks: `--time` warns when they step back before the chosen
    /// point, and when a transaction after it is stamped at or before the time.
    #[test]
    fn time_points_warn_of_times_that_go_backwards() {
        let mut f = Fixture::new();
        let times = [100, 200, 300, 150, 400, 500, 250];
        let batch: Vec<_> = times.iter().enumerate().map(|(i, t)| create_at(i as i64 + 1, *t)).collect();
        f.commit_batch(&batch);
        f.commit_batch(&[create_at(8, 600)]);
        f.archiver().pass(&mut Vec::new()).unwrap();
        let target = DirTarget::new(f.archive.clone());
        let mut said = Vec::new();
        let r = restore(&target, &f.dir.path().join("out"), None, Point::Time(350), None, &mut said).unwrap();
        assert_eq!(r.zxid, 4, "the last one before the first stamped later than 350");
        assert_eq!(r.warnings.len(), 2, "{:?}", r.warnings);
        assert!(
            r.warnings[0].contains("go backwards") && r.warnings[0].contains("zxid 0x4"),
            "{:?}",
            r.warnings
        );
        assert!(r.warnings[1].contains("zxid 0x7, after the chosen point"), "{:?}", r.warnings);
        assert!(String::from_utf8_lossy(&said).contains("restore: WARNING: "));
        // In order (stamped 1001, 1002, ...), no warning.
        let f = archived_1_to_5();
        let target = DirTarget::new(f.archive.clone());
        let r = restore(&target, &f.dir.path().join("out"), None, Point::Time(1_003), None, &mut Vec::new())
            .unwrap();
        assert_eq!(r.zxid, 3);
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    }

    #[test]
    fn a_subtree_keeps_itself_and_its_ancestors_only() {
        let s = "/app/jobs";
        for p in ["/", "/app", "/app/jobs", "/app/jobs/a", "/app/jobs/a/b"] {
            assert!(kept(p, s), "{p}");
        }
        for p in ["/apps", "/app/jobs2", "/app/other", "/zookeeper", "/zookeeper/quota", "/other"] {
            assert!(!kept(p, s), "{p}");
        }
    }
}
