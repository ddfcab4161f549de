//! zk-log: zkrs's durable transaction log.
//!
//! The log is a directory of segments (`log.<first zxid in 16 hex digits>`) in dataLogDir's
//! [`LOG_DIR_NAME`] directory. Each segment is preallocated with fallocate in
//! [`LogOptions::prealloc_bytes`] steps, read through shared memory mappings, appended to through
//! the mapping or with `pwrite` ([`AppendMode`], chosen with the [`FileStorage`] handle), and made
//! durable with fdatasync; every record carries its length, zxid and a CRC32. docs/log-format.md
//! gives every byte, the fsync protocol and the crash cases.
//!
//! - [`SegmentLog`]: append, group-commit sync, read from a zxid, truncate (Zab TRUNC), reset
//!   for a received snapshot (Zab SNAP), purge, and recovery when opened; its base
//!   ([`SegmentLog::base_zxid`]) says from where on it holds every transaction.
//! - [`LogWriter`]: the log on its own thread behind a bounded queue; one sync per group of
//!   batches, reported as "durable through zxid Z"; truncations and resets queued in order with
//!   batches ([`WriterReport`]).
//! - [`LogReader`]: reads durable records by zxid range from other threads while the log is
//!   written (a Zab leader's DIFF).
//! - [`TxnSink`] / [`TxnSource`]: the seam the write path (server core, Zab) persists through.
//! - [`EpochStore`]: Zab's acceptedEpoch and currentEpoch files.
//! - [`Storage`]: the backend seam, with the real disk ([`FileStorage`]) and a seeded
//!   fault-injecting in-memory disk ([`FaultStorage`]); [`conformance`] is the suite both pass.
//!
//! Architecture invariant: no tokio and no knowledge of the tree or the server. The crate sees
//! transactions only as zk-proto records and does its I/O on the caller's (or its own) threads.
//!
//! # Example
//!
//! Two transactions made durable with one sync, then read back after the log is reopened:
//!
//! ```
//! use zk_log::{FileStorage, LogOptions, SegmentLog};
//! use zk_proto::{CreateSessionTxn, CreateTxn, OpCode, Txn, TxnHeader};
//!
//! let dir = tempfile::tempdir()?;
//! let header = |zxid, txn_type: OpCode| TxnHeader {
//!     client_id: 0x100,
//!     cxid: zxid as i32,
//!     zxid,
//!     time: 1_700_000_000_000,
//!     txn_type: txn_type.code(),
//! };
//! let session = Txn::CreateSession(CreateSessionTxn { time_out: 30_000 });
//! let create = Txn::Create(CreateTxn {
//!     path: "/app".into(),
//!     data: Some("v1".into()),
//!     acl: vec![],
//!     ephemeral: false,
//!     parent_cversion: 1,
//! });
//! {
//!     let mut log = SegmentLog::open(FileStorage::open_dir(dir.path())?, LogOptions::default())?;
//!     let (h1, h2) = (header(1, OpCode::CreateSession), header(2, OpCode::Create));
//!     assert_eq!(log.commit(&[(&h1, &session), (&h2, &create)])?, 2);
//! }
//! let log = SegmentLog::open(FileStorage::open_dir(dir.path())?, LogOptions::default())?;
//! let zxids: Vec<i64> = log.read_from(1)?.map(|e| e.map(|e| e.header.zxid)).collect::<Result<_, _>>()?;
//! assert_eq!(zxids, [1, 2]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

pub mod apache;
pub mod apache_snap_stream;
mod base;
pub mod conformance;
pub mod epoch;
mod error;
pub mod fault;
mod file;
pub mod format;
mod log;
mod reader;
mod sink;
pub mod snapshot;
mod storage;
mod writer;

pub use base::{read_base_zxid, BASE_FILE};
pub use epoch::{EpochStore, ACCEPTED_EPOCH_FILE, CURRENT_EPOCH_FILE};
pub use error::LogError;
pub use fault::{CrashModel, FaultFile, FaultReadFile, FaultStorage, FAULT_PAGE_BYTES};
pub use file::{FileStorage, MappedFile, MappedReadFile, LOCK_FILE};
pub use format::{RecordBatch, FORMAT_VERSION, MAX_PAYLOAD_BYTES, OLDEST_FORMAT_VERSION};
pub use log::{
    LogEntry, LogIter, LogOptions, RecoveryReport, SegmentLog, SparePrep, SyncTimes, INDEX_STRIDE,
    LOG_DIR_NAME,
};
pub use reader::{LogReader, READ_HOLD_BYTES};
pub use sink::{DurableReport, TxnSink, TxnSource};
pub use storage::{
    move_to_trash, read_small_file, remove_gradually, replace_file, AppendMode, Storage, StorageFile,
    StorageRead, REMOVE_STEP_BYTES, TMP_SUFFIX, TRASH_PREFIX,
};
pub use writer::{LogWriter, SubmitError, WriterReport};
