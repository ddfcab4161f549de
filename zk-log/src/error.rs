//! Why a log operation failed.

use std::io;

/// A log error. Every variant that concerns bytes on disk names the file and the offset.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The backend failed.
    #[error("{op} {file}: {source}")]
    Io {
        /// What was being done ("open", "sync", "allocate", ...).
        op: &'static str,
        /// The file (or directory) concerned.
        file: String,
        /// The backend's error.
        #[source]
        source: io::Error,
    },
    /// Bytes that should hold a valid record or header do not: before the tail of a log (which
    /// cannot then be recovered without losing data that may have been acknowledged), or
    /// anywhere in a snapshot file (which is then skipped for an older one).
    #[error("corrupt file {file} at offset {offset}: {reason}")]
    Corrupt {
        /// The segment or snapshot file.
        file: String,
        /// Byte offset of the bad record or header.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// Two consecutive records (possibly in different segments) whose zxids do not follow.
    #[error("zxid gap in transaction log {file} at offset {offset}: {found:#x} does not follow {prev:#x}")]
    ZxidGap {
        /// The file holding the record that does not follow.
        file: String,
        /// Its offset.
        offset: u64,
        /// Zxid of the record before it.
        prev: i64,
        /// Its zxid.
        found: i64,
    },
    /// A log segment or snapshot written by a newer zkrs (a compressed snapshot, format 2, to a
    /// zkrs that reads only format 1): refused rather than misread.
    #[error(
        "{file} has format version {version}, this zkrs reads up to version {supported}; \
         run a newer zkrs or move the file away"
    )]
    UnsupportedVersion {
        /// The segment or snapshot file.
        file: String,
        /// Its version.
        version: u32,
        /// The newest version this build reads.
        supported: u32,
    },
    /// A snapshot whose header is intact (its checksum holds, so a writer meant what it says) in
    /// a known version but with a setting this build does not read: a compression codec it does
    /// not know, a reserved field in use, chunks larger than it writes. A newer zkrs's file,
    /// refused as [`LogError::UnsupportedVersion`] is, never skipped as damage.
    #[error("{file} uses {what}, which this zkrs does not read; run a newer zkrs or move the file away")]
    UnsupportedFormat {
        /// The snapshot file.
        file: String,
        /// What it uses (naming the codec, field or size).
        what: String,
    },
    /// A payload handed over already encoded does not start with a transaction header.
    #[error("a transaction payload of {bytes} bytes has no complete txn header")]
    BadPayload {
        /// Its length.
        bytes: usize,
    },
    /// An append whose first zxid does not follow the log's last one (or is not positive).
    #[error("zxid {got:#x} cannot follow {last:#x} in the log")]
    OutOfOrder {
        /// The log's (or batch's) last zxid.
        last: i64,
        /// The zxid offered.
        got: i64,
    },
    /// One transaction's encoding exceeds [`crate::MAX_PAYLOAD_BYTES`].
    #[error("transaction {zxid:#x} encodes to {bytes} bytes, over the log's record limit")]
    RecordTooLarge {
        /// Its zxid.
        zxid: i64,
        /// Its encoded size.
        bytes: u64,
    },
    /// A read or truncation asked for zxids the log no longer (or never) held.
    #[error("zxid {zxid:#x} is not in the log (it holds {first:#x}..={last:#x})")]
    NotInLog {
        /// The zxid asked for.
        zxid: i64,
        /// First zxid held (0 when empty).
        first: i64,
        /// Last zxid held (0 when empty).
        last: i64,
    },
    /// An earlier write or sync failed, so what is on disk is unknown; the log refuses further
    /// writes until it is reopened (and recovered). Retrying a failed fsync is not safe: the
    /// kernel may have dropped the dirty pages it failed to write.
    #[error("transaction log unusable after an earlier failure: {0}")]
    Poisoned(String),
    /// An epoch file (acceptedEpoch, currentEpoch) that does not hold an epoch, or epochs that
    /// contradict each other or the log; also a refused epoch update that would make them so.
    #[error("epoch file {file}: {reason}")]
    Epoch {
        /// The epoch file concerned.
        file: String,
        /// What is wrong.
        reason: String,
    },
    /// The background writer has stopped (after an error, or shut down).
    #[error("log writer has stopped")]
    WriterStopped,
}

impl LogError {
    pub(crate) fn io(op: &'static str, file: impl Into<String>, source: io::Error) -> LogError {
        LogError::Io { op, file: file.into(), source }
    }

    /// Whether this is a full disk (ENOSPC): the append was refused before anything was written,
    /// and the log stays usable; it will work again when space is freed.
    pub fn is_storage_full(&self) -> bool {
        matches!(self, LogError::Io { source, .. } if source.raw_os_error() == Some(libc::ENOSPC))
    }
}

impl From<LogError> for io::Error {
    fn from(e: LogError) -> io::Error {
        match e {
            LogError::Io { op, file, source } => {
                io::Error::new(source.kind(), format!("{op} {file}: {source}"))
            }
            LogError::Corrupt { .. }
            | LogError::ZxidGap { .. }
            | LogError::UnsupportedVersion { .. }
            | LogError::UnsupportedFormat { .. }
            | LogError::Epoch { .. } => io::Error::new(io::ErrorKind::InvalidData, e),
            LogError::OutOfOrder { .. }
            | LogError::RecordTooLarge { .. }
            | LogError::NotInLog { .. }
            | LogError::BadPayload { .. } => io::Error::new(io::ErrorKind::InvalidInput, e),
            LogError::Poisoned(_) | LogError::WriterStopped => io::Error::other(e),
        }
    }
}
