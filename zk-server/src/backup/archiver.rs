//! `zkrs-server backup`: copies what the archive lacks from a server's data directories, once
//! or every `--interval` (`--follow`).
//!
//! The log: the server appends to its newest segment and rolls to a new one only when a segment
//! is full (64 MiB), so waiting for segments to close would leave a quiet server's archive far
//! behind. Instead each pass archives the transactions after the archive's newest one, from
//! whichever segments hold them, as one archived segment (a "piece": a segment header for its
//! first zxid, then the records' frames byte for byte, so it reads like any segment). Of the
//! segment being written, only the records before its last group mark are taken: the log marks
//! a record only once everything before it in the segment is durable (docs/log-format.md, "Sync
//! groups"), so nothing archived can be lost by a power failure on the server and come back as
//! another transaction. The records of the last sync group wait for the next write, or, on a
//! standalone server, for a snapshot of the server's ending in them, which proves them durable
//! (`Archiver::archive_through_snapshot_end`).
//!
//! Durable is not committed on an ensemble member: its log holds proposals a new leader may have
//! it truncate away. Each pass then first asks the server for the zxid it has applied
//! ([`srvr_commit_cap`]) and archives nothing past it. Each piece records the zxid the server's
//! log held right before its first record, as read ([`LogFile::prev_zxid`]), so a restore can
//! tell the archived log whole from one piece to the next even across epochs. Where a pass
//! reads on from where the last one ended, it first checks that the record there is unchanged
//! (a TRUNC or SNAP on a follower rewrites the log).
//!
//! Snapshots: every snapshot under its final name (the server renames a snapshot only once it is
//! complete and synced) that the archive lacks, copied whole.
//!
//! Every file is staged in the staging directory with plain reads (never through a mapping: the
//! server may purge, and cut down, a file while it is read), then read back whole and checked
//! (every record of a piece, every chunk of a snapshot), then installed under its key, and only
//! then named by the manifest. A file that vanished while it was read was purged by the server:
//! it is reported and skipped, and a gap it leaves in the archived log is reported loudly.

use super::manifest::{LogFile, Manifest, SnapFile, LOG_PREFIX, SNAP_PREFIX};
use super::segment::{summarize, SegmentReader, SegmentSummary};
use super::target::{copy_with_crc, ArchiveTarget, CrcReader};
use super::time::format_time_ms;
use super::{io_err, BackupError};
use std::fs::File;
use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;
use zk_log::format::{encode_segment_header, parse_segment_name, SEGMENT_HEADER_BYTES};
use zk_log::snapshot::parse_snapshot_name;
use zk_log::{FileStorage, BASE_FILE, LOG_DIR_NAME};
use zk_tree::snapshot::{ContentParser, ContentRecord};

/// What one pass archived, and how far behind the archive is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PassReport {
    /// Segments archived in this pass.
    pub logs: Vec<String>,
    /// Snapshots archived in this pass.
    pub snapshots: Vec<String>,
    /// The newest zxid seen in the server's log (its open segment included), if any.
    pub newest_on_disk: Option<i64>,
    /// The newest zxid the archived log holds.
    pub newest_archived: Option<i64>,
    /// The server's committed zxid this pass archived up to, when it was asked (`--server`).
    pub committed: Option<i64>,
    /// Where the server's log starts when it holds no transaction: the zxid its state is at (the
    /// base its log was reset to, as by a snapshot from its leader, or the point a restore
    /// marker names).
    pub empty_log_at: Option<i64>,
}

/// Where the record holding the archive's newest zxid sits in a server segment, so the next
/// pass reads that segment on from there, once it has checked the record is still there.
#[derive(Debug, Clone)]
struct TailScan {
    /// The server segment.
    name: String,
    /// Offset of the record's frame in it.
    record_at: u64,
    /// The record's zxid.
    zxid: i64,
    /// The record's payload CRC ([`super::segment::SegmentRecord::payload_crc`]).
    payload_crc: u32,
}

/// What the server's log held right before the record being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Before {
    /// Nothing: the next record is the server's first transaction (its log was never purged or
    /// reset).
    Start,
    /// The record with this zxid.
    Zxid(i64),
    /// Not known: what came before was purged, or the log reset, before it was read.
    Unknown,
}

/// How a file is told unchanged since it was last read. The change time is in it because
/// user space cannot set it, and it moves on every create, rename and link: a copy that keeps
/// the other three (`cp -a`, `rsync -a` of an older copy of the directory, the freed inode
/// reused) is still told apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileIdent {
    inode: u64,
    bytes: u64,
    modified_ns: i64,
    changed_ns: i64,
}

fn file_ident(path: &Path) -> Option<FileIdent> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some(FileIdent {
        inode: m.ino(),
        bytes: m.len(),
        modified_ns: m.mtime().saturating_mul(1_000_000_000).saturating_add(m.mtime_nsec()),
        changed_ns: m.ctime().saturating_mul(1_000_000_000).saturating_add(m.ctime_nsec()),
    })
}

/// A closed server segment read to its end: not read again while it is unchanged.
#[derive(Debug, Clone, Copy)]
struct ReadSegment {
    ident: FileIdent,
    /// Its last record (what precedes the next segment's first).
    last: Before,
}

/// What a finished server snapshot ending past the archived log proves of the open segment
/// ([`Archiver::archive_through_snapshot_end`]).
#[derive(Debug, Clone, Copy)]
struct Proof {
    /// The snapshot's end zxid: the records through it are durable.
    end: i64,
    /// When the snapshot's file was last written (ms since the epoch, this host's clock): it
    /// proves only transactions proposed at or before that time, which it can have applied.
    written_ms: i64,
    /// The inode of the open segment as the pass listed the log: the one read again.
    segment_inode: u64,
}

/// Where a piece may end: its size, summary and last record then.
#[derive(Debug, Clone, Copy)]
struct PieceEnd {
    bytes: u64,
    summary: SegmentSummary,
    /// The last record's offset in the server's segment, zxid and payload CRC.
    last: (u64, i64, u32),
}

/// An archived segment being staged.
struct Piece {
    name: String,
    path: PathBuf,
    file: std::io::BufWriter<File>,
    /// Where it ends so far.
    end: PieceEnd,
    /// Where it ended before the last group-marked record: what is known durable of an open
    /// segment.
    durable: Option<PieceEnd>,
    /// Where it ends at the record a server snapshot ends at, when asked
    /// ([`Archiver::archive_through_snapshot_end`]): what that snapshot proves durable.
    proven: Option<PieceEnd>,
    /// The zxid before its first record, as read from the log ([`LogFile::prev_zxid`]).
    prev_zxid: Option<i64>,
    /// The first piece of a log that was never purged or reset.
    from_start: bool,
}

/// What reading one server segment came to.
struct SegmentPass {
    /// The piece archived from it, if any.
    piece: Option<String>,
    /// Its last record read (what precedes the next segment's first).
    last: Before,
    /// Reading stopped at a record past the server's committed zxid.
    capped: bool,
    /// Read to its end, every record checked.
    whole: bool,
    /// It was gone (purged, or the log reset) when it was opened or read.
    vanished: bool,
}

/// What reading the server's log came to ([`Archiver::read_log`]).
struct LogRead {
    /// The zxid the oldest segment listed starts at.
    first_segment: Option<i64>,
    /// The base marker read (its zxid and the file's identity), when it was the same file
    /// before and after it was read.
    marker: Option<(Option<i64>, Option<FileIdent>)>,
    /// The log changed while it was read: a segment listed was gone, or the marker was replaced.
    changed: bool,
}

/// Asks the server for its committed zxid ([`Archiver::set_commit_cap`]).
pub type CommitCap = Box<dyn FnMut() -> Result<i64, BackupError>>;

/// Archives one server's data directories into one archive. Holds the staging directory's
/// lock, so two archivers never write one archive.
pub struct Archiver {
    target: Box<dyn ArchiveTarget>,
    log_dir: PathBuf,
    snap_dir: PathBuf,
    staging: PathBuf,
    staging_storage: FileStorage,
    manifest: Manifest,
    tail: Option<TailScan>,
    /// Closed server segments read to their end, by name.
    read_segments: std::collections::HashMap<String, ReadSegment>,
    /// The newest zxid the server's log holds, as this pass has read it.
    newest_on_disk: Option<i64>,
    /// Where the data directory's own myid file is, for the `--server` identity check.
    data_dir: PathBuf,
    commit_cap: Option<CommitCap>,
    /// The manifest of a write that failed, as far as this backup knows (it may have landed).
    attempted: Option<Manifest>,
    /// Another backup was found writing the archive, or the data directory was restored at or
    /// below the archive's newest zxid: no later pass can succeed.
    contended: bool,
    /// The point of the restore marker in the data directory, once this archive may go on from
    /// it ([`Self::check_restore_marker`]).
    restored_to: Option<i64>,
    /// The base zxid the server's log marker ([`BASE_FILE`]) records, as read by this pass.
    log_marker: Option<i64>,
    /// This pass found the record the archive ended with as the pass began in the server's
    /// log, the same transaction (by payload CRC), so the server's log is the archive's
    /// history up to there.
    matched_newest: bool,
    /// The log's base marker (its zxid and the file's identity) as a pass of this backup that
    /// succeeded read it. A marker is only ever replaced whole (a new file), so one unchanged
    /// since then is no reset since then: a stale marker below the archive (a follower's old
    /// SNAP, a restore) rather than a new one.
    marker_seen: Option<(Option<i64>, Option<FileIdent>)>,
    /// This pass read the same marker as [`Self::marker_seen`].
    marker_unchanged: bool,
    /// The base of the server's log as this pass listed it ([`log_base`]): the zxid whose state
    /// the log goes on from. A snapshot ending before it is not archived: the pass cannot tie
    /// it to the log it read.
    log_base: i64,
    /// From where the server's log, as this pass listed it, is shown to be the archive's
    /// history up to the archive's newest zxid as the pass began ([`Self::log_base`]): set when
    /// the pass matched the archive's newest record in it, or the archive had no log. A snapshot
    /// ending at or below that newest zxid is archived only when it ends at or after this zxid.
    log_proven_from: Option<i64>,
    /// The identity of the log's base marker file as this pass listed the log: a snapshot is
    /// archived only while it is the same (a reset or restore during the pass replaces it).
    marker_listed: Option<FileIdent>,
    /// The newest zxid the archive held anything of as this pass began, snapshot ends
    /// included ([`Manifest::newest_zxid`]): a piece records the zxid before its first as its
    /// predecessor from zxid order alone only past it, where no snapshot archived before this
    /// pass can end.
    held_before: Option<i64>,
    /// The server's snapshots already archived under their name and compared with the archived
    /// one (size and CRC-32), by name: neither is read again while it and the archived one are
    /// unchanged. Kept across runs in the staging directory ([`SAME_NAMED_FILE`]), so a one-shot
    /// backup run from cron does not read every retained snapshot again each time.
    same_named: std::collections::HashMap<String, SameNamed>,
    /// [`Self::same_named`] as [`SAME_NAMED_FILE`] holds it.
    same_named_saved: std::collections::HashMap<String, SameNamed>,
    /// The log's base marker names a zxid whose snapshot the archive holds, and the server's
    /// snapshot under that name is another file than the archived one: the log goes on from
    /// another state than the archived one there, so the piece after the marker records no
    /// predecessor (a gap).
    marker_state_differs: bool,
    /// The server's open segment as this pass listed the log (its name and inode), and what its
    /// log held before the segment's first record, as read by this pass: what
    /// [`Self::archive_through_snapshot_end`] reads again (the same file only).
    open_listed: Option<(String, u64, Before)>,
    /// How many times [`Self::compare_same_named`] read a server snapshot, for tests.
    #[cfg(test)]
    same_named_reads: usize,
    /// Called at points of a pass (`"listed"`: the log was listed and its marker read;
    /// `"snapshots"`: the snapshots are about to be listed; `"read again"`: the open segment
    /// was read again through a snapshot's end, nothing of it archived yet), so tests can
    /// change the directories there.
    #[cfg(test)]
    test_hook: Option<TestHook>,
}

/// What [`Archiver::test_hook`] calls.
#[cfg(test)]
type TestHook = Box<dyn FnMut(&str)>;

/// A server snapshot compared with the archived one under its name ([`Archiver::same_named`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SameNamed {
    /// The server's file as it was read.
    ident: FileIdent,
    /// The archived file's size and CRC-32 it was compared with.
    archived: (u64, u32),
    /// Whether they were the same.
    same: bool,
}

/// The file in the staging directory that keeps [`Archiver::same_named`] between runs: a line
/// `name inode bytes mtime_ns ctime_ns archived_bytes archived_crc32 same` per snapshot, then
/// `end`. A file that does not read whole (no `end`, a line that does not parse, more than
/// [`SAME_NAMED_BYTES_MAX`] bytes) is ignored: the snapshots are compared again.
const SAME_NAMED_FILE: &str = "same-named-snapshots";

/// The most bytes of [`SAME_NAMED_FILE`] read.
const SAME_NAMED_BYTES_MAX: u64 = 1 << 20;

fn load_same_named(staging: &Path) -> std::collections::HashMap<String, SameNamed> {
    use std::io::Read;
    let mut bytes = Vec::new();
    let read = File::open(staging.join(SAME_NAMED_FILE))
        .and_then(|f| f.take(SAME_NAMED_BYTES_MAX + 1).read_to_end(&mut bytes));
    if read.is_err() || bytes.len() as u64 > SAME_NAMED_BYTES_MAX {
        return Default::default();
    }
    let text = String::from_utf8_lossy(&bytes);
    let mut lines: Vec<&str> = text.lines().collect();
    if lines.pop() != Some("end") {
        return Default::default();
    }
    let parse = |l: &str| -> Option<(String, SameNamed)> {
        let f: Vec<&str> = l.split(' ').collect();
        let [name, ino, bytes, m, c, ab, ac, same] = f[..] else { return None };
        parse_snapshot_name(name)?;
        let ident = FileIdent {
            inode: ino.parse().ok()?,
            bytes: bytes.parse().ok()?,
            modified_ns: m.parse().ok()?,
            changed_ns: c.parse().ok()?,
        };
        let same = match same {
            "1" => true,
            "0" => false,
            _ => return None,
        };
        Some((name.to_string(), SameNamed { ident, archived: (ab.parse().ok()?, ac.parse().ok()?), same }))
    };
    lines.into_iter().map(parse).collect::<Option<_>>().unwrap_or_default()
}

/// Writes [`SAME_NAMED_FILE`] (under a temporary name, then renamed). A failure is not an
/// error: the next run compares again.
fn save_same_named(staging: &Path, same_named: &std::collections::HashMap<String, SameNamed>) {
    let mut text = String::new();
    for (name, s) in same_named {
        let i = s.ident;
        text.push_str(&format!(
            "{name} {} {} {} {} {} {} {}\n",
            i.inode,
            i.bytes,
            i.modified_ns,
            i.changed_ns,
            s.archived.0,
            s.archived.1,
            u8::from(s.same)
        ));
    }
    text.push_str("end\n");
    let (p, tmp) = (staging.join(SAME_NAMED_FILE), staging.join(format!("{SAME_NAMED_FILE}.tmp")));
    if std::fs::write(&tmp, text).and_then(|_| std::fs::rename(&tmp, &p)).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

fn list_named(dir: &Path, parse: fn(&str) -> Option<i64>) -> Result<Vec<(i64, String)>, BackupError> {
    let mut v = Vec::new();
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(v),
        Err(e) => return Err(io_err(dir)(e)),
    };
    for e in rd {
        let e = e.map_err(io_err(dir))?;
        if let Some(name) = e.file_name().to_str() {
            if let Some(z) = parse(name) {
                v.push((z, name.to_string()));
            }
        }
    }
    v.sort();
    Ok(v)
}

/// Makes `dir` (the staging directory, which for an S3 archive is under the system's
/// temporary directory, writable by every user) a directory of this user's that no other user
/// can read or write: created with mode 0700; an existing one must be a real directory (not a
/// link) owned by this user (told by a file created in it), and loses any group or other
/// permission.
///
/// Errors: [`BackupError::Refused`] when it is a link, not a directory, or another user's;
/// [`BackupError::Io`].
fn private_dir(dir: &Path) -> Result<(), BackupError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).map_err(io_err(parent))?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io_err(dir)(e)),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(io_err(dir))?;
    if !meta.file_type().is_dir() {
        return Err(BackupError::Refused(format!(
            "{}: the staging directory is a link or not a directory; remove it",
            dir.display()
        )));
    }
    let probe = dir.join(".owner-probe");
    let mine = std::fs::File::create(&probe).and_then(|f| f.metadata()).map_err(io_err(&probe))?.uid();
    let _ = std::fs::remove_file(&probe);
    if meta.uid() != mine {
        return Err(BackupError::Refused(format!(
            "{}: the staging directory belongs to another user (uid {}); remove it, or run the backup as \
             that user",
            dir.display(),
            meta.uid()
        )));
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io_err(dir))?;
    }
    Ok(())
}

/// A zxid for messages: hex, as the server's logs show them.
fn hex(z: i64) -> String {
    format!("{z:#x}")
}

/// What the server's log held before its oldest segment, which starts at zxid `first`, given
/// whether it has a base marker ([`BASE_FILE`]). A marker's absence alone proves nothing: a
/// purge whose first kept segment does not follow zxid 0 (always so within epoch 0, so on
/// every standalone server) writes none, the log taking the zxid before that segment as its
/// base. So without a marker the log goes back to the server's first transaction only when
/// `first` is the first transaction of an epoch (a leader numbers an epoch's from 1), as the
/// server's first is. With a marker (the log was purged or reset, or started from a snapshot:
/// a SNAP, a restore) whose zxid `first` follows, the log holds that zxid as what came before
/// `first` ([`zk_log::format::zxid_follows`], as the log itself takes its base), so a piece
/// starting there records it and continues the snapshot at that point; anything else is
/// unknown, and a piece starting there is a gap (a restore does not chain across it).
fn log_begins(marker: Option<i64>, first: i64) -> Before {
    match marker {
        None if first > 0 && first & 0xffff_ffff == 1 => Before::Start,
        Some(m) if first > m && zk_log::format::zxid_follows(m, first) => Before::Zxid(m),
        _ => Before::Unknown,
    }
}

/// The base of a log whose oldest segment starts at `first` (None: it has none) given its base
/// marker: the zxid whose state it goes on from, as the log itself takes it (zk-log's
/// `base_of`): the marker's when `first` follows it ([`log_begins`]), 0 for a log from the
/// server's first transaction, else the zxid before `first` (the log was purged up to there).
fn log_base(marker: Option<i64>, first: Option<i64>) -> i64 {
    match first {
        None => marker.unwrap_or(0),
        Some(f) => match log_begins(marker, f) {
            Before::Zxid(m) => m,
            Before::Start => 0,
            Before::Unknown => f.saturating_sub(1),
        },
    }
}

/// How many transactions lie between two zxids, when both are in one epoch.
pub fn txns_between(older: i64, newer: i64) -> Option<i64> {
    (older >> 32 == newer >> 32).then(|| (newer - older).max(0))
}

/// Who writes an archive, as [`ArchiveLock::take`] records it in the staging directory for a
/// second writer's refusal to name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchiveWriter {
    /// `zkrs-server backup`.
    Tool,
    /// A running server archiving by itself (`zkrs.backup.to`).
    Server,
}

/// The file in the staging directory that names the archive's writer: `kind=tool` or
/// `kind=server`, `pid=N`, `data_dir=PATH`, a line each.
const WRITER_FILE: &str = "writer";

/// The most bytes of [`WRITER_FILE`] read.
const WRITER_BYTES_MAX: u64 = 4096;

/// The archive's staging directory, locked: while it is held, no other archiver (on this host)
/// writes the archive. Dropping it lets go.
pub struct ArchiveLock {
    target: Box<dyn ArchiveTarget>,
    staging: PathBuf,
    staging_storage: FileStorage,
}

impl ArchiveLock {
    /// Takes the lock of `target`'s staging directory (made private to this user, created if
    /// need be) for `writer`, archiving the server whose dataDir is `data_dir`, and removes the
    /// copies a stopped archiver left there (they are made again).
    ///
    /// Errors: [`BackupError::Refused`] when another archiver holds it, naming that writer
    /// (`zkrs-server backup`, or a server archiving by itself), its process and the data
    /// directory it backs up, as the staging directory records them; or when the staging
    /// directory is a link or another user's; [`BackupError::Io`].
    pub fn take(
        target: Box<dyn ArchiveTarget>,
        writer: ArchiveWriter,
        data_dir: &Path,
    ) -> Result<ArchiveLock, BackupError> {
        let staging = target.staging_dir();
        private_dir(&staging)?;
        let staging_storage = FileStorage::open_dir(&staging).map_err(|e| {
            if e.kind() == std::io::ErrorKind::WouldBlock {
                BackupError::Refused(format!(
                    "{}: {}; an archive takes one writer: stop the other one, or give this one another \
                     archive",
                    staging.display(),
                    other_writer(&staging)
                ))
            } else {
                io_err(&staging)(e)
            }
        })?;
        // Copies a stopped archiver left behind are of no use: they are made again.
        for e in std::fs::read_dir(&staging).map_err(io_err(&staging))?.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if parse_segment_name(&name).is_some() || parse_snapshot_name(&name).is_some() {
                std::fs::remove_file(e.path()).map_err(io_err(&e.path()))?;
            }
        }
        let kind = match writer {
            ArchiveWriter::Tool => "tool",
            ArchiveWriter::Server => "server",
        };
        let note = format!("kind={kind}\npid={}\ndata_dir={}\n", std::process::id(), data_dir.display());
        // Only for a second writer's refusal to name this one: a failure changes nothing else.
        let _ = std::fs::write(staging.join(WRITER_FILE), note);
        Ok(ArchiveLock { target, staging, staging_storage })
    }

    /// The archive's manifest (a new archive's empty one).
    ///
    /// Errors: it cannot be read, or is damaged.
    pub fn read_manifest(&self) -> Result<Manifest, BackupError> {
        Ok(self.target.read_manifest()?.unwrap_or_default())
    }

    /// Where the archive is (its path or URL).
    pub fn describe(&self) -> String {
        self.target.describe()
    }
}

/// Who holds the staging directory `staging`, as its [`WRITER_FILE`] says, for a refusal.
fn other_writer(staging: &Path) -> String {
    use std::io::Read;
    let mut text = String::new();
    if let Ok(f) = File::open(staging.join(WRITER_FILE)) {
        let _ = f.take(WRITER_BYTES_MAX).read_to_string(&mut text);
    }
    let field = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(k).and_then(|r| r.strip_prefix('=')))
            .map(|v| v.chars().filter(|c| !c.is_control()).collect::<String>())
    };
    let whose = match (field("pid"), field("data_dir")) {
        (Some(p), Some(d)) => format!(" (pid {p}, backing up {d})"),
        _ => String::new(),
    };
    match field("kind").as_deref() {
        Some("tool") => format!("another `zkrs-server backup` is writing to this archive{whose}"),
        Some("server") => format!(
            "a zkrs server archiving by itself (its zoo.cfg sets zkrs.backup.to) is writing to this archive{whose}"
        ),
        _ => "another `zkrs-server backup`, or a zkrs server archiving by itself (zkrs.backup.to), is \
              writing to this archive"
            .to_string(),
    }
}

impl Archiver {
    /// Opens the archive `target` for the server whose dataDir is `data_dir` and dataLogDir
    /// `data_log_dir` (the same directory when the server has no separate dataLogDir), as
    /// `zkrs-server backup` does: [`ArchiveLock::take`], then the manifest.
    ///
    /// Errors: another archiver holds the archive's staging directory; the manifest is
    /// damaged or cannot be read; a directory cannot be created.
    pub fn open(
        target: Box<dyn ArchiveTarget>,
        data_dir: &Path,
        data_log_dir: &Path,
    ) -> Result<Self, BackupError> {
        let lock = ArchiveLock::take(target, ArchiveWriter::Tool, data_dir)?;
        let manifest = lock.read_manifest()?;
        Ok(Self::from_lock(lock, manifest, data_dir, data_log_dir))
    }

    /// The archiver of the archive `lock` holds, whose manifest is `manifest` (as
    /// [`ArchiveLock::read_manifest`] read it), for the server whose dataDir is `data_dir` and
    /// dataLogDir `data_log_dir`.
    pub fn from_lock(lock: ArchiveLock, manifest: Manifest, data_dir: &Path, data_log_dir: &Path) -> Self {
        let ArchiveLock { target, staging, staging_storage } = lock;
        let same_named = load_same_named(&staging);
        Archiver {
            target,
            log_dir: data_log_dir.join(LOG_DIR_NAME),
            snap_dir: data_dir.join(zk_log::snapshot::SNAP_DIR_NAME),
            staging,
            staging_storage,
            manifest,
            tail: None,
            read_segments: std::collections::HashMap::new(),
            newest_on_disk: None,
            data_dir: data_dir.to_path_buf(),
            commit_cap: None,
            attempted: None,
            contended: false,
            restored_to: None,
            log_marker: None,
            matched_newest: false,
            marker_seen: None,
            marker_unchanged: false,
            log_base: 0,
            log_proven_from: None,
            marker_listed: None,
            held_before: None,
            same_named_saved: same_named.clone(),
            same_named,
            marker_state_differs: false,
            open_listed: None,
            #[cfg(test)]
            test_hook: None,
            #[cfg(test)]
            same_named_reads: 0,
        }
    }

    /// Has every pass first ask `cap` for the server's committed zxid and archive no
    /// transaction past it. An ensemble member's log holds proposals that are durable but not
    /// committed, which a new leader may have it truncate away (Zab's TRUNC): archived, they
    /// would restore as writes that never happened. Without a cap, a pass refuses an ensemble
    /// member's directories.
    pub fn set_commit_cap(&mut self, cap: CommitCap) {
        self.commit_cap = Some(cap);
    }

    /// Whether the directories are an ensemble member's: its snapshot directory holds the
    /// epochs it has accepted and acknowledged (a standalone server keeps none).
    fn is_ensemble_member(&self) -> bool {
        [zk_log::ACCEPTED_EPOCH_FILE, zk_log::CURRENT_EPOCH_FILE]
            .iter()
            .any(|f| self.snap_dir.join(f).exists())
    }

    /// Whether no pass can add to the archive any more: its manifest is full (it would exceed
    /// [`super::manifest::FILES_MAX`] files or [`super::manifest::MANIFEST_BYTES_MAX`] bytes),
    /// marks transactions the server's log lost ([`Manifest::rewritten_after`]), another backup
    /// writes it, or the data directory was restored below its newest zxid. A new archive must
    /// be started.
    pub fn closed(&self) -> bool {
        self.contended
            || self.manifest.rewritten_after.is_some()
            || self.manifest.logs.len() + self.manifest.snapshots.len() >= super::manifest::FILES_MAX
            || self.manifest.to_json_bounded().is_err()
    }

    /// The manifest as last written.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Copies `src` into the staging directory as `name`; None when the server removed it
    /// first.
    fn stage(&self, src: &Path, name: &str) -> Result<Option<(PathBuf, u64, u32)>, BackupError> {
        let mut f = match File::open(src) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(src)(e)),
        };
        let dest = self.staging.join(name);
        let mut out = File::create(&dest).map_err(io_err(&dest))?;
        let (n, crc) = copy_with_crc(&mut f, &mut out).map_err(io_err(src))?;
        Ok(Some((dest, n, crc)))
    }

    fn discard(&self, staged: &Path) {
        let _ = std::fs::remove_file(staged);
    }

    /// Writes the manifest, one generation on, once it has checked that the archive's is still
    /// the one this archiver last read or wrote: another writer (a `backup` on another machine
    /// writing the same S3 prefix, which the staging lock cannot see) would otherwise lose its
    /// files from the manifest, or this one its. The check and the write are two requests, so
    /// two writers at the same moment can still pass it; it catches any that write apart.
    fn commit_manifest(&mut self) -> Result<(), BackupError> {
        let stored = self.target.read_manifest()?;
        let theirs = stored.as_ref().map_or(0, |m| m.generation);
        if theirs != self.manifest.generation {
            // A write of ours that failed as far as we know may still have landed (an answer
            // lost after the store took it): the archive then holds exactly what we wrote.
            match (&self.attempted, &stored) {
                (Some(ours), Some(stored)) if ours == stored => self.manifest.generation = theirs,
                _ => {
                    self.contended = true;
                    return Err(BackupError::Refused(format!(
                        "{}: the manifest is at generation {theirs}, not the {} this backup last wrote \
                         or read: another `zkrs-server backup` writes this archive; stop one of them \
                         (each archive takes one backup)",
                        self.target.describe(),
                        self.manifest.generation
                    )));
                }
            }
        }
        // The generation moves on only once the write has succeeded: a write that failed (a
        // store's passing error) leaves the next pass to try again from the same one.
        let mut next = self.manifest.clone();
        next.generation += 1;
        self.attempted = Some(next.clone());
        self.target.write_manifest(&next)?;
        self.manifest.generation = next.generation;
        self.attempted = None;
        Ok(())
    }

    /// Refuses to go on when the data directory was restored (`zkrs-server restore` left its
    /// [`super::restore::RESTORE_MARKER`]) to a point at or below what the archive holds, unless
    /// this archive recorded going on from that very restore ([`Manifest::after_restore`]). The
    /// server's history after the point is a new one, and its transactions under zxids the
    /// archive already holds would be taken as archived (the old ones). A restore at the
    /// archive's newest point is refused too: it may have kept only a subtree, or come from
    /// another archive, and its snapshot would then be archived as this history's state at that
    /// zxid (the marker does not prove otherwise, so no restore at or below the newest zxid is
    /// trusted). An archive that is empty, or whose newest zxid is below the point (the restore
    /// came from elsewhere), goes on, and the manifest names the restore, so the archive, grown
    /// past the point, is not refused for it later.
    fn check_restore_marker(&mut self) -> Result<(), BackupError> {
        self.restored_to = None;
        let Some(m) = super::restore::RestoreMarker::read(&self.data_dir)? else {
            return Ok(());
        };
        let id = m.id();
        if self.manifest.after_restore.as_deref() == Some(id.as_str()) {
            self.restored_to = Some(m.zxid);
            return Ok(());
        }
        if let Some(newest) = self.manifest.newest_zxid().filter(|n| *n >= m.zxid) {
            self.contended = true;
            return Err(BackupError::Refused(format!(
                "{} was restored (zkrs-server restore, {}) to zxid {}, at or below this archive's newest, {}: \
                 the server's history goes on from {} with new transactions (and the restored state may be \
                 a subtree's, or another archive's), which this archive, holding the old ones, cannot take; \
                 start a new archive (another --to) for the restored server (this one still restores the \
                 history it holds)",
                self.data_dir.display(),
                format_time_ms(m.at_ms),
                hex(m.zxid),
                hex(newest),
                hex(m.zxid)
            )));
        }
        // Written with the next change to the manifest, before any transaction past the point.
        self.manifest.after_restore = Some(id);
        self.restored_to = Some(m.zxid);
        Ok(())
    }

    /// Refuses a pass whose read of the server's log ended behind the archive's newest zxid:
    /// the log was reset, or the data directory replaced, below the archive without a restore
    /// marker (a restore's `zkrs-snap` copied in by hand, an import, a seeded snapshot). The
    /// server then writes a new history under zxids the archive holds, and its snapshots are
    /// that history's: archived, a restore of an old point could start from one and mix the two.
    /// Nothing is archived (no transaction, no snapshot) while it lasts; once the new history
    /// reaches an archived piece's end, the pass finds the record there changed and closes the
    /// archive ([`Manifest::rewritten_after`]). `first_segment`: the zxid the oldest server
    /// segment starts at. Returns where an empty log's state is.
    fn check_not_behind(&self, first_segment: Option<i64>) -> Result<Option<i64>, BackupError> {
        // Where an empty log (no record read) stands: its base, as the log itself works it out,
        // or the point a restore this archive goes on from names.
        let base = {
            let m = self.log_marker.unwrap_or(0);
            match first_segment {
                Some(f) if !(f > m && zk_log::format::zxid_follows(m, f)) => f - 1,
                _ => m,
            }
        };
        let empty_at = self.newest_on_disk.is_none().then(|| base.max(self.restored_to.unwrap_or(0)));
        let Some(a) = self.manifest.last_log_zxid() else { return Ok(empty_at) };
        let (end, what) = match (self.newest_on_disk, empty_at) {
            (Some(d), _) => (d, format!("the server's log ends at zxid {}", hex(d))),
            (None, e) => {
                let e = e.unwrap_or(0);
                (e, format!("the server's log holds no transaction and starts after zxid {}", hex(e)))
            }
        };
        if end >= a {
            return Ok(empty_at);
        }
        Err(BackupError::Refused(format!(
            "{what}, behind the archive's newest, {}: its log was reset, or its data directory restored \
             or replaced, below the archive without a zkrs-server restore marker, and the server writes a \
             new history under zxids this archive holds; nothing is archived (no transaction, no snapshot) \
             while its log is behind; start a new archive (another --to) for the server (this one still \
             restores the history it holds)",
            hex(a)
        )))
    }

    /// One pass: archives the transactions the archive lacks, from every segment (the open
    /// one up to where its records are known durable), up to the server's committed zxid when
    /// a cap is set ([`Self::set_commit_cap`]), and every finished snapshot it lacks, then
    /// reports the lag. Progress lines go to `out`.
    ///
    /// Each archived segment records the zxid the server's log held before its first record
    /// ([`LogFile::prev_zxid`]); where that is not the archive's newest zxid (the server purged
    /// or reset its log before the archiver read it), the pass warns of the gap, and a restore
    /// refuses points past it. A server segment read in an earlier pass is read again when it
    /// changed (a TRUNC or SNAP on a follower rewrites the log); reading on from where the last
    /// pass ended happens only once the record there is found unchanged.
    ///
    /// Errors: asking for the cap fails; an ensemble member's directories without a cap; a file
    /// that cannot be read or installed; a closed segment or snapshot that is damaged on the
    /// server (named; it is not archived, and no later transaction is either, so the archived
    /// log never skips it unnoticed); the server's log holding another transaction than the
    /// archived one under the archive's newest zxid; the server's log ending behind the archive's
    /// newest zxid (nothing is archived then, no snapshot either, and the archive stays open, so
    /// `--follow` reports it at every pass); the data directory restored at or below the
    /// archive's newest zxid.
    pub fn pass(&mut self, out: &mut dyn Write) -> Result<PassReport, BackupError> {
        if let Some(p) = self.manifest.rewritten_after {
            return Err(rewritten(p, self.manifest.last_log_zxid()));
        }
        self.check_restore_marker()?;
        let member = self.is_ensemble_member();
        let cap = match &mut self.commit_cap {
            Some(ask) => Some(ask()?),
            None if member => {
                return Err(BackupError::Refused(format!(
                    "{} is an ensemble member's: its log holds proposals that are not committed yet (a new \
                     leader may truncate them away), so the backup must ask the server how far it has \
                     committed: give --server HOST:PORT (its client port; `srvr` must be allowed)",
                    self.snap_dir.parent().unwrap_or(&self.snap_dir).display()
                )))
            }
            None => None,
        };
        if let (Some(c), Some(l)) = (cap, self.manifest.last_log_zxid()) {
            if c < l {
                return Err(BackupError::Refused(format!(
                    "the server reports zxid {} committed, below the archive's newest, {}: the archive \
                     holds transactions the server does not have as committed (another server was asked, \
                     or uncommitted ones were archived); nothing is archived: check --server, or start a \
                     new archive",
                    hex(c),
                    hex(l)
                )));
            }
        }
        let mut report = PassReport { committed: cap, ..PassReport::default() };
        let newest_before = self.manifest.last_log_zxid();
        self.held_before = self.manifest.newest_zxid();
        let mut again = false;
        let (first_segment, marker_read) = loop {
            let read = self.read_log(cap, newest_before, out, &mut report)?;
            match self.check_not_behind(read.first_segment) {
                Ok(empty_at) => {
                    report.empty_log_at = empty_at;
                    break (read.first_segment, read.marker);
                }
                // A log read while it was reset (a follower's SNAP removing every segment listed,
                // a restore in place between its moves) can look behind the archive when it is
                // not: look once more before judging. Nothing was archived (a log behind the
                // archive holds no record past it).
                Err(_) if read.changed && !again => {
                    again = true;
                    let _ = writeln!(
                        out,
                        "backup: the server's log changed while this pass read it (segments removed, or its \
                         base marker replaced): reading it again"
                    );
                    self.check_restore_marker()?;
                }
                // Still behind: a restore in place between its moves, read twice, looks so.
                Err(BackupError::Refused(e)) if again => {
                    return Err(BackupError::Refused(format!(
                        "{e} (the log changed while this pass read it, and read again it is still behind: if a \
                         restore or a reset of the server was under way, run the backup again once it is done \
                         before starting a new archive)"
                    )))
                }
                Err(e) => return Err(e),
            }
        };
        self.log_base = log_base(self.log_marker, first_segment);
        self.log_proven_from = (self.matched_newest || newest_before.is_none()).then_some(self.log_base);
        self.archive_snapshots(cap, member, newest_before, out, &mut report)?;
        self.marker_seen = marker_read;
        report.newest_archived = self.manifest.last_log_zxid();
        // The server's own: below the archive's newest when its log was reset or restored
        // below it (the lag line says so instead of a lag of 0).
        report.newest_on_disk = self.newest_on_disk;
        Ok(report)
    }

    /// Lists the server's log and reads it: archives what the archive lacks of it (see
    /// [`Self::pass`]), noting the newest zxid on disk and whether the archive's newest record
    /// as the pass began (`newest_before`) was found the same in it.
    fn read_log(
        &mut self,
        cap: Option<i64>,
        newest_before: Option<i64>,
        out: &mut dyn Write,
        report: &mut PassReport,
    ) -> Result<LogRead, BackupError> {
        self.newest_on_disk = None;
        self.matched_newest = false;
        self.log_proven_from = None;
        let segments = list_named(&self.log_dir, parse_segment_name)?;
        let marker_file = self.log_dir.join(BASE_FILE);
        let marker_ident = file_ident(&marker_file);
        self.marker_listed = marker_ident;
        self.log_marker = zk_log::read_base_zxid(&self.log_dir).map_err(|e| BackupError::Damaged {
            key: marker_file.display().to_string(),
            why: e.to_string(),
        })?;
        // Read between two looks at the file: the same file both times, or not taken as known.
        let marker_read =
            (marker_ident == file_ident(&marker_file)).then_some((self.log_marker, marker_ident));
        self.marker_unchanged =
            marker_ident.is_some() && marker_read.is_some() && marker_read == self.marker_seen;
        #[cfg(test)]
        if let Some(hook) = &mut self.test_hook {
            hook("listed");
        }
        self.read_segments.retain(|n, _| segments.iter().any(|(_, s)| s == n));
        self.marker_state_differs = false;
        if let Some(m) = self.log_marker.filter(|_| !self.is_ensemble_member()) {
            let name = zk_log::snapshot::snapshot_name(m);
            if let Some(a) = self.manifest.snapshots.iter().find(|s| s.name == name) {
                let (bytes, crc32) = (a.bytes, a.crc32);
                // Not known the same (it cannot be read, or was replaced while it was read) counts
                // as differing: the chain onto the archived snapshot needs it shown the same. One
                // the server no longer has (its retention removed it) was shown the same, or not,
                // when it was compared: that comparison, kept while the marker names it, stands.
                let compared = self.compare_same_named(&name, bytes, crc32, out).or_else(|| {
                    let gone = std::fs::symlink_metadata(self.snap_dir.join(&name))
                        .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound);
                    self.same_named
                        .get(&name)
                        .filter(|c| gone && c.archived == (bytes, crc32))
                        .map(|c| c.same)
                });
                self.marker_state_differs = compared != Some(true);
            }
        }
        let mut before = match segments.first().map(|(first, _)| log_begins(self.log_marker, *first)) {
            // The log goes on from the marker's state, which is not the one archived there.
            Some(Before::Zxid(m)) if self.marker_state_differs && self.log_marker == Some(m) => {
                Before::Unknown
            }
            Some(b) => b,
            None => Before::Unknown,
        };
        let mut vanished = false;
        self.open_listed = None;
        for (i, (first, name)) in segments.iter().enumerate() {
            let open = i + 1 == segments.len();
            let ident = file_ident(&self.log_dir.join(name));
            if let (true, Some(id)) = (open, ident) {
                self.open_listed = Some((name.clone(), id.inode, before));
            }
            if let (false, Some(read), Some(id)) = (open, self.read_segments.get(name), ident) {
                if read.ident == id {
                    // Unchanged since a pass of this backup read it whole, when the archive's
                    // newest record was archived from it or found the same in it.
                    if let (Some(l), Before::Zxid(e)) = (newest_before, read.last) {
                        self.matched_newest |= (*first..=e).contains(&l);
                    }
                    before = read.last;
                    if let Before::Zxid(z) = before {
                        self.newest_on_disk = self.newest_on_disk.max(Some(z));
                    }
                    continue;
                }
            }
            let seen = self.archive_segment(name, open, before, cap, None, out)?;
            vanished |= seen.vanished;
            report.logs.extend(seen.piece);
            before = seen.last;
            if seen.capped {
                // The later segments are not read: their names say how far the log goes at least.
                self.newest_on_disk = self.newest_on_disk.max(segments.last().map(|(z, _)| *z));
                break;
            }
            match ident {
                Some(ident) if seen.whole && !open => {
                    self.read_segments.insert(name.clone(), ReadSegment { ident, last: before });
                }
                _ => {
                    self.read_segments.remove(name);
                }
            }
        }
        Ok(LogRead {
            first_segment: segments.first().map(|(z, _)| *z),
            marker: marker_read,
            changed: vanished || marker_read.is_none() || file_ident(&marker_file) != marker_ident,
        })
    }

    /// Archives the records of segment `name` the archive lacks as one archived segment (a
    /// piece: a segment header for its first zxid, then the records' frames as stored), none
    /// past `cap`. Of the `open` segment only the records before its last group mark are taken:
    /// those are durable (docs/log-format.md, "Sync groups"); the rest waits for the next pass.
    /// `before` is what the log held before the segment's first record. `proof`: what a
    /// finished server snapshot proves ([`Self::archive_through_snapshot_end`]): the open
    /// segment's records through its end are durable too, when the segment is still the file
    /// the pass listed and the log's base marker the one it listed the log under, both looked at
    /// after the read, and none of those records was proposed after the snapshot was written.
    fn archive_segment(
        &mut self,
        name: &str,
        open: bool,
        mut before: Before,
        cap: Option<i64>,
        proof: Option<Proof>,
        out: &mut dyn Write,
    ) -> Result<SegmentPass, BackupError> {
        let src = self.log_dir.join(name);
        let shown = src.display().to_string();
        let purged =
            SegmentPass { piece: None, last: Before::Unknown, capped: false, whole: false, vanished: true };
        let damaged = |d: super::segment::SegmentDamage| BackupError::Damaged {
            key: d.name.clone(),
            why: format!("{} at offset {}", d.why, d.offset),
        };
        use std::os::unix::fs::MetadataExt;
        // Read again for a proof: only the file the pass listed (a log reset by hand since may
        // have put another history's segment under the name).
        let replaced = std::cell::Cell::new(false);
        let open_reader = || -> Result<Option<SegmentReader<BufReader<File>>>, BackupError> {
            match File::open(&src) {
                Ok(f) if proof.is_some_and(|p| !f.metadata().is_ok_and(|m| m.ino() == p.segment_inode)) => {
                    replaced.set(true);
                    Ok(None)
                }
                Ok(f) => SegmentReader::open(&shown, BufReader::new(f)).map(Some).map_err(damaged),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(io_err(&src)(e)),
            }
        };
        let gone = |out: &mut dyn Write| {
            let _ = if replaced.get() {
                writeln!(out, "backup: {name} was replaced since this pass listed the log: not read again")
            } else {
                writeln!(out, "backup: {name} was purged by the server before it could be archived")
            };
        };
        let Some(mut r) = open_reader()? else {
            gone(out);
            return Ok(purged);
        };
        let last = self.manifest.last_log_zxid();
        if let Some(t) = self.tail.clone().filter(|t| t.name == name && Some(t.zxid) == last) {
            if r.resume_after(t.record_at, t.zxid, t.payload_crc).map_err(damaged)? {
                self.matched_newest = true;
                before = Before::Zxid(t.zxid);
                self.newest_on_disk = self.newest_on_disk.max(Some(t.zxid));
            } else {
                let _ = writeln!(
                    out,
                    "backup: {name} no longer holds zxid {} where the last pass left it (the server \
                     truncated, reset or purged its log since): reading it again from its start",
                    hex(t.zxid)
                );
                self.tail = None;
                let Some(again) = open_reader()? else {
                    gone(out);
                    return Ok(purged);
                };
                r = again;
            }
        }
        let mut piece: Option<Piece> = None;
        let (mut capped, mut whole) = (false, true);
        loop {
            let at = r.offset();
            let rec = match r.next_record() {
                Ok(Some(rec)) => rec,
                Ok(None) => break,
                // The open segment ends in a record being written: stop before it.
                Err(_) if open => {
                    whole = false;
                    break;
                }
                Err(d) => {
                    if let Some(p) = piece.take() {
                        self.discard(&p.path);
                    }
                    if !src.exists() {
                        let _ = writeln!(out, "backup: {name} was purged by the server while it was read");
                        return Ok(purged);
                    }
                    return Err(damaged(d));
                }
            };
            let z = rec.header.zxid;
            self.newest_on_disk = self.newest_on_disk.max(Some(z));
            if let Some(l) = last.filter(|l| z <= *l) {
                if let Some(p) = self.piece_end_differs(&rec) {
                    if let Some(piece) = piece.take() {
                        self.discard(&piece.path);
                    }
                    return Err(self.mark_rewritten_under(p, z, l, &shown));
                }
                if z == l {
                    let payload_crc = rec.payload_crc();
                    self.matched_newest |=
                        self.manifest.logs.last().and_then(|p| p.last_payload_crc) == Some(payload_crc);
                    self.tail =
                        Some(TailScan { name: name.to_string(), record_at: at, zxid: z, payload_crc });
                }
                before = Before::Zxid(z);
                continue;
            }
            if cap.is_some_and(|c| z > c) {
                // Not committed yet: it waits for a pass whose cap has moved past it. The rest of
                // the segment is read only for the lag (what the server has on disk).
                capped = true;
                continue;
            }
            let p = match &mut piece {
                Some(p) => {
                    if rec.group_start {
                        p.durable = Some(p.end);
                    }
                    p.end.summary.add(&rec);
                    p
                }
                None => piece.insert(self.start_piece(&rec, before, last, out)?),
            };
            p.file.write_all(&rec.frame).map_err(io_err(&p.path))?;
            p.end.bytes += rec.frame.len() as u64;
            p.end.last = (at, z, rec.payload_crc());
            if let Some(q) = proof.filter(|q| q.end == z) {
                if p.end.summary.max_time_ms <= q.written_ms {
                    p.proven = Some(p.end);
                } else {
                    let _ = writeln!(
                        out,
                        "backup: {name} holds transactions through zxid {} proposed after the snapshot ending there \
                         was written (by the file's time: the snapshot was written within the clock's granularity \
                         of them, or the log was reset by hand below an older snapshot): they wait for a later \
                         write to prove them durable",
                        hex(z)
                    );
                }
            }
            before = Before::Zxid(z);
        }
        let mut seen = SegmentPass { piece: None, last: before, capped, whole, vanished: false };
        let Some(mut p) = piece else { return Ok(seen) };
        if let Some(q) = proof.filter(|_| p.proven.is_some()) {
            #[cfg(test)]
            if let Some(hook) = &mut self.test_hook {
                hook("read again");
            }
            // Looked at after the read too: a reset or restore in place during it replaces the
            // marker, and a segment put in place by hand is another file.
            let marker = file_ident(&self.log_dir.join(BASE_FILE));
            if marker != self.marker_listed || file_ident(&src).map(|i| i.inode) != Some(q.segment_inode) {
                p.proven = None;
                let _ = writeln!(
                    out,
                    "backup: the server's log changed while {name} was read again (its base marker or the \
                     segment replaced): what the snapshot ending at zxid {} proves waits for the next pass",
                    hex(q.end)
                );
            }
        }
        // A closed segment is durable whole; of the open one, what a group mark proved, or a
        // snapshot of the server's (`proven_through`), whichever reaches further, unless the
        // server vouched for every record read: committed, each is in the ensemble's history
        // whatever becomes of this server's copy.
        let end = if open && cap.is_none() {
            match (p.durable, p.proven) {
                (Some(d), Some(q)) => Some(if q.bytes > d.bytes { q } else { d }),
                (d, q) => d.or(q),
            }
        } else {
            Some(p.end)
        };
        seen.piece = self.install_piece(p, end, name, &damaged, out)?;
        Ok(seen)
    }

    /// Whether `rec` is, under the zxid an archived piece ends with, another transaction than
    /// the one archived there (every piece of a version 3 manifest keeps its last record's
    /// payload CRC). When it is, returns the zxid after which the archive no longer matches the
    /// server's history: the end of the piece before (the log is read in zxid order, so every
    /// earlier piece end the log still holds was found the same), or, for the first piece, the
    /// zxid before it.
    fn piece_end_differs(&self, rec: &super::segment::SegmentRecord) -> Option<i64> {
        let z = rec.header.zxid;
        let logs = &self.manifest.logs;
        let i = logs.binary_search_by_key(&z, |l| l.summary.last_zxid).ok()?;
        let crc = logs[i].last_payload_crc?;
        if crc == rec.payload_crc() {
            return None;
        }
        Some(match i.checked_sub(1) {
            Some(p) => logs[p].summary.last_zxid,
            None => logs[i].prev_zxid.unwrap_or(logs[i].summary.first_zxid - 1),
        })
    }

    /// Records in the manifest that the server's log holds another transaction under zxid `z`
    /// than the archived one, so that the archived transactions after `p` up to `l` (the
    /// archive's newest) are not the server's history. Returns the error that stops the pass.
    fn mark_rewritten_under(&mut self, p: i64, z: i64, l: i64, shown: &str) -> BackupError {
        let found = format!(
            "{shown} holds another transaction under zxid {} than the archived one: the server's history \
             was rewritten under the archive (its log was reset, restored in place or truncated past \
             what it had committed)",
            hex(z)
        );
        match self.mark_rewritten(p, l) {
            BackupError::Refused(e) => BackupError::Refused(format!("{found}; {e}")),
            e => e,
        }
    }

    /// Records in the manifest that the server's log no longer holds the archived transactions
    /// after `p` up to `l` (the archive's newest): it holds `p` and then one past `l`, so they
    /// were cut away (a TRUNC: never committed). Returns the error that stops the pass; the
    /// manifest's own write failing is reported in it.
    fn mark_rewritten(&mut self, p: i64, l: i64) -> BackupError {
        self.manifest.rewritten_after = Some(p);
        match self.commit_manifest() {
            Ok(()) => rewritten(p, Some(l)),
            Err(e) => BackupError::Refused(format!(
                "{}; marking it in the manifest failed: {e}",
                rewritten(p, Some(l))
            )),
        }
    }

    /// Starts a piece at `rec`, the first record the archive lacks, `before` being what the
    /// log held before it and `last` the archive's newest zxid. Warns when the piece does not
    /// continue the archived log.
    fn start_piece(
        &mut self,
        rec: &super::segment::SegmentRecord,
        before: Before,
        last: Option<i64>,
        out: &mut dyn Write,
    ) -> Result<Piece, BackupError> {
        let z = rec.header.zxid;
        if let (Before::Zxid(p), Some(l)) = (before, last) {
            if p < l {
                return Err(self.mark_rewritten(p, l));
            }
        }
        let prev_zxid = match before {
            Before::Start => Some(0),
            Before::Zxid(p) => Some(p),
            // The record before was purged, or the log reset: only the next zxid of the same
            // epoch proves nothing lies between, and only when the log was not reset below the
            // archive (a base marker below its newest zxid: the new history's records at the
            // archived pieces' ends may have been purged before a pass could check them). A
            // marker below it that is the same file a successful pass of this backup read is
            // no reset since then (a stale one), so it does not break the chain; one this
            // backup has not seen before (a new process, or a reset) does.
            //
            // Past everything the archive held as the pass began (its log's newest + 1 and every
            // archived snapshot's end), the record before is the zxid before `z` when both are
            // of one epoch (a leader numbers an epoch's transactions one by one, and the log
            // holds them in order): recorded, it lets the snapshot at that zxid, the one the log
            // was purged up to, go on into the piece. It never continues an archived piece, nor
            // a snapshot archived before this pass (none ends there: one of the history before a
            // reset might), so the gap stays one; only a snapshot this pass archives from the
            // server's directory, of the log it read, can end there.
            Before::Unknown => {
                let prior = z.checked_sub(1).filter(|b| b >> 32 == z >> 32);
                match last {
                    Some(l) if prior == Some(l) => last.filter(|l| {
                        *l > 0
                            && (self.log_marker.is_none_or(|b| b >= *l) || self.marker_unchanged)
                            && !(self.marker_state_differs && self.log_marker == Some(*l))
                    }),
                    _ => prior.filter(|b| self.held_before.is_none_or(|h| *b > h)),
                }
            }
        };
        if let Some(l) = last.filter(|l| prev_zxid != Some(*l)) {
            let _ = writeln!(
                out,
                "backup: WARNING: the archived log has a gap: it ends at {} and the server's log goes on \
                 at {} after {} (the server purged or reset its log before the archiver read it); a \
                 restore to a zxid past the gap needs an archived snapshot taken after it",
                hex(l),
                hex(z),
                prev_zxid
                    .map_or("transactions it no longer holds".to_string(), |p| format!("zxid {}", hex(p)))
            );
        }
        let name = zk_log::format::segment_name(z);
        let path = self.staging.join(&name);
        let mut file = std::io::BufWriter::new(File::create(&path).map_err(io_err(&path))?);
        file.write_all(&encode_segment_header(z)).map_err(io_err(&path))?;
        Ok(Piece {
            name,
            path,
            file,
            end: PieceEnd { bytes: SEGMENT_HEADER_BYTES, summary: SegmentSummary::of(rec), last: (0, z, 0) },
            durable: None,
            proven: None,
            prev_zxid,
            from_start: before == Before::Start && last.is_none(),
        })
    }

    /// Cuts the staged piece `p` at `end` (nothing: it is dropped), checks it, installs it and
    /// names it in the manifest. Returns its name when it was archived.
    fn install_piece(
        &mut self,
        p: Piece,
        end: Option<PieceEnd>,
        segment: &str,
        damaged: &dyn Fn(super::segment::SegmentDamage) -> BackupError,
        out: &mut dyn Write,
    ) -> Result<Option<String>, BackupError> {
        let Piece { name: piece_name, path, file, prev_zxid, from_start, .. } = p;
        let Some(end) = end else {
            drop(file);
            self.discard(&path);
            return Ok(None);
        };
        let file = file.into_inner().map_err(|e| io_err(&path)(e.into_error()))?;
        file.set_len(end.bytes).and_then(|_| file.sync_all()).map_err(io_err(&path))?;
        drop(file);
        // Read back what was written, checking every record again, for its size and checksum.
        let mut crc = CrcReader::new(BufReader::new(File::open(&path).map_err(io_err(&path))?));
        let check = summarize(&path.display().to_string(), &mut crc).map_err(damaged)?;
        let (bytes, crc32) = crc.finish().map_err(io_err(&path))?;
        let summary = end.summary;
        if check != summary {
            self.discard(&path);
            return Err(BackupError::Damaged {
                key: path.display().to_string(),
                why: format!("reads back as {check:?}, written as {summary:?}"),
            });
        }
        let key = format!("{LOG_PREFIX}{piece_name}");
        self.target.put_file(&key, &path)?;
        self.manifest.log_from_start |= from_start;
        let last_payload_crc = Some(end.last.2);
        self.manifest.add_log(LogFile {
            name: piece_name.clone(),
            bytes,
            crc32,
            summary,
            prev_zxid,
            last_payload_crc,
            prev_inferred: false,
        });
        self.commit_manifest()?;
        let (record_at, zxid, payload_crc) = end.last;
        self.tail = Some(TailScan { name: segment.to_string(), record_at, zxid, payload_crc });
        let _ = writeln!(
            out,
            "backup: archived {key} (from {segment}): zxid {}..{}, {} txns from {} to {}, {bytes} bytes",
            hex(summary.first_zxid),
            hex(summary.last_zxid),
            summary.records,
            format_time_ms(summary.first_time_ms),
            format_time_ms(summary.last_time_ms)
        );
        Ok(Some(piece_name))
    }

    /// Archives every finished snapshot the archive lacks, but one that ends past `cap` (the
    /// server's committed zxid as the pass began): it may hold transactions that are not
    /// committed, and waits for a pass whose cap has moved past it; and one the pass cannot tie
    /// to the archived log ([`Self::unproven_snapshot`]; `newest_before` is the archive's newest
    /// zxid as the pass began). `member`: the directories are an ensemble member's
    /// ([`SnapFile::member`]).
    fn archive_snapshots(
        &mut self,
        cap: Option<i64>,
        member: bool,
        newest_before: Option<i64>,
        out: &mut dyn Write,
        report: &mut PassReport,
    ) -> Result<(), BackupError> {
        #[cfg(test)]
        if let Some(hook) = &mut self.test_hook {
            hook("snapshots");
        }
        let listed = list_named(&self.snap_dir, parse_snapshot_name)?;
        // The comparison of the snapshot at the log's base marker is kept after the server
        // removed it: [`Self::read_log`] goes on from it.
        let at_marker = self.log_marker.map(zk_log::snapshot::snapshot_name);
        self.same_named.retain(|n, _| listed.iter().any(|(_, s)| s == n) || at_marker.as_ref() == Some(n));
        let result = self.archive_listed_snapshots(listed, cap, member, newest_before, out, report);
        if self.same_named != self.same_named_saved {
            save_same_named(&self.staging, &self.same_named);
            self.same_named_saved = self.same_named.clone();
        }
        result
    }

    /// [`Self::archive_snapshots`] for the snapshots `listed`.
    fn archive_listed_snapshots(
        &mut self,
        listed: Vec<(i64, String)>,
        cap: Option<i64>,
        member: bool,
        newest_before: Option<i64>,
        out: &mut dyn Write,
        report: &mut PassReport,
    ) -> Result<(), BackupError> {
        let marker_file = self.log_dir.join(BASE_FILE);
        for (start, name) in listed {
            if let Some(archived) = self.manifest.snapshots.iter().find(|s| s.name == name) {
                let (bytes, crc32) = (archived.bytes, archived.crc32);
                self.compare_same_named(&name, bytes, crc32, out);
                continue;
            }
            if cap.is_some_and(|c| start > c) {
                continue;
            }
            let src = self.snap_dir.join(&name);
            let ident = file_ident(&src);
            let Some((staged, bytes, crc32)) = self.stage(&src, &name)? else {
                let _ = writeln!(out, "backup: {name} was removed by the server before it could be archived");
                continue;
            };
            match self.check_snapshot(&name) {
                Ok((end, nodes)) => {
                    let key = format!("{SNAP_PREFIX}{name}");
                    let (end_zxid, tree_digest) = match end {
                        Some(e) => (Some(e.zxid), e.digest),
                        None => (None, None),
                    };
                    // Checked before the upload: a snapshot that waits is not put in the archive
                    // (unnamed) at every pass.
                    if let Some(c) = cap.filter(|c| end_zxid.is_some_and(|e| e > *c)) {
                        self.discard(&staged);
                        let _ = writeln!(
                            out,
                            "backup: {name} ends past the committed zxid {}: it waits for a later pass",
                            hex(c)
                        );
                        continue;
                    }
                    if let Some(why) = end_zxid.and_then(|e| self.unproven_snapshot(start, e, newest_before))
                    {
                        self.discard(&staged);
                        let _ = writeln!(out, "backup: WARNING: {name} is not archived: {why}");
                        continue;
                    }
                    // Without a cap, the records through its end, read in the open segment, are
                    // archived first when they are there.
                    if let (Some(e), None) = (end_zxid.filter(|e| self.ahead_of_archived_log(*e)), cap) {
                        if file_ident(&marker_file) == self.marker_listed {
                            let written_ms = ident.map(|i| i.modified_ns.div_euclid(1_000_000));
                            self.archive_through_snapshot_end(e, written_ms, out, report)?;
                        }
                    }
                    if let Some(e) = end_zxid.filter(|e| self.ahead_of_archived_log(*e)) {
                        self.discard(&staged);
                        let _ = writeln!(
                            out,
                            "backup: {name} ends at zxid {}, past the archived log's newest ({}): it waits for a \
                             pass that archives the transactions through its end",
                            hex(e),
                            self.manifest.last_log_zxid().map_or("none".into(), hex)
                        );
                        continue;
                    }
                    // Looked at after the copy: a reset or restore of the log since it was listed
                    // (its marker is replaced) may have put another history's snapshot here,
                    // which the checks above, made against the log as listed, cannot tell.
                    if file_ident(&marker_file) != self.marker_listed {
                        self.discard(&staged);
                        let _ = writeln!(
                            out,
                            "backup: {name} waits for the next pass: the server's log was reset during this \
                             one (its base marker was replaced)"
                        );
                        continue;
                    }
                    self.target.put_file(&key, &staged)?;
                    self.manifest.add_snapshot(SnapFile {
                        name: name.clone(),
                        bytes,
                        crc32,
                        start_zxid: start,
                        end_zxid,
                        tree_digest,
                        nodes,
                        member,
                    });
                    self.commit_manifest()?;
                    let _ = writeln!(
                        out,
                        "backup: archived {key}: start zxid {}, end zxid {}, {nodes} nodes, {bytes} bytes{}",
                        hex(start),
                        end_zxid.map_or("not recorded".into(), hex),
                        if tree_digest.is_some() { ", tree digest recorded" } else { "" }
                    );
                    // What was copied is the server's file while it is unchanged since: the same
                    // as the archived one, so no later pass reads it to compare.
                    if let Some(ident) = ident.filter(|i| file_ident(&src) == Some(*i)) {
                        let archived = (bytes, crc32);
                        self.same_named.insert(name.clone(), SameNamed { ident, archived, same: true });
                    }
                    report.snapshots.push(name);
                }
                Err(e) => {
                    self.discard(&staged);
                    if !src.exists() {
                        let _ = writeln!(out, "backup: {name} was removed by the server while it was copied");
                        continue;
                    }
                    return Err(BackupError::Damaged { key: src.display().to_string(), why: e });
                }
            }
        }

        Ok(())
    }

    /// Compares the server's snapshot `name`, which the archive holds under that name, with the
    /// archived one (`bytes`, `crc32`), and warns once when they differ: the server wrote
    /// another file under the name since (after a reset below the archive, one of another
    /// history; or the same state written again: received from the leader, or under another
    /// compression). The archive keeps the file it holds, and nothing the pass archives is
    /// chained onto it for being at the same zxid ([`Self::start_piece`] records a predecessor
    /// from zxid order only past every archived end; and a piece after the log's base marker
    /// records none when the snapshot at the marker differs, [`Self::marker_state_differs`]).
    /// A file unchanged since it was compared with the same archived file is not read again
    /// ([`Self::same_named`]). Returns whether they are the same (None: not known: the file is
    /// gone, was replaced while it was read, or cannot be read, which is warned of and does not
    /// stop the pass: it decides nothing else, and an old snapshot the server no longer reads,
    /// on a bad sector, must not keep every newer one out of the archive).
    fn compare_same_named(
        &mut self,
        name: &str,
        bytes: u64,
        crc32: u32,
        out: &mut dyn Write,
    ) -> Option<bool> {
        let src = self.snap_dir.join(name);
        let ident = file_ident(&src)?;
        if let Some(c) =
            self.same_named.get(name).filter(|c| c.ident == ident && c.archived == (bytes, crc32))
        {
            return Some(c.same);
        }
        #[cfg(test)]
        {
            self.same_named_reads += 1;
        }
        let read = match File::open(&src) {
            Ok(mut f) => copy_with_crc(&mut f, &mut std::io::sink()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => Err(e),
        };
        let same = match read {
            Ok(read) => ident.bytes == bytes && read == (bytes, crc32),
            Err(e) => {
                let _ = writeln!(
                    out,
                    "backup: WARNING: {} cannot be read to compare it with the archived {name}: {e}; the pass goes \
                     on without it (it is archived already)",
                    src.display()
                );
                return None;
            }
        };
        // Looked at again after the read: a file replaced meanwhile is compared at the next pass.
        if file_ident(&src) != Some(ident) {
            return None;
        }
        if !same {
            let _ = writeln!(
                out,
                "backup: WARNING: {name} on the server ({} bytes) is not the archived {name} ({bytes} bytes, CRC-32 \
                 {crc32:#010x}): \
                 the server wrote another snapshot under that name since it was archived (after a reset or \
                 restore of the server below the archive it is of another history; it may also be the same \
                 state written again); the archive keeps the one it holds and chains nothing onto it for \
                 its name: if the server's history was reset, start a new archive",
                ident.bytes
            );
        }
        self.same_named.insert(name.to_string(), SameNamed { ident, archived: (bytes, crc32), same });
        Some(same)
    }

    /// Why a snapshot starting at `start` and exact at `end` may be of another history than the
    /// archived log holds at `end` (None: it is not). `newest_before` is the archive's newest
    /// zxid as the pass began.
    ///
    /// - One whose start is at or below the last zxid before the archived log's newest gap is
    ///   not archived: across a gap the archive cannot tell one history from another (and a
    ///   restore from it to a point past the gap would have to cross it).
    /// - One ending at or below `newest_before` is archived only when this pass found the
    ///   server's log, from at or before `end`, to be the archive's history
    ///   ([`Self::log_proven_from`]): otherwise it may be a snapshot of a history written after a
    ///   reset below the archive (or placed in the directory by hand), and a restore would start
    ///   from it for points of the archived one.
    /// - One ending past it ends in what this pass read of the server's log and archived, or at
    ///   the log's base marker ([`Self::ahead_of_archived_log`] holds the others back): it is
    ///   archived when it ends at or after the base of the log as this pass listed it
    ///   ([`Self::log_base`]), the same tie by zxid range. A pass that records a gap thus still
    ///   archives the snapshots after it, which a restore past the gap needs.
    fn unproven_snapshot(&self, start: i64, end: i64, newest_before: Option<i64>) -> Option<String> {
        let logs = &self.manifest.logs;
        let gap = (1..logs.len())
            .rev()
            .find(|&i| !logs[i].continues(logs[i - 1].summary.last_zxid))
            .map(|i| logs[i - 1].summary.last_zxid);
        if let Some(g) = gap.filter(|g| start <= *g) {
            return Some(format!(
                "it starts at or below zxid {}, before a gap in the archived log, so the archive cannot \
                 tell it is of the history archived there",
                hex(g)
            ));
        }
        let Some(l) = newest_before.filter(|l| end <= *l) else {
            return (end < self.log_base).then(|| {
                format!(
                    "it ends at zxid {}, before the server's log as this pass read it begins (it goes on from \
                     zxid {}), so the pass cannot tie it to the log it archived",
                    hex(end),
                    hex(self.log_base)
                )
            });
        };
        match self.log_proven_from {
            Some(f) if f <= end => None,
            Some(_) => Some(format!(
                "the server's log no longer holds its end zxid {} (purged), so the pass cannot tie it to \
                 the history archived there, at or below the archive's newest zxid {}",
                hex(end),
                hex(l)
            )),
            None => Some(format!(
                "it ends at zxid {}, at or below the archive's newest, {}, and this pass did not find that \
                 newest transaction in the server's log (purged, or the log reset), so it cannot tie the \
                 snapshot to the history archived there",
                hex(end),
                hex(l)
            )),
        }
    }

    /// Archives the server's open segment, as this pass listed it, through zxid `end`, where a
    /// finished snapshot of the server's ends past the archived log: a pass without a commit cap
    /// (a standalone server's directories: an ensemble member's need one) otherwise leaves the
    /// records of the segment's last sync group for a later write to prove durable, and an idle
    /// server's last group, with the idle snapshot holding it, would stay out of the archive
    /// for as long as it stays idle. The snapshot is that proof: a standalone server applies a
    /// transaction only once its log reports it durable (and a log opened after a crash is synced
    /// whole before anything is replayed from it), so a snapshot ending at `end` shows its log
    /// durable through `end`; and no later loss of its log's tail can put another transaction
    /// under a zxid up to `end`, since the server goes on past that snapshot. Only a record with
    /// zxid `end` itself, read in the segment right after what the archive holds (the segment is
    /// read as any pass reads it: from the record the archive ends with, checked unchanged, or
    /// from its start, every record the archive holds compared), takes it that far. The snapshot
    /// must be of the history the segment holds: the caller calls only while the log's base
    /// marker is the one the pass listed the log under, and [`Self::archive_segment`] reads
    /// only the segment file the pass listed (by inode) and takes the proof only when both are
    /// still so after the read (only a reset replaces a standalone server's history, and every
    /// reset through the log replaces the marker). A reset by hand that leaves an older
    /// snapshot ending past the new log end is caught by time instead: the proof holds only for
    /// records proposed at or before `written_ms`, when the snapshot file was last written (the
    /// server stamps each transaction with this host's clock as it proposes it, before it can
    /// apply it, so a snapshot holding it was written after; a clock stepped back between the
    /// old snapshot and the new writes defeats this, and a snapshot written within the file
    /// system's time granule of its end's proposal waits for the next write instead). Not
    /// called for an ensemble member's directories, looked at again here (a pass spanning the
    /// server's restart into an ensemble). Once the records through `end`
    /// are archived, [`Self::ahead_of_archived_log`] no longer holds the snapshot back, so it is
    /// archived with everything it holds in archived pieces of its own history, and a later
    /// history written over `end` is found at that piece's end ([`Self::piece_end_differs`]).
    fn archive_through_snapshot_end(
        &mut self,
        end: i64,
        written_ms: Option<i64>,
        out: &mut dyn Write,
        report: &mut PassReport,
    ) -> Result<(), BackupError> {
        let Some((name, segment_inode, before)) = self.open_listed.clone() else { return Ok(()) };
        let Some(written_ms) = written_ms else { return Ok(()) };
        // Looked at again here: a pass spanning a restart of the server as an ensemble member
        // (which writes its epochs before it logs anything) must not take a proposal as proven.
        if self.is_ensemble_member() {
            return Ok(());
        }
        let proof = Proof { end, written_ms, segment_inode };
        let seen = self.archive_segment(&name, true, before, None, Some(proof), out)?;
        report.logs.extend(seen.piece);
        Ok(())
    }

    /// Whether a snapshot ending at `end` (exact there) ends past the archived log as this pass
    /// left it, and not at the zxid the server's log base marker records (a SNAP's or a
    /// restore's point, which the piece after it records as its predecessor): such a snapshot
    /// waits for a pass that archives the transactions through its end. Archived now, it could
    /// end in transactions of the server's log the archive never holds (the open segment's
    /// last group, not yet durable): were the log then reset below its end and written anew,
    /// the piece archived later over its end would be another history, and a restore from the
    /// snapshot through that piece would mix the two.
    fn ahead_of_archived_log(&self, end: i64) -> bool {
        let at_marker = self.log_marker == Some(end) && self.log_base == end;
        self.manifest.last_log_zxid().is_none_or(|n| end > n) && !at_marker
    }

    /// Reads the staged snapshot `name` whole, checking every chunk and the content's counts;
    /// returns its end state and node count.
    fn check_snapshot(&self, name: &str) -> Result<(Option<zk_tree::snapshot::EndState>, u64), String> {
        let mut parser = ContentParser::new();
        let mut nodes = 0u64;
        zk_log::snapshot::read_snapshot(&self.staging_storage, name, &mut |chunk| {
            parser
                .feed(chunk, &mut |r| {
                    if let ContentRecord::Node(_) = r {
                        nodes += 1;
                    }
                    Ok(())
                })
                .map_err(|e| e.to_string())
        })
        .map_err(|e| e.to_string())?;
        if !parser.at_boundary() {
            return Err("content ends inside a record".into());
        }
        Ok((parser.end_state(), nodes))
    }
}

/// The error for an archive whose transactions after `p` (up to `l`, its newest) the server's
/// log no longer holds.
fn rewritten(p: i64, l: Option<i64>) -> BackupError {
    BackupError::Refused(format!(
        "the server's log no longer holds the archived transactions after zxid {} (up to {}): they \
         were cut away or written over (proposals never committed, archived without a correct \
         --server, or a log reset or restored in place); the manifest marks them, a restore refuses \
         points after {}, and nothing more is archived here: start a new archive",
        hex(p),
        l.map_or("?".to_string(), hex),
        hex(p)
    ))
}

/// A progress line about the lag.
pub fn lag_line(r: &PassReport) -> String {
    match (r.newest_on_disk, r.newest_archived) {
        (None, None) => "backup: the server's log holds no transaction yet".to_string(),
        (None, Some(a)) => match r.empty_log_at {
            Some(e) if e >= a => format!(
                "backup: lag: 0 txns (the server's log holds no transaction after zxid {}, where its state \
                 was reset, as by a snapshot from its leader; newest archived {})",
                hex(e),
                hex(a)
            ),
            _ => format!(
                "backup: WARNING: the server's log holds no transaction, behind the archive's newest, {}: a \
                 server reset or replaced below the archive starts a new history: start a new archive for it",
                hex(a)
            ),
        },
        (Some(d), None) => format!("backup: lag: nothing archived yet; newest zxid on disk {}", hex(d)),
        (Some(d), Some(a)) if d < a => format!(
            "backup: WARNING: the server's log ends at zxid {}, behind the archive's newest, {}: its log was \
             reset or restored below the archive; its new transactions up to {} are not archived here \
             (start a new archive for it)",
            hex(d),
            hex(a),
            hex(a)
        ),
        (Some(d), Some(a)) => {
            let n = txns_between(a, d).map_or("a new epoch's".to_string(), |n| n.to_string());
            let committed = r.committed.map_or(String::new(), |c| format!(", committed {}", hex(c)));
            format!(
                "backup: lag: {n} txns (newest zxid on disk {}, newest archived {}{committed})",
                hex(d),
                hex(a)
            )
        }
    }
}

/// A [`CommitCap`] that asks the server at `server` (`host:port`, its client port) how far it
/// has committed, once it has made sure that server is the one whose directories are backed up:
///
/// - the address is one of this host's (a server elsewhere may have directories of the same
///   names);
/// - `conf` names `data_dir` and `data_log_dir` as its dataDir and dataLogDir (so a leader, a
///   virtual address or another member answering instead is refused: its committed zxid says
///   nothing of this copy's log);
/// - for an ensemble member, `conf`'s `serverId` is the id in `data_dir`'s `myid` (two
///   members in containers of their own may have the same paths);
/// - `srvr`'s `Mode:` is `leader`, `follower`, `observer` or `standalone`: a read-only server
///   rebuilt its tree from its own log, uncommitted proposals included, so its `Zxid:` is no
///   commit point.
///
/// Then `srvr`'s `Zxid:` line, the last transaction the server applied, is the cap (a leader
/// elected moments ago reports its new epoch's zxid 0, above everything its log held when it
/// was elected).
///
/// Errors (when asked): the address does not resolve or is not this host's; the server does
/// not answer, or answers without statistics (electing or syncing, a leader with
/// `leaderServes=no`, or `srvr` or `conf` not in `4lw.commands.whitelist`); it names other
/// directories; it is read-only.
pub fn srvr_commit_cap(server: &str, data_dir: &Path, data_log_dir: &Path) -> CommitCap {
    let server = server.to_string();
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let (data_dir, data_log_dir) = (canonical(data_dir), canonical(data_log_dir));
    Box::new(move || {
        let failed = |why: String| BackupError::Refused(format!("--server {server}: {why}"));
        let addr = std::net::ToSocketAddrs::to_socket_addrs(server.as_str())
            .map_err(|e| failed(format!("not an address: {e}")))?
            .next()
            .ok_or_else(|| failed("resolves to no address".into()))?;
        if std::net::UdpSocket::bind((addr.ip(), 0)).is_err() {
            return Err(failed(format!(
                "{} is not an address of this host: give the client port of the server running on \
                 the data directory backed up, on this host",
                addr.ip()
            )));
        }
        let conf = crate::status::ask(addr, "conf").map_err(|e| failed(e.to_string()))?;
        check_conf_dirs(&conf, &data_dir, &data_log_dir).map_err(failed)?;
        let status = crate::status::query(addr).map_err(|e| failed(e.to_string()))?;
        if status.mode != "standalone" {
            check_conf_server_id(&conf, &data_dir).map_err(failed)?;
        }
        if !matches!(status.mode.as_str(), "leader" | "follower" | "observer" | "standalone") {
            return Err(failed(format!(
                "the server is in mode `{}`: a read-only server's tree holds what its log holds, \
                 proposals that may never have been committed among it, so it cannot say what is \
                 committed; back up once it has rejoined the ensemble",
                status.mode
            )));
        }
        status
            .zxid
            .strip_prefix("0x")
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .and_then(|z| i64::try_from(z).ok())
            .ok_or_else(|| failed(format!("`srvr` reports zxid `{}`, not a zxid", status.zxid)))
    })
}

/// Checks that `conf`'s answer names `data_dir` and `data_log_dir` (canonical) as the server's
/// dataDir and dataLogDir (`conf` prints each with Apache's `/version-2` after it).
fn check_conf_dirs(conf: &str, data_dir: &Path, data_log_dir: &Path) -> Result<(), String> {
    let field = |key: &str| {
        conf.lines().find_map(|l| l.strip_prefix(key)).map(|v| {
            let v = v.trim();
            let v = v.strip_suffix("/version-2").unwrap_or(v);
            std::fs::canonicalize(v).unwrap_or_else(|_| PathBuf::from(v))
        })
    };
    let (Some(dd), Some(dl)) = (field("dataDir="), field("dataLogDir=")) else {
        return Err(format!(
            "`conf` does not answer with the server's directories ({}): the backup must make sure \
             the server asked is the one running on the data directory; add `conf` to \
             4lw.commands.whitelist",
            conf.trim()
        ));
    };
    if dd != data_dir || dl != data_log_dir {
        return Err(format!(
            "the server runs on dataDir {} and dataLogDir {}, not on {} and {} (--data-dir, \
             --data-log-dir): its committed zxid says nothing of this copy's log",
            dd.display(),
            dl.display(),
            data_dir.display(),
            data_log_dir.display()
        ));
    }
    Ok(())
}

/// Checks that an ensemble member's `conf` answer names as its `serverId` the id in
/// `data_dir`'s `myid`: the directories' paths alone match another member's where each runs in
/// its own container with the same paths (or behind a tunnel).
fn check_conf_server_id(conf: &str, data_dir: &Path) -> Result<(), String> {
    let theirs = conf.lines().find_map(|l| l.strip_prefix("serverId=")).map(str::trim);
    let myid_path = data_dir.join("myid");
    let ours = std::fs::read(&myid_path).ok().map(|b| {
        let text = String::from_utf8_lossy(&b[..b.len().min(64)]).into_owned();
        text.lines().next().unwrap_or("").trim().to_string()
    });
    match (theirs, ours) {
        (Some(t), Some(o)) if !t.is_empty() && t.parse::<u64>().ok().is_some_and(|t| o.parse() == Ok(t)) => {
            Ok(())
        }
        (t, o) => Err(format!(
            "the server answers `conf` with serverId {}, and {} holds {}: the server asked is not the \
             member whose directories are backed up",
            t.unwrap_or("(none)"),
            myid_path.display(),
            o.map_or("nothing (it cannot be read)".to_string(), |o| format!("`{o}`"))
        )),
    }
}

/// Refuses a dataLogDir without the server's log in it: a server makes its `zkrs-log` when it
/// starts, so its absence means the wrong directory (most likely, a server with a separate
/// dataLogDir backed up without it), not an empty log.
fn check_log_dir(data_log_dir: &Path) -> Result<(), BackupError> {
    let log = data_log_dir.join(LOG_DIR_NAME);
    if log.is_dir() {
        return Ok(());
    }
    Err(BackupError::Refused(format!(
        "{} does not exist: a server keeps its log there from its first start; if it has a separate \
         dataLogDir, give --data-log-dir (or --config with its zoo.cfg)",
        log.display()
    )))
}

/// `zkrs-server backup`: opens the archive and runs one pass, or, with `follow`, a pass every
/// `interval` until the process is stopped (stopping it at any moment leaves a usable archive).
/// With `server` (`host:port`), every pass archives only what that server has committed
/// ([`srvr_commit_cap`]); an ensemble member's directories need it.
///
/// Errors: the archive cannot be opened; `data_log_dir` holds no `zkrs-log` (the server's
/// separate dataLogDir was not given); in one-pass mode, the pass's error. With `follow`, a
/// failed pass is reported and retried at the next interval, unless no later pass can succeed
/// ([`Archiver::closed`]: the archive is full, or marked as holding transactions the server
/// lost): then its error is returned.
pub fn run(
    target: &str,
    data_dir: &Path,
    data_log_dir: &Path,
    server: Option<&str>,
    follow: bool,
    interval: Duration,
    out: &mut dyn Write,
) -> Result<(), BackupError> {
    let t = super::target::open(target)?;
    if !data_dir.is_dir() {
        return Err(BackupError::Refused(format!("{}: not a directory", data_dir.display())));
    }
    check_log_dir(data_log_dir)?;
    let mut a = Archiver::open(t, data_dir, data_log_dir)?;
    if let Some(s) = server {
        a.set_commit_cap(srvr_commit_cap(s, data_dir, data_log_dir));
    }
    let _ = writeln!(
        out,
        "backup: {} -> {} ({} segments and {} snapshots archived so far)",
        data_dir.display(),
        a.target.describe(),
        a.manifest.logs.len(),
        a.manifest.snapshots.len()
    );
    loop {
        match a.pass(out) {
            Ok(r) => {
                let _ = writeln!(out, "{}", lag_line(&r));
            }
            Err(e) if follow && !a.closed() => {
                let _ = writeln!(out, "backup: pass failed (retrying in {interval:?}): {e}");
            }
            Err(e) => return Err(e),
        }
        let _ = out.flush();
        if !follow {
            return Ok(());
        }
        std::thread::sleep(interval);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backup::restore::{restore, Point};
    use crate::backup::target::DirTarget;
    use crate::backup::test_log::{create_at, new_history_at, Fixture};

    fn ranges(a: &Archiver) -> Vec<(i64, i64, Option<i64>)> {
        a.manifest().logs.iter().map(|l| (l.summary.first_zxid, l.summary.last_zxid, l.prev_zxid)).collect()
    }

    fn text(out: &[u8]) -> String {
        String::from_utf8_lossy(out).into_owned()
    }

    /// A log of `groups` (each one sync group), and a first pass over it of an archiver whose
    /// commit cap is `cap`; its output is in the returned buffer.
    fn capped_first_pass(groups: &[std::ops::RangeInclusive<i64>], cap: i64) -> (Fixture, Archiver, Vec<u8>) {
        let mut f = Fixture::new();
        let mut a = f.capped_archiver();
        let mut out = Vec::new();
        for g in groups {
            f.commit(g.clone());
        }
        f.cap.set(cap);
        a.pass(&mut out).unwrap();
        (f, a, out)
    }

    /// Of the segment being written, a pass takes only the records before its last group mark
    /// (each commit is one sync group): the newest group waits until a later one proves it
    /// durable. The pieces join up with no gap and read back as segments.
    #[test]
    fn the_open_segment_is_archived_up_to_its_last_group_mark() {
        let mut f = Fixture::new();
        let mut a = f.archiver();
        let mut out = Vec::new();

        f.commit(1..=3);
        let r = a.pass(&mut out).unwrap();
        assert_eq!(r.newest_archived, None, "the only group is not known durable yet");
        assert_eq!(r.newest_on_disk, Some(3));

        f.commit(4..=5);
        f.commit(6..=6);
        let r = a.pass(&mut out).unwrap();
        assert_eq!((r.newest_archived, r.newest_on_disk), (Some(5), Some(6)));
        assert_eq!(lag_line(&r), "backup: lag: 1 txns (newest zxid on disk 0x6, newest archived 0x5)");

        f.commit(7..=7);
        let r = a.pass(&mut out).unwrap();
        assert_eq!(r.newest_archived, Some(6));
        assert_eq!(ranges(&a), [(1, 5, Some(0)), (6, 6, Some(5))]);
        let m = a.manifest();
        assert!(m.log_from_start);
        for l in &m.logs {
            let file = File::open(f.archive.join(LOG_PREFIX).join(&l.name)).unwrap();
            let s = summarize(&l.name, BufReader::new(file)).unwrap();
            assert_eq!(
                (s.first_zxid, s.last_zxid, s.records),
                (l.summary.first_zxid, l.summary.last_zxid, l.summary.records)
            );
            assert_eq!(
                (s.first_time_ms, s.last_time_ms),
                (1_000 + l.summary.first_zxid, 1_000 + l.summary.last_zxid)
            );
        }
        // A manifest read back equals the one in memory.
        let back = DirTarget::new(f.archive.clone()).read_manifest().unwrap().unwrap();
        assert_eq!(&back, a.manifest());
    }

    /// A member's log holds proposals past what it has committed (a new leader may truncate
    /// them away): a pass archives nothing past the committed zxid the server reports, ends a
    /// piece there (inside a sync group too: committed, a record is in the ensemble's history
    /// whatever becomes of this copy), and takes the rest once the committed zxid has moved
    /// past it.
    #[test]
    fn nothing_past_the_servers_committed_zxid_is_archived() {
        let (f, mut a, mut out) = capped_first_pass(&[1..=3, 4..=6, 7..=9, 10..=10], 5);
        let r = a.pass(&mut out).unwrap();
        assert_eq!((r.newest_archived, r.committed), (Some(5), Some(5)), "{}", text(&out));
        assert_eq!(
            lag_line(&r),
            "backup: lag: 5 txns (newest zxid on disk 0xa, newest archived 0x5, committed 0x5)"
        );
        f.cap.set(8);
        a.pass(&mut out).unwrap();
        f.cap.set(10);
        let r = a.pass(&mut out).unwrap();
        assert_eq!(r.newest_archived, Some(10));
        assert_eq!(ranges(&a), [(1, 5, Some(0)), (6, 8, Some(5)), (9, 10, Some(8))]);
        assert!(!text(&out).contains("gap"), "{}", text(&out));
    }

    /// A server on loopback answering `srvr` as a server in `mode` at zxid 0x7, and `conf` with
    /// `conf` (the rest of the connections too, until the test ends).
    fn fake_server(mode: &'static str, conf: String) -> String {
        use std::io::Read;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { continue };
                let mut word = [0u8; 4];
                if s.read_exact(&mut word).is_err() {
                    continue;
                }
                let answer = match &word {
                    b"conf" => conf.clone(),
                    b"srvr" => format!(
                        "Zookeeper version: x\nConnections: 1\nZxid: 0x7\nMode: {mode}\nNode count: 4\n"
                    ),
                    _ => String::new(),
                };
                let _ = s.write_all(answer.as_bytes());
            }
        });
        addr
    }

    /// The commit cap comes only from the server running on the directories backed up, in a
    /// mode whose zxid is committed: a read-only server (its tree replays its whole log), a
    /// server on other directories, one that does not say which, and an address of another
    /// host are refused.
    #[test]
    fn the_commit_cap_is_asked_of_the_directories_own_server_only() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let logs = dir.path().join("logs");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::create_dir_all(&logs).unwrap();
        std::fs::write(data.join("myid"), "2\n").unwrap();
        let conf_of = |d: &Path, l: &Path, id: u64| {
            format!(
                "clientPort=2181\ndataDir={}/version-2\ndataDirSize=0\ndataLogDir={}/version-2\nserverId={id}\n",
                d.display(),
                l.display()
            )
        };
        let conf = |d: &Path, l: &Path| conf_of(d, l, 2);
        let ask = |server: &str| srvr_commit_cap(server, &data, &logs)();
        assert_eq!(ask(&fake_server("follower", conf(&data, &logs))).unwrap(), 7);
        // Another member on directories of the same paths (its own container) has another id.
        let e = ask(&fake_server("follower", conf_of(&data, &logs, 3))).unwrap_err();
        assert!(e.to_string().contains("answers `conf` with serverId 3, and"), "{e}");
        assert!(e.to_string().contains("holds `2`: the server asked is not the member"), "{e}");
        assert_eq!(ask(&fake_server("standalone", conf_of(&data, &logs, 0))).unwrap(), 7);
        let e = ask(&fake_server("read-only", conf(&data, &logs))).unwrap_err();
        assert!(e.to_string().contains("mode `read-only`"), "{e}");
        let e = ask(&fake_server("leader", conf(&data, &data))).unwrap_err();
        assert!(e.to_string().contains("its committed zxid says nothing of this copy's log"), "{e}");
        let e = ask(&fake_server("leader", String::new())).unwrap_err();
        assert!(e.to_string().contains("add `conf` to 4lw.commands.whitelist"), "{e}");
        let e = ask("192.0.2.1:2181").unwrap_err();
        assert!(e.to_string().contains("is not an address of this host"), "{e}");
    }

    /// A committed zxid below the archive's newest (another server asked, or uncommitted
    /// transactions archived) stops the pass before it archives anything.
    #[test]
    fn a_commit_cap_below_the_archive_is_refused() {
        let (mut f, mut a, _) = capped_first_pass(&[1..=3, 4..=6], 6);
        assert_eq!(ranges(&a), [(1, 6, Some(0))]);
        f.commit(7..=7);
        f.cap.set(5);
        let e = a.pass(&mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("reports zxid 0x5 committed, below the archive's newest, 0x6"), "{e}");
        assert_eq!(ranges(&a), [(1, 6, Some(0))]);
    }

    /// A manifest another writer changed since this archiver last wrote it is not overwritten:
    /// the pass stops naming the other writer.
    #[test]
    fn a_manifest_written_by_another_backup_is_not_overwritten() {
        let mut f = Fixture::new();
        let mut a = f.archiver();
        f.commit(1..=3);
        f.commit(4..=4);
        a.pass(&mut Vec::new()).unwrap();
        let target = DirTarget::new(f.archive.clone());
        let mut theirs = target.read_manifest().unwrap().unwrap();
        theirs.generation += 5;
        target.write_manifest(&theirs).unwrap();
        f.commit(5..=5);
        let e = a.pass(&mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("another `zkrs-server backup` writes this archive"), "{e}");
        assert_eq!(target.read_manifest().unwrap().unwrap(), theirs);
    }

    /// A directory archive whose manifest writes fail while `fail` is set; with `lands` the
    /// failed write still replaces the manifest (the store took it and its answer was lost).
    struct FlakyTarget {
        inner: DirTarget,
        fail: std::rc::Rc<std::cell::Cell<bool>>,
        lands: bool,
    }

    impl ArchiveTarget for FlakyTarget {
        fn describe(&self) -> String {
            self.inner.describe()
        }
        fn show(&self, key: &str) -> String {
            self.inner.show(key)
        }
        fn staging_dir(&self) -> PathBuf {
            self.inner.staging_dir()
        }
        fn read_manifest(&self) -> Result<Option<Manifest>, BackupError> {
            self.inner.read_manifest()
        }
        fn write_manifest(&self, m: &Manifest) -> Result<(), BackupError> {
            if !self.fail.get() {
                return self.inner.write_manifest(m);
            }
            if self.lands {
                self.inner.write_manifest(m)?;
            }
            Err(BackupError::Refused("the store answered 503".into()))
        }
        fn put_file(&self, key: &str, local: &Path) -> Result<(), BackupError> {
            self.inner.put_file(key, local)
        }
        fn fetch(&self, key: &str, bytes: u64, crc32: u32, local: &Path) -> Result<(), BackupError> {
            self.inner.fetch(key, bytes, crc32, local)
        }
    }

    /// helper-44's finding 1: a manifest write that failed (or seemed to) wedged the archiver for
    /// good, every later pass taking its own archive for another backup's. Now the next pass
    /// goes on, whether the failed write landed or not, and archives what came meanwhile; a
    /// manifest really written by another backup still stops it, and `closed` then ends
    /// `--follow`.
    #[test]
    fn a_failed_manifest_write_is_retried_not_taken_for_another_backup() {
        for lands in [false, true] {
            let mut f = Fixture::new();
            let fail = std::rc::Rc::new(std::cell::Cell::new(false));
            let target = FlakyTarget { inner: DirTarget::new(f.archive.clone()), fail: fail.clone(), lands };
            let mut a = Archiver::open(Box::new(target), &f.data, &f.data).unwrap();
            f.commit(1..=3);
            f.commit(4..=4);
            a.pass(&mut Vec::new()).unwrap();
            f.commit(5..=5);
            fail.set(true);
            assert!(a.pass(&mut Vec::new()).is_err(), "lands {lands}");
            assert!(!a.closed(), "lands {lands}: a failed write closes nothing");
            fail.set(false);
            f.commit(6..=6);
            a.pass(&mut Vec::new()).unwrap_or_else(|e| panic!("lands {lands}: {e}"));
            let m = DirTarget::new(f.archive.clone()).read_manifest().unwrap().unwrap();
            // Through 5: the newest sync group (6) waits for a later one, as in every pass.
            assert_eq!(m.logs.last().map(|l| l.summary.last_zxid), Some(5), "lands {lands}");
            assert_eq!(m.generation, a.manifest().generation, "lands {lands}");
            // Another writer: refused, and nothing more can be archived.
            let other = DirTarget::new(f.archive.clone());
            let mut theirs = m.clone();
            theirs.generation += 3;
            other.write_manifest(&theirs).unwrap();
            f.commit(7..=7);
            assert!(a.pass(&mut Vec::new()).is_err());
            assert!(a.closed(), "lands {lands}: another backup's manifest ends --follow");
        }
    }

    /// The staging directory is made private to the user: a world-readable one (as one made
    /// in /tmp by another program) loses its group and other permissions; a link is refused.
    #[test]
    fn the_staging_directory_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let staging = dir.path().join("staging");
        std::fs::create_dir(&staging).unwrap();
        std::fs::set_permissions(&staging, std::fs::Permissions::from_mode(0o777)).unwrap();
        private_dir(&staging).unwrap();
        assert_eq!(std::fs::metadata(&staging).unwrap().permissions().mode() & 0o777, 0o700);
        let fresh = dir.path().join("fresh");
        private_dir(&fresh).unwrap();
        assert_eq!(std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o777, 0o700);
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&staging, &link).unwrap();
        let e = private_dir(&link).unwrap_err();
        assert!(e.to_string().contains("is a link or not a directory"), "{e}");
    }

    /// A dataLogDir without a `zkrs-log` (a server's separate dataLogDir left out, so the data
    /// directory is taken for it) is refused, not archived as a log with nothing in it.
    #[test]
    fn a_data_log_dir_without_a_log_is_refused() {
        let f = Fixture::new();
        let elsewhere = f.dir.path().join("snaps-only");
        std::fs::create_dir_all(elsewhere.join(zk_log::snapshot::SNAP_DIR_NAME)).unwrap();
        let e = run(
            f.archive.to_str().unwrap(),
            &elsewhere,
            &elsewhere,
            None,
            false,
            Duration::from_secs(1),
            &mut Vec::new(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("give --data-log-dir (or --config"), "{e}");
        run(
            f.archive.to_str().unwrap(),
            &elsewhere,
            &f.data,
            None,
            false,
            Duration::from_secs(1),
            &mut Vec::new(),
        )
        .unwrap();
    }

    /// A member writes the snapshot a leader sends it with its own zxid as its end, though the
    /// leader read it while writes went on: such a snapshot (end = start) is archived (once
    /// committed: a snapshot past the commit cap waits) but a restore does not start from it
    /// unless the archived log shows its tree digest, and says so; here nothing can show it
    /// (no digests), so the restore replays from the start.
    #[test]
    fn a_members_snapshot_ending_at_its_start_is_no_base_unless_proven() {
        let mut f = Fixture::new();
        let snap_dir = f.data.join(zk_log::snapshot::SNAP_DIR_NAME);
        std::fs::create_dir_all(&snap_dir).unwrap();
        std::fs::write(snap_dir.join(zk_log::CURRENT_EPOCH_FILE), b"0").unwrap();
        f.commit(1..=3);
        f.commit(4..=6);
        f.commit(7..=7);
        let mut rec = zk_tree::Recovery::new(zk_tree::Database::new(zk_tree::TreeConfig::default()));
        for z in 1..=3 {
            let (h, t) = create_at(z, 1_000 + z);
            assert!(rec.replay(&h, &t));
        }
        let storage = crate::snapshots::open_dir(&snap_dir).unwrap();
        crate::snapshots::write_whole(&storage, &rec.finish(0), 16_384, zk_log::snapshot::Compression::None)
            .unwrap();
        let mut a = f.capped_archiver();
        f.cap.set(2);
        let mut out = Vec::new();
        let r = a.pass(&mut out).unwrap();
        assert!(r.snapshots.is_empty(), "past the cap: {}", text(&out));
        f.cap.set(7);
        let r = a.pass(&mut out).unwrap();
        assert_eq!(r.snapshots.len(), 1, "{}", text(&out));
        let s = &a.manifest().snapshots[0];
        assert!(s.member && s.start_zxid == 3 && s.end_zxid == Some(3), "{s:?}");
        drop(a);
        let target = DirTarget::new(f.archive.clone());
        let into = f.dir.path().join("restored");
        let mut said = Vec::new();
        let r = restore(&target, &into, Some(&into), Point::Zxid(5), None, &mut said).unwrap();
        assert_eq!((r.zxid, r.snapshot.as_deref(), r.replayed), (5, None, 5));
        assert!(
            text(&said).contains("is an ensemble member's that ends at its start zxid 0x3"),
            "{}",
            text(&said)
        );
    }

    /// An ensemble member's directories (its snapshot directory holds the epoch files) are
    /// refused without a server to ask how far it has committed.
    #[test]
    fn an_ensemble_members_log_needs_a_server_to_ask() {
        let mut f = Fixture::new();
        f.commit(1..=3);
        f.commit(4..=4);
        let snap = f.data.join(zk_log::snapshot::SNAP_DIR_NAME);
        std::fs::create_dir_all(&snap).unwrap();
        std::fs::write(snap.join(zk_log::CURRENT_EPOCH_FILE), b"1").unwrap();
        let e = f.archiver().pass(&mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("ensemble member") && e.to_string().contains("--server"), "{e}");
        drop(e);
        f.cap.set(4);
        let r = f.capped_archiver().pass(&mut Vec::new()).unwrap();
        assert_eq!(r.newest_archived, Some(4));
    }

    /// The resume point is checked before a pass reads on from it: a log cut below it and
    /// written again (a follower's TRUNC, here past what it had reported committed) is read
    /// again from its start; finding the archived transactions 5 and 6 gone from the log (it
    /// holds 4, then the next epoch), the pass stops, the manifest marks them, a restore
    /// refuses points after 4, and no later pass archives anything.
    #[test]
    fn a_log_cut_below_the_archive_stops_the_backup_and_marks_it() {
        let (mut f, mut a, mut out) = capped_first_pass(&[1..=3, 4..=6, 7..=9], 6);
        assert_eq!(ranges(&a), [(1, 6, Some(0))]);
        let e1 = 1i64 << 32;
        f.log.truncate_after(4).unwrap();
        f.commit(e1 + 1..=e1 + 2);
        f.commit(e1 + 3..=e1 + 3);
        f.cap.set(e1 + 3);
        let e = a.pass(&mut out).unwrap_err();
        let said = text(&out);
        assert!(said.contains("no longer holds zxid 0x6 where the last pass left it"), "{said}");
        assert!(
            e.to_string().contains("no longer holds the archived transactions after zxid 0x4 (up to 0x6)"),
            "{e}"
        );
        assert_eq!(ranges(&a), [(1, 6, Some(0))]);
        assert_eq!(a.manifest().rewritten_after, Some(4));
        let e = a.pass(&mut out).unwrap_err();
        assert!(e.to_string().contains("start a new archive"), "{e}");
        drop(a);
        let e = f.capped_archiver().pass(&mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("start a new archive"), "{e}");
        // `--follow` stops with the error instead of retrying forever.
        let data = f.data.clone();
        let e = run(
            f.archive.to_str().unwrap(),
            &data,
            &data,
            None,
            true,
            Duration::from_millis(1),
            &mut Vec::new(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("start a new archive"), "{e}");
        let target = DirTarget::new(f.archive.clone());
        let into = f.dir.path().join("restored");
        for point in [Point::Zxid(5), Point::Newest] {
            let e = restore(&target, &into, Some(&into), point, None, &mut Vec::new()).unwrap_err();
            assert!(e.to_string().contains("no point after 0x4 is restored"), "{point:?}: {e}");
        }
        let r = restore(&target, &into, Some(&into), Point::Zxid(4), None, &mut Vec::new()).unwrap();
        assert_eq!(r.zxid, 4);
    }

    /// An archiver started again knows the archive's last transaction by its payload CRC (the
    /// manifest keeps it): a log holding another transaction under that zxid is refused.
    #[test]
    fn another_transaction_under_the_archived_zxid_is_refused_after_a_restart() {
        let mut f = Fixture::new();
        f.commit(1..=5);
        f.commit(6..=6);
        f.archiver().pass(&mut Vec::new()).unwrap();
        f.log.truncate_after(4).unwrap();
        f.commit_batch(&[create_at(5, 77)]);
        f.commit(6..=6);
        let e = f.archiver().pass(&mut Vec::new()).unwrap_err();
        assert!(
            e.to_string().contains("holds another transaction under zxid 0x5 than the archived one"),
            "{e}"
        );
    }

    /// A segment purged before the archiver read all of it leaves the end of epoch 0
    /// unarchived; the next epoch's records are archived with their predecessor unknown, the
    /// pass warns of the gap, and a restore refuses points past it (naming it) while points
    /// before it still restore.
    #[test]
    fn a_purged_end_of_an_epoch_is_a_gap_a_restore_names() {
        let (mut f, mut a, mut out) = capped_first_pass(&[1..=5, 6..=8], 5);
        assert_eq!(ranges(&a), [(1, 5, Some(0))]);
        let e1 = 1i64 << 32;
        f.log.roll().unwrap();
        f.commit(e1 + 1..=e1 + 2);
        f.commit(e1 + 3..=e1 + 3);
        assert_eq!(f.log.purge_before(e1 + 1).unwrap().len(), 1, "log.1 is purged");
        f.cap.set(e1 + 3);
        a.pass(&mut out).unwrap();
        let said = text(&out);
        assert!(said.contains("gap: it ends at 0x5 and the server's log goes on at 0x100000001"), "{said}");
        // The purge wrote a base marker at the epoch's start: the piece records it, no zxid of
        // the archive's.
        assert_eq!(ranges(&a), [(1, 5, Some(0)), (e1 + 1, e1 + 3, Some(e1))]);
        drop(a);

        let target = DirTarget::new(f.archive.clone());
        let into = f.dir.path().join("restored");
        let e = restore(&target, &into, Some(&into), Point::Zxid(e1 + 2), None, &mut Vec::new()).unwrap_err();
        let want = "lacks the transactions after zxid 0x5 up to 0x100000001 (between";
        assert!(e.to_string().contains(want), "want `{want}`: {e}");
        let e = restore(&target, &into, Some(&into), Point::Newest, None, &mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains(want), "want `{want}`: {e}");
        let r = restore(&target, &into, Some(&into), Point::Zxid(5), None, &mut Vec::new()).unwrap();
        assert_eq!((r.zxid, r.replayed), (5, 5));
    }

    /// A standalone server's log purged before its first backup has no base marker (the log
    /// writes none when its first kept segment does not follow zxid 0): its first piece is not
    /// taken for the server's first transaction, and a restore needing what was purged is
    /// refused. A purge after the archiver read the purged segment leaves no false gap.
    #[test]
    fn a_purged_log_without_a_marker_is_not_from_the_start() {
        let mut f = Fixture::new();
        f.commit(1..=5);
        f.log.roll().unwrap();
        f.commit(6..=7);
        f.commit(8..=8);
        assert_eq!(f.log.purge_before(6).unwrap().len(), 1);
        assert!(!f.data.join(LOG_DIR_NAME).join(BASE_FILE).exists(), "the log wrote no marker");
        let mut a = f.archiver();
        let mut out = Vec::new();
        a.pass(&mut out).unwrap();
        // The zxid before it is 5 (the log was purged up to there), not the server's start.
        assert_eq!(ranges(&a), [(6, 7, Some(5))]);
        assert!(!a.manifest().log_from_start, "{}", text(&out));
        drop(a);
        let target = DirTarget::new(f.archive.clone());
        let into = f.dir.path().join("restored");
        for point in [Point::Zxid(7), Point::Newest] {
            let e = restore(&target, &into, Some(&into), point, None, &mut Vec::new()).unwrap_err();
            assert!(e.to_string().contains("does not go back to the server's first transaction"), "{e}");
        }
        // What an earlier archiver wrote for it: a restore does not take it at its word.
        let mut m = target.read_manifest().unwrap().unwrap();
        m.log_from_start = true;
        m.logs[0].prev_zxid = Some(0);
        target.write_manifest(&m).unwrap();
        let e = restore(&target, &into, Some(&into), Point::Zxid(7), None, &mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("does not go back to the server's first transaction"), "{e}");

        let mut f = Fixture::new();
        let mut a = f.archiver();
        let mut out = Vec::new();
        f.commit(1..=5);
        f.log.roll().unwrap();
        f.commit(6..=7);
        a.pass(&mut out).unwrap();
        assert_eq!(ranges(&a), [(1, 5, Some(0))]);
        f.commit(8..=8);
        f.log.purge_before(6).unwrap();
        a.pass(&mut out).unwrap();
        assert_eq!(ranges(&a), [(1, 5, Some(0)), (6, 7, Some(5))]);
        assert!(a.manifest().log_from_start);
        assert!(!text(&out).contains("gap"), "{}", text(&out));
    }

    /// A point inside a gap (after the archived end of epoch 0, before the next archived
    /// piece, which does not continue it) is refused, by zxid and by time: the transactions
    /// before it that the archive lacks would be missing from the restored tree. A point
    /// between two epochs whose pieces do continue each other restores to the end of the
    /// first.
    #[test]
    fn a_point_inside_a_gap_is_refused() {
        let (mut f, mut a, mut out) = capped_first_pass(&[1..=5, 6..=8], 5);
        let e1 = 1i64 << 32;
        f.log.roll().unwrap();
        f.commit(e1 + 1..=e1 + 2);
        f.commit(e1 + 3..=e1 + 3);
        f.log.purge_before(e1 + 1).unwrap();
        f.cap.set(e1 + 3);
        a.pass(&mut out).unwrap();
        // The purge wrote a base marker at the epoch's start: the piece records it, no zxid of
        // the archive's.
        assert_eq!(ranges(&a), [(1, 5, Some(0)), (e1 + 1, e1 + 3, Some(e1))]);
        drop(a);
        let target = DirTarget::new(f.archive.clone());
        let into = f.dir.path().join("restored");
        for point in [Point::Zxid(7), Point::Zxid(e1), Point::Time(1_007)] {
            let e = restore(&target, &into, Some(&into), point, None, &mut Vec::new()).unwrap_err();
            let want = "lacks the transactions after zxid 0x5 up to 0x100000001";
            assert!(e.to_string().contains(want), "{point:?}: want `{want}`: {e}");
        }
        // The time of zxid 5 itself: the missing transactions after it may be stamped the same.
        let e = restore(&target, &into, Some(&into), Point::Time(1_005), None, &mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("falls between log.0000000000000001 and"), "{e}");
        let r = restore(&target, &into, Some(&into), Point::Time(1_004), None, &mut Vec::new()).unwrap();
        assert_eq!(r.zxid, 4);

        // The same log unpurged: the epoch-1 piece records 5 before it.
        let (mut f, mut a, mut out) = capped_first_pass(&[1..=5, 6..=6], 5);
        f.log.truncate_after(5).unwrap();
        f.log.roll().unwrap();
        f.commit(e1 + 1..=e1 + 2);
        f.commit(e1 + 3..=e1 + 3);
        f.cap.set(e1 + 3);
        a.pass(&mut out).unwrap();
        assert_eq!(ranges(&a), [(1, 5, Some(0)), (e1 + 1, e1 + 3, Some(5))], "{}", text(&out));
        drop(a);
        let target = DirTarget::new(f.archive.clone());
        for (i, point) in [Point::Zxid(7), Point::Zxid(e1)].into_iter().enumerate() {
            let into = f.dir.path().join(format!("restored-{i}"));
            let r = restore(&target, &into, Some(&into), point, None, &mut Vec::new()).unwrap();
            assert_eq!(r.zxid, 5, "{point:?}");
        }
    }

    /// Three pieces, ending at zxids 4, 6 and 8, archived from a log of 1..9.
    fn archived_in_three_pieces() -> (Fixture, Archiver) {
        let mut f = Fixture::new();
        let mut a = f.archiver();
        f.commit(1..=4);
        f.commit(5..=6);
        a.pass(&mut Vec::new()).unwrap();
        f.commit(7..=8);
        a.pass(&mut Vec::new()).unwrap();
        f.commit(9..=9);
        a.pass(&mut Vec::new()).unwrap();
        assert_eq!(ranges(&a), [(1, 4, Some(0)), (5, 6, Some(4)), (7, 8, Some(6))]);
        (f, a)
    }

    /// A standalone server's log reset below the archive's newest zxid, then written with new
    /// transactions (a restore in place by hand): the first one under a zxid an archived piece
    /// ends with is compared with it (by payload CRC), found to differ, and the archive is
    /// marked from the piece before; an archiver started again finds the same.
    #[test]
    fn a_log_reset_below_the_archive_is_found_at_a_piece_end() {
        for restart in [false, true] {
            let (mut f, mut a) = archived_in_three_pieces();
            f.log.reset_to(4).unwrap();
            for z in 5..=7 {
                f.commit_batch(&[create_at(z, 9_000 + z)]);
            }
            if restart {
                drop(a);
                a = f.archiver();
            }
            let e = a.pass(&mut Vec::new()).unwrap_err();
            assert!(
                e.to_string().contains("holds another transaction under zxid 0x6 than the archived one"),
                "{e}"
            );
            assert!(e.to_string().contains("after zxid 0x4 (up to 0x8)"), "{e}");
            assert_eq!(a.manifest().rewritten_after, Some(4));
            assert!(a.closed());
            let back = DirTarget::new(f.archive.clone()).read_manifest().unwrap().unwrap();
            assert_eq!(back.rewritten_after, Some(4));
        }
    }

    /// A reset below the archive that no archived piece end shows yet: the lag line names the
    /// server's own newest zxid, behind the archive's, instead of a lag of 0.
    #[test]
    fn a_log_behind_the_archive_is_reported_as_behind() {
        let mut f = Fixture::new();
        let mut a = f.archiver();
        f.commit(1..=8);
        f.commit(9..=9);
        a.pass(&mut Vec::new()).unwrap();
        assert_eq!(a.manifest().last_log_zxid(), Some(8));
        f.log.reset_to(4).unwrap();
        for z in 5..=7 {
            f.commit_batch(&[create_at(z, 9_000 + z)]);
        }
        let mut a = Some(a);
        for _restarted in [false, true] {
            let mut b = a.take().unwrap_or_else(|| f.archiver());
            let e = b.pass(&mut Vec::new()).unwrap_err().to_string();
            assert!(e.contains("the server's log ends at zxid 0x7, behind the archive's newest, 0x8"), "{e}");
            assert!(e.contains("start a new archive"), "{e}");
            // Not closed: `--follow` goes on reporting it at every pass.
            assert!(!b.closed());
        }
    }

    /// A snapshot in the fixture's data directory of the tree `txns` builds, exact at the last.
    fn write_snapshot(f: &Fixture, txns: &[(zk_proto::TxnHeader, zk_proto::Txn)]) {
        write_snapshot_in(&f.data, txns)
    }

    /// A snapshot in the data directory `data` of the tree `txns` builds, exact at the last.
    fn write_snapshot_in(data: &Path, txns: &[(zk_proto::TxnHeader, zk_proto::Txn)]) {
        let mut rec = zk_tree::Recovery::new(zk_tree::Database::new(zk_tree::TreeConfig::default()));
        for (h, t) in txns {
            assert!(rec.replay(h, t));
        }
        let db = rec.finish(0);
        let snap_dir = data.join(zk_log::snapshot::SNAP_DIR_NAME);
        let storage = crate::snapshots::open_dir(&snap_dir).unwrap();
        let mut cur = db.snapshot_begin();
        let mut w = zk_log::snapshot::SnapshotWriter::create(&storage, cur.start_zxid()).unwrap();
        let mut buf = Vec::new();
        while {
            buf.clear();
            let done = db.snapshot_step(&mut cur, &mut buf, 16_384);
            w.write(&buf).unwrap();
            !done
        } {}
        w.finish().unwrap();
    }

    /// A log reset below the archive without a restore marker (a restore's `zkrs-snap` copied in
    /// by hand, say), then a snapshot of the new history before it reaches an archived piece's
    /// end: the pass archives nothing (a restore of an old point would otherwise start from the
    /// new history's snapshot) and says why, at every pass (`--follow` goes on); once the new
    /// history reaches the archive's newest zxid the record there is found changed and the
    /// archive is closed.
    #[test]
    fn a_new_history_snapshot_is_not_archived_while_the_log_is_behind() {
        let mut f = Fixture::new();
        let mut a = f.archiver();
        f.commit(1..=8);
        f.commit(9..=9);
        a.pass(&mut Vec::new()).unwrap();
        assert_eq!(ranges(&a), [(1, 8, Some(0))]);
        let target = DirTarget::new(f.archive.clone());
        let before =
            restore(&target, &f.dir.path().join("b8"), None, Point::Zxid(8), None, &mut Vec::new()).unwrap();
        f.log.reset_to(4).unwrap();
        let newer = new_history_at;
        for z in 5..=7 {
            f.commit_batch(&[newer(z)]);
        }
        let mut txns: Vec<_> = (1..=4).map(|z| create_at(z, 1_000 + z)).collect();
        txns.extend((5..=6).map(newer));
        write_snapshot(&f, &txns);
        for _pass in 0..2 {
            let mut out = Vec::new();
            let e = a.pass(&mut out).unwrap_err().to_string();
            assert!(e.contains("behind the archive's newest, 0x8") && e.contains("no snapshot"), "{e}");
            assert!(!a.closed());
        }
        assert!(a.manifest().snapshots.is_empty());
        assert_eq!(ranges(&a), [(1, 8, Some(0))]);
        let mut said = Vec::new();
        let after =
            restore(&target, &f.dir.path().join("a8"), None, Point::Zxid(8), None, &mut said).unwrap();
        assert_eq!((after.snapshot.as_deref(), after.nodes), (None, before.nodes), "{}", text(&said));
        // The new history reaches 8: the record there is another one, and the archive closes.
        f.commit_batch(&[newer(8)]);
        f.commit_batch(&[newer(9)]);
        let e = a.pass(&mut Vec::new()).unwrap_err().to_string();
        assert!(e.contains("holds another transaction under zxid 0x8"), "{e}");
        assert!(a.closed());
    }

    /// A data directory whose log was removed by hand (a restore's snapshot copied in): its
    /// empty log is behind the archive, and nothing is archived; a follower's log emptied by a
    /// snapshot from its leader at or past the archive's newest zxid is not behind, and the lag
    /// line says where its log starts (not to start a new archive).
    #[test]
    fn an_empty_log_is_behind_unless_its_base_is_past_the_archive() {
        let mut f = Fixture::new();
        let mut a = f.archiver();
        f.commit(1..=8);
        f.commit(9..=9);
        a.pass(&mut Vec::new()).unwrap();
        f.log.reset_to(10).unwrap();
        let r = a.pass(&mut Vec::new()).unwrap();
        assert_eq!((r.newest_on_disk, r.empty_log_at), (None, Some(10)));
        let line = lag_line(&r);
        assert!(line.contains("lag: 0 txns") && line.contains("after zxid 0xa"), "{line}");
        assert!(!line.contains("start a new archive"), "{line}");
        drop(a);
        let log_dir = f.data.join(LOG_DIR_NAME);
        drop(std::mem::replace(
            &mut f.log,
            zk_log::SegmentLog::open(
                FileStorage::open_dir(f.dir.path().join("elsewhere")).unwrap(),
                zk_log::LogOptions::default(),
            )
            .unwrap(),
        ));
        std::fs::remove_dir_all(&log_dir).unwrap();
        std::fs::create_dir_all(&log_dir).unwrap();
        let mut a = f.archiver();
        let e = a.pass(&mut Vec::new()).unwrap_err().to_string();
        assert!(
            e.contains("holds no transaction and starts after zxid 0x0, behind the archive's newest"),
            "{e}"
        );
    }

    /// A --subtree restore in place at the archive's newest zxid (the default point), and a whole
    /// one there: the archive is not continued (it would hold two states at one zxid, or a
    /// restore from elsewhere as this history's), and a new archive of the restored server is.
    #[test]
    fn an_archive_is_not_continued_after_a_restore_at_its_newest_point() {
        for subtree in [Some("/n2"), None] {
            let mut f = Fixture::new();
            let mut a = f.archiver();
            f.commit(1..=4);
            f.commit(5..=5);
            a.pass(&mut Vec::new()).unwrap();
            assert_eq!(a.manifest().last_log_zxid(), Some(4));
            drop(a);
            let target = DirTarget::new(f.archive.clone());
            let r = f
                .restore_in_place(|d| restore(&target, d, Some(d), Point::Newest, subtree, &mut Vec::new()))
                .unwrap();
            assert_eq!(r.zxid, 4);
            f.log.reset_to(4).unwrap();
            f.commit(5..=6);
            f.commit(7..=7);
            let mut a = f.archiver();
            let e = a.pass(&mut Vec::new()).unwrap_err().to_string();
            assert!(e.contains("to zxid 0x4, at or below this archive's newest, 0x4"), "{subtree:?}: {e}");
            assert!(a.closed());
            assert_eq!(ranges(&a), [(1, 4, Some(0))]);
            assert!(a.manifest().snapshots.is_empty() && a.manifest().after_restore.is_none());
            let fresh = f.dir.path().join("archive2");
            let mut b = Archiver::open(Box::new(DirTarget::new(fresh)), &f.data, &f.data).unwrap();
            b.pass(&mut Vec::new()).unwrap();
            assert_eq!(b.manifest().last_log_zxid(), Some(6));
            assert!(b.manifest().after_restore.is_some());
        }
    }

    /// A log reset below the archive (no restore marker), written on, and purged of the new
    /// history's records at the archived pieces' ends before a pass could check them: a first
    /// kept record at the archive's newest + 1 is not taken as continuing the archive (the base
    /// marker the reset left is below the archive's newest), so the gap is reported and a
    /// restore past it needs a snapshot taken after it.
    #[test]
    fn a_reset_then_purged_log_is_not_chained_on_as_continuous() {
        let (mut f, a) = archived_in_three_pieces();
        drop(a);
        f.log.reset_to(2).unwrap();
        for z in 3..=8 {
            f.commit_batch(&[create_at(z, 9_000 + z)]);
        }
        f.log.roll().unwrap();
        for z in 9..=15 {
            f.commit_batch(&[create_at(z, 9_000 + z)]);
        }
        f.log.purge_before(9).unwrap();
        let mut a = f.archiver();
        let mut out = Vec::new();
        a.pass(&mut out).unwrap();
        assert_eq!(ranges(&a)[3], (9, 14, None), "{}", text(&out));
        assert!(text(&out).contains("WARNING: the archived log has a gap"), "{}", text(&out));
        // A restore past the gap does not chain the new history's 9.. onto the old 1..8.
        let target = DirTarget::new(f.archive.clone());
        let e = restore(&target, &f.dir.path().join("r12"), None, Point::Zxid(12), None, &mut Vec::new())
            .unwrap_err();
        assert!(matches!(e, BackupError::Gap { after: 8, before: 9, .. }), "{e}");
        let r =
            restore(&target, &f.dir.path().join("r8"), None, Point::Zxid(8), None, &mut Vec::new()).unwrap();
        assert_eq!(r.zxid, 8, "the old history up to the gap still restores");
    }

    /// A log reset to a snapshot (a follower's SNAP, a restored server) starts after its base
    /// marker: the first piece records the marker's zxid as the one before it, so a restore
    /// from the archived snapshot at that point goes on into it (an unknown predecessor would
    /// be a gap).
    #[test]
    fn a_first_piece_after_a_reset_continues_the_snapshot_there() {
        let mut f = Fixture::new();
        let mut a = f.archiver();
        write_snapshot(&f, &(1..=4).map(|z| create_at(z, 1_000 + z)).collect::<Vec<_>>());
        f.log.reset_to(4).unwrap();
        f.commit(5..=8);
        f.commit(9..=9);
        a.pass(&mut Vec::new()).unwrap();
        assert_eq!(ranges(&a), [(5, 8, Some(4))]);
        let target = DirTarget::new(f.archive.clone());
        let r =
            restore(&target, &f.dir.path().join("r6"), None, Point::Zxid(6), None, &mut Vec::new()).unwrap();
        assert_eq!((r.zxid, r.snapshot.as_deref()), (6, Some("snapshot.0000000000000004")));
    }

    /// A log reset below the archive (a restore by hand), a snapshot of the new history, and
    /// the new history purged past the archive's newest zxid before a pass: the pass cannot tie
    /// the snapshot (ending below the archive's newest, its end purged) to the archived history,
    /// so it is not archived, and a restore of an old point does not start from it.
    #[test]
    fn a_new_history_snapshot_is_not_archived_after_a_purge_past_the_newest() {
        let mut f = Fixture::new();
        let mut a = f.archiver();
        f.commit(1..=8);
        f.commit(9..=9);
        a.pass(&mut Vec::new()).unwrap();
        assert_eq!(ranges(&a), [(1, 8, Some(0))]);
        f.log.reset_to(4).unwrap();
        let newer = new_history_at;
        for z in 5..=6 {
            f.commit_batch(&[newer(z)]);
        }
        let mut txns: Vec<_> = (1..=4).map(|z| create_at(z, 1_000 + z)).collect();
        txns.extend((5..=6).map(newer));
        write_snapshot(&f, &txns);
        for z in 7..=12 {
            f.commit_batch(&[newer(z)]);
        }
        f.log.roll().unwrap();
        for z in 13..=15 {
            f.commit_batch(&[newer(z)]);
        }
        f.log.purge_before(13).unwrap();
        let mut out = Vec::new();
        let r = a.pass(&mut out).unwrap();
        assert!(r.snapshots.is_empty(), "{}", text(&out));
        assert!(a.manifest().snapshots.is_empty());
        assert!(text(&out).contains("snapshot.0000000000000006 is not archived"), "{}", text(&out));
        let target = DirTarget::new(f.archive.clone());
        let after =
            restore(&target, &f.dir.path().join("a8"), None, Point::Zxid(8), None, &mut Vec::new()).unwrap();
        assert_eq!(after.snapshot, None, "a new-history snapshot is used for an old-history point");
    }

    /// A follower's log reset by a SNAP keeps that base marker below the archive after later
    /// purges: a backup that read the same marker file in an earlier pass chains the first
    /// kept record at the archive's newest + 1 on (no false gap); a backup started afresh
    /// has not seen it and records a gap (safe: it cannot tell a stale marker from a reset).
    #[test]
    fn a_stale_marker_seen_before_is_no_gap() {
        let mut f = Fixture::new();
        let mut a = f.archiver();
        f.log.reset_to(4).unwrap();
        f.commit(5..=8);
        f.log.roll().unwrap();
        f.commit(9..=12);
        a.pass(&mut Vec::new()).unwrap();
        assert_eq!(ranges(&a), [(5, 8, Some(4))]);
        f.commit(13..=13);
        f.log.roll().unwrap();
        f.commit(14..=15);
        f.log.purge_before(9).unwrap();
        let mut out = Vec::new();
        a.pass(&mut out).unwrap();
        assert_eq!(ranges(&a), [(5, 8, Some(4)), (9, 13, Some(8))], "{}", text(&out));
        assert!(!text(&out).contains("gap"), "{}", text(&out));

        // The same log, the archiver started again before the pass: a gap.
        let mut f = Fixture::new();
        let mut a = f.archiver();
        f.log.reset_to(4).unwrap();
        f.commit(5..=8);
        f.log.roll().unwrap();
        f.commit(9..=12);
        a.pass(&mut Vec::new()).unwrap();
        drop(a);
        f.commit(13..=13);
        f.log.roll().unwrap();
        f.commit(14..=15);
        f.log.purge_before(9).unwrap();
        let mut a = f.archiver();
        let mut out = Vec::new();
        a.pass(&mut out).unwrap();
        assert_eq!(ranges(&a), [(5, 8, Some(4)), (9, 13, None)], "{}", text(&out));
        assert!(text(&out).contains("WARNING: the archived log has a gap"), "{}", text(&out));
    }

    /// `zkrs-server restore` in place to a point below the archive's newest zxid leaves a marker
    /// the archiver refuses to go on past (and `--follow` stops); a new archive of the restored
    /// server is taken, and goes on after it has grown past the point, restarted or not.
    #[test]
    fn an_archive_is_not_continued_past_a_restore_below_it() {
        let (mut f, a) = archived_in_three_pieces();
        drop(a);
        let target = DirTarget::new(f.archive.clone());
        let mut said = Vec::new();
        let r =
            f.restore_in_place(|d| restore(&target, d, Some(d), Point::Zxid(4), None, &mut said)).unwrap();
        assert_eq!(r.zxid, 4);
        let marker = crate::backup::restore::RestoreMarker::read(&f.data).unwrap().unwrap();
        assert_eq!(marker.zxid, 4);
        // The restored server resets its log to the snapshot and writes on.
        f.log.reset_to(4).unwrap();
        for z in 5..=7 {
            f.commit_batch(&[create_at(z, 9_000 + z)]);
        }
        let mut old = f.archiver();
        let e = old.pass(&mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("was restored (zkrs-server restore"), "{e}");
        assert!(e.to_string().contains("to zxid 0x4, at or below this archive's newest, 0x8"), "{e}");
        assert!(e.to_string().contains("start a new archive"), "{e}");
        assert!(old.closed());
        assert_eq!(ranges(&old), [(1, 4, Some(0)), (5, 6, Some(4)), (7, 8, Some(6))]);
        drop(old);
        let data = f.data.clone();
        let e = run(
            f.archive.to_str().unwrap(),
            &data,
            &data,
            None,
            true,
            Duration::from_millis(1),
            &mut Vec::new(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("start a new archive"), "{e}");
        // A new archive of the restored server.
        let fresh = f.dir.path().join("archive2");
        let open_fresh = || Archiver::open(Box::new(DirTarget::new(fresh.clone())), &data, &data).unwrap();
        let mut b = open_fresh();
        f.commit(8..=8);
        b.pass(&mut Vec::new()).unwrap();
        assert_eq!(b.manifest().last_log_zxid(), Some(7));
        assert_eq!(b.manifest().after_restore, Some(marker.id()));
        f.commit(9..=9);
        b.pass(&mut Vec::new()).unwrap();
        drop(b);
        let mut b = open_fresh();
        f.commit(10..=10);
        b.pass(&mut Vec::new()).unwrap();
        assert_eq!(b.manifest().last_log_zxid(), Some(9));
    }

    /// A snapshot that starts at or before the cap but ends past it waits, and is not put in
    /// the archive meanwhile (unnamed, at every pass).
    #[test]
    fn a_snapshot_ending_past_the_cap_is_not_uploaded() {
        let mut f = Fixture::new();
        f.commit(1..=3);
        f.commit(4..=6);
        f.commit(7..=7);
        let mut rec = zk_tree::Recovery::new(zk_tree::Database::new(zk_tree::TreeConfig::default()));
        for z in 1..=3 {
            let (h, t) = create_at(z, 1_000 + z);
            assert!(rec.replay(&h, &t));
        }
        let mut db = rec.finish(0);
        let snap_dir = f.data.join(zk_log::snapshot::SNAP_DIR_NAME);
        let storage = crate::snapshots::open_dir(&snap_dir).unwrap();
        // Fuzzy: 4 and 5 are applied while it is written, so it starts at 3 and ends at 5.
        let mut cur = db.snapshot_begin();
        let mut w = zk_log::snapshot::SnapshotWriter::create(&storage, cur.start_zxid()).unwrap();
        for z in 4..=5 {
            let (h, t) = create_at(z, 1_000 + z);
            db.apply(&h, &t);
        }
        let mut buf = Vec::new();
        while {
            buf.clear();
            let done = db.snapshot_step(&mut cur, &mut buf, 16_384);
            w.write(&buf).unwrap();
            !done
        } {}
        w.finish().unwrap();
        let mut a = f.capped_archiver();
        f.cap.set(4);
        let mut out = Vec::new();
        let r = a.pass(&mut out).unwrap();
        assert!(
            r.snapshots.is_empty() && text(&out).contains("ends past the committed zxid 0x4"),
            "{}",
            text(&out)
        );
        let uploaded = std::fs::read_dir(f.archive.join(SNAP_PREFIX)).map_or(0, |d| d.count());
        assert_eq!(uploaded, 0, "a snapshot that waits is not uploaded");
        f.cap.set(7);
        let r = a.pass(&mut out).unwrap();
        assert_eq!(r.snapshots.len(), 1, "{}", text(&out));
        let s = &a.manifest().snapshots[0];
        assert_eq!((s.start_zxid, s.end_zxid), (3, Some(5)));
    }

    /// Restores the fixture's archive into a fresh directory at zxid `z`.
    fn restore_at(f: &Fixture, z: i64) -> Result<crate::backup::restore::RestoreReport, BackupError> {
        let target = DirTarget::new(f.archive.clone());
        let into = f.dir.path().join(format!("restored-{z:x}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&into);
        restore(&target, &into, None, Point::Zxid(z), None, &mut Vec::new())
    }

    /// A cron-style backup of a server that purges past the archive's newest zxid between
    /// runs: each pass records a gap, and still archives the snapshot taken after it (it ends
    /// in the log the pass read and archived), so a restore past each gap starts from it; the
    /// points inside a gap are refused, the old history before the first still restores.
    #[test]
    fn a_pass_that_records_a_gap_archives_the_snapshots_after_it() {
        let mut f = Fixture::new();
        let mut a = f.archiver();
        f.commit(1..=8);
        f.commit(9..=9);
        a.pass(&mut Vec::new()).unwrap();
        assert_eq!(ranges(&a), [(1, 8, Some(0))]);
        f.commit(10..=15);
        f.log.roll().unwrap();
        f.commit(16..=20);
        write_snapshot(&f, &(1..=18).map(|z| create_at(z, 1_000 + z)).collect::<Vec<_>>());
        f.commit(21..=24);
        f.log.roll().unwrap();
        f.commit(25..=25);
        f.commit(26..=26);
        f.log.purge_before(16).unwrap();
        let mut out = Vec::new();
        let r = a.pass(&mut out).unwrap();
        assert!(text(&out).contains("WARNING: the archived log has a gap"), "{}", text(&out));
        assert_eq!(ranges(&a), [(1, 8, Some(0)), (16, 24, Some(15)), (25, 25, Some(24))]);
        assert_eq!(r.snapshots, ["snapshot.0000000000000012"], "{}", text(&out));
        let r = restore_at(&f, 22).unwrap();
        assert_eq!((r.zxid, r.snapshot.as_deref()), (22, Some("snapshot.0000000000000012")));
        // The next run: the server purged past the archive's newest again.
        f.commit(27..=30);
        f.log.roll().unwrap();
        f.commit(31..=33);
        write_snapshot(&f, &(1..=32).map(|z| create_at(z, 1_000 + z)).collect::<Vec<_>>());
        f.commit(34..=34);
        f.commit(35..=35);
        f.log.purge_before(31).unwrap();
        let mut out = Vec::new();
        let r = a.pass(&mut out).unwrap();
        assert_eq!(r.snapshots, ["snapshot.0000000000000020"], "{}", text(&out));
        assert_eq!(a.manifest().snapshots.len(), 2);
        let r = restore_at(&f, 34).unwrap();
        assert_eq!((r.zxid, r.snapshot.as_deref()), (34, Some("snapshot.0000000000000020")));
        let e = restore_at(&f, 12).unwrap_err();
        assert!(matches!(e, BackupError::Gap { after: 8, before: 16, .. }), "{e}");
        let e = restore_at(&f, 28).unwrap_err();
        assert!(matches!(e, BackupError::Gap { after: 25, before: 31, .. }), "{e}");
        assert_eq!(restore_at(&f, 8).unwrap().zxid, 8);
    }

    /// The oldest snapshot the server keeps, right before its oldest kept segment (a segment
    /// boundary fell right after it, and the log was purged up to there): the first piece
    /// records that zxid as the one before it, the snapshot is archived, and a restore goes on
    /// from it into the piece.
    #[test]
    fn a_snapshot_right_before_the_oldest_kept_segment_is_archived_and_restores() {
        let mut f = Fixture::new();
        f.commit(1..=10);
        f.log.roll().unwrap();
        f.commit(11..=12);
        write_snapshot(&f, &(1..=10).map(|z| create_at(z, 1_000 + z)).collect::<Vec<_>>());
        f.commit(13..=13);
        f.log.purge_before(11).unwrap();
        let mut a = f.archiver();
        let mut out = Vec::new();
        let r = a.pass(&mut out).unwrap();
        assert_eq!(ranges(&a), [(11, 12, Some(10))]);
        assert_eq!(r.snapshots, ["snapshot.000000000000000a"], "{}", text(&out));
        let r = restore_at(&f, 12).unwrap();
        assert_eq!((r.zxid, r.snapshot.as_deref()), (12, Some("snapshot.000000000000000a")));
    }

    /// A snapshot that ends before the server's log as the pass listed it begins (the log was
    /// purged past it) is not archived, even past the archive's newest zxid: nothing the pass
    /// read ties it to the log.
    #[test]
    fn a_snapshot_before_the_listed_log_is_not_archived() {
        let mut f = Fixture::new();
        let mut a = f.archiver();
        f.commit(1..=4);
        f.commit(5..=5);
        a.pass(&mut Vec::new()).unwrap();
        assert_eq!(ranges(&a), [(1, 4, Some(0))]);
        f.commit(6..=7);
        write_snapshot(&f, &(1..=7).map(|z| create_at(z, 1_000 + z)).collect::<Vec<_>>());
        f.commit(8..=9);
        f.log.roll().unwrap();
        f.commit(10..=11);
        f.log.purge_before(10).unwrap();
        let mut out = Vec::new();
        let r = a.pass(&mut out).unwrap();
        assert!(r.snapshots.is_empty(), "{}", text(&out));
        assert!(text(&out).contains("before the server's log as this pass read it begins"), "{}", text(&out));
    }

    /// A follower's log reset by a snapshot from its leader past the archive's newest zxid
    /// after the pass listed it (every segment listed is gone when it is opened): the pass
    /// reads the log again rather than judge it behind the archive, and finds it empty at the
    /// snapshot's point.
    #[test]
    fn a_log_reset_while_a_pass_reads_it_is_read_again() {
        let mut f = Fixture::new();
        let mut a = f.archiver();
        f.commit(1..=8);
        f.log.roll().unwrap();
        f.commit(9..=9);
        a.pass(&mut Vec::new()).unwrap();
        assert_eq!(a.manifest().last_log_zxid(), Some(8));
        let elsewhere = FileStorage::open_dir(f.dir.path().join("elsewhere")).unwrap();
        let log =
            std::mem::replace(&mut f.log, zk_log::SegmentLog::open(elsewhere, Default::default()).unwrap());
        let mut log = Some(log);
        a.test_hook = Some(Box::new(move |at| {
            if let Some(mut l) = log.take_if(|_| at == "listed") {
                l.reset_to(20).unwrap();
            }
        }));
        let mut out = Vec::new();
        let r = a.pass(&mut out).unwrap_or_else(|e| panic!("{e}\n{}", text(&out)));
        assert!(text(&out).contains("reading it again"), "{}", text(&out));
        assert_eq!((r.newest_on_disk, r.empty_log_at), (None, Some(20)));
        assert!(lag_line(&r).contains("lag: 0 txns"), "{}", lag_line(&r));
    }

    /// A log taken away while the pass reads it, and still gone when it is read again (a
    /// restore in place between its moves): the refusal says the log changed under the pass
    /// and to run the backup again before starting a new archive.
    #[test]
    fn a_log_still_behind_when_read_again_says_it_changed() {
        let mut f = Fixture::new();
        let mut a = f.archiver();
        f.commit(1..=8);
        f.commit(9..=9);
        a.pass(&mut Vec::new()).unwrap();
        let log_dir = f.data.join(LOG_DIR_NAME);
        a.test_hook = Some(Box::new(move |at| {
            if at == "listed" {
                for e in std::fs::read_dir(&log_dir).unwrap().flatten() {
                    if parse_segment_name(&e.file_name().to_string_lossy()).is_some() {
                        std::fs::remove_file(e.path()).unwrap();
                    }
                }
            }
        }));
        let mut out = Vec::new();
        let e = a.pass(&mut out).unwrap_err().to_string();
        assert!(text(&out).contains("reading it again"), "{}", text(&out));
        assert!(e.contains("behind the archive's newest, 0x8"), "{e}");
        assert!(e.contains("run the backup again once it is done before starting a new archive"), "{e}");
    }

    /// A log reset below the archive while a pass runs, after the pass read the log and found
    /// it the archive's history, and a snapshot of the new history put in place: the snapshot
    /// is not archived (the base marker was replaced during the pass); the next pass finds the
    /// log behind the archive.
    #[test]
    fn a_snapshot_is_not_archived_when_the_log_was_reset_during_the_pass() {
        let mut f = Fixture::new();
        let mut a = f.archiver();
        f.commit(1..=8);
        f.commit(9..=9);
        a.pass(&mut Vec::new()).unwrap();
        assert_eq!(ranges(&a), [(1, 8, Some(0))]);
        let elsewhere = FileStorage::open_dir(f.dir.path().join("elsewhere")).unwrap();
        let log =
            std::mem::replace(&mut f.log, zk_log::SegmentLog::open(elsewhere, Default::default()).unwrap());
        let mut log = Some(log);
        let data = f.data.clone();
        a.test_hook = Some(Box::new(move |at| {
            if let Some(mut l) = log.take_if(|_| at == "snapshots") {
                l.reset_to(4).unwrap();
                for z in 5..=6 {
                    let (h, t) = new_history_at(z);
                    l.commit(&[(&h, &t)]).unwrap();
                }
                let mut txns: Vec<_> = (1..=4).map(|z| create_at(z, 1_000 + z)).collect();
                txns.extend((5..=6).map(new_history_at));
                write_snapshot_in(&data, &txns);
            }
        }));
        let mut out = Vec::new();
        let r = a.pass(&mut out).unwrap();
        assert!(r.snapshots.is_empty(), "{}", text(&out));
        assert!(text(&out).contains("snapshot.0000000000000006 waits for the next pass"), "{}", text(&out));
        let e = a.pass(&mut Vec::new()).unwrap_err().to_string();
        assert!(e.contains("behind the archive's newest, 0x8"), "{e}");
        assert!(a.manifest().snapshots.is_empty());
    }

    /// A link between archived pieces that an older manifest did not record but that was
    /// inferred from zxid order (kept as such in the manifest) is named by a restore that relies
    /// on it, in one warning line; a restore before it relies on recorded links only.
    #[test]
    fn a_restore_names_the_links_inferred_from_an_older_manifest() {
        let (f, a) = archived_in_three_pieces();
        drop(a);
        let target = DirTarget::new(f.archive.clone());
        let mut m = target.read_manifest().unwrap().unwrap();
        m.logs[2].prev_inferred = true;
        target.write_manifest(&m).unwrap();
        let r = restore_at(&f, 8).unwrap();
        assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
        assert!(
            r.warnings[0].contains("1 archived segment(s) are taken to follow the one before them by zxid order alone (log.0000000000000007 after zxid 0x6)"),
            "{:?}",
            r.warnings
        );
        assert!(restore_at(&f, 6).unwrap().warnings.is_empty());
    }

    /// A file put back in place of itself with its inode, size and modification time (a copy
    /// that keeps them, the freed inode reused) is not taken as unchanged: its change time moved.
    #[test]
    fn a_file_relinked_with_the_same_metadata_is_not_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"marker").unwrap();
        let before = file_ident(&p).unwrap();
        // File times move in the kernel's clock ticks.
        std::thread::sleep(Duration::from_millis(50));
        std::fs::hard_link(&p, dir.path().join("g")).unwrap();
        std::fs::remove_file(dir.path().join("g")).unwrap();
        let after = file_ident(&p).unwrap();
        assert_eq!(
            (after.inode, after.bytes, after.modified_ns),
            (before.inode, before.bytes, before.modified_ns)
        );
        assert_ne!(after, before);
    }

    /// The paths in the snapshot a restore wrote.
    fn paths_in(written: &Path) -> Vec<String> {
        let storage = crate::snapshots::open_dir(written.parent().unwrap()).unwrap();
        let name = written.file_name().unwrap().to_string_lossy().into_owned();
        let mut parser = ContentParser::new();
        let mut paths = Vec::new();
        zk_log::snapshot::read_snapshot(&storage, &name, &mut |chunk| {
            parser
                .feed(chunk, &mut |r| {
                    if let ContentRecord::Node(n) = r {
                        paths.push(n.path.to_string());
                    }
                    Ok(())
                })
                .map_err(|e| e.to_string())
        })
        .unwrap();
        paths.sort();
        paths
    }

    /// A piece whose first record starts past the archive's log newest + 1 in a purged log does
    /// not record the zxid before it as its predecessor when an archived snapshot ends there (one
    /// of the history before a reset: here archived at the log's base marker after a SNAP, then
    /// the log reset below the archive, written anew, the snapshot replaced by the new history's
    /// under the same name, and purged past it): a restore past it is a gap, never the old
    /// snapshot with the new history's transactions; and the same-named server snapshot that
    /// differs from the archived one is warned of.
    #[test]
    fn a_purged_piece_does_not_chain_onto_an_archived_snapshot_of_another_history() {
        let mut f = Fixture::new();
        let mut a = f.archiver();
        f.commit(1..=8);
        f.commit(9..=9); // the newest group: not durable yet, so not archived
        a.pass(&mut Vec::new()).unwrap();
        assert_eq!(ranges(&a), [(1, 8, Some(0))]);
        // A snapshot from a leader at 10 (history A), the log reset to it.
        write_snapshot(&f, &(1..=10).map(|z| create_at(z, 1_000 + z)).collect::<Vec<_>>());
        f.log.reset_to(10).unwrap();
        let mut out = Vec::new();
        let r = a.pass(&mut out).unwrap();
        assert_eq!(r.snapshots, ["snapshot.000000000000000a"], "{}", text(&out));
        // A restore by hand below the archive: the log reset to 4, new writes, the snapshot at
        // 10 replaced by the new history's (same zxid, same name), then purged past it.
        f.log.reset_to(4).unwrap();
        for z in 5..=10 {
            f.commit_batch(&[new_history_at(z)]);
        }
        let snap_dir = f.data.join(zk_log::snapshot::SNAP_DIR_NAME);
        std::fs::remove_file(snap_dir.join("snapshot.000000000000000a")).unwrap();
        let mut b: Vec<_> = (1..=4).map(|z| create_at(z, 1_000 + z)).collect();
        b.extend((5..=10).map(new_history_at));
        write_snapshot(&f, &b);
        f.log.roll().unwrap();
        for z in 11..=13 {
            f.commit_batch(&[new_history_at(z)]);
        }
        f.log.purge_before(11).unwrap();
        let mut out = Vec::new();
        a.pass(&mut out).unwrap();
        match restore_at(&f, 12) {
            Ok(r) => panic!("restore --zxid 12 from {:?}: {:?}", r.snapshot, paths_in(&r.written)),
            Err(e) => assert!(matches!(e, BackupError::Gap { .. }), "{e}"),
        }
        assert_eq!(ranges(&a), [(1, 8, Some(0)), (11, 12, None)], "{}", text(&out));
        assert!(text(&out).contains("WARNING: snapshot.000000000000000a on the server ("), "{}", text(&out));
        // Compared once: an unchanged file is not warned of again.
        let mut out = Vec::new();
        a.pass(&mut out).unwrap();
        assert!(!text(&out).contains("is not the archived"), "{}", text(&out));
    }

    /// An archive holding 1..=8, then a snapshot at 10 archived at the log's base marker (the log
    /// reset to it, as by a restore's point): the fixture of the next tests.
    fn archived_at_the_marker() -> (Fixture, Archiver) {
        let mut f = Fixture::new();
        let mut a = f.archiver();
        f.commit(1..=8);
        f.commit(9..=9);
        a.pass(&mut Vec::new()).unwrap();
        write_snapshot(&f, &(1..=10).map(|z| create_at(z, 1_000 + z)).collect::<Vec<_>>());
        f.log.reset_to(10).unwrap();
        let mut out = Vec::new();
        let r = a.pass(&mut out).unwrap();
        assert_eq!(r.snapshots, ["snapshot.000000000000000a"], "{}", text(&out));
        assert_eq!(ranges(&a), [(1, 8, Some(0))]);
        (f, a)
    }

    /// The piece after the log's base marker, whose snapshot the archive holds and the server
    /// still has unchanged, records the marker's zxid as its predecessor: it chains onto the
    /// archived snapshot.
    #[test]
    fn a_piece_after_a_marker_whose_snapshot_is_the_same_chains_onto_it() {
        let (mut f, mut a) = archived_at_the_marker();
        f.commit(11..=12);
        f.commit(13..=13);
        let mut out = Vec::new();
        a.pass(&mut out).unwrap();
        assert_eq!(ranges(&a), [(1, 8, Some(0)), (11, 12, Some(10))], "{}", text(&out));
    }

    /// Review 10, finding 2: the snapshot at the log's base marker, archived and found the same,
    /// then removed by the server's retention before the next pass (this backup's process, or a
    /// new one run from cron; the next pass or one after it), still chains the piece after the marker onto the archived
    /// snapshot: the comparison made when it was archived, kept while the marker names the
    /// snapshot, stands (it made a false gap).
    #[test]
    fn a_piece_after_a_marker_whose_snapshot_the_server_removed_chains_onto_it() {
        for (new_process, pass_between) in [(false, false), (true, false), (false, true)] {
            let (mut f, mut a) = archived_at_the_marker();
            let snap = f.data.join(zk_log::snapshot::SNAP_DIR_NAME).join("snapshot.000000000000000a");
            std::fs::remove_file(&snap).unwrap();
            if pass_between {
                a.pass(&mut Vec::new()).unwrap();
            }
            f.commit(11..=12);
            f.commit(13..=13);
            if new_process {
                drop(a);
                a = f.archiver();
            }
            let mut out = Vec::new();
            a.pass(&mut out).unwrap();
            let case = (new_process, pass_between);
            assert_eq!(ranges(&a), [(1, 8, Some(0)), (11, 12, Some(10))], "{case:?}: {}", text(&out));
        }
    }

    /// A snapshot archived at the log's base marker, past the archived log, restores at its own
    /// zxid (and is the newest point), while a point between the log and it is still refused
    /// (review 8, note 4: every point past the archived log was).
    #[test]
    fn a_snapshot_archived_at_the_marker_restores_at_its_zxid() {
        let (f, _a) = archived_at_the_marker();
        let r = restore_at(&f, 10).unwrap_or_else(|e| panic!("restore --zxid 10: {e}"));
        assert_eq!((r.zxid, r.snapshot.as_deref()), (10, Some("snapshot.000000000000000a")));
        let target = DirTarget::new(f.archive.clone());
        let into = f.dir.path().join("newest");
        let r = restore(&target, &into, None, Point::Newest, None, &mut Vec::new()).unwrap();
        assert_eq!(r.zxid, 10);
        for z in [9, 11] {
            let e = restore_at(&f, z).unwrap_err();
            assert!(e.to_string().contains("past the newest archived transaction, 0x8"), "{e}");
        }
    }

    /// A log reset by hand to the zxid of a snapshot the archive holds, with another history's
    /// state put in place under that snapshot's name: the piece after the marker records no
    /// predecessor (a gap), so no restore goes on from the archived snapshot into the new
    /// history's transactions (review 8, note 5: the piece chained onto it, the differing
    /// snapshot only warned of).
    #[test]
    fn a_piece_after_a_marker_whose_snapshot_differs_is_a_gap() {
        let (mut f, mut a) = archived_at_the_marker();
        let snap_dir = f.data.join(zk_log::snapshot::SNAP_DIR_NAME);
        std::fs::remove_file(snap_dir.join("snapshot.000000000000000a")).unwrap();
        write_snapshot(&f, &(1..=10).map(new_history_at).collect::<Vec<_>>());
        f.log.reset_to(10).unwrap();
        f.commit_batch(&[new_history_at(11), new_history_at(12)]);
        f.commit_batch(&[new_history_at(13)]);
        let mut out = Vec::new();
        a.pass(&mut out).unwrap();
        assert_eq!(ranges(&a), [(1, 8, Some(0)), (11, 12, None)], "{}", text(&out));
        assert!(text(&out).contains("WARNING: snapshot.000000000000000a on the server ("), "{}", text(&out));
        match restore_at(&f, 12) {
            Ok(r) => panic!("restore --zxid 12 from {:?}: {:?}", r.snapshot, paths_in(&r.written)),
            Err(e) => assert!(matches!(e, BackupError::Gap { .. }), "{e}"),
        }
    }

    /// An archived snapshot that the server still keeps but that cannot be read (here a
    /// directory put in its place) is warned of, and the pass goes on to archive the newer
    /// snapshots (review 8, finding 3: the read error failed every pass at its name).
    #[test]
    fn an_unreadable_archived_snapshot_does_not_keep_newer_ones_out() {
        let mut f = Fixture::new();
        let mut a = f.archiver();
        f.commit(1..=4);
        write_snapshot(&f, &(1..=4).map(|z| create_at(z, 1_000 + z)).collect::<Vec<_>>());
        f.commit(5..=5);
        a.pass(&mut Vec::new()).unwrap();
        assert_eq!(a.manifest().snapshots.len(), 1);
        let old = f.data.join(zk_log::snapshot::SNAP_DIR_NAME).join("snapshot.0000000000000004");
        std::fs::remove_file(&old).unwrap();
        std::fs::create_dir(&old).unwrap();
        f.commit(6..=8);
        write_snapshot(&f, &(1..=8).map(|z| create_at(z, 1_000 + z)).collect::<Vec<_>>());
        f.commit(9..=9);
        let mut out = Vec::new();
        let r = a.pass(&mut out).unwrap_or_else(|e| panic!("{e}\n{}", text(&out)));
        assert_eq!(r.snapshots, ["snapshot.0000000000000008"], "{}", text(&out));
        assert!(text(&out).contains("cannot be read to compare it with the archived"), "{}", text(&out));
    }

    /// A server snapshot the archive holds under its name is read to compare it at most once
    /// while it is unchanged, across runs too (the comparisons are kept in the staging
    /// directory), and not at all once this backup archived it from that very file (review 8,
    /// finding 3: a cron run read every retained snapshot in full each time).
    #[test]
    fn an_unchanged_same_named_snapshot_is_not_read_again_by_a_later_run() {
        let mut f = Fixture::new();
        let mut a = f.archiver();
        f.commit(1..=4);
        write_snapshot(&f, &(1..=4).map(|z| create_at(z, 1_000 + z)).collect::<Vec<_>>());
        f.commit(5..=5);
        a.pass(&mut Vec::new()).unwrap();
        a.pass(&mut Vec::new()).unwrap();
        assert_eq!(a.same_named_reads, 0);
        drop(a);
        let mut b = f.archiver();
        b.pass(&mut Vec::new()).unwrap();
        assert_eq!(b.same_named_reads, 0, "a later run read it again");
        drop(b);
        // Changed (here only its times): read again, found the same, not warned of.
        let snap = f.data.join(zk_log::snapshot::SNAP_DIR_NAME).join("snapshot.0000000000000004");
        let bytes = std::fs::read(&snap).unwrap();
        std::fs::write(&snap, &bytes).unwrap();
        let mut c = f.archiver();
        let mut out = Vec::new();
        c.pass(&mut out).unwrap();
        assert_eq!(c.same_named_reads, 1);
        assert!(!text(&out).contains("is not the archived"), "{}", text(&out));
        drop(c);
        // A damaged record of the comparisons is ignored: compared again.
        let kept = f.archive.join(".staging").join(SAME_NAMED_FILE);
        let text_kept = std::fs::read_to_string(&kept).unwrap();
        std::fs::write(&kept, text_kept.trim_end().strip_suffix("end").unwrap()).unwrap();
        let mut d = f.archiver();
        d.pass(&mut Vec::new()).unwrap();
        assert_eq!(d.same_named_reads, 1);
    }

    /// An idle standalone server's last sync group waits for no later write once the server
    /// has taken a snapshot ending in it (its idle snapshot): the snapshot proves the records
    /// through its end durable, so the pass archives them, and then the snapshot, and the
    /// acknowledged state is restorable while the server stays idle (review 8, finding 1: both
    /// waited for the next write, and a disk lost meanwhile lost them).
    #[test]
    fn an_idle_snapshot_archives_the_last_group_it_holds() {
        let mut f = Fixture::new();
        let mut a = f.archiver();
        f.commit(1..=8);
        f.commit(9..=10); // the newest group: no later write marks it durable
        write_snapshot(&f, &(1..=10).map(|z| create_at(z, 1_000 + z)).collect::<Vec<_>>());
        let mut out = Vec::new();
        let r = a.pass(&mut out).unwrap();
        assert_eq!(ranges(&a), [(1, 8, Some(0)), (9, 10, Some(8))], "{}", text(&out));
        assert_eq!(r.snapshots, ["snapshot.000000000000000a"], "{}", text(&out));
        a.pass(&mut out).unwrap();
        drop(a);
        // A later one-shot run, the server still idle: nothing more to archive.
        let r = f.archiver().pass(&mut out).unwrap();
        assert!(r.logs.is_empty() && r.snapshots.is_empty(), "{}", text(&out));
        let r = restore_at(&f, 10).unwrap_or_else(|e| panic!("restore --zxid 10: {e}\n{}", text(&out)));
        assert_eq!(r.zxid, 10);
        assert_eq!(r.snapshot.as_deref(), Some("snapshot.000000000000000a"));
        // Of the group, only what the snapshot proves is taken: none past its end.
        let mut f = Fixture::new();
        let mut a = f.archiver();
        f.commit(1..=8);
        f.commit(9..=12);
        write_snapshot(&f, &(1..=10).map(|z| create_at(z, 1_000 + z)).collect::<Vec<_>>());
        let mut out = Vec::new();
        a.pass(&mut out).unwrap();
        assert_eq!(ranges(&a), [(1, 8, Some(0)), (9, 10, Some(8))], "{}", text(&out));
    }

    /// Once an idle snapshot's end is archived with it, a history written over that end after a
    /// reset below it (here by hand, the old snapshot removed, and purged past the archive) is
    /// found at the archived piece's end: the pass closes the archive (restores stop before that
    /// piece), and a restore never starts from the old snapshot through a piece of the new history (review 7, finding 2, which
    /// held the snapshot back instead).
    #[test]
    fn a_history_written_over_an_idle_snapshots_end_closes_the_archive() {
        let mut f = Fixture::new();
        let mut a = f.archiver();
        f.commit(1..=8);
        f.commit(9..=10);
        write_snapshot(&f, &(1..=10).map(|z| create_at(z, 1_000 + z)).collect::<Vec<_>>());
        a.pass(&mut Vec::new()).unwrap();
        assert_eq!(ranges(&a), [(1, 8, Some(0)), (9, 10, Some(8))]);
        f.log.reset_to(4).unwrap();
        for z in 5..=9 {
            f.commit_batch(&[new_history_at(z)]);
        }
        let snap_dir = f.data.join(zk_log::snapshot::SNAP_DIR_NAME);
        std::fs::remove_file(snap_dir.join("snapshot.000000000000000a")).unwrap();
        f.log.roll().unwrap();
        for z in 10..=14 {
            f.commit_batch(&[new_history_at(z)]);
        }
        f.log.purge_before(10).unwrap();
        let mut out = Vec::new();
        let e = a.pass(&mut out).unwrap_err();
        assert!(e.to_string().contains("another transaction under zxid 0xa"), "{e}\n{}", text(&out));
        assert_eq!(ranges(&a), [(1, 8, Some(0)), (9, 10, Some(8))]);
        // The manifest marks everything after the piece before the one that differs.
        let e = restore_at(&f, 10).unwrap_err();
        assert!(e.to_string().contains("no point after 0x8 is restored"), "{e}");
        assert!(restore_at(&f, 12).is_err());
        assert_eq!(restore_at(&f, 8).unwrap().zxid, 8);
    }

    /// A snapshot ending past what the pass read of the server's log (the record at its end is
    /// not there: here written by hand ahead of the log) still waits for the pass that archives
    /// the transactions through its end, and a restore then starts from it.
    #[test]
    fn a_snapshot_past_the_servers_log_waits_for_its_end() {
        let mut f = Fixture::new();
        let mut a = f.archiver();
        f.commit(1..=8);
        f.commit(9..=10);
        write_snapshot(&f, &(1..=12).map(|z| create_at(z, 1_000 + z)).collect::<Vec<_>>());
        let mut out = Vec::new();
        let r = a.pass(&mut out).unwrap();
        assert!(r.snapshots.is_empty(), "{}", text(&out));
        assert_eq!(ranges(&a), [(1, 8, Some(0))]);
        assert!(text(&out).contains("past the archived log's newest (0x8): it waits"), "{}", text(&out));
        f.commit(11..=12);
        f.commit(13..=13);
        let mut out = Vec::new();
        let r = a.pass(&mut out).unwrap();
        assert_eq!(ranges(&a), [(1, 8, Some(0)), (9, 12, Some(8))]);
        assert_eq!(r.snapshots, ["snapshot.000000000000000c"], "{}", text(&out));
        let r = restore_at(&f, 12).unwrap();
        assert_eq!(r.snapshot.as_deref(), Some("snapshot.000000000000000c"));
    }

    /// A standalone server's log of 1..=8, then its newest group 9..=10, not yet durable, and
    /// a snapshot of 1..=10 beside it: the fixture of the next tests, whose passes archive 1..=8
    /// and would then read the open segment again through zxid 10.
    fn idle_with_a_snapshot_at_10() -> (Fixture, Archiver) {
        let mut f = Fixture::new();
        let a = f.archiver();
        f.commit(1..=8);
        f.commit(9..=10);
        write_snapshot(&f, &(1..=10).map(|z| create_at(z, 1_000 + z)).collect::<Vec<_>>());
        (f, a)
    }

    /// The open segment's path in the fixture's log.
    fn open_segment(f: &Fixture) -> PathBuf {
        let log_dir = f.data.join(LOG_DIR_NAME);
        let mut segs: Vec<_> = std::fs::read_dir(&log_dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| parse_segment_name(n).is_some())
            .collect();
        segs.sort();
        log_dir.join(segs.last().unwrap())
    }

    /// Puts a copy of `p` in its place (another inode, the same bytes).
    fn replace_by_a_copy(p: &Path) {
        let tmp = p.with_extension("copy");
        std::fs::copy(p, &tmp).unwrap();
        std::fs::rename(&tmp, p).unwrap();
    }

    /// Review 9, finding 2: a snapshot of history A left in the directory when the log is reset
    /// by hand below it, and history B's newest group (not durable) written after it through
    /// the snapshot's end zxid: the snapshot proves nothing of B's records (they were proposed
    /// after it was written), so they wait for a later write, and the snapshot with them.
    #[test]
    fn a_stale_snapshot_does_not_prove_another_historys_last_group() {
        let mut f = Fixture::new();
        let mut a = f.archiver();
        f.commit(1..=8);
        f.commit(9..=9);
        a.pass(&mut Vec::new()).unwrap();
        assert_eq!(ranges(&a), [(1, 8, Some(0))]);
        write_snapshot(&f, &(1..=10).map(|z| create_at(z, 1_000 + z)).collect::<Vec<_>>());
        let snap = f.data.join(zk_log::snapshot::SNAP_DIR_NAME).join("snapshot.000000000000000a");
        let written_ms = std::fs::metadata(&snap)
            .unwrap()
            .modified()
            .unwrap()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        f.log.reset_to(8).unwrap();
        // B's last group, proposed after A's snapshot was written: not durable.
        let b = |z: i64| {
            let (mut h, t) = new_history_at(z);
            h.time = written_ms + 1_000 + z;
            (h, t)
        };
        f.commit_batch(&[b(9), b(10)]);
        let mut out = Vec::new();
        let r = a.pass(&mut out).unwrap();
        assert_eq!(ranges(&a), [(1, 8, Some(0))], "B's group archived: {r:?}\n{}", text(&out));
        assert!(r.snapshots.is_empty(), "{}", text(&out));
        assert!(
            text(&out).contains("proposed after the snapshot ending there was written"),
            "{}",
            text(&out)
        );
    }

    /// Review 9, finding 2: the open segment is read again through a snapshot's end only while
    /// it is the file the pass listed (here replaced by a copy after the listing, as a log reset
    /// by hand would put another one under the name).
    #[test]
    fn the_open_segment_is_read_again_only_while_it_is_the_file_listed() {
        let (f, mut a) = idle_with_a_snapshot_at_10();
        let seg = open_segment(&f);
        a.test_hook = Some(Box::new(move |at| {
            if at == "snapshots" {
                replace_by_a_copy(&seg);
            }
        }));
        let mut out = Vec::new();
        let r = a.pass(&mut out).unwrap();
        assert_eq!(ranges(&a), [(1, 8, Some(0))], "{r:?}\n{}", text(&out));
        assert!(text(&out).contains("was replaced since this pass listed the log"), "{}", text(&out));
    }

    /// Review 9, finding 2: the log's base marker is looked at again after the open segment
    /// was read again through a snapshot's end (here replaced during that read): nothing is
    /// taken on the snapshot's proof.
    #[test]
    fn the_base_marker_is_looked_at_again_after_the_read_for_a_proof() {
        let (f, mut a) = idle_with_a_snapshot_at_10();
        let marker = f.data.join(LOG_DIR_NAME).join(BASE_FILE);
        a.test_hook = Some(Box::new(move |at| {
            if at == "read again" {
                std::fs::write(&marker, b"replaced").unwrap();
            }
        }));
        let mut out = Vec::new();
        let r = a.pass(&mut out).unwrap();
        assert_eq!(ranges(&a), [(1, 8, Some(0))], "{r:?}\n{}", text(&out));
        assert!(text(&out).contains("changed while log."), "{}", text(&out));
    }

    /// Review 9, note 4: a pass that began on a standalone server's directories and finds them
    /// an ensemble member's by the time it would read the open segment again (the server
    /// restarted into an ensemble) takes nothing on a snapshot's proof.
    #[test]
    fn a_server_become_a_member_during_the_pass_proves_nothing_by_snapshot() {
        let (f, mut a) = idle_with_a_snapshot_at_10();
        let epoch = f.data.join(zk_log::snapshot::SNAP_DIR_NAME).join(zk_log::ACCEPTED_EPOCH_FILE);
        a.test_hook = Some(Box::new(move |at| {
            if at == "snapshots" {
                std::fs::write(&epoch, b"1").unwrap();
            }
        }));
        let mut out = Vec::new();
        let r = a.pass(&mut out).unwrap();
        assert_eq!(ranges(&a), [(1, 8, Some(0))], "{r:?}\n{}", text(&out));
    }

    /// The fixture's own pass (nothing changed under it) does archive through the snapshot's
    /// end: what the three tests before check is the change they make.
    #[test]
    fn an_idle_snapshot_fixture_archives_through_its_end() {
        let (_f, mut a) = idle_with_a_snapshot_at_10();
        let mut out = Vec::new();
        a.pass(&mut out).unwrap();
        assert_eq!(ranges(&a), [(1, 8, Some(0)), (9, 10, Some(8))], "{}", text(&out));
    }

    /// Review 9, note 5: the server's snapshot at the log's base marker, under the name of one
    /// the archive holds, that cannot be read (here a directory in its place) is not known the
    /// same: the piece after the marker records no predecessor (a gap) instead of chaining onto
    /// the archived snapshot.
    #[test]
    fn a_piece_after_a_marker_whose_snapshot_cannot_be_read_is_a_gap() {
        let (mut f, mut a) = archived_at_the_marker();
        let snap = f.data.join(zk_log::snapshot::SNAP_DIR_NAME).join("snapshot.000000000000000a");
        std::fs::remove_file(&snap).unwrap();
        std::fs::create_dir(&snap).unwrap();
        f.commit(11..=12);
        f.commit(13..=13);
        let mut out = Vec::new();
        a.pass(&mut out).unwrap();
        assert_eq!(ranges(&a), [(1, 8, Some(0)), (11, 12, None)], "{}", text(&out));
    }
}
