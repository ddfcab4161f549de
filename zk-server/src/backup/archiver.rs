//! `zkrs-server backup`: copies what a server has closed and the archive lacks into the
//! archive, once or every `--interval` (`--follow`).
//!
//! What is closed: every log segment but the newest (the server appends only to its newest
//! segment; a roll closes the old one, cut at its last record and synced, before the next
//! exists), and every snapshot under its final name (the server renames a snapshot only once it
//! is complete and synced). The newest segment is archived once the server has started the
//! next one: after a snapshot, or when the segment is full.
//!
//! Each file is first copied into the staging directory with plain reads (never through a
//! mapping: the server may purge, and cut down, a file while it is read), and the copy is then
//! checked whole (every record of a segment, every chunk of a snapshot). A file that vanished or
//! was cut short while copied was purged by the server: it is reported and skipped. A checked
//! copy is installed under its key, and only then does the manifest name it.

use super::manifest::{LogFile, Manifest, SnapFile, LOG_PREFIX, SNAP_PREFIX};
use super::segment::{summarize, SegmentReader};
use super::target::{copy_with_crc, ArchiveTarget};
use super::time::format_time_ms;
use super::{io_err, BackupError};
use std::fs::File;
use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;
use zk_log::format::parse_segment_name;
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

/// The last look at the server's open segment, so the next look reads only what was added.
#[derive(Debug, Clone)]
struct TailScan {
    name: String,
    offset: u64,
    last_zxid: Option<i64>,
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

    /// One pass: archives every closed segment and finished snapshot the archive lacks,
    /// then looks at the open segment for the lag. Progress lines go to `out`.
    ///
    /// Errors: a file that cannot be read or installed, or a closed segment or snapshot that is
    /// damaged on the server (named; it is not archived, and no later segment is either, so
    /// the archived log never skips it unnoticed).
    pub fn pass(&mut self, out: &mut dyn Write) -> Result<PassReport, BackupError> {
        let mut report = PassReport::default();
        let segments = list_named(&self.log_dir, parse_segment_name)?;
        let closed = segments.len().saturating_sub(1);
        for (i, (first, name)) in segments[..closed].iter().enumerate() {
            if self.manifest.logs.iter().any(|l| &l.name == name) {
                continue;
            }
            let last = self.manifest.last_log_zxid();
            if last.is_some_and(|l| *first <= l) {
                let _ = writeln!(
                    out,
                    "backup: skipping {name}: it overlaps the archived log (through {}); the server's log \
                     was truncated after it was archived",
                    hex(last.unwrap_or_default())
                );
                continue;
            }
            let src = self.log_dir.join(name);
            let Some((staged, bytes, crc32)) = self.stage(&src, name)? else {
                let _ = writeln!(out, "backup: {name} was purged by the server before it could be archived");
                continue;
            };
            let summary = File::open(&staged).map_err(io_err(&staged)).and_then(|f| {
                summarize(&src.display().to_string(), BufReader::new(f)).map_err(|d| BackupError::Damaged {
                    key: d.name.clone(),
                    why: format!("{} at offset {}", d.why, d.offset),
                })
            });
            let summary = match summary {
                Ok(s) => s,
                Err(e) => {
                    self.discard(&staged);
                    if !src.exists() {
                        let _ = writeln!(out, "backup: {name} was purged by the server while it was copied");
                        continue;
                    }
                    return Err(e);
                }
            };
            if let Some(l) = last {
                if !zk_log::format::zxid_follows(l, summary.first_zxid) {
                    let _ = writeln!(
                        out,
                        "backup: WARNING: the archived log has a gap: it ends at {} and {name} starts at {} \
                         (the server purged the segments between before they were archived); a restore \
                         to a zxid in the gap is impossible, and later ones need a snapshot taken after it",
                        hex(l),
                        hex(summary.first_zxid)
                    );
                }
            } else if i == 0 && !self.log_dir.join(BASE_FILE).exists() {
                // The oldest segment of a log never purged or reset: it starts at the beginning.
                self.manifest.log_from_start = true;
            }
            let key = format!("{LOG_PREFIX}{name}");
            self.target.put_file(&key, &staged)?;
            self.manifest.add_log(LogFile {
                name: name.clone(),
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
            let _ = writeln!(
                out,
                "backup: archived {key}: zxid {}..{}, {} txns from {} to {}, {bytes} bytes",
                hex(summary.first_zxid),
                hex(summary.last_zxid),
                summary.records,
                format_time_ms(summary.first_time_ms),
                format_time_ms(summary.last_time_ms)
            );
            report.logs.push(name.clone());
        }

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

        report.newest_archived = self.manifest.last_log_zxid();
        report.newest_on_disk = self.look_at_tail(segments.last()).or(report.newest_archived);
        Ok(report)
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

    /// The newest zxid in the server's open segment, reading on from where the last look ended.
    fn look_at_tail(&mut self, open: Option<&(i64, String)>) -> Option<i64> {
        let (_, name) = open?;
        let mut scan = match self.tail.take() {
            Some(t) if &t.name == name => t,
            _ => TailScan { name: name.clone(), offset: 0, last_zxid: None },
        };
        let path = self.log_dir.join(name);
        if let Ok(f) = File::open(&path) {
            if let Ok(mut r) = SegmentReader::open(name, BufReader::new(f)) {
                let resumed = match scan.last_zxid {
                    Some(z) if scan.offset > 0 => r.resume_at(scan.offset, z).is_ok(),
                    _ => true,
                };
                // The open segment ends in zeros or in a record being written: stop at the first
                // frame that does not check out, and look again from there next time.
                while resumed {
                    match r.next_record() {
                        Ok(Some(rec)) => {
                            scan.last_zxid = Some(rec.header.zxid);
                            scan.offset = r.offset();
                        }
                        _ => break,
                    }
                }
            }
        }
        let newest = scan.last_zxid;
        self.tail = Some(scan);
        newest
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
