//! Offline tools behind `zkrs-server import|dump-log|dump-snapshot`: importing an Apache
//! ZooKeeper data directory, and printing our own log segments and snapshots in human-readable
//! form (as Apache's LogFormatter and SnapshotFormatter do for theirs).
//!
//! Every function is synchronous, prints to the writers it is given and returns a typed error;
//! the binary decides where output goes and what exit code an error gets. None of them modifies
//! the files it reads; `import_apache` only creates a snapshot in the destination.

use crate::apache_snap_stream::{snapshot_content, SnapStreamKind, CONTENT_BYTES_MAX};
use bytes::Bytes;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use zk_log::apache::{
    read_snapshot_bytes as read_apache_snapshot, zxid_from_apache_name, ApacheError, ApacheLog,
};
use zk_log::format::{
    check_segment_header, decode_payload_digest, record_crc, zxid_follows, HeaderCheck, RecordHeader,
    RECORD_HEADER_BYTES, SEGMENT_HEADER_BYTES,
};
use zk_log::snapshot::{list_snapshots, read_snapshot_bytes, SnapshotInfo, SNAP_DIR_NAME};
use zk_log::{FileStorage, LogError};
use zk_proto::{perms, Acl, Id};
use zk_tree::snapshot::{ContentParser, ContentRecord};
use zk_tree::{ContentBuilder, Database, Recovery, SnapshotError, SnapshotLoader, TreeConfig};

/// Why a tool failed.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// An Apache file could not be read or is damaged.
    #[error(transparent)]
    Apache(#[from] ApacheError),
    /// A zkrs log or snapshot file could not be read, is damaged, or could not be written.
    #[error(transparent)]
    Log(#[from] LogError),
    /// Snapshot content that does not load.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// A file or directory operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The path concerned.
        path: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The request cannot be carried out (the message says why).
    #[error("{0}")]
    Refused(String),
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> ToolError + '_ {
    move |source| ToolError::Io { path: path.display().to_string(), source }
}

/// Writes at most one progress line per interval (import and restore).
pub(crate) struct Progress<'a> {
    out: &'a mut dyn Write,
    last: Instant,
    every: Duration,
}

impl<'a> Progress<'a> {
    pub(crate) fn new(out: &'a mut dyn Write) -> Self {
        let every = Duration::from_secs(1);
        Progress { out, last: Instant::now() - every, every }
    }

    /// A throttled line.
    pub(crate) fn tick(&mut self, line: impl FnOnce() -> String) {
        if self.last.elapsed() >= self.every {
            self.last = Instant::now();
            let _ = writeln!(self.out, "{}", line());
        }
    }

    /// A line that always goes out.
    pub(crate) fn say(&mut self, line: String) {
        let _ = writeln!(self.out, "{line}");
    }
}

/// What an import did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportReport {
    /// The Apache snapshot the import started from (None: none was usable, started empty).
    pub apache_snapshot: Option<PathBuf>,
    /// Nodes read from it.
    pub snapshot_nodes: u64,
    /// Apache log files read.
    pub log_files: usize,
    /// Txns replayed on top of the snapshot.
    pub txns_replayed: u64,
    /// Nodes in the imported tree.
    pub nodes: u64,
    /// Sessions in the imported state.
    pub sessions: usize,
    /// Zxid of the imported state (the new snapshot's start zxid): the server continues after it.
    pub last_zxid: i64,
    /// The zkrs snapshot written.
    pub written: SnapshotInfo,
}

/// Apache keeps its files in `version-2` under dataDir/dataLogDir; accept either that directory
/// or its parent.
fn version2(dir: &Path) -> PathBuf {
    let v = dir.join("version-2");
    if v.is_dir() {
        v
    } else {
        dir.to_path_buf()
    }
}

fn apache_files(dir: &Path, prefix: &str) -> Result<Vec<(i64, PathBuf)>, ToolError> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).map_err(io_err(dir))? {
        let e = e.map_err(io_err(dir))?;
        let Ok(name) = e.file_name().into_string() else { continue };
        if let Some(z) = zxid_from_apache_name(&name, prefix) {
            v.push((z, e.path()));
        }
    }
    v.sort();
    Ok(v)
}

/// Apache's `ZooDefs.Ids.OPEN_ACL_UNSAFE`, which its ACL cache stores under key -1.
fn open_acl() -> Vec<Acl> {
    vec![Acl { perms: perms::ALL, id: Id { scheme: "world".into(), id: "anyone".into() } }]
}

/// The jute content of one Apache snapshot file, plain, gz or snappy by its name, decompressed,
/// and the name errors about that content give the file (offsets in it are offsets in the
/// content, so a compressed file's says so).
fn apache_snapshot_content(path: &Path) -> Result<(String, Bytes), ApacheError> {
    let shown = path.display().to_string();
    let data = std::fs::read(path).map_err(|source| ApacheError::Io { file: shown.clone(), source })?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let kind = SnapStreamKind::of_file_name(name);
    let content = snapshot_content(&shown, kind, Bytes::from(data), CONTENT_BYTES_MAX)?;
    let label = match kind {
        SnapStreamKind::Plain => shown,
        _ => format!("{shown} (decompressed {})", kind.method_name()),
    };
    Ok((label, content))
}

/// Builds a database from one Apache snapshot file, plain or compressed. Errors leave nothing
/// behind.
fn load_apache_snapshot(
    path: &Path,
    cfg: &TreeConfig,
    zxid: i64,
    progress: &mut Progress<'_>,
) -> Result<(Database, u64), ToolError> {
    let (label, content) = apache_snapshot_content(path)?;
    let (db, nodes, _) = apache_snapshot_database(label, content, cfg, Some(zxid), progress)?;
    Ok((db, nodes))
}

/// Builds a database from an Apache snapshot's (uncompressed) content, `label` naming it in
/// errors, as of `zxid`, or, when `None`, of the zxid the content says it is at: Apache 3.9's
/// last processed zxid, else its digest's. Returns the database, its node count and that zxid.
///
/// Errors: the content does not read as Apache's snapshot (its Adler32 seals included), a node
/// names an ACL the table lacks, or (`zxid` `None`) the content names no zxid.
fn apache_snapshot_database(
    label: String,
    content: Bytes,
    cfg: &TreeConfig,
    zxid: Option<i64>,
    progress: &mut Progress<'_>,
) -> Result<(Database, u64, i64), ToolError> {
    let mut loader = SnapshotLoader::new(cfg.clone());
    let mut nodes: Vec<(String, Option<Bytes>, i64, zk_proto::StatPersisted)> = Vec::new();
    // The ACL table comes back with the sessions once the content is read; the nodes name ACLs
    // by key, so they are held (in batches fed to the loader later) until then. Apache's
    // snapshot gives the ACL table before the nodes, but this reader reports it at the end.
    // The Adler32 seals are over the uncompressed content, as Apache computes them.
    let info = read_apache_snapshot(label.clone(), content, |n| {
        nodes.push((n.path, n.data, n.acl_key, n.stat));
    })?;
    let zxid = match zxid.or(info.last_processed_zxid).or(info.digest.map(|d| d.zxid)) {
        Some(z) => z,
        None => {
            return Err(ToolError::Refused(format!(
                "{label}: the snapshot does not say which zxid it is at (Apache 3.9 writes it after \
                 the digest, as serializeLastProcessedZxid)"
            )))
        }
    };
    let mut builder = ContentBuilder::new(zxid, 0);
    let acls: std::collections::HashMap<i64, Vec<Acl>> = info.acls.iter().cloned().collect();
    let open = open_acl();
    for (id, t) in &info.sessions {
        builder.session(*id, *t);
    }
    let total = nodes.len() as u64;
    for (i, (p, data, key, stat)) in nodes.into_iter().enumerate() {
        let acl = match acls.get(&key) {
            Some(a) => a.as_slice(),
            None if key == -1 => open.as_slice(),
            None => {
                return Err(ToolError::Refused(format!(
                    "{label}: node {p} names ACL key {key}, which the snapshot's ACL table lacks"
                )))
            }
        };
        builder.node(&p, data.as_deref(), acl, &stat);
        if i % 65536 == 65535 {
            loader.feed(&builder.take())?;
            progress.tick(|| format!("import: {} of {total} nodes loaded from {label}", i + 1));
        }
    }
    loader.feed(&builder.finish())?;
    Ok((loader.finish()?, total, zxid))
}

/// Builds the database an AdminServer `restore` puts in place from the snapshot `content` a
/// client sent (Apache's format, as the `snapshot` command serves it): the database, its node
/// count, and the zxid the content says it is at.
///
/// Errors: as a [`ToolError`]'s text: the content is not a whole, sealed Apache snapshot, or it
/// does not say which zxid it is at.
pub fn restore_content(content: Bytes, cfg: &TreeConfig) -> Result<(Database, u64, i64), String> {
    let mut quiet = std::io::sink();
    let mut progress = Progress::new(&mut quiet);
    let (db, nodes, zxid) =
        apache_snapshot_database("the restore's snapshot".into(), content, cfg, None, &mut progress)
            .map_err(|e| e.to_string())?;
    // Nothing to replay: the snapshot is the whole of it. Finishing the recovery sets up what a
    // loaded tree needs to serve (its identity, quotas, sessions' clocks).
    Ok((Recovery::new(db).finish(0), nodes, zxid))
}

/// Imports an Apache ZooKeeper data directory: loads the newest Apache snapshot that reads
/// cleanly from `apache_data_dir` (its `version-2`; plain `snapshot.<zxid>`, or `.gz` or
/// `.snappy` as Apache 3.6+ writes them under `zookeeper.snapshot.compression.method`,
/// decompressed and then checked against their Adler32 seals, which Apache computes over the
/// uncompressed content: [`crate::apache_snap_stream`]), replays every later txn from the log files
/// in `apache_log_dir` idempotently (Apache's snapshots are fuzzy too), and writes the result as
/// a zkrs snapshot in `dest_data_dir`'s `zkrs-snap` directory. Progress lines (nodes and txns
/// loaded, at most one a second, plus a summary) go to `progress`.
///
/// The server started on `dest_data_dir` afterwards loads that snapshot, with an empty zkrs log,
/// and continues at zxid `last_zxid + 1`.
///
/// Errors: [`ToolError::Refused`] if `dest_data_dir` already holds zkrs snapshots, if no snapshot
/// is usable while logs do not start at zxid 1 (or hold no transaction at all: nothing to
/// import), or if the logs have a gap after the snapshot;
/// [`ToolError::Apache`] for a damaged log before its tail; [`ToolError::Log`] if the snapshot
/// cannot be written (or another process holds the directory).
pub fn import_apache(
    apache_data_dir: &Path,
    apache_log_dir: &Path,
    dest_data_dir: &Path,
    cfg: TreeConfig,
    progress: &mut dyn Write,
) -> Result<ImportReport, ToolError> {
    let mut progress = Progress::new(progress);
    let snap_dir = dest_data_dir.join(SNAP_DIR_NAME);
    let storage = FileStorage::open_dir(&snap_dir).map_err(io_err(&snap_dir))?;
    if !list_snapshots(&storage)?.is_empty() {
        return Err(ToolError::Refused(format!(
            "{} already holds zkrs snapshots; import into an empty data directory",
            snap_dir.display()
        )));
    }

    // The newest Apache snapshot of any stream kind that reads cleanly (a torn or damaged newest
    // one is skipped, as Apache does); at one zxid, .snappy before .gz before plain.
    let snaps = apache_files(&version2(apache_data_dir), "snapshot")?;
    let mut start: Option<(Database, i64, PathBuf, u64)> = None;
    for (zxid, path) in snaps.iter().rev() {
        match load_apache_snapshot(path, &cfg, *zxid, &mut progress) {
            Ok((db, n)) => {
                progress.say(format!("import: {n} nodes loaded from {}", path.display()));
                start = Some((db, *zxid, path.clone(), n));
                break;
            }
            Err(e) => progress.say(format!("import: skipping {}: {e}", path.display())),
        }
    }
    let (db, snap_zxid, snap_path, snapshot_nodes) = match start {
        Some((db, z, p, n)) => (db, z, Some(p), n),
        None => (Database::new(cfg.clone()), 0, None, 0),
    };

    // Every log file that can hold txns after the snapshot: the last one starting at or below
    // snap_zxid + 1, and all after it.
    let logs = apache_files(&version2(apache_log_dir), "log")?;
    let first = logs.iter().rposition(|(z, _)| *z <= snap_zxid + 1).unwrap_or(0);
    let mut rec = Recovery::new(db);
    let mut prev = snap_zxid;
    let mut log_files = 0;
    for (_, path) in &logs[first..] {
        let mut log = ApacheLog::open(path)?;
        log_files += 1;
        for t in log.by_ref() {
            let (hdr, txn) = t?;
            if hdr.zxid <= snap_zxid {
                continue;
            }
            // A new epoch restarts the counter; anything else that skips a zxid is a lost file.
            if !zxid_follows(prev, hdr.zxid) {
                return Err(ToolError::Refused(format!(
                    "{}: zxid {:#x} does not follow {prev:#x}: a log file is missing",
                    path.display(),
                    hdr.zxid
                )));
            }
            prev = hdr.zxid;
            rec.replay(&hdr, &txn);
            let n = rec.replayed();
            progress.tick(|| format!("import: {n} txns replayed (zxid {:#x})", hdr.zxid));
        }
        if log.ended_torn() {
            progress
                .say(format!("import: {} ends with a torn entry (ignored, as Apache does)", path.display()));
        }
    }
    let txns_replayed = rec.replayed();
    if snap_path.is_none() && txns_replayed == 0 {
        // Every snapshot damaged (or none) and no log to rebuild from: an empty tree here would
        // be a silent loss (or a wrong path), where Apache refuses to start.
        return Err(ToolError::Refused(format!(
            "nothing to import: none of the {} snapshots in {} reads cleanly and no log in {} holds \
             a transaction",
            snaps.len(),
            version2(apache_data_dir).display(),
            version2(apache_log_dir).display()
        )));
    }
    // Session expiry is not written to the snapshot: any clock will do.
    let db = rec.finish(0);

    // Write it as our snapshot, streamed in steps so the content is never whole in memory, and
    // uncompressed (format 1, which every zkrs reads; the server's own snapshots follow its
    // snapshot.compression from then on).
    let written = crate::snapshots::write_whole(&storage, &db, 16_384, zk_log::snapshot::Compression::None)?;
    let report = ImportReport {
        apache_snapshot: snap_path,
        snapshot_nodes,
        log_files,
        txns_replayed,
        nodes: db.tree().len() as u64,
        sessions: db.sessions().len(),
        last_zxid: db.last_applied_zxid(),
        written,
    };
    progress.say(format!(
        "import: done: {} nodes, {} sessions, zxid {:#x} ({} txns replayed from {} log files) -> {}",
        report.nodes,
        report.sessions,
        report.last_zxid,
        report.txns_replayed,
        report.log_files,
        snap_dir.join(&report.written.name).display()
    ));
    Ok(report)
}

fn show_data(d: Option<&[u8]>) -> String {
    match d {
        None => "null".into(),
        Some(d) => {
            const SHOWN: usize = 64;
            let s: String = String::from_utf8_lossy(&d[..d.len().min(SHOWN)]).escape_debug().collect();
            if d.len() > SHOWN {
                format!("\"{s}\"... ({} bytes)", d.len())
            } else {
                format!("\"{s}\"")
            }
        }
    }
}

/// Prints a zkrs snapshot file (`snapshot.<zxid>`): the container's facts, then every record
/// (header, ACL lists, sessions, each node with its stat), checking everything as it goes.
///
/// Errors: [`ToolError::Io`] if the file cannot be read; [`ToolError::Log`] if it is damaged or
/// of a newer format (what was printed before the damage stays printed).
pub fn dump_snapshot(path: &Path, out: &mut dyn Write) -> Result<SnapshotInfo, ToolError> {
    let data = std::fs::read(path).map_err(io_err(path))?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
    let mut parser = ContentParser::new();
    let mut write_err: Option<std::io::Error> = None;
    let info = read_snapshot_bytes(&name, &data, &mut |chunk| {
        parser
            .feed(chunk, &mut |r| {
                if let Err(e) = print_record(&r, out) {
                    write_err.get_or_insert(e);
                }
                Ok(())
            })
            .map_err(|e| e.to_string())
    })?;
    if let Some(e) = write_err {
        return Err(ToolError::Io { path: "output".into(), source: e });
    }
    if !parser.at_boundary() {
        return Err(ToolError::Refused(format!("{}: content ends inside a record", path.display())));
    }
    writeln!(
        out,
        "snapshot {}: start zxid {:#x}, {} bytes, {} content bytes in {} chunks{}, all checksums good",
        info.name,
        info.start_zxid,
        info.file_bytes,
        info.content_bytes,
        info.chunks,
        match info.codec {
            zk_log::snapshot::Codec::None => String::new(),
            codec => format!(" ({} compressed)", codec.name()),
        }
    )
    .map_err(io_err(Path::new("output")))?;
    Ok(info)
}

fn print_record(r: &ContentRecord<'_>, out: &mut dyn Write) -> std::io::Result<()> {
    match r {
        ContentRecord::Header(h) => writeln!(
            out,
            "header: content version {}, start zxid {:#x}, {} nodes when begun",
            h.version, h.start_zxid, h.node_hint
        ),
        ContentRecord::Acl { index, acl } => {
            let list: Vec<String> =
                acl.iter().map(|a| format!("{}:{}:{:#x}", a.id.scheme, a.id.id, a.perms)).collect();
            writeln!(out, "acl {index}: [{}]", list.join(", "))
        }
        ContentRecord::Session { id, timeout_ms } => writeln!(out, "session {id:#x} timeout {timeout_ms} ms"),
        ContentRecord::Node(n) => {
            let s = &n.stat;
            writeln!(out, "----\n{}", n.path)?;
            writeln!(
                out,
                "  cZxid = {:#x}\n  ctime = {}\n  mZxid = {:#x}\n  mtime = {}",
                s.czxid, s.ctime, s.mzxid, s.mtime
            )?;
            writeln!(
                out,
                "  pZxid = {:#x}\n  cversion = {}\n  dataVersion = {}\n  aclVersion = {}",
                s.pzxid, s.cversion, s.version, s.aversion
            )?;
            writeln!(out, "  ephemeralOwner = {:#x}\n  acl = {}", s.ephemeral_owner, n.acl)?;
            writeln!(out, "  dataLength = {}\n  data = {}", n.data.map_or(0, |d| d.len()), show_data(n.data))
        }
        ContentRecord::End { nodes, acls, sessions } => {
            writeln!(out, "----\nend: {nodes} nodes, {acls} ACL lists, {sessions} sessions")
        }
    }
}

/// Prints a zkrs log: one segment file, or every `log.*` segment of a directory in order. One
/// line per txn (time, session, cxid, zxid, type, body), then a summary; the end of each segment
/// is explained (clean end, preallocated zeros, or a torn/corrupt tail at an offset). Read-only:
/// nothing is cut or repaired (the server's recovery does that).
///
/// Errors: [`ToolError::Io`] if a file cannot be read; [`ToolError::Refused`] for a file that is
/// not a zkrs segment (or a newer version of one).
pub fn dump_log(path: &Path, out: &mut dyn Write) -> Result<u64, ToolError> {
    let files: Vec<PathBuf> = if path.is_dir() {
        let mut v: Vec<(i64, PathBuf)> = Vec::new();
        for e in std::fs::read_dir(path).map_err(io_err(path))? {
            let e = e.map_err(io_err(path))?;
            if let Some(z) = e.file_name().to_str().and_then(zk_log::format::parse_segment_name) {
                v.push((z, e.path()));
            }
        }
        v.sort();
        v.into_iter().map(|(_, p)| p).collect()
    } else {
        vec![path.to_path_buf()]
    };
    let w = |e: std::io::Error| ToolError::Io { path: "output".into(), source: e };
    let mut total = 0u64;
    for f in files {
        total += dump_segment(&f, out)?;
    }
    writeln!(out, "{total} transactions").map_err(w)?;
    Ok(total)
}

fn dump_segment(path: &Path, out: &mut dyn Write) -> Result<u64, ToolError> {
    let data = std::fs::read(path).map_err(io_err(path))?;
    let w = |e: std::io::Error| ToolError::Io { path: "output".into(), source: e };
    let first = match check_segment_header(&data) {
        HeaderCheck::Valid { first_zxid } => first_zxid,
        HeaderCheck::NewerVersion(v) => {
            return Err(ToolError::Refused(format!(
                "{}: segment format version {v} is newer than this zkrs reads",
                path.display()
            )))
        }
        HeaderCheck::Invalid(why) => {
            return Err(ToolError::Refused(format!("{}: not a zkrs log segment: {why}", path.display())))
        }
    };
    writeln!(out, "segment {} (first zxid {first:#x})", path.display()).map_err(w)?;
    let mut off = SEGMENT_HEADER_BYTES as usize;
    let mut n = 0u64;
    let end_note = loop {
        if off == data.len() {
            break "ends after its last record".to_string();
        }
        let Some(hb) = data.get(off..off + RECORD_HEADER_BYTES as usize) else {
            break format!("{} stray bytes at offset {off} (torn tail)", data.len() - off);
        };
        let h = RecordHeader::parse(hb.try_into().expect("16 bytes"));
        if h.is_zero() {
            break format!("preallocated zeros from offset {off}");
        }
        let body_at = off + RECORD_HEADER_BYTES as usize;
        let Some(payload) = data.get(body_at..body_at + h.len as usize).filter(|_| h.len_plausible()) else {
            break format!("bad record length {} at offset {off} (torn or corrupt tail)", h.len);
        };
        if record_crc(h.len, h.zxid, payload) != h.crc {
            break format!("checksum mismatch at offset {off} (torn or corrupt tail)");
        }
        match decode_payload_digest(Bytes::copy_from_slice(payload)) {
            Ok((hdr, txn, digest)) => {
                let ty = zk_proto::OpCode::from_i32(hdr.txn_type)
                    .map_or(format!("type {}", hdr.txn_type), |o| format!("{o:?}"));
                let digest =
                    digest.map_or(String::new(), |d| format!(" digest {}:{:x}", d.version, d.tree_digest));
                writeln!(
                    out,
                    "{} session {:#x} cxid {:#x} zxid {:#x} {ty} {txn:?}{digest}",
                    hdr.time, hdr.client_id, hdr.cxid, hdr.zxid
                )
                .map_err(w)?;
            }
            Err(e) => writeln!(out, "zxid {:#x}: payload does not decode: {e}", h.zxid).map_err(w)?,
        }
        n += 1;
        off = body_at + h.len as usize;
    };
    writeln!(out, "segment {}: {n} records; {end_note}", path.display()).map_err(w)?;
    Ok(n)
}

/// Whether `dir` exists (what it is, opening it tells); errors other than its absence are
/// errors.
fn exists(dir: &Path) -> Result<bool, ToolError> {
    match std::fs::symlink_metadata(dir) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io_err(dir)(e)),
    }
}

/// What [`purge`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PurgeReport {
    /// Snapshots removed, oldest first.
    pub snapshots_removed: Vec<String>,
    /// Snapshots kept.
    pub snapshots_kept: Vec<String>,
    /// Log segments removed.
    pub segments_removed: Vec<String>,
    /// What was kept for the server's archive (`zkrs.backup.to`), which has not taken it yet, as
    /// the data directory's progress file says; `None` when nothing was.
    pub kept_for_archive: Option<String>,
}

/// The smallest number of snapshots [`purge`] keeps, as Apache's PurgeTxnLog requires.
pub const PURGE_KEEP_MIN: usize = 3;

/// Keeps the newest `keep` snapshots in `data_dir` and removes older ones, then removes the log
/// segments in `data_log_dir` that only hold transactions older than the oldest kept snapshot — what
/// Apache's `zkCleanup.sh -n N` does for its files. A running server purges after every snapshot on
/// its own; this is for a stopped one.
///
/// A server that archives by itself (`zkrs.backup.to`) leaves what its archive has taken in
/// `zkrs-snap/` ([`crate::backup::continuous::PROGRESS_FILE`]): the snapshots and log segments
/// it had not taken are kept, as the server's own purge keeps them
/// ([`crate::backup::continuous::Taken::allow`]), and the report says so.
///
/// Errors: [`ToolError::Refused`] for `keep` below [`PURGE_KEEP_MIN`]; [`ToolError::Log`] when a
/// directory is locked by a running server, or a file cannot be read or removed.
pub fn purge(data_dir: &Path, data_log_dir: &Path, keep: usize) -> Result<PurgeReport, ToolError> {
    if keep < PURGE_KEEP_MIN {
        return Err(ToolError::Refused(format!(
            "keep at least {PURGE_KEEP_MIN} snapshots (asked for {keep})"
        )));
    }
    let snap_dir = data_dir.join(SNAP_DIR_NAME);
    // Nothing is created: a directory that is not there holds nothing to purge (and an empty
    // zkrs-snap made here beside a restore's staging directory would hide that the restore did
    // not finish).
    if !exists(&snap_dir)? {
        return Ok(PurgeReport::default());
    }
    let snaps = FileStorage::open_dir(&snap_dir).map_err(io_err(&snap_dir))?;
    let progress = crate::backup::continuous::read_progress(&snap_dir);
    let (at_most, log_cap) = match &progress {
        None => (usize::MAX, Some(i64::MAX)),
        Some(p) => {
            let all = zk_log::snapshot::list_snapshots(&snaps)?;
            p.taken.allow(&all, all.len().saturating_sub(keep))
        }
    };
    let (r, trash) = zk_log::snapshot::retain_newest_to_trash_at_most(&snaps, keep, at_most)?;
    for t in &trash {
        zk_log::remove_gradually(&snaps, t).map_err(io_err(&snap_dir.join(t)))?;
    }
    let whole = zk_log::snapshot::list_snapshots(&snaps)?.len().saturating_sub(keep);
    let capped = match (r.purge_logs_before, log_cap) {
        (Some(p), Some(c)) => c < p,
        (Some(_), None) => true,
        (None, _) => false,
    };
    let kept_for_archive = progress.as_ref().filter(|_| whole > 0 || capped).map(|p| {
        let hex = |z: Option<i64>| z.map_or("none".to_string(), |z| format!("{z:#x}"));
        format!(
            "kept for the archive {}, which had taken the log through zxid {} and the snapshots through {} \
             (as of {}): {whole} snapshot(s) more than {keep}, and the log they and the archive need; remove \
             {} to purge them anyway (the archive will lack them)",
            p.target,
            hex(p.taken.log_through),
            hex(p.taken.snapshots_through),
            crate::backup::time::format_time_ms(p.at_ms),
            snap_dir.join(crate::backup::continuous::PROGRESS_FILE).display()
        )
    });
    let mut report = PurgeReport {
        snapshots_removed: r.removed,
        snapshots_kept: r.kept,
        segments_removed: Vec::new(),
        kept_for_archive,
    };
    let purge_logs_before = match (r.purge_logs_before, log_cap) {
        (Some(p), Some(c)) => Some(p.min(c)),
        _ => None,
    };
    let log_dir = data_log_dir.join(zk_log::LOG_DIR_NAME);
    if let Some(before) = purge_logs_before.filter(|_| exists(&log_dir).unwrap_or(true)) {
        let storage = FileStorage::open_dir(&log_dir).map_err(io_err(&log_dir))?;
        let mut log = zk_log::SegmentLog::open(storage, zk_log::LogOptions::default())?;
        report.segments_removed = log.purge_before(before)?;
    }
    Ok(report)
}
