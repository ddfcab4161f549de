//! Where the write path persists transactions before they are committed.
//!
//! The core hands every batch of proposals to a [`TxnLog`] and commits them only once the log says
//! they are durable. Standalone zkrs runs Zab's write path as a quorum of one: "durable on a
//! quorum" means durable here.

use zk_proto::{Txn, TxnHeader};

/// What a log says about a batch it accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// The batch is durable: it may be committed and acknowledged.
    Durable,
}

/// A transaction log the core persists proposals to, in zxid order.
pub trait TxnLog: Send {
    /// Appends `batch` (contiguous zxids, after everything appended before) and makes it durable.
    ///
    /// Errors are fatal to the server: no transaction of the batch may be acknowledged.
    fn append(&mut self, batch: &[(&TxnHeader, &Txn)]) -> std::io::Result<Durability>;
}

/// Keeps nothing: state lives in memory only, and is lost when the process stops.
#[derive(Debug, Default)]
pub struct MemoryLog {
    last_zxid: i64,
}

impl TxnLog for MemoryLog {
    fn append(&mut self, batch: &[(&TxnHeader, &Txn)]) -> std::io::Result<Durability> {
        for (hdr, _) in batch {
            debug_assert!(hdr.zxid > self.last_zxid, "zxids must increase");
            self.last_zxid = hdr.zxid;
        }
        Ok(Durability::Durable)
    }
}
