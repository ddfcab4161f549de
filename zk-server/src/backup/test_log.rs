//! For the backup tests: a server's log written with the log's own writer, in a temporary data
//! directory, and an archiver over it into a directory archive.

use super::archiver::{Archiver, CommitCap};
use super::target::DirTarget;
use bytes::Bytes;
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use zk_log::{FileStorage, LogOptions, SegmentLog, LOG_DIR_NAME};
use zk_proto::{CreateTxn, OpCode, Txn, TxnHeader};

/// A create of `/n<zxid>` stamped `time_ms`.
pub fn create_at(zxid: i64, time_ms: i64) -> (TxnHeader, Txn) {
    let hdr =
        TxnHeader { client_id: 1, cxid: zxid as i32, zxid, time: time_ms, txn_type: OpCode::Create.code() };
    let txn = Txn::Create(CreateTxn {
        path: format!("/n{zxid:x}"),
        data: Some(Bytes::from_static(b"x")),
        acl: vec![],
        ephemeral: false,
        parent_cversion: zxid as i32,
    });
    (hdr, txn)
}

/// A create of `/m<zxid>` stamped `9000 + zxid`: a transaction of another history than
/// [`create_at`]'s at the same zxid (a log reset below the archive, then new writes).
pub fn new_history_at(zxid: i64) -> (TxnHeader, Txn) {
    let (hdr, mut txn) = create_at(zxid, 9_000 + zxid);
    if let Txn::Create(c) = &mut txn {
        c.path = format!("/m{zxid:x}");
    }
    (hdr, txn)
}

/// A data directory with a log, and an archive beside it.
pub struct Fixture {
    /// Holds every directory.
    pub dir: tempfile::TempDir,
    /// The server's dataDir (and dataLogDir).
    pub data: PathBuf,
    /// The archive.
    pub archive: PathBuf,
    /// The server's log.
    pub log: SegmentLog<FileStorage>,
    /// What the archiver's commit cap answers, when it has one.
    pub cap: Rc<Cell<i64>>,
}

impl Fixture {
    /// An empty log and archive.
    pub fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let storage = FileStorage::open_dir(data.join(LOG_DIR_NAME)).unwrap();
        let log = SegmentLog::open(storage, LogOptions::default()).unwrap();
        let archive = dir.path().join("archive");
        Fixture { dir, data, archive, log, cap: Rc::new(Cell::new(0)) }
    }

    /// Commits the transactions `zxids` as one sync group, each stamped 1000 + its zxid.
    pub fn commit(&mut self, zxids: std::ops::RangeInclusive<i64>) {
        let batch: Vec<(TxnHeader, Txn)> = zxids.map(|z| create_at(z, 1_000 + z)).collect();
        self.commit_batch(&batch);
    }

    /// Commits `batch` as one sync group.
    pub fn commit_batch(&mut self, batch: &[(TxnHeader, Txn)]) {
        let refs: Vec<(&TxnHeader, &Txn)> = batch.iter().map(|(h, t)| (h, t)).collect();
        self.log.commit(&refs).unwrap();
    }

    /// An archiver over the data directory, without a commit cap.
    pub fn archiver(&self) -> Archiver {
        Archiver::open(Box::new(DirTarget::new(self.archive.clone())), &self.data, &self.data).unwrap()
    }

    /// An archiver whose commit cap is [`Self::cap`].
    pub fn capped_archiver(&self) -> Archiver {
        let mut a = self.archiver();
        let cap = self.cap.clone();
        let ask: CommitCap = Box::new(move || Ok(cap.get()));
        a.set_commit_cap(ask);
        a
    }

    /// Moves everything in the data directory out (to `moved-<n>` beside it), as an operator
    /// does before restoring in place (a restore writes only into an empty directory), and
    /// opens the log again on the emptied directory once the restore has run: `restored` runs
    /// the restore.
    pub fn restore_in_place<T>(&mut self, restored: impl FnOnce(&Path) -> T) -> T {
        let moved = (0..).map(|n| self.dir.path().join(format!("moved-{n}"))).find(|p| !p.exists()).unwrap();
        std::fs::create_dir_all(&moved).unwrap();
        for e in std::fs::read_dir(&self.data).unwrap().flatten() {
            std::fs::rename(e.path(), moved.join(e.file_name())).unwrap();
        }
        let r = restored(&self.data);
        let storage = FileStorage::open_dir(self.data.join(LOG_DIR_NAME)).unwrap();
        self.log = SegmentLog::open(storage, LogOptions::default()).unwrap();
        r
    }
}
