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

/// Checks that `out` (and `log_out`, a separate dataLogDir) can take the result: `out` is
/// created if absent; refused when `out` holds anything or `log_out` holds a `zkrs-log`, unless
/// `force`: then returns the `zkrs-snap` and `zkrs-log` of both, which [`move_aside`] renames
/// `<name>.before-restore-<ms>` (never deleted) once the restore has succeeded: a log left
/// there would be replayed over the restored tree.
fn prepare_out(out: &Path, log_out: Option<&Path>, force: bool) -> Result<Vec<PathBuf>, BackupError> {
    std::fs::create_dir_all(out).map_err(io_err(out))?;
    let entries: Vec<String> = std::fs::read_dir(out)
        .map_err(io_err(out))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != STAGING_NAME)
        .collect();
    let log_given = log_out.is_some();
    let log_out = log_out.filter(|l| !same_dir(l, out));
    let old_log = log_out.map(|l| l.join(zk_log::LOG_DIR_NAME)).filter(|l| l.exists());
    if entries.is_empty() && old_log.is_none() {
        return Ok(Vec::new());
    }
    if !force {
        let what = match (&old_log, entries.is_empty()) {
            (Some(l), true) => format!("{} exists", l.display()),
            (Some(l), false) => format!(
                "{} is not empty (it holds {}) and {} exists",
                out.display(),
                entries.join(", "),
                l.display()
            ),
            (None, _) => format!("{} is not empty (it holds {})", out.display(), entries.join(", ")),
        };
        return Err(BackupError::Refused(format!(
            "{what}; restore into an empty directory, or give --force to move its zkrs-snap and zkrs-log \
             aside"
        )));
    }
    // A data directory with snapshots and no log had its log elsewhere: a separate dataLogDir,
    // whose log, left in place, the server would replay over the restored tree.
    let snaps = out.join(zk_log::snapshot::SNAP_DIR_NAME);
    if !log_given && snaps.exists() && !out.join(zk_log::LOG_DIR_NAME).exists() {
        return Err(BackupError::Refused(format!(
            "{} holds {} but no {}: the server keeps its log in a separate dataLogDir, whose log it would \
             replay over the restored tree; give --data-log-dir (or --config with its zoo.cfg) so that \
             log is moved aside too (--data-log-dir {} when it has none, as in a directory a restore \
             wrote that no server has started on)",
            out.display(),
            zk_log::snapshot::SNAP_DIR_NAME,
            zk_log::LOG_DIR_NAME,
            out.display()
        )));
    }
    // An earlier restore's marker describes the snapshots moved aside: it goes with them (and
    // comes back with them when this restore fails). So does an earlier restore's finished
    // stamp, first of all ([`install_steps`] syncs the directory right after it): left in place
    // while anything else is moved, it would cover this restore's moves aside should this one be
    // killed before it finishes, whenever the clock stepped back since (it names stamps up to
    // its own), and the server would start empty.
    let mut aside = vec![
        out.join(RESTORE_FINISHED),
        out.join(zk_log::snapshot::SNAP_DIR_NAME),
        out.join(zk_log::LOG_DIR_NAME),
        out.join(RESTORE_MARKER),
    ];
    aside.extend(old_log);
    Ok(aside.into_iter().filter(|p| p.exists()).collect())
}

/// Whether two spellings name one directory (a relative path, a link): compared canonical
/// where both exist.
fn same_dir(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// The file a restore leaves in the data directory it builds, naming the restore point
/// ([`RestoreMarker`]). `zkrs-server backup` reads it: an archive whose newest zxid is past the
/// point holds a history the restored server no longer has, and is not continued.
pub const RESTORE_MARKER: &str = "zkrs-restored";

/// The most bytes of a restore marker read.
const RESTORE_MARKER_BYTES_MAX: u64 = 4096;

/// What a restore marker says: the point restored and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestoreMarker {
    /// The zxid the data directory was restored to.
    pub zxid: i64,
    /// When the restore finished (ms since the epoch, this host's clock).
    pub at_ms: i64,
}

impl RestoreMarker {
    /// The marker's identity, as an archive records the restore it goes on from
    /// ([`Manifest::after_restore`]).
    pub fn id(&self) -> String {
        format!("{}@{}", hex(self.zxid), self.at_ms)
    }

    /// The marker's text; `stamp`: the stamp of what the restore writing it moves aside
    /// ([`RESTORE_STAMP_KEY`]).
    fn text(&self, stamp: u128) -> String {
        format!(
            "# Written by zkrs-server restore: this data directory was restored to zxid {} at {}.\n\
             # An archive holding transactions past that zxid is not continued by zkrs-server backup:\n\
             # start a new archive for this server.\n\
             zxid={}\nrestored_at_ms={}\n{RESTORE_STAMP_KEY}{stamp}\n",
            hex(self.zxid),
            format_time_ms(self.at_ms),
            hex(self.zxid),
            self.at_ms
        )
    }

    /// Reads the marker in `data_dir`, if any.
    ///
    /// Errors: [`BackupError::Io`]; [`BackupError::Damaged`] for a marker without its two
    /// values.
    pub fn read(data_dir: &Path) -> Result<Option<RestoreMarker>, BackupError> {
        use std::io::Read;
        let p = data_dir.join(RESTORE_MARKER);
        let f = match File::open(&p) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(&p)(e)),
        };
        let mut bytes = Vec::new();
        f.take(RESTORE_MARKER_BYTES_MAX).read_to_end(&mut bytes).map_err(io_err(&p))?;
        let text = String::from_utf8_lossy(&bytes);
        let value = |key: &str| text.lines().find_map(|l| l.trim().strip_prefix(key));
        let zxid = value("zxid=0x")
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .and_then(|z| i64::try_from(z).ok());
        let at_ms = value("restored_at_ms=").and_then(|t| t.parse::<i64>().ok());
        match (zxid, at_ms) {
            (Some(zxid), Some(at_ms)) => Ok(Some(RestoreMarker { zxid, at_ms })),
            _ => Err(BackupError::Damaged {
                key: p.display().to_string(),
                why: "a restore marker without its `zxid=0x…` and `restored_at_ms=` lines".into(),
            }),
        }
    }

    /// Writes the marker into `dir` (synced, under a temporary name first), naming the stamp of
    /// the restore writing it.
    fn write(&self, dir: &Path, stamp: u128) -> Result<(), BackupError> {
        let p = dir.join(RESTORE_MARKER);
        let tmp = dir.join(format!("{RESTORE_MARKER}.tmp"));
        let mut f = File::create(&tmp).map_err(io_err(&tmp))?;
        f.write_all(self.text(stamp).as_bytes()).and_then(|_| f.sync_all()).map_err(io_err(&tmp))?;
        std::fs::rename(&tmp, &p).map_err(io_err(&p))
    }
}

/// The file a restore leaves in the data directory once its result is in place, naming the
/// stamp (`<ms>`) of the directories it moved aside (`zkrs-snap.before-restore-<ms>`,
/// `zkrs-log.before-restore-<ms>`): the server refuses to start empty beside moved-aside
/// directories only when no such file covers their stamp (the restore stopped before its
/// result was in), not when the data was emptied after a restore that finished.
pub const RESTORE_FINISHED: &str = "zkrs-restore-finished";

/// The file a forced restore writes (and syncs) in the data directory before it moves anything
/// aside, naming its stamp (`restore_stamp_ms=<ms>`), and removes (synced) only once it finished
/// ([`RESTORE_FINISHED`] written by it) or moved everything back: while it is there and no
/// [`RESTORE_FINISHED`] written by that restore is in place, that restore stopped half done.
/// [`undo`] and a server start tell the stopped restore by it, never by comparing stamps (wall
/// clock times, which can step back).
pub const RESTORE_STARTED: &str = "zkrs-restore-started";

/// What [`RESTORE_STARTED`] in a data directory says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Started {
    /// None there: no restore by this build stopped.
    None,
    /// The restore stamped so stopped half done.
    Stopped(u128),
    /// The restore stamped so finished (its [`RESTORE_FINISHED`] is in place), killed before it
    /// removed the file.
    Finished(u128),
    /// There, but it names no stamp (damaged): some restore stopped.
    Unreadable,
}

/// Reads [`RESTORE_STARTED`] in `data_dir` ([`Started`]).
fn started_in(data_dir: &Path) -> Started {
    let p = data_dir.join(RESTORE_STARTED);
    if std::fs::symlink_metadata(&p).is_err() {
        return Started::None;
    }
    match stamp_in(&p, RESTORE_STAMP_KEY) {
        None => Started::Unreadable,
        Some(x) if stamp_in(&data_dir.join(RESTORE_FINISHED), RESTORE_STAMP_KEY) == Some(x) => {
            Started::Finished(x)
        }
        Some(x) => Started::Stopped(x),
    }
}

/// Writes [`RESTORE_STARTED`] into `dir` for the restore stamped `stamp` (synced, under a
/// temporary name first; the caller syncs the directory).
fn write_started(dir: &Path, stamp: u128) -> Result<(), BackupError> {
    let p = dir.join(RESTORE_STARTED);
    let tmp = dir.join(format!("{RESTORE_STARTED}.tmp"));
    let text = format!(
        "# Written by zkrs-server restore --force before it moved anything aside, removed once it finished\n\
         # or moved everything back: while it is here, `zkrs-server restore --undo` puts back what it moved aside.\n\
         {RESTORE_STAMP_KEY}{stamp}\n"
    );
    let written = File::create(&tmp)
        .and_then(|mut f| f.write_all(text.as_bytes()).and_then(|_| f.sync_all()))
        .and_then(|_| std::fs::rename(&tmp, &p));
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io_err(&p)(e)
    })
}

/// Removes [`RESTORE_STARTED`] from `dir` (gone already is fine) and syncs `dir`, as steps named
/// `what` (tests).
fn remove_started(dir: &Path, what: &str) -> Result<(), BackupError> {
    let p = dir.join(RESTORE_STARTED);
    step(format!("{what} {}", p.display()))?;
    match std::fs::remove_file(&p) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io_err(&p)(e)),
        _ => {}
    }
    step(format!("{what} sync {}", dir.display()))?;
    sync_dir(dir)
}

/// What [`unfinished_restore`] found: a directory holding what a restore moved aside that no
/// finished restore covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unfinished {
    /// The directory holding them.
    pub dir: PathBuf,
    /// Their names, sorted.
    pub moved: Vec<String>,
    /// They are inside the server's own `zkrs-snap` or `zkrs-log` (renamed onto that directory
    /// once it existed, by hand), where the server does not see them.
    pub nested: bool,
}

/// Whether `name` is a `zkrs-snap` or `zkrs-log` a restore moved aside, and its stamp's text.
fn moved_dir_stamp(name: &str) -> Option<&str> {
    [zk_log::snapshot::SNAP_DIR_NAME, zk_log::LOG_DIR_NAME]
        .iter()
        .find_map(|d| name.strip_prefix(d).and_then(|r| r.strip_prefix(".before-restore-")))
}

/// What a server starting empty on `snap_root` (its dataDir) and `log_root` (its dataLogDir),
/// or on a snapshot with a log holding no transaction, refuses: first a `zkrs-snap` or
/// `zkrs-log` moved aside (`<name>.before-restore-<ms>`) found inside the `zkrs-snap` or
/// `zkrs-log` of either (renamed onto an existing directory: the server would not see it,
/// whatever its stamp), then the first of the two directories holding such a directory that the
/// restore [`RESTORE_STARTED`] in `snap_root` names as stopped moved aside (all of them when that
/// file is damaged), whatever the clock did, or that no [`RESTORE_FINISHED`] in `snap_root`
/// covers (its stamp is older than theirs, or there is none: an older build's restore, which
/// records no start). None: nothing to refuse. A stamp that does not parse (renamed by hand) is
/// not known finished.
pub fn unfinished_restore(snap_root: &Path, log_root: &Path) -> Option<Unfinished> {
    let listed = |dir: &Path, keep: &dyn Fn(&str) -> bool| {
        let mut moved: Vec<String> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| keep(n))
            .collect();
        moved.sort();
        moved
    };
    for root in [snap_root, log_root] {
        for d in [zk_log::snapshot::SNAP_DIR_NAME, zk_log::LOG_DIR_NAME] {
            let dir = root.join(d);
            let moved = listed(&dir, &|n| moved_dir_stamp(n).is_some());
            if !moved.is_empty() {
                return Some(Unfinished { dir, moved, nested: true });
            }
        }
    }
    let finished = restore_finished_stamp(snap_root);
    let started = started_in(snap_root);
    for dir in [snap_root, log_root] {
        let moved = listed(dir, &|n| {
            moved_dir_stamp(n).is_some_and(|s| {
                let s = s.parse::<u128>().ok();
                let stopped = match started {
                    Started::Stopped(x) => s == Some(x),
                    Started::Unreadable => true,
                    Started::None | Started::Finished(_) => false,
                };
                stopped || finished.is_none_or(|f| s.is_none_or(|s| s > f))
            })
        });
        if !moved.is_empty() {
            return Some(Unfinished { dir: dir.to_path_buf(), moved, nested: false });
        }
    }
    None
}

/// `p` as a shell word (quoted when it holds anything but plain characters).
fn shell_word(p: &Path) -> String {
    let s = p.display().to_string();
    if s.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+:@%,=".contains(c)) {
        s
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// The command a server's refusal names to put back what a stopped restore moved aside in
/// `snap_root` (dataDir) and `log_root` (dataLogDir) ([`undo`]).
pub fn undo_command(snap_root: &Path, log_root: &Path) -> String {
    format!(
        "zkrs-server restore --undo --data-dir {} --data-log-dir {}",
        shell_word(snap_root),
        shell_word(log_root)
    )
}

/// The names a restore moves aside ([`prepare_out`]).
const MOVED_NAMES: [&str; 4] =
    [RESTORE_FINISHED, zk_log::snapshot::SNAP_DIR_NAME, zk_log::LOG_DIR_NAME, RESTORE_MARKER];

/// Holds the lock file in `dir` (a `zkrs-snap` or `zkrs-log`), if it has one: a server running
/// there holds it. None when there is none (no server ever opened the directory).
#[allow(unsafe_code)]
fn lock_in(dir: &Path) -> Result<Option<File>, BackupError> {
    use std::os::fd::AsRawFd;
    let p = dir.join(zk_log::LOCK_FILE);
    let f = match File::open(&p) {
        Ok(f) => f,
        Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) => {
            return Ok(None)
        }
        Err(e) => return Err(io_err(&p)(e)),
    };
    // SAFETY: flock on a descriptor we own; no memory is passed.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::WouldBlock {
            return Err(BackupError::Refused(format!(
                "{} is locked: a server runs on {}; stop it first",
                p.display(),
                dir.display()
            )));
        }
        return Err(io_err(&p)(e));
    }
    Ok(Some(f))
}

/// Renames `from` to `to`, which must not exist (a rename onto an empty directory would replace
/// it, onto a file would replace the file), as one step of [`undo`], said.
fn rename_new(from: &Path, to: &Path, what: &str, progress: &mut Progress<'_>) -> Result<(), BackupError> {
    if std::fs::symlink_metadata(to).is_ok() {
        return Err(BackupError::Refused(format!(
            "{} exists: {} is not moved onto it",
            to.display(),
            from.display()
        )));
    }
    step(format!("{what} {}", from.display()))?;
    std::fs::rename(from, to).map_err(io_err(to))?;
    progress.say(format!("restore --undo: moved {} to {}", from.display(), to.display()));
    Ok(())
}

/// Syncs `dir` as one step of [`undo`], said.
fn undo_sync(dir: &Path, progress: &mut Progress<'_>) -> Result<(), BackupError> {
    step(format!("sync {}", dir.display()))?;
    sync_dir(dir)?;
    progress.say(format!("restore --undo: synced {}", dir.display()));
    Ok(())
}

/// `zkrs-server restore --undo`: puts back what a forced restore that stopped half done (a kill,
/// a power loss, a rollback that could not finish) moved aside in `snap_root` (dataDir) and
/// `log_root` (dataLogDir), in the order the restore's own rollback keeps: first, in the data
/// directory, the restored snapshots and marker (whatever is in the way) are set aside as
/// `<name>.set-aside-<stamp>` and the old snapshots and marker come back, and the directory is
/// synced; then the old log comes back and its directory is synced (a separate dataLogDir is
/// another file system, typically, whose renames are not ordered with the data directory's: a
/// power loss cannot leave the old log back beside the restored snapshot); last the finished
/// stamp the restore moved aside first, synced. A power loss at any point leaves a state a
/// server refuses to start on, or the old one; running this again goes on from there.
///
/// The stopped restore is the one [`RESTORE_STARTED`] names (written before its first move
/// aside), not the one with the newest stamp, which after a clock step back is an earlier
/// restore's; once everything is back, that file is removed (synced). When it cannot be told
/// (no such file: an older build's restore, or none stopped; a damaged one; stamps renamed by
/// hand), or the restore it names finished, nothing is moved and the error says why. Moves aside
/// renamed into the server's own `zkrs-snap` or `zkrs-log` are only moved back out one level: a
/// server start then says how to go on. Nothing is deleted. Refused while a server holds the
/// directories' lock, and, when no `log_root` is given (taken as `snap_root`), for a data
/// directory with snapshots and no log of its own (in place or moved aside by that restore):
/// its log is in a separate dataLogDir, which would stay aside. `progress` gets each move and
/// sync; the result says what was done.
pub fn undo(
    snap_root: &Path,
    log_root: Option<&Path>,
    progress: &mut dyn Write,
) -> Result<String, BackupError> {
    use std::collections::BTreeSet;
    let mut progress = Progress::new(progress);
    let log_given = log_root.is_some();
    let log_root = log_root.unwrap_or(snap_root);
    let separate = !same_dir(snap_root, log_root);
    let roots: Vec<&Path> = if separate { vec![snap_root, log_root] } else { vec![snap_root] };
    let mut locks = Vec::new();
    for root in &roots {
        for d in [zk_log::snapshot::SNAP_DIR_NAME, zk_log::LOG_DIR_NAME] {
            locks.extend(lock_in(&root.join(d))?);
        }
    }
    if let Some(u) = unfinished_restore(snap_root, log_root).filter(|u| u.nested) {
        let parent = u.dir.parent().unwrap_or(&u.dir).to_path_buf();
        for n in &u.moved {
            rename_new(&u.dir.join(n), &parent.join(n), "out", &mut progress)?;
        }
        undo_sync(&u.dir, &mut progress)?;
        undo_sync(&parent, &mut progress)?;
        return Ok(format!(
            "moved {} back out of {} into {}, where a server sees it; nothing else was moved: start the \
             server again, it says how to go on",
            u.moved.join(", "),
            u.dir.display(),
            parent.display()
        ));
    }
    let mut stamps = BTreeSet::new();
    let mut unparsed = Vec::new();
    for root in &roots {
        for e in std::fs::read_dir(root).map_err(io_err(root))?.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(stamp) =
                MOVED_NAMES.iter().find_map(|b| name.strip_prefix(b)?.strip_prefix(".before-restore-"))
            else {
                continue;
            };
            match stamp.parse::<u128>() {
                Ok(stamp) => {
                    stamps.insert(stamp);
                }
                Err(_) => unparsed.push(root.join(&name).display().to_string()),
            }
        }
    }
    let dirs = roots.iter().map(|r| r.display().to_string()).collect::<Vec<_>>().join(" and ");
    if !unparsed.is_empty() {
        return Err(BackupError::Refused(format!(
            "{} moved aside, renamed by hand (the stamp after `.before-restore-` is not a number): which \
             restore stopped cannot be told, nothing was moved; rename them back, or move them out of {dirs}, \
             then run this again",
            unparsed.join(", ")
        )));
    }
    let record = snap_root.join(RESTORE_STARTED);
    let x = match started_in(snap_root) {
        Started::Stopped(x) => x,
        Started::Finished(x) => return Err(BackupError::Refused(format!(
            "the restore stamped {x} that {} names finished (the {RESTORE_FINISHED} in place is its own): \
                 nothing was moved; it is not undone",
            record.display()
        ))),
        Started::Unreadable => {
            return Err(BackupError::Refused(format!(
                "{} names no restore (damaged): which restore stopped cannot be told, nothing was moved; run \
                 the restore again with --force, or move out of {dirs} everything moved aside \
                 (`*.before-restore-*`) by the restores not to put back",
                record.display()
            )))
        }
        Started::None if stamps.is_empty() => {
            return Err(BackupError::Refused(format!(
                "nothing to put back: nothing moved aside by a restore (`*.before-restore-*`) is in {dirs}"
            )))
        }
        Started::None => {
            let v: Vec<String> = stamps.iter().map(u128::to_string).collect();
            return Err(BackupError::Refused(format!(
                "no restore in flight is recorded ({} is absent): what {dirs} hold moved aside (the names \
                 ending .before-restore-{}) was left by restores that finished, or by an older build's \
                 restore, which records neither its start nor always its finish, so which restore stopped \
                 cannot be told: nothing was moved. If the server refuses to start, run the restore again \
                 with --force, or move out of {dirs} (anywhere outside dataDir and dataLogDir) everything \
                 moved aside by the restores not to put back, and move back by hand what the stopped one \
                 moved aside",
                record.display(),
                v.join(", .before-restore-")
            )));
        }
    };
    let aside_of = |root: &Path, base: &str| {
        let p = root.join(format!("{base}.before-restore-{x}"));
        std::fs::symlink_metadata(&p).is_ok().then_some(p)
    };
    let set_aside = |to: &Path| {
        let base = to.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        (0..1000)
            .map(|n| match n {
                0 => to.with_file_name(format!("{base}.set-aside-{x}")),
                n => to.with_file_name(format!("{base}.set-aside-{x}.{n}")),
            })
            .find(|p| std::fs::symlink_metadata(p).is_err())
            .ok_or_else(|| BackupError::Refused(format!("no free name to set {} aside", to.display())))
    };
    let in_place = |p: &Path| std::fs::symlink_metadata(p).is_ok();
    // A data directory with snapshots (in place or coming back) and no log of its own had its
    // log in a separate dataLogDir, not given: that log would stay aside while the finished stamp
    // comes back and may cover it (as [`prepare_out`] refuses).
    let snaps = snap_root.join(zk_log::snapshot::SNAP_DIR_NAME);
    if !log_given
        && (in_place(&snaps) || aside_of(snap_root, zk_log::snapshot::SNAP_DIR_NAME).is_some())
        && !in_place(&snap_root.join(zk_log::LOG_DIR_NAME))
        && aside_of(snap_root, zk_log::LOG_DIR_NAME).is_none()
    {
        return Err(BackupError::Refused(format!(
            "{} holds {} (in place or moved aside) but no {}: the server keeps its log in a separate \
             dataLogDir, whose log the restore stamped {x} moved aside too; nothing was moved: give \
             --data-log-dir (or --config with its zoo.cfg) (--data-log-dir {} when it has none, as in a \
             directory a restore wrote that no server has started on)",
            snap_root.display(),
            zk_log::snapshot::SNAP_DIR_NAME,
            zk_log::LOG_DIR_NAME,
            snap_root.display()
        )));
    }
    // The marker in place is the stopped restore's when it names its stamp: then its result moved
    // in (the marker first), everything it moved aside was moved, and a snapshot directory in
    // place is its result (or one a refused start created) even with none moved aside.
    let marker_is_its = stamp_in(&snap_root.join(RESTORE_MARKER), RESTORE_STAMP_KEY) == Some(x);
    let mut moved = Vec::new();
    let mut set = Vec::new();
    // 1. The data directory: the result out (the snapshots first), the old snapshots and marker
    // back; synced before any log comes back.
    let mut backs = Vec::new();
    for base in [zk_log::snapshot::SNAP_DIR_NAME, RESTORE_MARKER] {
        let to = snap_root.join(base);
        let back = aside_of(snap_root, base);
        if in_place(&to) && (back.is_some() || marker_is_its) {
            let out = set_aside(&to)?;
            rename_new(&to, &out, "out", &mut progress)?;
            set.push(out.display().to_string());
        }
        backs.extend(back.map(|b| (b, to)));
    }
    for (from, to) in backs {
        rename_new(&from, &to, "back", &mut progress)?;
        moved.push(to.display().to_string());
    }
    if !moved.is_empty() || !set.is_empty() {
        undo_sync(snap_root, &mut progress)?;
    }
    // 2. The old logs, each directory synced.
    for root in &roots {
        let Some(from) = aside_of(root, zk_log::LOG_DIR_NAME) else { continue };
        let to = root.join(zk_log::LOG_DIR_NAME);
        if in_place(&to) {
            let out = set_aside(&to)?;
            rename_new(&to, &out, "out", &mut progress)?;
            set.push(out.display().to_string());
        }
        rename_new(&from, &to, "back", &mut progress)?;
        moved.push(to.display().to_string());
        undo_sync(root, &mut progress)?;
    }
    // 3. Last, the finished stamp the restore moved aside first.
    if let Some(from) = aside_of(snap_root, RESTORE_FINISHED) {
        let to = snap_root.join(RESTORE_FINISHED);
        if in_place(&to) {
            let out = set_aside(&to)?;
            rename_new(&to, &out, "out", &mut progress)?;
            set.push(out.display().to_string());
        }
        rename_new(&from, &to, "back", &mut progress)?;
        moved.push(to.display().to_string());
        undo_sync(snap_root, &mut progress)?;
    }
    // 4. Everything is back: the restore is no longer in flight.
    remove_started(snap_root, "unrecord")?;
    progress.say(format!("restore --undo: removed {}", record.display()));
    drop(locks);
    let set =
        if set.is_empty() { String::new() } else { format!("; set aside (not deleted): {}", set.join(", ")) };
    Ok(format!(
        "put back what the restore stamped {x} moved aside: {}{set}; a server started there now starts on the data \
         held before that restore",
        if moved.is_empty() { "nothing (it had moved nothing aside)".to_string() } else { moved.join(", ") }
    ))
}

/// The key of the stamp in [`RESTORE_FINISHED`].
const FINISHED_KEY: &str = "moved_aside_stamp_ms=";

/// The key, in [`RESTORE_FINISHED`] and the [`RESTORE_MARKER`], of the stamp of the restore that
/// wrote the file (what it moved aside is named `<name>.before-restore-<that stamp>`): [`undo`]
/// tells by it which restore finished, and whether the marker in place is the stopped one's.
const RESTORE_STAMP_KEY: &str = "restore_stamp_ms=";

/// The value of `key` in the small file `path` (a restore marker or finished stamp), if it is
/// there and parses.
fn stamp_in(path: &Path, key: &str) -> Option<u128> {
    use std::io::Read;
    let f = File::open(path).ok()?;
    let mut bytes = Vec::new();
    f.take(RESTORE_MARKER_BYTES_MAX).read_to_end(&mut bytes).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    text.lines().find_map(|l| l.trim().strip_prefix(key)).and_then(|v| v.parse().ok())
}

/// The stamp of the newest restore that finished in `data_dir` ([`RESTORE_FINISHED`]): None
/// when there is none, or it cannot be read or holds no stamp (taken as no restore finished).
pub fn restore_finished_stamp(data_dir: &Path) -> Option<u128> {
    stamp_in(&data_dir.join(RESTORE_FINISHED), FINISHED_KEY)
}

/// Writes [`RESTORE_FINISHED`] into `dir` covering the moves aside stamped up to `stamp`, as
/// written by the restore stamped `by` (synced, under a temporary name first; the caller syncs
/// the directory).
fn write_finished(dir: &Path, stamp: u128, by: u128) -> Result<(), BackupError> {
    let p = dir.join(RESTORE_FINISHED);
    let tmp = dir.join(format!("{RESTORE_FINISHED}.tmp"));
    let text = format!(
        "# Written by zkrs-server restore once its result was in place: the directories moved aside\n\
         # stamped up to {stamp} (*.before-restore-{stamp} and older) are left over from restores that finished.\n\
         {FINISHED_KEY}{stamp}\n{RESTORE_STAMP_KEY}{by}\n"
    );
    let written = File::create(&tmp)
        .and_then(|mut f| f.write_all(text.as_bytes()).and_then(|_| f.sync_all()))
        .and_then(|_| std::fs::rename(&tmp, &p));
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io_err(&p)(e)
    })
}

/// The stamps of everything in `dir` a restore moved aside (`<name>.before-restore-<ms>`).
fn aside_stamps(dir: &Path) -> Vec<u128> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let (_, stamp) = name.rsplit_once(".before-restore-")?;
            stamp.parse().ok()
        })
        .collect()
}

/// The directory under the output directory a restore fetches into and builds its result in.
const STAGING_NAME: &str = ".restore-staging";

/// One step of [`install`]: tests record the steps and make one fail.
fn step(what: String) -> Result<(), BackupError> {
    #[cfg(test)]
    {
        // What a kill right before this step would leave on disk.
        KILL_POINTS.with(|k| {
            if let Some(watch) = k.borrow_mut().as_mut() {
                watch(&what);
            }
        });
        let fail = INSTALL_STEPS.with(|s| {
            let mut s = s.borrow_mut();
            s.0.push(what.clone());
            s.1.as_deref().is_some_and(|f| f.split('|').any(|f| what.starts_with(f)))
        });
        if fail {
            return Err(BackupError::Io {
                path: what,
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
    /// The steps [`install`] took, and the ones to fail (by prefix, several split by `|`).
    static INSTALL_STEPS: std::cell::RefCell<(Vec<String>, Option<String>)> =
        const { std::cell::RefCell::new((Vec::new(), None)) };
    /// Called before each step of [`install`] (with its name), to look at the directories as a
    /// restore killed there would leave them.
    static KILL_POINTS: std::cell::RefCell<Option<KillWatch>> =
        const { std::cell::RefCell::new(None) };
}

/// Syncs `out` and the separate dataLogDir `log_out` (if any, and other than `out`).
fn sync_dirs(out: &Path, log_out: Option<&Path>) -> Result<(), BackupError> {
    for d in std::iter::once(out).chain(log_out.filter(|l| l.exists() && !same_dir(l, out))) {
        step(format!("sync {}", d.display()))?;
        sync_dir(d)?;
    }
    Ok(())
}

/// Puts the result built in `staging` (its `zkrs-snap` and the [`RESTORE_MARKER`]) in place:
/// moves `aside` (what [`prepare_out`] found) to `<name>.before-restore-<ms>`, syncs both
/// directories so the moves are durable before anything is moved in (a separate dataLogDir is
/// another file system, typically, which orders nothing with the data directory's: a power loss
/// could otherwise bring back an old log beside the restored snapshot), moves the marker in and
/// then the snapshot directory, and syncs again. A separate dataLogDir's log is moved aside only
/// once the data directory's moves are synced. When a step fails, every rename done is undone
/// (the old directories come back) before the error is returned: first this restore's own
/// [`RESTORE_FINISHED`] is removed (and the directory synced) if it was written, then the
/// result moved in goes back to staging and the data directory is synced before the separate
/// dataLogDir's log comes back (nothing old comes back beside a result that cannot be moved
/// out, nor when that sync fails), then that log is synced before the snapshots, and the earlier
/// restore's [`RESTORE_FINISHED`] comes back last, once everything else is back and synced, and
/// only then (see [`prepare_out`]); left aside, it makes a server refuse to start there on an
/// empty tree or without its log, the safe side.
fn install(
    aside: &[PathBuf],
    staging: &Path,
    out: &Path,
    log_out: Option<&Path>,
    stamp: u128,
    progress: &mut Progress<'_>,
) -> Result<(), BackupError> {
    let mut done: Vec<(PathBuf, PathBuf)> = Vec::new();
    let mut finishing = false;
    let result = install_steps(aside, staging, out, log_out, stamp, &mut done, &mut finishing, progress);
    let Err(e) = result else {
        // Finished: its [`RESTORE_FINISHED`] in place names it, so [`RESTORE_STARTED`] left (this
        // removal failing, or a kill before it) is taken for a finished restore's too.
        if !aside.is_empty() {
            if let Err(u) = remove_started(out, "unrecord") {
                progress.say(format!(
                    "restore: removing {} failed ({u}); it names this restore, which finished: remove it",
                    out.join(RESTORE_STARTED).display()
                ));
            }
        }
        return Ok(());
    };
    let finished = out.join(RESTORE_FINISHED);
    // This restore's own stamp, written before the failure (only the directory's last sync can
    // fail after it), covers its moves aside: it goes first, durably, before anything moves
    // back. Left in place, a restore killed while moving back, or a move back that sticks, would
    // leave it covering the old directories aside, and a server would start empty there.
    if finishing {
        let removed = step(format!("unfinished {}", finished.display()))
            .and_then(|_| match std::fs::remove_file(&finished) {
                Err(u) if u.kind() != std::io::ErrorKind::NotFound => Err(io_err(&finished)(u)),
                _ => Ok(()),
            })
            .and_then(|_| step(format!("sync {}", out.display())))
            .and_then(|_| sync_dir(out));
        if let Err(u) = removed {
            return Err(BackupError::Refused(format!(
                "{e}; then removing this restore's {} before moving the old directories back failed ({u}): \
                 nothing was moved back, {} holds the restored data; check the disk, then run the restore \
                 again with --force",
                finished.display(),
                out.display()
            )));
        }
    }
    let (finished_move, others): (Vec<_>, Vec<_>) = done.iter().partition(|(from, _)| *from == finished);
    // A separate dataLogDir's log comes back before the data directory's snapshots, and its
    // return is made durable before they move: that directory is another file system, typically,
    // whose renames are not ordered with the data directory's, and a power loss could otherwise
    // leave the old snapshots back without their log (a server would start on them without the
    // transactions after them). Snapshots left aside beside their log are safe: the server
    // replays the log, or refuses a log that no longer starts at its beginning.
    let separate = log_out.filter(|l| !same_dir(l, out));
    let separate_log = separate.map(|l| l.join(zk_log::LOG_DIR_NAME));
    let snaps = out.join(zk_log::snapshot::SNAP_DIR_NAME);
    let mut log_back_unsynced = false;
    let mut moved_out_unsynced = false;
    // Once something cannot be moved back safely, nothing after it is: why.
    let mut halted: Option<String> = None;
    let mut stuck = Vec::new();
    for (from, to) in others.iter().rev() {
        // The result moved in (into the data directory) goes back to staging first.
        let moved_in = from.parent() == Some(staging);
        if let Some(why) = &halted {
            stuck.push(format!("{} (to {}): not moved back, since {why}", to.display(), from.display()));
            continue;
        }
        // The restored snapshot's move back out is made durable before the old log comes back on
        // the other file system: a power loss would otherwise leave it in place beside the old
        // log, replayed onto it (a mixed tree). Both stay aside when that sync fails: a server
        // refuses there.
        if let (true, true, Some(l)) = (moved_out_unsynced, Some(from) == separate_log.as_ref(), separate) {
            let synced = step(format!("sync {} (moved out)", out.display())).and_then(|_| sync_dir(out));
            if let Err(u) = synced {
                let why = format!(
                    "syncing {} after the restored data was moved out of it failed ({u}), and the old log in \
                     {} may not come back beside the restored snapshot",
                    out.display(),
                    l.display()
                );
                stuck.push(format!("{} (to {}): not moved back, since {why}", to.display(), from.display()));
                halted = Some(why);
                continue;
            }
            moved_out_unsynced = false;
        }
        if let (true, true, Some(l)) = (*from == snaps, log_back_unsynced, separate) {
            let synced = step(format!("sync {}", l.display())).and_then(|_| sync_dir(l));
            if let Err(u) = synced {
                stuck.push(format!(
                    "{} (to {}): not moved back, since syncing {} after its log came back failed: {u}",
                    to.display(),
                    from.display(),
                    l.display()
                ));
                continue;
            }
            log_back_unsynced = false;
        }
        let back = step(format!("back {}", from.display()))
            .and_then(|_| std::fs::rename(to, from).map_err(io_err(from)));
        match back {
            Err(u) => {
                stuck.push(format!("{} (to {}): {u}", to.display(), from.display()));
                // The result left in place: no old directory may come back beside it (an old log
                // would be replayed onto the restored snapshot).
                if moved_in {
                    halted = Some(format!(
                        "the restored {} could not be moved out of {}",
                        to.display(),
                        out.display()
                    ));
                }
            }
            Ok(()) => {
                log_back_unsynced |= separate_log.as_ref() == Some(from);
                moved_out_unsynced |= moved_in;
            }
        }
    }
    let mut synced = sync_dirs(out, log_out);
    if let Some((from, to)) = finished_move.first().filter(|_| stuck.is_empty() && synced.is_ok()) {
        let back = step(format!("back {}", from.display()))
            .and_then(|_| std::fs::rename(to, from).map_err(io_err(from)))
            .and_then(|_| step(format!("sync {}", out.display())))
            .and_then(|_| sync_dir(out));
        if let Err(u) = back {
            synced = Err(BackupError::Refused(format!(
                "moving {} back to {} failed ({u}): a server refuses to start empty there until it is moved \
                 back by hand",
                to.display(),
                from.display()
            )));
        }
    }
    // Everything is back and synced: this restore is no longer in flight. Otherwise its
    // [`RESTORE_STARTED`] stays, naming it for `--undo` and a server start.
    if stuck.is_empty() && synced.is_ok() && !aside.is_empty() {
        synced = remove_started(out, "unrecord");
    }
    if stuck.is_empty() {
        if !done.is_empty() {
            progress.say("restore: the directories moved aside are back in place".to_string());
        }
        return match synced {
            Ok(()) => Err(e),
            Err(s) => {
                Err(BackupError::Refused(format!("{e}; then syncing the directories put back failed: {s}")))
            }
        };
    }
    // The earlier restore's finished stamp stayed aside: it goes back last, by hand too.
    let stamp = finished_move.first().map_or_else(String::new, |(from, to)| {
        format!(", then, last, {} to {}", to.display(), from.display())
    });
    Err(BackupError::Refused(format!(
        "{e}; then moving back failed for {}: move them back by hand, in this order{stamp}, before starting a server there",
        stuck.join(", ")
    )))
}

#[allow(clippy::too_many_arguments)]
fn install_steps(
    aside: &[PathBuf],
    staging: &Path,
    out: &Path,
    log_out: Option<&Path>,
    stamp: u128,
    done: &mut Vec<(PathBuf, PathBuf)>,
    finishing: &mut bool,
    progress: &mut Progress<'_>,
) -> Result<(), BackupError> {
    // The stamp the finished restore before this one wrote, moved aside with the rest: once this
    // one finishes, what that one covered is still left over from restores that finished, even
    // when this one's stamp is older (the clock stepped back).
    let covered = restore_finished_stamp(out).map_or(stamp, |s| s.max(stamp));
    // Before anything moves aside, durably: which restore is in flight (see
    // [`RESTORE_STARTED`]). A restore that moves nothing aside leaves nothing to undo.
    if !aside.is_empty() {
        step(format!("started {}", out.display()))?;
        write_started(out, stamp)?;
        step(format!("started sync {}", out.display()))?;
        sync_dir(out)?;
    }
    for p in aside {
        let name = p.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let to = p.with_file_name(format!("{name}.before-restore-{stamp}"));
        // A separate dataLogDir's log (after everything in the data directory): the data
        // directory's moves, its snapshots' first of all, are made durable before it moves. That
        // directory is another file system, typically, whose renames are not ordered with the data
        // directory's: a power loss could otherwise leave the old snapshots in place beside their
        // log moved aside, and a server would start on them without the transactions after them.
        if p.parent() != Some(out) {
            step(format!("sync {}", out.display()))?;
            sync_dir(out)?;
        }
        step(format!("aside {}", p.display()))?;
        std::fs::rename(p, &to).map_err(io_err(p))?;
        done.push((p.clone(), to.clone()));
        progress.say(format!("restore: moved {} aside to {}", p.display(), to.display()));
        // The earlier restore's finished stamp (first, see [`prepare_out`]) is out of the way for
        // good before anything else moves: a power loss cannot bring it back beside the others
        // moved aside.
        if name == RESTORE_FINISHED {
            step(format!("sync {}", out.display()))?;
            sync_dir(out)?;
        }
    }
    sync_dirs(out, log_out)?;
    // The marker goes in before the snapshot, so that no backup continues an archive past the
    // point over a directory holding the result.
    for name in [RESTORE_MARKER, zk_log::snapshot::SNAP_DIR_NAME] {
        let (from, to) = (staging.join(name), out.join(name));
        step(format!("in {name}"))?;
        std::fs::rename(&from, &to).map_err(io_err(&to))?;
        done.push((from, to));
    }
    sync_dirs(out, log_out)?;
    // Last: the moves aside are left over from a restore that finished, which a server started
    // on the directory after it was emptied on purpose must not take for one stopped half done.
    step("finished".to_string())?;
    // Everything moved aside in either directory, by this restore or any before it (one killed
    // once it had moved the stamp before it aside, whose coverage would otherwise be lost for
    // good when the clock stepped back since), is now superseded by this restore's result, which
    // is in place and synced. Taken only here: while moves are in flight, no stamp may cover
    // them.
    let covered = aside_stamps(out)
        .into_iter()
        .chain(log_out.map_or_else(Vec::new, aside_stamps))
        .fold(covered, u128::max);
    *finishing = true;
    write_finished(out, covered, stamp)?;
    step(format!("finished sync {}", out.display()))?;
    sync_dir(out)
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
/// is the server's dataLogDir when it has a separate one: its `zkrs-log` must be empty too
/// (or is moved aside with `force`), or the server would replay it over the restored tree.
/// With `force`, nothing is moved aside before the result is whole: a restore that fails
/// leaves both directories as they were. Beside the snapshot it leaves a [`RESTORE_MARKER`]
/// naming the point, and syncs the directories it renamed in. Progress lines, at most one a
/// second plus a summary of what was checked, go to `progress`.
///
/// Errors: [`BackupError::Refused`] for a non-empty `out` without `force`, a point outside the
/// archive, a subtree that does not exist at the point; [`BackupError::Gap`] when the archived
/// log lacks transactions the restore needs; [`BackupError::Damaged`] naming the file for a
/// missing or damaged archived file or a digest that does not match; [`BackupError::Io`].
pub fn restore(
    target: &dyn ArchiveTarget,
    out: &Path,
    log_out: Option<&Path>,
    point: Point,
    subtree: Option<&str>,
    force: bool,
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
    let aside = prepare_out(out, log_out, force)?;
    let staging = out.join(STAGING_NAME);
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(io_err(&staging))?;
    // The result, the marker naming the point with it, is built in the staging directory; only
    // once it is whole is anything there moved aside and the result moved in, and a failure
    // then moves the old directories back, so a failed restore leaves the directories as they
    // were.
    let result = restore_staged(target, &m, out, &staging, point, subtree, &mut progress).and_then(|r| {
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
        let at_ms = i64::try_from(now).unwrap_or(i64::MAX);
        // The stamp of what this restore moves aside, named in its marker too: [`undo`] tells by
        // it whether the marker in place is this restore's.
        RestoreMarker { zxid: r.zxid, at_ms }.write(&staging, now)?;
        install(&aside, &staging, out, log_out, now, &mut progress)?;
        progress.say(format!(
            "restore: done: {} nodes at zxid {} ({} txns replayed) -> {}",
            r.nodes,
            hex(r.zxid),
            r.replayed,
            r.written.display()
        ));
        Ok(r)
    });
    let _ = std::fs::remove_dir_all(&staging);
    result
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
    if let Some(p) = m.rewritten_after.filter(|p| zxid > *p) {
        return Err(BackupError::Refused(format!(
            "the archive holds transactions after zxid {} that the server's log later lost (they were never \
             committed; the backup marked them when it found out): no point after {} is restored",
            hex(p),
            hex(p)
        )));
    }
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

    /// `--force` moves aside a separate dataLogDir's log too (the server would replay it over
    /// the restored tree), and without it a dataLogDir holding a log is refused.
    #[test]
    fn force_moves_a_separate_log_dirs_log_aside() {
        let f = archived_1_to_5();
        let target = DirTarget::new(f.archive.clone());
        let out = f.dir.path().join("out");
        let logs = f.dir.path().join("logs");
        let old_log = logs.join(zk_log::LOG_DIR_NAME);
        std::fs::create_dir_all(&old_log).unwrap();
        std::fs::write(old_log.join("log.0000000000000001"), b"old").unwrap();
        let e = restore(&target, &out, Some(&logs), Point::Newest, None, false, &mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains(&format!("{} exists", old_log.display())), "{e}");
        let mut said = Vec::new();
        let r = restore(&target, &out, Some(&logs), Point::Newest, None, true, &mut said).unwrap();
        assert_eq!(r.zxid, 5);
        assert!(!old_log.exists(), "{}", String::from_utf8_lossy(&said));
        let aside: Vec<String> = std::fs::read_dir(&logs)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert!(aside.len() == 1 && aside[0].starts_with("zkrs-log.before-restore-"), "{aside:?}");
        assert!(String::from_utf8_lossy(&said).contains("moved"), "{}", String::from_utf8_lossy(&said));
    }

    /// `--force` moves nothing aside until the restore has succeeded: one that fails (here, a
    /// point past the archive, and a damaged file) leaves the old directories in place.
    #[test]
    fn a_failed_forced_restore_leaves_the_old_directories() {
        let f = archived_1_to_5();
        let target = DirTarget::new(f.archive.clone());
        let out = f.dir.path().join("out");
        let old_snap = out.join(zk_log::snapshot::SNAP_DIR_NAME);
        let old_log = out.join(zk_log::LOG_DIR_NAME);
        std::fs::create_dir_all(&old_snap).unwrap();
        std::fs::create_dir_all(&old_log).unwrap();
        std::fs::write(old_log.join("log.0000000000000001"), b"old").unwrap();
        let e = restore(&target, &out, None, Point::Zxid(99), None, true, &mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("past the newest archived transaction"), "{e}");
        let m = target.read_manifest().unwrap().unwrap();
        let piece = f.archive.join(LOG_PREFIX).join(&m.logs[0].name);
        let mut bytes = std::fs::read(&piece).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&piece, &bytes).unwrap();
        let e = restore(&target, &out, None, Point::Newest, None, true, &mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains(&m.logs[0].name), "{e}");
        let mut left: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["zkrs-log", "zkrs-snap"]);
        assert_eq!(std::fs::read(old_log.join("log.0000000000000001")).unwrap(), b"old");
    }

    /// A dataLogDir given as another spelling of the data directory (a link to it) is the
    /// data directory: its log is moved aside once, the restore succeeds, and the directory
    /// holds the result and the marker naming the point.
    #[test]
    fn a_log_dir_spelt_otherwise_is_the_data_dir() {
        let f = archived_1_to_5();
        let target = DirTarget::new(f.archive.clone());
        let out = f.dir.path().join("out");
        let old_log = out.join(zk_log::LOG_DIR_NAME);
        std::fs::create_dir_all(&old_log).unwrap();
        std::fs::write(old_log.join("log.0000000000000001"), b"old").unwrap();
        let link = f.dir.path().join("link");
        std::os::unix::fs::symlink(&out, &link).unwrap();
        let mut said = Vec::new();
        let r = restore(&target, &out, Some(&link), Point::Zxid(3), None, true, &mut said).unwrap();
        assert_eq!(r.zxid, 3, "{}", String::from_utf8_lossy(&said));
        assert!(r.written.exists());
        let marker = RestoreMarker::read(&out).unwrap().unwrap();
        assert_eq!(marker.zxid, 3);
        let mut left: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with("zkrs-log.before-restore-"))
            .collect();
        left.sort();
        assert_eq!(left, [RESTORE_FINISHED, RESTORE_MARKER, "zkrs-snap"]);
    }

    /// Runs a forced restore of `f`'s archive at zxid 3 into `out` (a separate dataLogDir
    /// `logs`), failing at the install step named `fail` (by prefix); returns the steps taken.
    fn restore_failing_at(f: &Fixture, out: &Path, logs: &Path, fail: Option<&str>) -> (Vec<String>, bool) {
        INSTALL_STEPS.with(|s| *s.borrow_mut() = (Vec::new(), fail.map(str::to_string)));
        let target = DirTarget::new(f.archive.clone());
        let mut said = Vec::new();
        let r = restore(&target, out, Some(logs), Point::Zxid(3), None, true, &mut said);
        let steps = INSTALL_STEPS.with(|s| std::mem::take(&mut *s.borrow_mut()).0);
        // "done" is said only once the result is installed.
        let done = String::from_utf8_lossy(&said).contains("restore: done:");
        assert_eq!(done, r.is_ok(), "{}", String::from_utf8_lossy(&said));
        (steps, r.is_ok())
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

    /// A forced restore that fails once the old directories are moved aside (moving the marker or
    /// the snapshot directory in, or syncing) moves them back: the data directory keeps its old
    /// snapshots, log and marker, and the separate dataLogDir its log.
    #[test]
    fn a_restore_failing_after_the_move_aside_puts_the_old_directories_back() {
        let f = archived_1_to_5();
        for fail in ["in zkrs-restored", "in zkrs-snap", "sync", "finished"] {
            let out = f.dir.path().join(format!("out-{}", fail.replace(' ', "-")));
            let logs = f.dir.path().join(format!("logs-{}", fail.replace(' ', "-")));
            std::fs::create_dir_all(out.join(zk_log::snapshot::SNAP_DIR_NAME)).unwrap();
            std::fs::write(out.join(zk_log::snapshot::SNAP_DIR_NAME).join("old"), b"old").unwrap();
            std::fs::write(out.join(RESTORE_MARKER), "zxid=0x1\nrestored_at_ms=1\n").unwrap();
            std::fs::create_dir_all(logs.join(zk_log::LOG_DIR_NAME)).unwrap();
            std::fs::write(logs.join(zk_log::LOG_DIR_NAME).join("log.0000000000000001"), b"old").unwrap();
            let (steps, ok) = restore_failing_at(&f, &out, &logs, Some(fail));
            assert!(!ok, "{fail}: {steps:?}");
            assert!(steps.iter().any(|s| s.starts_with("aside")), "{fail}: {steps:?}");
            // Its start record goes once everything is back and synced (here the sync fails).
            if fail == "sync" {
                assert_eq!(names(&out), [RESTORE_STARTED, RESTORE_MARKER, "zkrs-snap"], "{fail}");
            } else {
                assert_eq!(names(&out), [RESTORE_MARKER, "zkrs-snap"], "{fail}");
            }
            assert_eq!(std::fs::read(out.join("zkrs-snap/old")).unwrap(), b"old", "{fail}");
            assert_eq!(RestoreMarker::read(&out).unwrap().map(|m| m.zxid), Some(1), "{fail}");
            assert_eq!(names(&logs), ["zkrs-log"], "{fail}");
        }
    }

    /// The moves aside are synced, in the data directory and a separate dataLogDir, before the
    /// marker and the result are moved in, and both are synced again after.
    #[test]
    fn the_moves_aside_are_synced_before_the_result_moves_in() {
        let f = archived_1_to_5();
        let out = f.dir.path().join("out");
        let logs = f.dir.path().join("logs");
        std::fs::create_dir_all(out.join(zk_log::snapshot::SNAP_DIR_NAME)).unwrap();
        std::fs::create_dir_all(logs.join(zk_log::LOG_DIR_NAME)).unwrap();
        let (steps, ok) = restore_failing_at(&f, &out, &logs, None);
        assert!(ok, "{steps:?}");
        let at = |s: &str| steps.iter().position(|t| *t == s).unwrap_or_else(|| panic!("no {s}: {steps:?}"));
        let (sync_out, sync_logs) = (format!("sync {}", out.display()), format!("sync {}", logs.display()));
        assert!(
            at(&sync_out) < at("in zkrs-restored") && at(&sync_logs) < at("in zkrs-restored"),
            "{steps:?}"
        );
        assert!(steps.iter().rposition(|t| *t == sync_logs) > Some(at("in zkrs-snap")), "{steps:?}");
        assert!(at("finished") > at("in zkrs-snap"), "{steps:?}");
        assert_eq!(steps.last(), Some(&format!("unrecord {sync_out}")), "{steps:?}");
        assert!(
            at(&format!("finished {sync_out}"))
                < at(&format!("unrecord {}", out.join(RESTORE_STARTED).display()))
        );
        assert!(at("finished") < steps.len() - 1, "{steps:?}");
        assert_eq!(names(&out).iter().filter(|n| !n.contains("before-restore")).count(), 3);
    }

    /// A restore that finished records the stamp of the directories it moved aside, in the data
    /// directory and the separate dataLogDir alike, so that a server started there after the data
    /// was emptied on purpose does not take them for a restore stopped half done; a second
    /// restore's stamp replaces the first's.
    #[test]
    fn a_finished_restore_records_the_stamp_of_what_it_moved_aside() {
        let f = archived_1_to_5();
        let out = f.dir.path().join("out");
        let logs = f.dir.path().join("logs");
        std::fs::create_dir_all(out.join(zk_log::snapshot::SNAP_DIR_NAME)).unwrap();
        std::fs::create_dir_all(logs.join(zk_log::LOG_DIR_NAME)).unwrap();
        assert_eq!(restore_finished_stamp(&out), None);
        let stamps = |dir: &Path| -> Vec<u128> {
            names(dir).iter().filter_map(|n| n.split(".before-restore-").nth(1)?.parse().ok()).collect()
        };
        let (steps, ok) = restore_failing_at(&f, &out, &logs, None);
        assert!(ok, "{steps:?}");
        let first = restore_finished_stamp(&out).expect("a stamp");
        assert_eq!(stamps(&out), [first]);
        assert_eq!(stamps(&logs), [first]);
        std::thread::sleep(std::time::Duration::from_millis(2));
        let (steps, ok) = restore_failing_at(&f, &out, &logs, None);
        assert!(ok, "{steps:?}");
        let second = restore_finished_stamp(&out).expect("a stamp");
        assert!(second > first);
        assert!(stamps(&out).iter().all(|s| *s <= second), "{:?}", names(&out));
        std::fs::write(out.join(RESTORE_FINISHED), "moved_aside_stamp_ms=x\n").unwrap();
        assert_eq!(restore_finished_stamp(&out), None, "unreadable: no restore known finished");
    }

    /// A forced restore moves the finished stamp of the restore before it aside first of all, and
    /// syncs the directory before it moves anything else: killed between its moves, it leaves no
    /// stamp that could cover its own moves aside (review 8, finding 2: one stamped later, by a
    /// clock since stepped back, did). Once it finishes, its stamp still covers what the one
    /// before covered.
    #[test]
    fn a_forced_restore_moves_the_finished_stamp_before_it_aside() {
        let f = archived_1_to_5();
        let out = f.dir.path().join("out");
        let logs = f.dir.path().join("logs");
        std::fs::create_dir_all(out.join(zk_log::snapshot::SNAP_DIR_NAME)).unwrap();
        let (steps, ok) = restore_failing_at(&f, &out, &logs, None);
        assert!(ok, "{steps:?}");
        // Restore 1 finished with the clock far ahead.
        let ahead = restore_finished_stamp(&out).unwrap() + 10_000_000_000;
        write_finished(&out, ahead, ahead).unwrap();
        let (steps, ok) = restore_failing_at(&f, &out, &logs, None);
        assert!(ok, "{steps:?}");
        let finished_aside = format!("aside {}", out.join(RESTORE_FINISHED).display());
        assert_eq!(
            steps[..2],
            [format!("started {}", out.display()), format!("started sync {}", out.display())]
        );
        assert_eq!(steps[2..4], [finished_aside, format!("sync {}", out.display())], "{steps:?}");
        assert!(steps[4].starts_with("aside "), "{steps:?}");
        assert_eq!(restore_finished_stamp(&out), Some(ahead), "{:?}", names(&out));
        assert!(
            names(&out).iter().any(|n| n.starts_with(&format!("{RESTORE_FINISHED}.before-restore-"))),
            "{:?}",
            names(&out)
        );
    }

    /// A data directory holding its log (no separate dataLogDir), restored once by a restore that
    /// finished with the clock far ahead, then holding a log again, as a server leaves it.
    fn restored_with_the_clock_ahead(f: &Fixture, out: &Path) {
        let target = DirTarget::new(f.archive.clone());
        std::fs::create_dir_all(out.join(zk_log::LOG_DIR_NAME)).unwrap();
        restore(&target, out, Some(out), Point::Zxid(3), None, true, &mut Vec::new()).unwrap();
        let ahead = restore_finished_stamp(out).unwrap() + 10_000_000_000;
        write_finished(out, ahead, ahead).unwrap();
        std::fs::create_dir_all(out.join(zk_log::LOG_DIR_NAME)).unwrap();
        std::fs::write(out.join(zk_log::LOG_DIR_NAME).join("log.0000000000000004"), b"old").unwrap();
    }

    /// Runs a forced restore of `f`'s archive into `out` (holding its log), failing at the step
    /// named `fail` (by prefix), and looks at the directory before every step, as a restore
    /// killed there leaves it: wherever a server would start empty there (no `zkrs-snap`, no
    /// `zkrs-log`), it must refuse ([`unfinished_restore`], what the server asks). Returns the
    /// steps, and the steps at which the server would have started empty.
    fn killed_at_every_step(f: &Fixture, out: &Path, fail: Option<&str>) -> (Vec<String>, Vec<String>) {
        let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let (watch_out, watch_seen) = (out.to_path_buf(), seen.clone());
        KILL_POINTS.with(|k| {
            *k.borrow_mut() = Some(Box::new(move |at: &str| {
                let empty = !watch_out.join(zk_log::snapshot::SNAP_DIR_NAME).exists()
                    && !watch_out.join(zk_log::LOG_DIR_NAME).exists();
                if empty {
                    let refused = unfinished_restore(&watch_out, &watch_out).is_some();
                    watch_seen.borrow_mut().push((at.to_string(), refused, names(&watch_out)));
                }
            }))
        });
        INSTALL_STEPS.with(|s| *s.borrow_mut() = (Vec::new(), fail.map(str::to_string)));
        let target = DirTarget::new(f.archive.clone());
        let r = restore(&target, out, Some(out), Point::Zxid(2), None, true, &mut Vec::new());
        KILL_POINTS.with(|k| *k.borrow_mut() = None);
        let steps = INSTALL_STEPS.with(|s| std::mem::take(&mut *s.borrow_mut()).0);
        assert_eq!(r.is_ok(), fail.is_none(), "{r:?} {steps:?}");
        let seen = std::mem::take(&mut *seen.borrow_mut());
        for (at, refused, left) in &seen {
            assert!(refused, "killed before `{at}`, a server starts empty on {left:?}; steps {steps:?}");
        }
        (steps, seen.into_iter().map(|(at, _, _)| at).collect())
    }

    /// Review 9, finding 1: a forced restore killed at any of its steps, or while it moves back
    /// after a failure, with the clock behind the restore before it, leaves no directory a
    /// server starts empty on: the earlier restore's finished stamp is out of the way before
    /// anything else moves, and comes back only after everything else did (and was synced).
    #[test]
    fn a_restore_killed_at_any_step_after_a_clock_step_back_leaves_the_server_refusing() {
        let f = archived_1_to_5();
        let out = f.dir.path().join("out");
        restored_with_the_clock_ahead(&f, &out);
        let (steps, empty_at) = killed_at_every_step(&f, &out, None);
        assert!(!empty_at.is_empty(), "no kill point leaves the directory empty: {steps:?}");

        let out = f.dir.path().join("out-rollback");
        restored_with_the_clock_ahead(&f, &out);
        let (steps, empty_at) = killed_at_every_step(&f, &out, Some("in zkrs-snap"));
        assert!(empty_at.iter().any(|s| s.starts_with("back ")), "{empty_at:?}; steps {steps:?}");
        // The finished stamp comes back last, after the directories moved back are synced.
        let back_finished = format!("back {}", out.join(RESTORE_FINISHED).display());
        let at = steps.iter().position(|s| *s == back_finished).unwrap_or_else(|| panic!("{steps:?}"));
        assert!(
            steps[..at].iter().rev().take_while(|s| !s.starts_with("back ")).any(|s| s.starts_with("sync ")),
            "not synced before the stamp comes back: {steps:?}"
        );
        assert!(!steps[at + 1..].iter().any(|s| s.starts_with("back ")), "{steps:?}");
        assert!(restore_finished_stamp(&out).is_some(), "{:?}", names(&out));
        assert!(unfinished_restore(&out, &out).is_none(), "{:?}", names(&out));
    }

    /// Review 10, finding 3: a forced restore that fails after it wrote its own finished stamp
    /// (its last sync) removes that stamp, durably, before it moves anything back: killed at any
    /// step of the rollback, it leaves no stamp covering the old directories aside while a
    /// server would start empty there. Once everything is back, the earlier stamp is back.
    #[test]
    fn a_restore_failing_after_its_finished_stamp_is_killed_at_any_step_of_its_rollback() {
        let f = archived_1_to_5();
        let out = f.dir.path().join("out");
        restored_with_the_clock_ahead(&f, &out);
        let ahead = restore_finished_stamp(&out);
        let (steps, empty_at) = killed_at_every_step(&f, &out, Some("finished sync"));
        assert!(empty_at.iter().any(|s| s.starts_with("back ")), "{empty_at:?}; steps {steps:?}");
        let unfinished = format!("unfinished {}", out.join(RESTORE_FINISHED).display());
        let at = steps.iter().position(|s| *s == unfinished).unwrap_or_else(|| panic!("{steps:?}"));
        assert_eq!(steps.get(at + 1), Some(&format!("sync {}", out.display())), "{steps:?}");
        assert!(!steps[..at].iter().any(|s| s.starts_with("back ")), "{steps:?}");
        assert_eq!(restore_finished_stamp(&out), ahead, "{:?}", names(&out));
        assert!(unfinished_restore(&out, &out).is_none(), "{:?}", names(&out));
        assert!(out.join(zk_log::LOG_DIR_NAME).join("log.0000000000000004").exists(), "{:?}", names(&out));
    }

    /// Review 10, finding 1: with a separate dataLogDir (another file system, typically, whose
    /// renames are not ordered with the data directory's), the snapshots' move aside is synced
    /// before the log moves aside, and on a failure the log's return is synced before the
    /// snapshots move back: no power loss leaves the old snapshots in place with their log aside.
    #[test]
    fn a_separate_log_dir_moves_only_once_the_data_dirs_moves_are_synced() {
        let f = archived_1_to_5();
        for fail in [None, Some("in zkrs-snap")] {
            let name = fail.map_or("ok".to_string(), |f| f.replace(' ', "-"));
            let out = f.dir.path().join(format!("out-{name}"));
            let logs = f.dir.path().join(format!("logs-{name}"));
            std::fs::create_dir_all(out.join(zk_log::snapshot::SNAP_DIR_NAME)).unwrap();
            std::fs::create_dir_all(logs.join(zk_log::LOG_DIR_NAME)).unwrap();
            let (steps, ok) = restore_failing_at(&f, &out, &logs, fail);
            assert_eq!(ok, fail.is_none(), "{steps:?}");
            let at =
                |s: String| steps.iter().position(|t| *t == s).unwrap_or_else(|| panic!("no {s}: {steps:?}"));
            let between = |a: String, b: String, s: String| {
                let (a, b) = (at(a), at(b));
                assert!(a < b && steps[a..b].contains(&s), "{s} not between: {steps:?}");
            };
            let (snaps, log) = (out.join(zk_log::snapshot::SNAP_DIR_NAME), logs.join(zk_log::LOG_DIR_NAME));
            between(
                format!("aside {}", snaps.display()),
                format!("aside {}", log.display()),
                format!("sync {}", out.display()),
            );
            if fail.is_some() {
                between(
                    format!("back {}", log.display()),
                    format!("back {}", snaps.display()),
                    format!("sync {}", logs.display()),
                );
                assert_eq!(names(&out), ["zkrs-snap"]);
                assert_eq!(names(&logs), ["zkrs-log"]);
            }
        }
    }

    /// Review 11, finding 1: with a separate dataLogDir, a rollback that moved the restored
    /// snapshot back out of the data directory (a failure at or after the finished stamp) syncs
    /// the data directory before the old log comes back on the other file system: a power loss
    /// cannot leave the restored snapshot in place beside the old log, replayed onto it. When
    /// that sync fails, the old log and snapshots both stay aside.
    #[test]
    fn a_rollback_syncs_the_restored_snapshots_move_out_before_the_old_log_comes_back() {
        let f = archived_1_to_5();
        for fail in ["finished", "finished sync", "finished|sync", "finished|back"] {
            let name = fail.replace([' ', '|'], "-");
            let out = f.dir.path().join(format!("out-{name}"));
            let logs = f.dir.path().join(format!("logs-{name}"));
            std::fs::create_dir_all(out.join(zk_log::snapshot::SNAP_DIR_NAME)).unwrap();
            std::fs::create_dir_all(logs.join(zk_log::LOG_DIR_NAME)).unwrap();
            let sync_moved_out = format!("sync {} (moved out)", out.display());
            // The last case fails the rollback's sync too (by its own name).
            // The last fails moving the restored snapshot back out: then nothing old comes back
            // beside it.
            let staged = out.join(STAGING_NAME).join(zk_log::snapshot::SNAP_DIR_NAME);
            let fail = fail
                .replace("|sync", &format!("|{sync_moved_out}"))
                .replace("|back", &format!("|back {}", staged.display()));
            let (steps, ok) = restore_failing_at(&f, &out, &logs, Some(&fail));
            assert!(!ok, "{fail}: {steps:?}");
            let at = |s: String| steps.iter().position(|t| *t == s);
            let moved_out = at(format!("back {}", staged.display())).unwrap_or_else(|| panic!("{steps:?}"));
            let log_back = at(format!("back {}", logs.join(zk_log::LOG_DIR_NAME).display()));
            if fail.contains('|') {
                // Both stay aside: the server refuses there (no log, its asides uncovered), on the
                // restored snapshot or on none.
                assert_eq!(log_back, None, "{steps:?}");
                assert_eq!(out.join("zkrs-snap").exists(), fail.contains("|back"), "{:?}", names(&out));
                assert!(
                    !steps.iter().any(|s| *s == format!("back {}", out.join("zkrs-snap").display())),
                    "{steps:?}"
                );
                assert!(
                    names(&logs).iter().all(|n| n.starts_with("zkrs-log.before-restore-")),
                    "{:?}",
                    names(&logs)
                );
                assert!(unfinished_restore(&out, &logs).is_some(), "{:?}", names(&out));
                continue;
            }
            let log_back = log_back.unwrap_or_else(|| panic!("{steps:?}"));
            assert!(
                moved_out < log_back && steps[moved_out..log_back].contains(&sync_moved_out),
                "{fail}: {steps:?}"
            );
            assert_eq!(names(&out), ["zkrs-snap"], "{fail}");
            assert_eq!(names(&logs), ["zkrs-log"], "{fail}");
        }
    }

    /// Runs [`undo`], recording its steps; with `watch`, calls it before each step (as a kill
    /// there leaves the directories).
    fn undo_steps(
        out: &Path,
        logs: &Path,
        watch: Option<KillWatch>,
    ) -> (Result<String, BackupError>, Vec<String>) {
        INSTALL_STEPS.with(|s| *s.borrow_mut() = (Vec::new(), None));
        KILL_POINTS.with(|k| *k.borrow_mut() = watch);
        let r = undo(out, Some(logs), &mut Vec::new());
        KILL_POINTS.with(|k| *k.borrow_mut() = None);
        (r, INSTALL_STEPS.with(|s| std::mem::take(&mut *s.borrow_mut()).0))
    }

    /// Runs a forced restore of `f`'s archive at zxid 2 into `out` (holding its log), and copies
    /// `out` to `copy` right before the step named `at`: the directory as a restore killed there
    /// leaves it (its staging directory removed, as a later restore does).
    fn killed_at(f: &Fixture, out: &Path, copy: &Path, at: &'static str) {
        let (w_out, w_copy) = (out.to_path_buf(), copy.to_path_buf());
        KILL_POINTS.with(|k| {
            *k.borrow_mut() = Some(Box::new(move |step: &str| {
                if step.starts_with(at) && !w_copy.exists() {
                    let st =
                        std::process::Command::new("cp").arg("-a").arg(&w_out).arg(&w_copy).status().unwrap();
                    assert!(st.success());
                }
            }))
        });
        let target = DirTarget::new(f.archive.clone());
        let r = restore(&target, out, Some(out), Point::Zxid(2), None, true, &mut Vec::new());
        KILL_POINTS.with(|k| *k.borrow_mut() = None);
        r.unwrap();
        assert!(copy.exists(), "no step {at}");
        let _ = std::fs::remove_dir_all(copy.join(STAGING_NAME));
    }

    /// Review 12, finding 1: restore 1 finished with the clock ahead (its moves aside stamped T1,
    /// later than now), the server wrote on; restore 2 (stamp T2 < T1) is killed once it moved
    /// everything aside. `--undo` puts back restore 2's moves (the current data), not restore
    /// 1's (the data from before restore 1), which have the newest stamp; and a server then
    /// starts there (nothing is left uncovered).
    #[test]
    fn undo_after_a_clock_step_back_puts_back_the_stopped_restores_moves() {
        let f = archived_1_to_5();
        let out = f.dir.path().join("out");
        std::fs::create_dir_all(out.join("zkrs-log")).unwrap();
        std::fs::write(out.join("zkrs-log/log.OLD-before-restore-1"), b"old").unwrap();
        let target = DirTarget::new(f.archive.clone());
        restore(&target, &out, Some(&out), Point::Zxid(3), None, true, &mut Vec::new()).unwrap();
        let t1 = restore_finished_stamp(&out).unwrap();
        let ahead = t1 + 10_000_000_000;
        for n in names(&out) {
            if let Some(base) = n.strip_suffix(&format!(".before-restore-{t1}")) {
                std::fs::rename(out.join(&n), out.join(format!("{base}.before-restore-{ahead}"))).unwrap();
            }
        }
        write_finished(&out, ahead, ahead).unwrap();
        std::fs::create_dir_all(out.join("zkrs-log")).unwrap();
        std::fs::write(out.join("zkrs-log/log.0000000000000004"), b"current").unwrap();
        let copy = f.dir.path().join("killed");
        killed_at(&f, &out, &copy, "in zkrs-restored");
        assert!(unfinished_restore(&copy, &copy).is_some(), "{:?}", names(&copy));
        let (r, steps) = undo_steps(&copy, &copy, None);
        let said = r.unwrap_or_else(|e| panic!("{e}: {steps:?}"));
        assert!(
            copy.join("zkrs-log/log.0000000000000004").exists(),
            "{said}: the data from before restore 1 was put back: {:?} / {:?}",
            names(&copy),
            names(&copy.join("zkrs-log"))
        );
        assert!(copy.join("zkrs-snap").is_dir() && copy.join(RESTORE_MARKER).exists(), "{:?}", names(&copy));
        assert_eq!(restore_finished_stamp(&copy), Some(ahead), "{:?}", names(&copy));
        assert!(unfinished_restore(&copy, &copy).is_none(), "{:?}", names(&copy));
        // The same when restore 2 was killed right after it moved only the finished stamp aside:
        // only that comes back (restore 1's result stays, and restore 1 is not undone).
        let copy = f.dir.path().join("killed-early");
        let snaps = names(&out.join("zkrs-snap"));
        killed_at(&f, &out, &copy, "sync");
        let (r, steps) = undo_steps(&copy, &copy, None);
        r.unwrap_or_else(|e| panic!("{e}: {steps:?}"));
        assert_eq!(
            steps.iter().filter(|s| s.starts_with("back ") || s.starts_with("out ")).count(),
            1,
            "{steps:?}"
        );
        assert_eq!(names(&copy.join("zkrs-snap")), snaps);
        assert!(unfinished_restore(&copy, &copy).is_none(), "{:?}", names(&copy));
    }

    /// Review 12, finding 2: with a separate dataLogDir, `--undo` for a restore stopped with its
    /// result in place moves the restored snapshot out and the old snapshots back, and syncs the
    /// data directory, before the old log comes back on the other file system; the finished
    /// stamp last. Killed before any step, it leaves the restored snapshot never beside the old
    /// log, and a state a server refuses (or the old one); run again, it finishes.
    #[test]
    fn undo_syncs_the_restored_snapshots_move_out_before_the_old_log_comes_back() {
        let dir = tempfile::tempdir().unwrap();
        let (out, logs) = (dir.path().join("out"), dir.path().join("logs"));
        let setup = || {
            let _ = std::fs::remove_dir_all(dir.path().join("out"));
            let _ = std::fs::remove_dir_all(dir.path().join("logs"));
            for d in ["zkrs-snap", "zkrs-snap.before-restore-300"] {
                std::fs::create_dir_all(out.join(d)).unwrap();
            }
            std::fs::write(out.join("zkrs-snap/result"), b"").unwrap();
            std::fs::write(out.join("zkrs-snap.before-restore-300/old"), b"").unwrap();
            std::fs::write(
                out.join("zkrs-restore-finished.before-restore-300"),
                "moved_aside_stamp_ms=100\n",
            )
            .unwrap();
            std::fs::create_dir_all(logs.join("zkrs-log.before-restore-300")).unwrap();
            std::fs::write(logs.join("zkrs-log.before-restore-300/log.0000000000000001"), b"").unwrap();
            write_started(&out, 300).unwrap();
        };
        setup();
        let (r, steps) = undo_steps(&out, &logs, None);
        r.unwrap_or_else(|e| panic!("{e}: {steps:?}"));
        let at =
            |s: String| steps.iter().position(|t| *t == s).unwrap_or_else(|| panic!("no {s}: {steps:?}"));
        let snap_out = at(format!("out {}", out.join("zkrs-snap").display()));
        let snap_back = at(format!("back {}", out.join("zkrs-snap.before-restore-300").display()));
        let log_back = at(format!("back {}", logs.join("zkrs-log.before-restore-300").display()));
        let finished = at(format!("back {}", out.join("zkrs-restore-finished.before-restore-300").display()));
        let sync_out = format!("sync {}", out.display());
        assert!(snap_out < snap_back && snap_back < log_back, "{steps:?}");
        assert!(steps[snap_back..log_back].contains(&sync_out), "{steps:?}");
        assert!(steps[log_back..finished].contains(&format!("sync {}", logs.display())), "{steps:?}");
        assert_eq!(steps[finished + 1], sync_out, "{steps:?}");
        assert_eq!(steps.last(), Some(&format!("unrecord {sync_out}")), "{steps:?}");
        assert!(out.join("zkrs-snap/old").exists() && logs.join("zkrs-log/log.0000000000000001").exists());
        assert!(out.join("zkrs-snap.set-aside-300/result").exists(), "{:?}", names(&out));
        assert!(unfinished_restore(&out, &logs).is_none(), "{:?} {:?}", names(&out), names(&logs));
        // Killed before each step: never the restored snapshot beside the old log; the old
        // snapshots without their log are refused; and `--undo` again finishes.
        let steps_taken = steps.len();
        for kill in 0..steps_taken {
            setup();
            let (w_out, w_logs) = (out.clone(), logs.clone());
            let mut n = 0;
            let (r, _) = undo_steps(
                &out,
                &logs,
                Some(Box::new(move |s: &str| {
                    if n == kill {
                        let result = w_out.join("zkrs-snap/result").exists();
                        let old_log = w_logs.join("zkrs-log").exists();
                        assert!(!(result && old_log), "killed before {s}: the result beside the old log");
                        if !old_log {
                            assert!(
                                unfinished_restore(&w_out, &w_logs).is_some(),
                                "killed before {s}: not refused"
                            );
                        }
                        // What a kill leaves: the steps after it are not taken.
                        INSTALL_STEPS.with(|st| st.borrow_mut().1 = Some(String::new()));
                    }
                    n += 1;
                })),
            );
            assert!(r.is_err(), "{kill}");
            // Killed before the last sync, everything is back: nothing is left to do.
            let (r, steps) = undo_steps(&out, &logs, None);
            if let Err(e) = r.map_err(|e| e.to_string()).map(|_| ()) {
                assert!(
                    kill + 1 == steps_taken && e.contains("nothing to put back"),
                    "again after a kill before step {kill}: {e}: {steps:?}"
                );
            }
            assert!(
                out.join("zkrs-snap/old").exists() && logs.join("zkrs-log/log.0000000000000001").exists()
            );
            assert!(unfinished_restore(&out, &logs).is_none(), "{:?} {:?}", names(&out), names(&logs));
        }
    }

    /// Review 12, finding 3: a first-ever forced restore stopped once its marker moved in (or its
    /// result too) is undone with its marker set aside: none is left beside the old data, where
    /// `zkrs-server backup` would take the directory for one restored.
    #[test]
    fn undo_sets_aside_the_stopped_restores_own_marker() {
        let f = archived_1_to_5();
        for at in ["in zkrs-snap", "sync"] {
            let name = at.replace(' ', "-");
            let out = f.dir.path().join(format!("out-{name}"));
            std::fs::create_dir_all(out.join("zkrs-snap")).unwrap();
            std::fs::write(out.join("zkrs-snap/old"), b"").unwrap();
            std::fs::create_dir_all(out.join("zkrs-log")).unwrap();
            let copy = f.dir.path().join(format!("killed-{name}"));
            // "sync" is first met before the result moves in: the second kill is past it.
            let at = if at == "sync" { "finished" } else { at };
            killed_at(&f, &out, &copy, at);
            assert!(copy.join(RESTORE_MARKER).exists(), "{:?}", names(&copy));
            let (r, steps) = undo_steps(&copy, &copy, None);
            r.unwrap_or_else(|e| panic!("{e}: {steps:?}"));
            assert!(!copy.join(RESTORE_MARKER).exists(), "{at}: {:?}", names(&copy));
            assert!(
                copy.join("zkrs-snap/old").exists() && copy.join("zkrs-log").is_dir(),
                "{:?}",
                names(&copy)
            );
            assert!(unfinished_restore(&copy, &copy).is_none(), "{:?}", names(&copy));
        }
    }

    /// `--undo` moves nothing when it cannot tell which restore stopped (two restores' moves
    /// aside uncovered, or a stamp renamed by hand) or nothing stopped, and refuses while a
    /// server holds the directory's lock; moves aside renamed into the server's own `zkrs-log`
    /// are only moved back out.
    #[test]
    fn undo_refuses_when_it_cannot_tell_and_moves_nested_asides_out_only() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        for d in ["zkrs-snap.before-restore-100", "zkrs-log.before-restore-200"] {
            std::fs::create_dir_all(out.join(d)).unwrap();
        }
        let before = names(&out);
        let e = undo(&out, Some(&out), &mut Vec::new()).unwrap_err().to_string();
        assert!(
            e.contains(".before-restore-100, .before-restore-200") && e.contains("cannot be told"),
            "{e}"
        );
        // A damaged record of the restore in flight.
        std::fs::write(out.join(RESTORE_STARTED), "restore_stamp_ms=\n").unwrap();
        let e = undo(&out, Some(&out), &mut Vec::new()).unwrap_err().to_string();
        assert!(e.contains("names no restore"), "{e}");
        std::fs::remove_file(out.join(RESTORE_STARTED)).unwrap();
        assert_eq!(names(&out), before);
        std::fs::rename(out.join("zkrs-log.before-restore-200"), out.join("zkrs-log.before-restore-x"))
            .unwrap();
        let e = undo(&out, Some(&out), &mut Vec::new()).unwrap_err().to_string();
        assert!(e.contains("renamed by hand"), "{e}");
        std::fs::remove_dir(out.join("zkrs-log.before-restore-x")).unwrap();
        std::fs::write(out.join(RESTORE_FINISHED), "moved_aside_stamp_ms=100\n").unwrap();
        let e = undo(&out, Some(&out), &mut Vec::new()).unwrap_err().to_string();
        assert!(e.contains("no restore in flight"), "{e}");
        std::fs::remove_file(out.join(RESTORE_FINISHED)).unwrap();
        // A server holding zkrs-log.
        let held = zk_log::FileStorage::open_dir(out.join("zkrs-log")).unwrap();
        let e = undo(&out, Some(&out), &mut Vec::new()).unwrap_err().to_string();
        assert!(e.contains("a server runs"), "{e}");
        drop(held);
        // A log moved aside renamed into zkrs-log (a plain `mv` onto it).
        std::fs::create_dir_all(out.join("zkrs-log.before-restore-400")).unwrap();
        std::fs::rename(
            out.join("zkrs-log.before-restore-400"),
            out.join("zkrs-log/zkrs-log.before-restore-400"),
        )
        .unwrap();
        assert!(unfinished_restore(&out, &out).unwrap().nested);
        let said = undo(&out, Some(&out), &mut Vec::new()).unwrap();
        assert!(said.contains("start the server again"), "{said}");
        assert!(
            out.join("zkrs-log.before-restore-400").is_dir() && out.join("zkrs-log").is_dir(),
            "{:?}",
            names(&out)
        );
        assert!(
            out.join("zkrs-snap.before-restore-100").is_dir(),
            "only the nested one moved: {:?}",
            names(&out)
        );
        assert!(!unfinished_restore(&out, &out).unwrap().nested);
    }

    /// Review 13, finding 1: the stopped restore is the one its start record names, whatever the
    /// stamps: a finished stamp left aside by an interrupted restore, covering an earlier restore
    /// whose stamp is ahead of the clock, then a restore (clock behind that stamp) killed once it
    /// moved everything aside (none finished was in place, so it moved none aside): `--undo` puts
    /// back the second's moves and the server starts on the data held before it, not empty.
    #[test]
    fn undo_puts_back_the_restore_its_start_record_names() {
        let f = archived_1_to_5();
        let out = f.dir.path().join("out");
        std::fs::create_dir_all(out.join("zkrs-log")).unwrap();
        std::fs::write(out.join("zkrs-log/log.OLD"), b"old").unwrap();
        let target = DirTarget::new(f.archive.clone());
        restore(&target, &out, Some(&out), Point::Zxid(3), None, true, &mut Vec::new()).unwrap();
        assert!(
            !out.join(RESTORE_STARTED).exists(),
            "a finished restore leaves its record: {:?}",
            names(&out)
        );
        let t1 = restore_finished_stamp(&out).unwrap();
        let ahead = t1 + 10_000_000_000;
        for n in names(&out) {
            if let Some(base) = n.strip_suffix(&format!(".before-restore-{t1}")) {
                std::fs::rename(out.join(&n), out.join(format!("{base}.before-restore-{ahead}"))).unwrap();
            }
        }
        write_finished(&out, ahead, ahead).unwrap();
        std::fs::create_dir_all(out.join("zkrs-log")).unwrap();
        std::fs::write(out.join("zkrs-log/log.0000000000000004"), b"current").unwrap();
        // Restore x killed right after it moved the finished stamp aside; the server runs on.
        let c1 = f.dir.path().join("c1");
        killed_at(&f, &out, &c1, "sync");
        assert!(restore_finished_stamp(&c1).is_none(), "{:?}", names(&c1));
        std::thread::sleep(std::time::Duration::from_millis(5));
        // Restore y (clock still behind `ahead`) killed once it moved everything aside.
        let c2 = f.dir.path().join("c2");
        killed_at(&f, &c1, &c2, "in zkrs-restored");
        assert!(unfinished_restore(&c2, &c2).is_some(), "{:?}", names(&c2));
        let (r, steps) = undo_steps(&c2, &c2, None);
        r.unwrap_or_else(|e| panic!("{e}: {steps:?}"));
        // The state before restore y: restore x's leftover (its finished stamp aside) and the
        // current data in place, where a server starts on that data.
        assert!(c2.join("zkrs-log/log.0000000000000004").exists(), "{:?}", names(&c2));
        assert!(c2.join("zkrs-snap").is_dir() && !c2.join(RESTORE_STARTED).exists(), "{:?}", names(&c2));
        // A server start refuses a stopped restore named by its record even when a finished
        // stamp (by the clock) covers its moves aside.
        let c3 = f.dir.path().join("c3");
        killed_at(&f, &out, &c3, "in zkrs-restored");
        write_finished(&c3, u128::MAX, 1).unwrap();
        assert!(unfinished_restore(&c3, &c3).is_some(), "{:?}", names(&c3));
        // A restore whose finished stamp is in place but whose record is left (killed between
        // them) finished: neither refused nor undone.
        let c4 = f.dir.path().join("c4");
        killed_at(&f, &out, &c4, "unrecord");
        assert!(c4.join(RESTORE_STARTED).exists(), "{:?}", names(&c4));
        assert!(unfinished_restore(&c4, &c4).is_none(), "{:?}", names(&c4));
        let e = undo(&c4, Some(&c4), &mut Vec::new()).unwrap_err().to_string();
        assert!(e.contains("finished"), "{e}");
    }

    /// Review 13, finding 3: a forced restore by an older build (main's: no finished stamp, no
    /// start record, a marker without a stamp) that finished: `--undo` refuses rather than set the
    /// restored snapshot aside for the data from before it.
    #[test]
    fn undo_refuses_an_older_builds_restore() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        for d in ["zkrs-snap", "zkrs-snap.before-restore-100", "zkrs-log.before-restore-100"] {
            std::fs::create_dir_all(out.join(d)).unwrap();
        }
        std::fs::write(out.join("zkrs-snap/restored"), b"").unwrap();
        std::fs::write(out.join("zkrs-snap.before-restore-100/old"), b"").unwrap();
        std::fs::write(out.join(RESTORE_MARKER), "zxid=0x3\nrestored_at_ms=1\n").unwrap();
        let before = names(&out);
        let e = undo(&out, Some(&out), &mut Vec::new()).unwrap_err().to_string();
        assert!(e.contains("older build") && e.contains("cannot be told"), "{e}");
        assert_eq!(names(&out), before);
        assert!(out.join("zkrs-snap/restored").exists());
    }

    /// Review 13, finding 4: `--undo` without a log directory, for a data directory holding
    /// snapshots and no log (its log in a separate dataLogDir), refuses: the finished stamp would
    /// come back while that log stays aside.
    #[test]
    fn undo_without_the_log_dir_of_a_separate_log_refuses() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        std::fs::create_dir_all(out.join("zkrs-snap.before-restore-300")).unwrap();
        std::fs::write(out.join("zkrs-restore-finished.before-restore-300"), "moved_aside_stamp_ms=500\n")
            .unwrap();
        write_started(&out, 300).unwrap();
        let before = names(&out);
        let e = undo(&out, None, &mut Vec::new()).unwrap_err().to_string();
        assert!(e.contains("give --data-log-dir"), "{e}");
        assert_eq!(names(&out), before);
        // Given (the same directory, as for a directory without a log): it goes on.
        undo(&out, Some(&out), &mut Vec::new()).unwrap();
        assert!(out.join("zkrs-snap").is_dir() && out.join(RESTORE_FINISHED).exists(), "{:?}", names(&out));
    }

    /// Review 10, note 4: a restore killed right after it moved the finished stamp before it
    /// aside, then run again to its end with the clock behind the stamps of an earlier
    /// restore's moves aside, still covers them: a data directory emptied on purpose after it
    /// starts (its stamp covered only its own moves and the stamp it found in place).
    #[test]
    fn a_finished_restore_covers_every_move_aside_it_leaves() {
        let f = archived_1_to_5();
        let out = f.dir.path().join("out");
        std::fs::create_dir_all(out.join(zk_log::LOG_DIR_NAME)).unwrap();
        let target = DirTarget::new(f.archive.clone());
        restore(&target, &out, Some(&out), Point::Zxid(3), None, true, &mut Vec::new()).unwrap();
        // Restore 1 ran with the clock far ahead.
        let ahead = restore_finished_stamp(&out).unwrap() + 10_000_000_000;
        assert_eq!(names(&out).iter().filter(|n| n.contains(".before-restore-")).count(), 1);
        for n in names(&out).iter().filter(|n| n.contains(".before-restore-")) {
            let (name, _) = n.rsplit_once(".before-restore-").unwrap();
            std::fs::rename(out.join(n), out.join(format!("{name}.before-restore-{ahead}"))).unwrap();
        }
        write_finished(&out, ahead, ahead).unwrap();
        // Restore 2 was killed once it had moved that stamp aside.
        std::fs::rename(out.join(RESTORE_FINISHED), out.join(format!("{RESTORE_FINISHED}.before-restore-1")))
            .unwrap();
        let (steps, ok) = restore_failing_at(&f, &out, &out, None);
        assert!(ok, "{steps:?}");
        assert_eq!(restore_finished_stamp(&out), Some(ahead), "{:?}", names(&out));
        assert!(unfinished_restore(&out, &out).is_none(), "{:?}", names(&out));
    }

    /// A marker without its values is named as damaged, not taken as no marker.
    #[test]
    fn a_damaged_restore_marker_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(RestoreMarker::read(dir.path()).unwrap(), None);
        std::fs::write(dir.path().join(RESTORE_MARKER), "zxid=0x4\n").unwrap();
        let e = RestoreMarker::read(dir.path()).unwrap_err();
        assert!(e.to_string().contains("a restore marker without"), "{e}");
    }

    /// `--force` over a data directory holding snapshots but no log (the server's log is in a
    /// separate dataLogDir) is refused without that dataLogDir, and nothing is moved aside.
    #[test]
    fn force_over_a_data_dir_without_its_log_needs_the_log_dir() {
        let f = archived_1_to_5();
        let target = DirTarget::new(f.archive.clone());
        let out = f.dir.path().join("out");
        let snaps = out.join(zk_log::snapshot::SNAP_DIR_NAME);
        std::fs::create_dir_all(&snaps).unwrap();
        let e = restore(&target, &out, None, Point::Newest, None, true, &mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("give --data-log-dir (or --config"), "{e}");
        assert!(snaps.exists());
        let logs = f.dir.path().join("logs");
        let r = restore(&target, &out, Some(&logs), Point::Newest, None, true, &mut Vec::new()).unwrap();
        assert_eq!(r.zxid, 5);
        // The dataLogDir is the data directory itself: nothing elsewhere to move.
        let r = restore(&target, &out, Some(&out), Point::Zxid(4), None, true, &mut Vec::new()).unwrap();
        assert_eq!(r.zxid, 4);
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
        let r = restore(&target, &f.dir.path().join("out"), None, Point::Time(350), None, false, &mut said)
            .unwrap();
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
        let r = restore(
            &target,
            &f.dir.path().join("out"),
            None,
            Point::Time(1_003),
            None,
            false,
            &mut Vec::new(),
        )
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
