//! Continuous backup and point-in-time restore: `zkrs-server backup` and `zkrs-server restore`.
//!
//! An archive is a directory or a prefix in object storage ([`object`]: S3, Google Cloud Storage
//! or Azure Blob Storage, [`cloud`]) holding closed log segments and finished snapshots copied
//! byte for byte from a server's data directories, plus a manifest ([`manifest`]) that names
//! each file with its size, CRC-32 and zxid range, and, for a segment, the times of its first
//! and last transaction. A file is always complete in the archive before
//! the manifest names it ([`target`]), so a backup stopped at any moment leaves an archive that
//! restores.
//!
//! - [`archiver`]: one pass (or a loop, `--follow`) that archives what the server has closed and
//!   the archive lacks, and reports the lag.
//! - [`continuous`]: the same passes run by the server itself (`zkrs.backup.to`), on a thread of
//!   its own, with what the archive has taken shared with the server's purge (which keeps what
//!   it has not, up to a bound) and its lag in `mntr` and `/metrics`.
//! - [`restore`]: builds a fresh data directory holding the tree as of a zxid or a wall-clock
//!   time, whole or one subtree, from the newest suitable snapshot and the archived log,
//!   checking every checksum and tree digest the archive holds.
//! - [`restored_log`]: a server started on a restored data directory ties its log to the
//!   restore and replays no other log over the restored snapshot.
//! - [`segment`]: reads a segment as a stream of checked records, without the log's lock.
//! - [`time`]: the `--time` argument (RFC 3339 or epoch milliseconds).

pub mod archiver;
pub mod cloud;
pub mod continuous;
pub mod manifest;
pub mod object;
pub mod restore;
pub mod restored_log;
pub mod segment;
pub mod target;
#[cfg(test)]
mod test_log;
pub mod time;

/// Why a backup or restore failed.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// A local file or directory operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The path concerned.
        path: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// An archived file (or the manifest) is damaged, missing or not what the manifest says.
    #[error("{key}: {why}")]
    Damaged {
        /// The file's key in the archive, or its path.
        key: String,
        /// What is wrong.
        why: String,
    },
    /// The archived log lacks transactions a restore needs.
    #[error(
        "the archive lacks the transactions after zxid {after:#x} up to {before:#x} ({why}): \
         no archived snapshot lets the restore skip them; a point at or before zxid {after:#x} needs \
         none of them"
    )]
    Gap {
        /// The last zxid held before the gap.
        after: i64,
        /// The first zxid held after it, or the target when nothing is held after it.
        before: i64,
        /// Where the gap is.
        why: String,
    },
    /// Object storage refused or failed a request.
    #[error("{key}: {why}")]
    Remote {
        /// The object's URL.
        key: String,
        /// The store's error.
        why: String,
    },
    /// The archive target (a path or a URL) cannot be used.
    #[error("archive target {target}: {why}")]
    Target {
        /// The target as given.
        target: String,
        /// Why.
        why: String,
    },
    /// The request cannot be carried out (the message says why).
    #[error("{0}")]
    Refused(String),
}

impl BackupError {
    /// The same error, a [`BackupError::Damaged`] one naming `key` instead (the manifest's path
    /// or URL, where the parser only knew it as `manifest.json`).
    pub fn naming(self, key: &str) -> BackupError {
        match self {
            BackupError::Damaged { why, .. } => BackupError::Damaged { key: key.to_string(), why },
            e => e,
        }
    }
}

pub(crate) fn io_err(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> BackupError + '_ {
    move |source| BackupError::Io { path: path.display().to_string(), source }
}
