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
//! another transaction. The records of the last sync group wait for the next write.
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
}

/// Where the last archived record of a server segment ended, so the next pass reads that
/// segment on from there.
#[derive(Debug, Clone)]
struct TailScan {
    name: String,
    offset: u64,
    prev_zxid: i64,
}

/// An archived segment being staged.
struct Piece {
    name: String,
    path: PathBuf,
    file: std::io::BufWriter<File>,
    /// Bytes written, the header included.
    bytes: u64,
    summary: SegmentSummary,
    /// Before the last group-marked record: (bytes, summary, offset in the server's segment).
    durable: Option<(u64, SegmentSummary, u64)>,
    /// The first piece of a log that was never purged or reset.
    from_start: bool,
}

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
    /// Server segments known to hold nothing the archive lacks.
    done: std::collections::HashSet<String>,
    newest_on_disk: Option<i64>,
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

/// A zxid for messages: hex, as the server's logs show them.
fn hex(z: i64) -> String {
    format!("{z:#x}")
}

/// How many transactions lie between two zxids, when both are in one epoch.
pub fn txns_between(older: i64, newer: i64) -> Option<i64> {
    (older >> 32 == newer >> 32).then(|| (newer - older).max(0))
}

impl Archiver {
    /// Opens the archive `target` for the server whose dataDir is `data_dir` and dataLogDir
    /// `data_log_dir` (the same directory when the server has no separate dataLogDir).
    ///
    /// Errors: another archiver holds the archive's staging directory; the manifest is
    /// damaged; a directory cannot be created.
    pub fn open(
        target: Box<dyn ArchiveTarget>,
        data_dir: &Path,
        data_log_dir: &Path,
    ) -> Result<Self, BackupError> {
        let staging = target.staging_dir();
        let staging_storage = FileStorage::open_dir(&staging).map_err(|e| {
            if e.kind() == std::io::ErrorKind::WouldBlock {
                BackupError::Refused(format!(
                    "{}: another `zkrs-server backup` is writing to this archive",
                    staging.display()
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
        let manifest = target.read_manifest()?.unwrap_or_default();
        Ok(Archiver {
            target,
            log_dir: data_log_dir.join(LOG_DIR_NAME),
            snap_dir: data_dir.join(zk_log::snapshot::SNAP_DIR_NAME),
            staging,
            staging_storage,
            manifest,
            tail: None,
            done: std::collections::HashSet::new(),
            newest_on_disk: None,
        })
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

    fn commit_manifest(&mut self) -> Result<(), BackupError> {
        self.manifest.generation += 1;
        self.target.write_manifest(&self.manifest)
    }

    /// One pass: archives the transactions the archive lacks, from every segment (the open
    /// one up to where its records are known durable), and every finished snapshot it lacks,
    /// then reports the lag. Progress lines go to `out`.
    ///
    /// Errors: a file that cannot be read or installed, or a closed segment or snapshot that is
    /// damaged on the server (named; it is not archived, and no later transaction is either, so
    /// the archived log never skips it unnoticed).
    pub fn pass(&mut self, out: &mut dyn Write) -> Result<PassReport, BackupError> {
        let mut report = PassReport::default();
        let segments = list_named(&self.log_dir, parse_segment_name)?;
        self.done.retain(|n| segments.iter().any(|(_, s)| s == n));
        for (i, (_, name)) in segments.iter().enumerate() {
            if self.done.contains(name) {
                continue;
            }
            let next_first = segments.get(i + 1).map(|(z, _)| *z);
            // A segment followed by one that starts at or before the archive's next zxid holds
            // nothing the archive lacks.
            if let (Some(l), Some(next)) = (self.manifest.last_log_zxid(), next_first) {
                if next <= l.saturating_add(1) {
                    self.done.insert(name.clone());
                    continue;
                }
            }
            let open = next_first.is_none();
            if let Some(piece) = self.archive_segment(name, open, i == 0, out)? {
                report.logs.push(piece);
            }
            if !open {
                self.done.insert(name.clone());
            }
        }
        self.archive_snapshots(out, &mut report)?;
        report.newest_archived = self.manifest.last_log_zxid();
        report.newest_on_disk = self.newest_on_disk.max(report.newest_archived);
        Ok(report)
    }

    /// Archives the records of segment `name` the archive lacks as one archived segment (a
    /// piece: a segment header for its first zxid, then the records' frames as stored). Of the
    /// `open` segment only the records before its last group mark are taken: those are durable
    /// (docs/log-format.md, "Sync groups"); the rest waits for the next pass. Returns the
    /// piece's name, if one was archived.
    fn archive_segment(
        &mut self,
        name: &str,
        open: bool,
        oldest: bool,
        out: &mut dyn Write,
    ) -> Result<Option<String>, BackupError> {
        let src = self.log_dir.join(name);
        let shown = src.display().to_string();
        let f = match File::open(&src) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let _ = writeln!(out, "backup: {name} was purged by the server before it could be archived");
                return Ok(None);
            }
            Err(e) => return Err(io_err(&src)(e)),
        };
        let damaged = |d: super::segment::SegmentDamage| BackupError::Damaged {
            key: d.name.clone(),
            why: format!("{} at offset {}", d.why, d.offset),
        };
        let mut r = SegmentReader::open(&shown, BufReader::new(f)).map_err(damaged)?;
        let last = self.manifest.last_log_zxid();
        if let (Some(t), Some(l)) = (&self.tail, last) {
            if t.name == name && t.prev_zxid == l {
                r.resume_at(t.offset, t.prev_zxid).map_err(damaged)?;
            }
        }
        let mut piece: Option<Piece> = None;
        let mut before = r.offset();
        loop {
            let rec = match r.next_record() {
                Ok(Some(rec)) => rec,
                Ok(None) => break,
                // The open segment ends in a record being written: stop before it.
                Err(_) if open => break,
                Err(d) => {
                    if let Some(p) = piece.take() {
                        self.discard(&p.path);
                    }
                    if !src.exists() {
                        let _ = writeln!(out, "backup: {name} was purged by the server while it was read");
                        return Ok(None);
                    }
                    return Err(damaged(d));
                }
            };
            let z = rec.header.zxid;
            self.newest_on_disk = self.newest_on_disk.max(Some(z));
            if last.is_some_and(|l| z <= l) {
                before = r.offset();
                continue;
            }
            match &mut piece {
                Some(p) => {
                    if rec.group_start {
                        p.durable = Some((p.bytes, p.summary, before));
                    }
                    p.summary.add(&rec);
                }
                None => {
                    if let Some(l) = last {
                        if !zk_log::format::zxid_follows(l, z) {
                            let _ = writeln!(
                                out,
                                "backup: WARNING: the archived log has a gap: it ends at {} and the server's log \
                                 goes on at {} (the server purged the segments between before they were \
                                 archived); a restore to a zxid in the gap is impossible, and later ones need \
                                 a snapshot taken after it",
                                hex(l),
                                hex(z)
                            );
                        }
                    }
                    let piece_name = zk_log::format::segment_name(z);
                    let path = self.staging.join(&piece_name);
                    let mut file = std::io::BufWriter::new(File::create(&path).map_err(io_err(&path))?);
                    file.write_all(&encode_segment_header(z)).map_err(io_err(&path))?;
                    piece = Some(Piece {
                        name: piece_name,
                        path,
                        file,
                        bytes: SEGMENT_HEADER_BYTES,
                        summary: SegmentSummary::of(&rec),
                        durable: None,
                        from_start: last.is_none() && oldest && !self.log_dir.join(BASE_FILE).exists(),
                    });
                }
            }
            let p = piece.as_mut().expect("set above");
            p.file.write_all(&rec.frame).map_err(io_err(&p.path))?;
            p.bytes += rec.frame.len() as u64;
            before = r.offset();
        }
        let Some(p) = piece else {
            // Nothing new: the next pass over this segment starts where this one ended, so an
            // idle server's open segment is not read again from its start at every interval.
            if let (Some(l), true) = (last, self.newest_on_disk == last) {
                if before > SEGMENT_HEADER_BYTES {
                    self.tail = Some(TailScan { name: name.to_string(), offset: before, prev_zxid: l });
                }
            }
            return Ok(None);
        };
        let Piece { name: piece_name, path, file, bytes, summary, durable, from_start } = p;
        let (len, summary, resume) = match (open, durable) {
            (false, _) => (bytes, summary, before),
            (true, Some(d)) => d,
            (true, None) => {
                drop(file);
                self.discard(&path);
                return Ok(None);
            }
        };
        let file = file.into_inner().map_err(|e| io_err(&path)(e.into_error()))?;
        file.set_len(len).and_then(|_| file.sync_all()).map_err(io_err(&path))?;
        drop(file);
        // Read back what was written, checking every record again, for its size and checksum.
        let mut crc = CrcReader::new(BufReader::new(File::open(&path).map_err(io_err(&path))?));
        let check = summarize(&path.display().to_string(), &mut crc).map_err(damaged)?;
        let (bytes, crc32) = crc.finish().map_err(io_err(&path))?;
        assert_eq!(check, summary, "a staged piece reads back as it was written");
        let key = format!("{LOG_PREFIX}{piece_name}");
        self.target.put_file(&key, &path)?;
        self.manifest.log_from_start |= from_start;
        self.manifest.add_log(LogFile {
            name: piece_name.clone(),
            bytes,
            crc32,
            first_zxid: summary.first_zxid,
            last_zxid: summary.last_zxid,
            records: summary.records,
            first_time_ms: summary.first_time_ms,
            last_time_ms: summary.last_time_ms,
            max_time_ms: summary.max_time_ms,
            digests: summary.digests,
        });
        self.commit_manifest()?;
        self.tail = Some(TailScan { name: name.to_string(), offset: resume, prev_zxid: summary.last_zxid });
        let _ = writeln!(
            out,
            "backup: archived {key} (from {name}): zxid {}..{}, {} txns from {} to {}, {bytes} bytes",
            hex(summary.first_zxid),
            hex(summary.last_zxid),
            summary.records,
            format_time_ms(summary.first_time_ms),
            format_time_ms(summary.last_time_ms)
        );
        Ok(Some(piece_name))
    }

    /// Archives every finished snapshot the archive lacks.
    fn archive_snapshots(&mut self, out: &mut dyn Write, report: &mut PassReport) -> Result<(), BackupError> {
        for (start, name) in list_named(&self.snap_dir, parse_snapshot_name)? {
            if self.manifest.snapshots.iter().any(|s| s.name == name) {
                continue;
            }
            let src = self.snap_dir.join(&name);
            let Some((staged, bytes, crc32)) = self.stage(&src, &name)? else {
                let _ = writeln!(out, "backup: {name} was removed by the server before it could be archived");
                continue;
            };
            match self.check_snapshot(&name) {
                Ok((end, nodes)) => {
                    let key = format!("{SNAP_PREFIX}{name}");
                    self.target.put_file(&key, &staged)?;
                    let (end_zxid, tree_digest) = match end {
                        Some(e) => (Some(e.zxid), e.digest),
                        None => (None, None),
                    };
                    self.manifest.add_snapshot(SnapFile {
                        name: name.clone(),
                        bytes,
                        crc32,
                        start_zxid: start,
                        end_zxid,
                        tree_digest,
                        nodes,
                    });
                    self.commit_manifest()?;
                    let _ = writeln!(
                        out,
                        "backup: archived {key}: start zxid {}, end zxid {}, {nodes} nodes, {bytes} bytes{}",
                        hex(start),
                        end_zxid.map_or("not recorded".into(), hex),
                        if tree_digest.is_some() { ", tree digest recorded" } else { "" }
                    );
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

/// A progress line about the lag.
pub fn lag_line(r: &PassReport) -> String {
    match (r.newest_on_disk, r.newest_archived) {
        (None, _) => "backup: the server's log holds no transaction yet".to_string(),
        (Some(d), None) => format!("backup: lag: nothing archived yet; newest zxid on disk {}", hex(d)),
        (Some(d), Some(a)) => {
            let n = txns_between(a, d).map_or("a new epoch's".to_string(), |n| n.to_string());
            format!("backup: lag: {n} txns (newest zxid on disk {}, newest archived {})", hex(d), hex(a))
        }
    }
}

/// `zkrs-server backup`: opens the archive and runs one pass, or, with `follow`, a pass every
/// `interval` until the process is stopped (stopping it at any moment leaves a usable archive).
///
/// Errors: the archive cannot be opened; in one-pass mode, the pass's error. With `follow`, a
/// failed pass is reported and retried at the next interval.
pub fn run(
    target: &str,
    data_dir: &Path,
    data_log_dir: &Path,
    follow: bool,
    interval: Duration,
    out: &mut dyn Write,
) -> Result<(), BackupError> {
    let t = super::target::open(target)?;
    if !data_dir.is_dir() {
        return Err(BackupError::Refused(format!("{}: not a directory", data_dir.display())));
    }
    let mut a = Archiver::open(t, data_dir, data_log_dir)?;
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
            Err(e) if follow => {
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
    use crate::backup::target::DirTarget;
    use zk_log::{LogOptions, SegmentLog};
    use zk_proto::{CreateTxn, OpCode, Txn, TxnHeader};

    fn create(zxid: i64) -> (TxnHeader, Txn) {
        let hdr = TxnHeader {
            client_id: 1,
            cxid: zxid as i32,
            zxid,
            time: 1_000 + zxid,
            txn_type: OpCode::Create.code(),
        };
        let txn = Txn::Create(CreateTxn {
            path: format!("/n{zxid}"),
            data: None,
            acl: vec![],
            ephemeral: false,
            parent_cversion: zxid as i32,
        });
        (hdr, txn)
    }

    fn commit(log: &mut SegmentLog<FileStorage>, zxids: std::ops::RangeInclusive<i64>) {
        let batch: Vec<(TxnHeader, Txn)> = zxids.map(create).collect();
        let refs: Vec<(&TxnHeader, &Txn)> = batch.iter().map(|(h, t)| (h, t)).collect();
        log.commit(&refs).unwrap();
    }

    /// Of the segment being written, a pass takes only the records before its last group mark
    /// (each commit is one sync group): the newest group waits until a later one proves it
    /// durable. The pieces join up with no gap and read back as segments.
    #[test]
    fn the_open_segment_is_archived_up_to_its_last_group_mark() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let storage = FileStorage::open_dir(data.join(LOG_DIR_NAME)).unwrap();
        let mut log = SegmentLog::open(storage, LogOptions::default()).unwrap();
        let archive = dir.path().join("archive");
        let mut a = Archiver::open(Box::new(DirTarget::new(archive.clone())), &data, &data).unwrap();
        let mut out = Vec::new();

        commit(&mut log, 1..=3);
        let r = a.pass(&mut out).unwrap();
        assert_eq!(r.newest_archived, None, "the only group is not known durable yet");
        assert_eq!(r.newest_on_disk, Some(3));

        commit(&mut log, 4..=5);
        commit(&mut log, 6..=6);
        let r = a.pass(&mut out).unwrap();
        assert_eq!((r.newest_archived, r.newest_on_disk), (Some(5), Some(6)));
        assert_eq!(lag_line(&r), "backup: lag: 1 txns (newest zxid on disk 0x6, newest archived 0x5)");

        commit(&mut log, 7..=7);
        let r = a.pass(&mut out).unwrap();
        assert_eq!(r.newest_archived, Some(6));
        let m = a.manifest();
        let ranges: Vec<(i64, i64)> = m.logs.iter().map(|l| (l.first_zxid, l.last_zxid)).collect();
        assert_eq!(ranges, [(1, 5), (6, 6)]);
        assert!(m.log_from_start);
        for l in &m.logs {
            let f = File::open(archive.join(LOG_PREFIX).join(&l.name)).unwrap();
            let s = summarize(&l.name, BufReader::new(f)).unwrap();
            assert_eq!((s.first_zxid, s.last_zxid, s.records), (l.first_zxid, l.last_zxid, l.records));
            assert_eq!((s.first_time_ms, s.last_time_ms), (1_000 + l.first_zxid, 1_000 + l.last_zxid));
        }
        // A manifest read back equals the one in memory.
        let back = DirTarget::new(archive).read_manifest().unwrap().unwrap();
        assert_eq!(&back, a.manifest());
    }
}
