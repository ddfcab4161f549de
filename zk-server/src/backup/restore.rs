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
use super::target::ArchiveTarget;
use super::time::format_time_ms;
use super::{io_err, BackupError};
use crate::tools::Progress;
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};
use zk_log::format::zxid_follows;
use zk_log::FileStorage;
use zk_proto::Acl;
use zk_tree::snapshot::{ContentParser, ContentRecord};
use zk_tree::{ContentBuilder, Database, Recovery, SnapshotCheck, SnapshotLoader, TreeConfig};

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
}

/// The tree settings a restore replays with: the tree digest kept, so that every digest the
/// archive holds can be compared.
fn replay_config() -> TreeConfig {
    TreeConfig { tree_digest: true, extended_types_enabled: true, ..TreeConfig::default() }
}

fn hex(z: i64) -> String {
    format!("{z:#x}")
}

/// Makes `out` ready: created if absent; refused when it holds anything, unless `force`, which
/// moves its `zkrs-snap` and `zkrs-log` aside (renamed `<name>.before-restore-<ms>`, never
/// deleted).
fn prepare_out(out: &Path, force: bool, progress: &mut Progress<'_>) -> Result<(), BackupError> {
    std::fs::create_dir_all(out).map_err(io_err(out))?;
    let entries: Vec<String> = std::fs::read_dir(out)
        .map_err(io_err(out))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    if entries.is_empty() {
        return Ok(());
    }
    if !force {
        return Err(BackupError::Refused(format!(
            "{} is not empty (it holds {}); restore into an empty directory, or give --force to move its \
             zkrs-snap and zkrs-log aside",
            out.display(),
            entries.join(", ")
        )));
    }
    let stamp =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
    for name in [zk_log::snapshot::SNAP_DIR_NAME, zk_log::LOG_DIR_NAME] {
        let p = out.join(name);
        if p.exists() {
            let aside = out.join(format!("{name}.before-restore-{stamp}"));
            std::fs::rename(&p, &aside).map_err(io_err(&p))?;
            progress.say(format!("restore: moved {} aside to {}", p.display(), aside.display()));
        }
    }
    Ok(())
}

/// The zxid a point stands for in this archive.
fn resolve_point(
    m: &Manifest,
    point: Point,
    target: &dyn ArchiveTarget,
    staging: &Path,
) -> Result<i64, BackupError> {
    let newest = m.last_log_zxid().or_else(|| m.snapshots.iter().map(|s| s.exact_from()).max());
    let Some(newest) = newest else {
        return Err(BackupError::Refused(format!("{}: the archive holds no file yet", target.describe())));
    };
    match point {
        Point::Newest => Ok(newest),
        Point::Zxid(z) if z > newest => Err(BackupError::Refused(format!(
            "zxid {} is past the newest archived transaction, {}: the segment holding it is not archived \
             yet (the server's open segment is archived once the server starts the next)",
            hex(z),
            hex(newest)
        ))),
        Point::Zxid(z) => Ok(z),
        Point::Time(t) => {
            // The first segment holding a transaction stamped later than t; the point is the
            // transaction before that one.
            let Some(i) = m.logs.iter().position(|l| l.max_time_ms > t) else {
                let last = m.logs.last();
                return Err(BackupError::Refused(format!(
                    "{} is past the newest archived transaction ({}), so later transactions before it may \
                     not be archived yet: give --zxid {} to restore that one",
                    format_time_ms(t),
                    last.map_or("none".into(), |l| format!(
                        "zxid {} at {}",
                        hex(l.last_zxid),
                        format_time_ms(l.last_time_ms)
                    )),
                    hex(newest)
                )));
            };
            let seg = &m.logs[i];
            let mut before = if i > 0 { Some(m.logs[i - 1].last_zxid) } else { None };
            let local = fetch_log(target, seg, staging)?;
            let mut r = open_log(&local, target, seg)?;
            while let Some(rec) = next_log_record(&mut r, target, seg)? {
                if rec.header.time > t {
                    break;
                }
                before = Some(rec.header.zxid);
            }
            let _ = std::fs::remove_file(&local);
            before.ok_or_else(|| {
                BackupError::Refused(format!(
                    "{} is before the first archived transaction (zxid {} at {})",
                    format_time_ms(t),
                    hex(seg.first_zxid),
                    format_time_ms(seg.first_time_ms)
                ))
            })
        }
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
    if r.first_zxid() != l.first_zxid {
        return Err(BackupError::Damaged {
            key,
            why: format!("starts at zxid {}, the manifest says {}", hex(r.first_zxid()), hex(l.first_zxid)),
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
/// of them.
///
/// Errors: [`BackupError::Gap`] naming the first missing range.
fn plan_segments<'m>(
    m: &'m Manifest,
    start: i64,
    point: i64,
    target: &dyn ArchiveTarget,
) -> Result<Vec<&'m LogFile>, BackupError> {
    let needed: Vec<&LogFile> =
        m.logs.iter().filter(|l| l.last_zxid > start && l.first_zxid <= point).collect();
    if point <= start {
        return Ok(Vec::new());
    }
    let Some(first) = needed.first() else {
        return Err(BackupError::Gap {
            after: start,
            before: point,
            why: "no archived segment holds them".into(),
        });
    };
    if first.first_zxid > start && !zxid_follows(start, first.first_zxid) {
        return Err(BackupError::Gap {
            after: start,
            before: first.first_zxid,
            why: format!("before {}", target.show(&format!("{LOG_PREFIX}{}", first.name))),
        });
    }
    for w in needed.windows(2) {
        if !zxid_follows(w[0].last_zxid, w[1].first_zxid) {
            return Err(BackupError::Gap {
                after: w[0].last_zxid,
                before: w[1].first_zxid,
                why: format!("between {} and {}", w[0].name, w[1].name),
            });
        }
    }
    Ok(needed)
}

/// Restores the archive at `target` into `out` (a data directory: the snapshot goes into its
/// `zkrs-snap`), as of `point`, the whole tree or only `subtree` with its ancestors. Progress
/// lines, at most one a second plus a summary of what was checked, go to `progress`.
///
/// Errors: [`BackupError::Refused`] for a non-empty `out` without `force`, a point outside the
/// archive, a subtree that does not exist at the point; [`BackupError::Gap`] when the archived
/// log lacks transactions the restore needs; [`BackupError::Damaged`] naming the file for a
/// missing or damaged archived file or a digest that does not match; [`BackupError::Io`].
pub fn restore(
    target: &dyn ArchiveTarget,
    out: &Path,
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
    prepare_out(out, force, &mut progress)?;
    let staging = out.join(".restore-staging");
    std::fs::create_dir_all(&staging).map_err(io_err(&staging))?;
    let result = restore_staged(target, &m, out, &staging, point, subtree, &mut progress);
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
    let zxid = resolve_point(m, point, target, staging)?;
    let snap: Option<&SnapFile> = m.snapshots.iter().rev().find(|s| s.exact_from() <= zxid);
    if snap.is_none() && !m.log_from_start {
        let oldest = m
            .snapshots
            .first()
            .map_or("none".to_string(), |s| format!("{} (exact from {})", s.name, hex(s.exact_from())));
        return Err(BackupError::Refused(format!(
            "no archived snapshot is exact at or before zxid {} (oldest: {oldest}), and the archived log does \
             not go back to the server's first transaction",
            hex(zxid)
        )));
    }
    let start = snap.map_or(0, |s| s.start_zxid);
    let segments = plan_segments(m, start, zxid, target)?;
    progress.say(format!(
        "restore: to zxid {} from {} and {} archived segments",
        hex(zxid),
        snap.map_or("an empty tree".to_string(), |s| format!(
            "snapshot {} (start {}, exact from {})",
            s.name,
            hex(s.start_zxid),
            hex(s.exact_from())
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
    let exact_from = snap.map_or(0, |s| s.exact_from());
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
    let snap_dir = out.join(zk_log::snapshot::SNAP_DIR_NAME);
    let storage = crate::snapshots::open_dir(&snap_dir).map_err(|e| BackupError::Refused(e.to_string()))?;
    let written = crate::snapshots::write_whole(&storage, &db, 16_384)
        .map_err(|e| BackupError::Refused(e.to_string()))?;
    let report = RestoreReport {
        zxid: restored,
        snapshot: snap.map(|s| s.name.clone()),
        replayed,
        nodes: db.tree().len() as u64,
        checks,
        written: snap_dir.join(&written.name),
    };
    for c in &report.checks {
        progress.say(format!("restore: checked: {c}"));
    }
    progress.say(format!(
        "restore: done: {} nodes at zxid {} ({replayed} txns replayed) -> {}",
        report.nodes,
        hex(report.zxid),
        report.written.display()
    ));
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
