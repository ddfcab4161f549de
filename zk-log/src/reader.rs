//! Reading durable records while the log is being written: the view a [`crate::SegmentLog`]
//! publishes after each sync, and [`LogReader`], the cloneable handle other threads read it by
//! (Zab's leader reads the range a follower lacks, for a DIFF, while commits go on).
//!
//! The view lists, for each segment, the offset up to which its records are durable and a
//! read-only handle of its file (the file backend maps it). Readers take the view's read lock,
//! copy the record bytes they need, and let go; the log takes the write lock to publish a
//! newer durable end after a sync, and to withdraw a range before it truncates, resets or
//! purges it. Hence a reader never reads a byte whose sync has not completed (no torn read)
//! nor a byte that is being cut off (which, through a mapping, would be SIGBUS).

use crate::error::LogError;
use crate::format::{decode_payload, record_crc, RecordHeader, RECORD_HEADER_BYTES, SEGMENT_HEADER_BYTES};
use crate::log::LogEntry;
use crate::storage::{Storage, StorageRead};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// One segment as readers see it.
#[derive(Debug)]
pub(crate) struct ViewSegment<S: Storage> {
    pub name: String,
    /// How the file is named in errors.
    pub shown: String,
    pub first_zxid: i64,
    /// Zxid of the last durable record (meaningless while `records` is 0).
    pub last_zxid: i64,
    /// Offset just past the last durable record.
    pub end: u64,
    pub records: u64,
    /// The segment's (zxid, offset) index, durable entries only.
    pub index: Vec<(i64, u64)>,
    pub file: S::ReadFile,
}

/// What the log has published.
#[derive(Debug)]
pub(crate) struct View<S: Storage> {
    /// Every transaction above this zxid is in the log (see `SegmentLog::base_zxid`).
    pub base: i64,
    /// A prefix of the log's segments, with their durable parts.
    pub segments: Vec<ViewSegment<S>>,
}

impl<S: Storage> View<S> {
    /// The last durable zxid readers can reach (the base when no record is published).
    pub fn durable_zxid(&self) -> i64 {
        self.segments.iter().rev().find(|s| s.records > 0).map_or(self.base, |s| s.last_zxid)
    }

    fn first_zxid(&self) -> Option<i64> {
        self.segments.iter().find(|s| s.records > 0).map(|s| s.first_zxid)
    }
}

/// Shared between the log and its readers.
#[derive(Debug)]
pub(crate) struct ReadShared<S: Storage> {
    view: RwLock<View<S>>,
    /// `view.durable_zxid()`, readable without the lock.
    durable: AtomicI64,
}

impl<S: Storage> ReadShared<S> {
    pub fn new(base: i64) -> Self {
        ReadShared { view: RwLock::new(View { base, segments: Vec::new() }), durable: AtomicI64::new(base) }
    }

    /// The view, for the log to change. A panic while it was held leaves a view that is at
    /// worst behind the log, never ahead of it, so poisoning is ignored.
    pub fn write(&self) -> RwLockWriteGuard<'_, View<S>> {
        self.view.write().unwrap_or_else(|p| p.into_inner())
    }

    fn read(&self) -> RwLockReadGuard<'_, View<S>> {
        self.view.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Stores the view's durable zxid for lock-free readers; call with the write guard held,
    /// after changing the view.
    pub fn note_durable(&self, view: &View<S>) {
        self.durable.store(view.durable_zxid(), Ordering::Release);
    }
}

/// Where to start scanning `index` (one entry per `INDEX_STRIDE` records) to find `zxid`.
pub(crate) fn seek_in_index(index: &[(i64, u64)], zxid: i64) -> u64 {
    let i = index.partition_point(|&(z, _)| z <= zxid);
    if i == 0 {
        SEGMENT_HEADER_BYTES
    } else {
        index[i - 1].1
    }
}

/// A read handle on a log's durable records, for other threads (the log itself keeps
/// appending, syncing, rolling, truncating and purging meanwhile). Get one from
/// [`crate::SegmentLog::reader`] or [`crate::LogWriter::reader`]; clones are cheap and share the
/// same view.
///
/// It sees exactly what the log has made durable: records whose sync completed, in segments
/// not yet purged, below any truncation or reset the log has begun. A handle outliving its log
/// keeps reading what was published last.
#[derive(Debug)]
pub struct LogReader<S: Storage> {
    shared: Arc<ReadShared<S>>,
}

impl<S: Storage> Clone for LogReader<S> {
    fn clone(&self) -> Self {
        LogReader { shared: self.shared.clone() }
    }
}

/// Raw records copied out under the lock: (zxid, file shown, offset, payload).
type RawRecord = (i64, usize, u64, Vec<u8>);

impl<S: Storage> LogReader<S> {
    pub(crate) fn new(shared: Arc<ReadShared<S>>) -> Self {
        LogReader { shared }
    }

    /// The last durable zxid readers can reach: every record through it is readable (unless
    /// purged). Moves back only when the log is truncated or reset.
    pub fn durable_zxid(&self) -> i64 {
        self.shared.durable.load(Ordering::Acquire)
    }

    /// The zxid above which the log holds every transaction (see
    /// [`crate::SegmentLog::base_zxid`]): reads from above it are answered from the log, reads
    /// from it or below are [`LogError::NotInLog`].
    pub fn base_zxid(&self) -> i64 {
        self.shared.read().base
    }

    /// Zxid of the oldest durable record readers can reach, if any.
    pub fn first_zxid(&self) -> Option<i64> {
        self.shared.read().first_zxid()
    }

    /// Reads the durable records with `from <= zxid <= through`, oldest first, at most
    /// `max_entries` of them (at least one is allowed): `through` is cut to the durable zxid, so
    /// the last entry returned may be below what was asked for. To read a long range, call
    /// again from the last zxid returned plus one. Each record's checksum is verified again.
    ///
    /// The view's read lock is held while the records' bytes are copied (not while they are
    /// decoded); a sync's publication waits for it, so keep `max_entries` modest (hundreds).
    ///
    /// Errors: [`LogError::NotInLog`] if `from` is at or below [`Self::base_zxid`] (the records
    /// asked for were purged, or precede a reset: the caller falls back to a snapshot);
    /// [`LogError::Corrupt`] naming file and offset for a record that no longer checks out;
    /// [`LogError::Io`] if the backend fails.
    pub fn read_range(&self, from: i64, through: i64, max_entries: usize) -> Result<Vec<LogEntry>, LogError> {
        let max_entries = max_entries.max(1);
        let mut names: Vec<String> = Vec::new();
        let mut raw: Vec<RawRecord> = Vec::new();
        {
            let view = self.shared.read();
            let durable = view.durable_zxid();
            if from <= view.base {
                return Err(LogError::NotInLog {
                    zxid: from,
                    first: view.first_zxid().unwrap_or(0),
                    last: durable,
                });
            }
            let through = through.min(durable);
            if from > through {
                return Ok(Vec::new());
            }
            let si = view.segments.partition_point(|s| s.first_zxid <= from).saturating_sub(1);
            'segments: for seg in &view.segments[si..] {
                if seg.records == 0 || seg.first_zxid > through {
                    continue;
                }
                let mut off = seek_in_index(&seg.index, from);
                names.push(seg.shown.clone());
                let file_no = names.len() - 1;
                while off < seg.end {
                    let corrupt = |offset: u64, reason: String| LogError::Corrupt {
                        file: seg.shown.clone(),
                        offset,
                        reason,
                    };
                    let mut hb = [0u8; RECORD_HEADER_BYTES as usize];
                    seg.file.read_at(off, &mut hb).map_err(|e| LogError::io("read", seg.shown.clone(), e))?;
                    let h = RecordHeader::parse(&hb);
                    if !h.len_plausible() || off + RECORD_HEADER_BYTES + h.len as u64 > seg.end {
                        return Err(corrupt(off, format!("bad record length {} on re-read", h.len)));
                    }
                    let zxid = h.zxid as i64;
                    if zxid > through {
                        break 'segments;
                    }
                    let at = off;
                    off += RECORD_HEADER_BYTES + h.len as u64;
                    if zxid < from {
                        continue;
                    }
                    let mut payload = vec![0u8; h.len as usize];
                    seg.file
                        .read_at(at + RECORD_HEADER_BYTES, &mut payload)
                        .map_err(|e| LogError::io("read", seg.shown.clone(), e))?;
                    if record_crc(h.len, h.zxid, &payload) != h.crc {
                        return Err(corrupt(at, "record checksum mismatch on re-read".into()));
                    }
                    raw.push((zxid, file_no, at, payload));
                    if raw.len() >= max_entries {
                        break 'segments;
                    }
                }
            }
        }
        let mut out = Vec::with_capacity(raw.len());
        let mut prev: Option<i64> = None;
        for (zxid, file_no, at, payload) in raw {
            let corrupt =
                |reason: String| LogError::Corrupt { file: names[file_no].clone(), offset: at, reason };
            let (header, txn) = decode_payload(bytes::Bytes::from(payload))
                .map_err(|e| corrupt(format!("record does not decode: {e}")))?;
            if header.zxid != zxid {
                return Err(corrupt("frame zxid differs from the txn header's".into()));
            }
            // Paired with the writer's order check: what comes back is in order, too.
            if prev.is_some_and(|p| !crate::format::zxid_follows(p, zxid)) {
                return Err(corrupt(format!("zxid {zxid:#x} does not follow {:#x}", prev.unwrap_or(0))));
            }
            prev = Some(zxid);
            out.push(LogEntry { header, txn });
        }
        Ok(out)
    }
}
