//! The log of a restored server: a server started on a data directory `zkrs-server restore`
//! wrote ties the log in its dataLogDir to that restore, and replays no other log over the
//! restored snapshot.
//!
//! A restored data directory holds the snapshot at the restore point Z and the restore's marker
//! ([`RESTORE_MARKER`]). The danger is an older log beside it, most often the dataLogDir the
//! server used before the restore: replayed over the restored snapshot, it brings back the state
//! the restore went back from. A log's shape does not tell it from the restored server's own:
//! an older log reset to Z (by an earlier restore to the same point) or purged up to Z (an old
//! member's, whose purge moved its base marker to Z) has a base marker of Z and records after Z,
//! as the restored server's own has. So the restored server marks its log, and nothing else
//! passes:
//!
//! - While the newest snapshot on disk is the restored one (the marker's zxid), a start whose
//!   log holds no record draws a random `first_start`, writes it into the data directory's
//!   marker and into a copy of that marker in the log directory ([`LOG_COPY`]), each durably
//!   (temporary file, sync, rename, directory sync), and then resets the log to Z, even when it
//!   already ends there (a log at Z = 0, or one an earlier restore reset to Z). Every copy of one
//!   restore's data directory (an ensemble's members) draws its own.
//! - A start whose log holds records replays it only when its copy says what the marker says:
//!   the same restore (zxid and time) and the same first start. Any other log is refused
//!   ([`StartError::LogBesideRestore`]) before anything is written, naming both directories: a
//!   log of another restore, of an earlier copy of this one (the same result copied in again),
//!   or without a copy at all. A log without a copy whose base marker is Z may be the own log
//!   of a server an earlier build restored (it wrote no copy): the refusal says to copy the
//!   marker into the log directory, only then.
//!
//! The restored server's own log always passes, through everything that writes to it while the
//! restored snapshot is the newest: a restart finds the copy it wrote; as a learner, a DIFF
//! appends after Z; a TRUNC cuts at or above Z (the log's base is Z), or empties the log to Z;
//! a SNAP writes its snapshot before it resets the log, so a SNAP past Z makes that snapshot the
//! newest (nothing is checked from then on) and a SNAP at Z or below leaves, until it has
//! removed Z's snapshot, either the log as it was or an empty one (marked again); a purge removes
//! no segment while the restored snapshot is the only one, and neither a purge nor a reset
//! touches the copy. Once a snapshot past Z is the newest, the server has taken or received
//! state past the restore on this log, and the start checks nothing: the marker stays for
//! `zkrs-server backup`, which reads its restore (zxid and time), not its first start.
//!
//! A marker that cannot be read refuses the start ([`StartError::RestoreMarker`]): the check
//! depends on it. So does a restored snapshot that did not load while it is the newest on disk
//! (another snapshot, or an empty tree, loaded in its place is not the restored state).

use super::restore::{RestoreMarker, RESTORE_MARKER};
use super::time::format_time_ms;
use super::BackupError;
use crate::server::StartError;
use std::path::Path;
use tracing::info;
use zk_log::{FileStorage, LogError, SegmentLog};

/// The name of the copy of the restore marker that a restored server's log directory
/// (dataLogDir/zkrs-log) holds, written by its first start.
pub const LOG_COPY: &str = RESTORE_MARKER;

/// Fits the log of a server starting on `data_dir` to the restore that wrote it, if any (see the
/// module's docs): `snaps` is its snapshot directory, `loaded` the start zxid of the snapshot
/// loaded, `log` the log opened in dataLogDir. Returns the restored zxid when the restored
/// snapshot is the newest on disk (the replay must then start from it), None when no restore
/// is in question.
///
/// Errors: [`StartError::RestoreMarker`] for a marker that cannot be read;
/// [`StartError::Snapshot`] when the restored snapshot is the newest on disk and another was
/// loaded; [`StartError::LogBesideRestore`] for a log that is not the restored server's;
/// [`StartError::Log`] when the first start's mark or reset cannot be written.
pub fn fit_log(
    data_dir: &Path,
    snaps: &FileStorage,
    loaded: i64,
    log: &mut SegmentLog<FileStorage>,
) -> Result<Option<i64>, StartError> {
    let (marker_path, marker) = match RestoreMarker::read_located(data_dir) {
        Ok(Some(m)) => m,
        Ok(None) => return Ok(None),
        Err(e) => {
            return Err(StartError::RestoreMarker { data_dir: data_dir.to_path_buf(), cause: e.to_string() })
        }
    };
    let snap_dir = snaps.path().to_path_buf();
    let newest = zk_log::snapshot::list_snapshots(snaps)
        .map_err(|source| StartError::Log { dir: snap_dir.clone(), source })?
        .last()
        .map(|(z, _)| *z);
    let z = marker.zxid;
    if newest != Some(z) {
        return Ok(None);
    }
    if loaded != z {
        return Err(StartError::Snapshot {
            dir: snap_dir,
            message: format!(
                "{} is the snapshot `zkrs-server restore` wrote ({} names zxid {z:#x}) and did not load (the \
                 warning before this says why); {} loaded in its place is not the restored state. Restore \
                 again into a new directory",
                zk_log::snapshot::snapshot_name(z),
                marker_path.display(),
                if loaded > 0 { format!("the snapshot at zxid {loaded:#x}") } else { "an empty tree".into() }
            ),
        });
    }
    let log_dir = log.storage().path().to_path_buf();
    let copy_path = log_dir.join(LOG_COPY);
    if log.first_zxid().is_none() {
        mark_first_start(&marker_path, marker, &copy_path, log)?;
        return Ok(Some(z));
    }
    let copy = RestoreMarker::read_file(&copy_path);
    if matches!(copy, Ok(Some(c)) if c == marker) {
        return Ok(Some(z));
    }
    let why = not_this_restores(&marker, &marker_path, &copy, log);
    Err(StartError::LogBesideRestore { log_dir, data_dir: data_dir.to_path_buf(), zxid: z, why })
}

/// The restored server's first start (its log holds no record): a new `first_start` in the
/// marker at `marker_path` and in the log's copy at `copy_path`, each durable before the next
/// step, then the log reset to the restored zxid. A crash part-way leaves the log without a
/// record, and the next start marks it again.
fn mark_first_start(
    marker_path: &Path,
    marker: RestoreMarker,
    copy_path: &Path,
    log: &mut SegmentLog<FileStorage>,
) -> Result<(), StartError> {
    use rand::RngCore;
    let dir = log.storage().path().to_path_buf();
    let marked = RestoreMarker { first_start: Some(rand::rngs::OsRng.next_u64()), ..marker };
    let failed = |e: BackupError| {
        let source = match e {
            BackupError::Io { path, source } => {
                LogError::Io { op: "write the restored server's first start into", file: path, source }
            }
            other => LogError::Io {
                op: "write the restored server's first start into",
                file: copy_path.display().to_string(),
                source: std::io::Error::other(other.to_string()),
            },
        };
        StartError::Log { dir: dir.clone(), source }
    };
    marked.replace(marker_path).map_err(failed)?;
    marked.replace(copy_path).map_err(failed)?;
    log.reset_to(marker.zxid).map_err(|source| StartError::Log { dir: dir.clone(), source })?;
    info!(
        "first start on the data directory restored to zxid {:#x} ({}): the log in {} starts there and \
         holds a copy of the restore marker; no other log is replayed over the restored snapshot",
        marker.zxid,
        format_time_ms(marker.at_ms),
        dir.display()
    );
    Ok(())
}

/// Why the log `log`, holding records, is not the log of the restore `marker` (read from
/// `marker_path`) whose copy in the log directory read as `copy`.
fn not_this_restores(
    marker: &RestoreMarker,
    marker_path: &Path,
    copy: &Result<Option<RestoreMarker>, BackupError>,
    log: &SegmentLog<FileStorage>,
) -> String {
    let z = marker.zxid;
    let (first, last) = (log.first_zxid().unwrap_or(0), log.last_zxid());
    let records = format!("records from zxid {first:#x} to {last:#x}");
    match copy {
        Err(e) => format!("{records}, and its copy of a restore marker cannot be read: {e}"),
        Ok(Some(c)) if c.id() != marker.id() => format!(
            "{records}, written after another restore, to zxid {:#x} at {}, as its copy of that restore's \
             marker says",
            c.zxid,
            format_time_ms(c.at_ms)
        ),
        Ok(Some(_)) => format!(
            "{records}, written after this same restore but by a server started on another copy of its \
             result, or on this one before it was copied in again: its copy of the restore marker names \
             another first start"
        ),
        Ok(None) if first <= z => format!("{records}, at or below the restored zxid"),
        Ok(None) => {
            let since = match log.base_marker() {
                Some(b) if b == z => "after a reset to the restored zxid".to_string(),
                Some(b) if b > z => format!("after a reset to {b:#x}, past the restored zxid"),
                Some(b) => format!("after a reset to {b:#x}, before the restored zxid"),
                None => "from a log never reset".to_string(),
            };
            let own = if log.base_marker() == Some(z) {
                format!(
                    ". Only if an earlier build restored this server and this is the log it has written since \
                     (that build wrote no copy), copy {} into {} and start again",
                    marker_path.display(),
                    log.storage().path().display()
                )
            } else {
                String::new()
            };
            format!(
                "{records}, {since}, and no copy of the restore marker ({LOG_COPY}), which the restored \
                 server's first start writes beside its log{own}"
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    const E: i64 = 0x1_0000_0000;
    const Z: i64 = E + 8;

    /// A restored data directory and a separate log directory, opened as a server opens them.
    struct Restored {
        _dir: tempfile::TempDir,
        data: PathBuf,
        log_dir: PathBuf,
    }

    impl Restored {
        /// `data` restored to `z` (its snapshot, a placeholder, and `marker` as the marker's text,
        /// None for none), and an empty log directory.
        fn new(z: i64, marker: Option<String>) -> Restored {
            let dir = tempfile::tempdir().unwrap();
            let data = dir.path().join("data");
            let snap = data.join(zk_log::snapshot::SNAP_DIR_NAME);
            std::fs::create_dir_all(&snap).unwrap();
            std::fs::write(snap.join(zk_log::snapshot::snapshot_name(z)), b"x").unwrap();
            if let Some(t) = marker {
                std::fs::write(snap.join(RESTORE_MARKER), t).unwrap();
            }
            let log_dir = dir.path().join("logs").join(zk_log::LOG_DIR_NAME);
            std::fs::create_dir_all(&log_dir).unwrap();
            Restored { _dir: dir, data, log_dir }
        }

        fn snaps(&self) -> FileStorage {
            FileStorage::open_dir(self.data.join(zk_log::snapshot::SNAP_DIR_NAME)).unwrap()
        }

        fn log(&self) -> SegmentLog<FileStorage> {
            let storage = FileStorage::open_dir(&self.log_dir).unwrap();
            SegmentLog::open(storage, opts()).unwrap()
        }

        /// What a start that loaded the snapshot at `loaded` makes of the log.
        fn start(&self, loaded: i64) -> Result<Option<i64>, StartError> {
            fit_log(&self.data, &self.snaps(), loaded, &mut self.log())
        }

        /// Appends `zxids` to the log, rolling before those in `rolls`.
        fn append(&self, zxids: impl IntoIterator<Item = i64>, rolls: &[i64]) {
            let mut log = self.log();
            for zx in zxids {
                if rolls.contains(&zx) {
                    log.roll().unwrap();
                }
                let (h, t) = zk_log::conformance::sample_txn(zx, 40);
                log.commit(&[(&h, &t)]).unwrap();
            }
        }

        /// A copy of this restored data directory, as the guide's ensemble procedure makes one,
        /// with its own empty log directory beside it.
        fn copy(&self) -> Restored {
            let r = Restored::new(Z, None);
            let (from, to) = (self.data.join("zkrs-snap"), r.data.join("zkrs-snap"));
            for n in [zk_log::snapshot::snapshot_name(Z), RESTORE_MARKER.to_string()] {
                std::fs::copy(from.join(&n), to.join(&n)).unwrap();
            }
            r
        }

        fn marker(&self) -> RestoreMarker {
            RestoreMarker::read(&self.data).unwrap().unwrap()
        }
    }

    fn opts() -> zk_log::LogOptions {
        zk_log::LogOptions { prealloc_bytes: 1 << 16, segment_bytes_max: 1 << 20 }
    }

    fn marker(z: i64, at_ms: i64) -> Option<String> {
        Some(format!("zxid=0x{z:016x}\nrestored_at_ms={at_ms}\n"))
    }

    fn refused(r: Result<Option<i64>, StartError>) -> String {
        match r {
            Err(e @ StartError::LogBesideRestore { .. }) => e.to_string(),
            other => panic!("not refused as a log beside a restore: {other:?}"),
        }
    }

    /// The restored server's own log passes, at every start: the first (an empty log, marked and
    /// reset to Z), after writes, after restarts, after a learner's DIFF into a later epoch, and
    /// after a purge; one without records is marked again.
    #[test]
    fn the_restored_servers_own_log_is_replayed() {
        let r = Restored::new(Z, marker(Z, 7));
        assert_eq!(r.start(Z).unwrap(), Some(Z));
        let m = r.marker();
        assert!(m.first_start.is_some(), "the first start marked the data directory");
        assert_eq!(RestoreMarker::read_file(&r.log_dir.join(LOG_COPY)).unwrap(), Some(m));
        assert_eq!(r.log().base_marker(), Some(Z), "the log was reset to the restored zxid");
        // Nothing written yet: marked again, with a new first start.
        assert_eq!(r.start(Z).unwrap(), Some(Z));
        let m2 = r.marker();
        assert_ne!(m2.first_start, m.first_start);
        r.append((1..=4).map(|c| Z + c), &[]);
        r.append([2 * E + 1, 2 * E + 2], &[2 * E + 1]);
        for _ in 0..3 {
            assert_eq!(r.start(Z).unwrap(), Some(Z), "a restart");
        }
        assert_eq!(r.marker(), m2, "a start with records leaves the marker as it was");
        // A purge (the restored snapshot the only one: nothing before Z + 1 to remove), and one
        // of everything but the newest segment.
        let mut log = r.log();
        assert!(log.purge_before(Z + 1).unwrap().is_empty());
        assert_eq!(log.purge_before(2 * E + 1).unwrap().len(), 1);
        drop(log);
        assert_eq!(r.start(Z).unwrap(), Some(Z), "after a purge");
    }

    /// Sequence A of review 15: a second restore to the same zxid, started beside the log the
    /// first restore's server wrote (reset to Z, records after it) is refused: the second
    /// restore's marker has another time.
    #[test]
    fn the_first_restores_log_beside_a_second_restore_to_the_same_point_is_refused() {
        let first = Restored::new(Z, marker(Z, 7));
        first.start(Z).unwrap();
        first.append((1..=8).map(|c| Z + c), &[]);
        let second = Restored::new(Z, marker(Z, 9));
        std::fs::remove_dir_all(&second.log_dir).unwrap();
        std::fs::rename(&first.log_dir, &second.log_dir).unwrap();
        let said = refused(second.start(Z));
        assert!(said.contains("written after another restore, to zxid 0x100000008"), "{said}");
        assert!(said.contains(&second.data.display().to_string()), "names dataDir: {said}");
        assert!(said.contains(&second.log_dir.display().to_string()), "names the log: {said}");
        assert!(said.contains("Point dataLogDir at an empty directory"), "{said}");
    }

    /// The same restore's result copied in again (the guide's ensemble procedure, redone with
    /// the members' dataLogDirs kept) beside the log a server started on the earlier copy
    /// wrote: refused, the copy's first start differs; each member's own log passes.
    #[test]
    fn a_log_of_another_copy_of_the_same_restore_is_refused() {
        let a = Restored::new(Z, marker(Z, 7));
        let b = a.copy();
        assert_eq!(a.start(Z).unwrap(), Some(Z));
        assert_eq!(b.start(Z).unwrap(), Some(Z));
        assert_ne!(a.marker().first_start, b.marker().first_start, "each copy draws its own");
        a.append((1..=8).map(|c| Z + c), &[]);
        b.append((1..=3).map(|c| Z + c), &[]);
        assert_eq!(a.start(Z).unwrap(), Some(Z));
        assert_eq!(b.start(Z).unwrap(), Some(Z));
        // The result copied in again, beside a's log.
        let again = Restored::new(Z, marker(Z, 7));
        std::fs::remove_dir_all(&again.log_dir).unwrap();
        std::fs::rename(&a.log_dir, &again.log_dir).unwrap();
        let said = refused(again.start(Z));
        assert!(said.contains("another first start"), "{said}");
    }

    /// Sequence B of review 15: an old member's log (epoch 1, never reset), purged by its own
    /// retention so that its first kept segment starts right after Z, has a base marker of
    /// exactly Z: refused, with the way out for an earlier build's restored server; a log whose
    /// base marker is past Z is refused as clearly; one reset below Z, and one never reset, too.
    #[test]
    fn old_logs_whatever_their_base_marker_are_refused() {
        let r = Restored::new(Z, marker(Z, 7));
        r.append((1..=16).map(|c| E + c), &[Z + 1]);
        r.log().purge_before(E + 12).unwrap();
        assert_eq!(r.log().base_marker(), Some(Z), "the purge's base marker");
        let said = refused(r.start(Z));
        assert!(said.contains("after a reset to the restored zxid, and no copy"), "{said}");
        assert!(said.contains("Only if an earlier build restored this server"), "{said}");
        // Past Z: an old SNAP's reset.
        let past = Restored::new(Z, marker(Z, 7));
        past.log().reset_to(Z + 4).unwrap();
        past.append((5..=9).map(|c| Z + c), &[]);
        let said = refused(past.start(Z));
        assert!(said.contains("after a reset to 0x10000000c, past the restored zxid"), "{said}");
        assert!(!said.contains("Only if"), "{said}");
        // Before Z, and none.
        let before = Restored::new(Z, marker(Z, 7));
        before.log().reset_to(E + 5).unwrap();
        before.append([2 * E + 1], &[]);
        assert!(refused(before.start(Z)).contains("before the restored zxid"));
        let none = Restored::new(Z, marker(Z, 7));
        none.append((1..=16).map(|c| E + c), &[]);
        assert!(refused(none.start(Z)).contains("at or below the restored zxid"));
    }

    /// A log an earlier build's restored server wrote (reset to Z, no copy) is refused, and
    /// passes once the marker is copied into the log directory, as the refusal says.
    #[test]
    fn an_earlier_builds_restored_log_passes_once_the_marker_is_copied() {
        let r = Restored::new(Z, marker(Z, 7));
        r.log().reset_to(Z).unwrap();
        r.append((1..=3).map(|c| Z + c), &[]);
        let said = refused(r.start(Z));
        let marker_path = r.data.join("zkrs-snap").join(RESTORE_MARKER);
        assert!(
            said.contains(&format!("copy {} into {}", marker_path.display(), r.log_dir.display())),
            "{said}"
        );
        std::fs::copy(&marker_path, r.log_dir.join(LOG_COPY)).unwrap();
        assert_eq!(r.start(Z).unwrap(), Some(Z));
    }

    /// A damaged marker refuses the start, naming the file and what to do, instead of letting
    /// any log through.
    #[test]
    fn a_damaged_marker_refuses_the_start() {
        let r = Restored::new(Z, Some("zxid=garbage\n".into()));
        r.append((1..=16).map(|c| E + c), &[]);
        match r.start(Z) {
            Err(e @ StartError::RestoreMarker { .. }) => {
                let said = e.to_string();
                let file = r.data.join("zkrs-snap").join(RESTORE_MARKER);
                assert!(said.contains(&file.display().to_string()), "{said}");
                assert!(said.contains("Fix the file") && said.contains("or remove it"), "{said}");
            }
            other => panic!("a damaged marker let the start go on: {other:?}"),
        }
    }

    /// A restore to zxid 0 (the archive's first snapshot, an empty tree) is checked like any
    /// other: an old log from zxid 1 is refused; the restored server's own passes.
    #[test]
    fn a_restore_to_zxid_0_is_checked() {
        let r = Restored::new(0, marker(0, 7));
        r.append(1..=5, &[]);
        assert!(refused(r.start(0)).contains("records from zxid 0x1 to 0x5"));
        let own = Restored::new(0, marker(0, 7));
        assert_eq!(own.start(0).unwrap(), Some(0));
        assert_eq!(own.log().base_marker(), Some(0));
        own.append(1..=5, &[]);
        assert_eq!(own.start(0).unwrap(), Some(0));
    }

    /// The check is keyed on the newest snapshot on disk: while it is the restored one and
    /// another loaded (the restored one is damaged), the start is refused; once a newer one is
    /// on disk, any log passes (the server has gone past the restore); without a marker, nothing
    /// is checked.
    #[test]
    fn the_check_follows_the_newest_snapshot_on_disk() {
        let r = Restored::new(Z, marker(Z, 7));
        r.append((1..=16).map(|c| E + c), &[]);
        match r.start(0) {
            Err(e @ StartError::Snapshot { .. }) => {
                let said = e.to_string();
                assert!(said.contains("did not load") && said.contains("an empty tree"), "{said}");
            }
            other => panic!("a restored snapshot that did not load was passed over: {other:?}"),
        }
        let snap = r.data.join("zkrs-snap");
        std::fs::write(snap.join(zk_log::snapshot::snapshot_name(Z + 100)), b"x").unwrap();
        assert_eq!(r.start(Z + 100).unwrap(), None);
        let plain = Restored::new(Z, None);
        plain.append((1..=16).map(|c| E + c), &[]);
        assert_eq!(plain.start(Z).unwrap(), None);
    }

    /// A learner's TRUNC past Z cuts records and leaves the copy; a SNAP at the restored zxid
    /// (every member restored to it) resets the log to Z and leaves the copy: the log passes. An
    /// empty log after a SNAP below Z (Z's snapshot not yet removed) is marked again and reset
    /// to Z.
    #[test]
    fn a_learners_sync_leaves_a_log_that_passes() {
        let r = Restored::new(Z, marker(Z, 7));
        r.start(Z).unwrap();
        r.append((1..=3).map(|c| Z + c), &[]);
        r.log().truncate_after(Z + 1).unwrap();
        assert_eq!(r.start(Z).unwrap(), Some(Z));
        r.log().reset_to(Z).unwrap();
        r.append([2 * E + 1], &[]);
        assert_eq!(r.start(Z).unwrap(), Some(Z));
        r.log().reset_to(Z - 5).unwrap();
        assert_eq!(r.start(Z).unwrap(), Some(Z));
        assert_eq!(r.log().base_marker(), Some(Z));
    }
}
