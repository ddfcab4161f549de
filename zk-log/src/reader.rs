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
    /// Bumped by every truncation, reset and purge: a reader that let go of the lock part way
    /// through a range does not resume at an offset that may have been cut and rewritten.
    pub withdrawals: u64,
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
    /// Runs between two holds of the lock in one read (unit tests change the log there).
    #[cfg(test)]
    between_holds: tests::Hook,
}

impl<S: Storage> ReadShared<S> {
    pub fn new(base: i64) -> Self {
        ReadShared {
            view: RwLock::new(View { base, segments: Vec::new(), withdrawals: 0 }),
            durable: AtomicI64::new(base),
            #[cfg(test)]
            between_holds: tests::Hook::default(),
        }
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

/// Record bytes [`LogReader::read_range`] copies per hold of the view's read lock: bounds how
/// long a publication after a sync (or a truncation) can wait for a reader, page faults from a
/// cold file included.
pub const READ_HOLD_BYTES: u64 = 256 << 10;

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
    /// from it or below are [`LogError::NotInLog`] unless it is 0 (nothing was ever dropped).
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
    /// The view's read lock is held while record bytes are copied, [`READ_HOLD_BYTES`] at a time
    /// (not while they are decoded): a sync's publication waits for it, and a copy from a cold
    /// part of the file waits for the disk. If the log truncates, resets or purges between two
    /// holds, the records copied so far are returned (fewer than asked for); the next call
    /// from the last zxid plus one continues or reports `NotInLog`.
    ///
    /// Errors: [`LogError::NotInLog`] if `from` is at or below a nonzero [`Self::base_zxid`]
    /// (the records asked for were purged, or precede a reset: the caller falls back to a
    /// snapshot);
    /// [`LogError::Corrupt`] naming file and offset for a record that no longer checks out;
    /// [`LogError::Io`] if the backend fails.
    pub fn read_range(&self, from: i64, through: i64, max_entries: usize) -> Result<Vec<LogEntry>, LogError> {
        let max_entries = max_entries.max(1);
        let mut names: Vec<String> = Vec::new();
        let mut raw: Vec<RawRecord> = Vec::new();
        let mut through = through;
        // Where the previous hold of the lock stopped: (segment's first zxid, offset, the
        // view's withdrawal count then).
        let mut cursor: Option<(i64, u64, u64)> = None;
        loop {
            #[cfg(test)]
            if cursor.is_some() {
                self.shared.between_holds.run();
            }
            let view = self.shared.read();
            let (si, start) = match cursor {
                None => {
                    let durable = view.durable_zxid();
                    if from <= view.base && view.base > 0 {
                        return Err(LogError::NotInLog {
                            zxid: from,
                            first: view.first_zxid().unwrap_or(0),
                            last: durable,
                        });
                    }
                    through = through.min(durable);
                    if from > through {
                        return Ok(Vec::new());
                    }
                    let si = view.segments.partition_point(|s| s.first_zxid <= from).saturating_sub(1);
                    let Some(seg) = view.segments.get(si) else { return Ok(Vec::new()) };
                    (si, seek_in_index(&seg.index, from))
                }
                Some((first, off, withdrawals)) => {
                    // Something was truncated, reset or purged since the last hold: the offset
                    // may no longer be a record's. What was copied is returned; the caller
                    // continues from its last zxid and seeks afresh.
                    if view.withdrawals != withdrawals {
                        break;
                    }
                    match view.segments.iter().position(|s| s.first_zxid == first) {
                        Some(i) => (i, off),
                        None => break,
                    }
                }
            };
            cursor = None;
            let mut budget = READ_HOLD_BYTES;
            'segments: for (i, seg) in view.segments.iter().enumerate().skip(si) {
                if seg.records == 0 || seg.first_zxid > through {
                    continue;
                }
                let mut off = if i == si { start } else { SEGMENT_HEADER_BYTES };
                if names.last() != Some(&seg.shown) {
                    names.push(seg.shown.clone());
                }
                let file_no = names.len() - 1;
                while off < seg.end {
                    if budget == 0 {
                        cursor = Some((seg.first_zxid, off, view.withdrawals));
                        break 'segments;
                    }
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
                    budget = budget.saturating_sub(RECORD_HEADER_BYTES);
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
                    budget = budget.saturating_sub(h.len as u64);
                    raw.push((zxid, file_no, at, payload));
                    if raw.len() >= max_entries {
                        break 'segments;
                    }
                }
            }
            if cursor.is_none() {
                break;
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

#[cfg(test)]
mod tests {
    use crate::conformance::{sample_batch, sample_txn};
    use crate::{FaultStorage, LogOptions, SegmentLog};
    use std::sync::Mutex;

    type HookFn = Box<dyn FnMut() + Send>;

    /// A closure run between two holds of the view lock.
    #[derive(Default)]
    pub(super) struct Hook(Mutex<Option<HookFn>>);

    impl std::fmt::Debug for Hook {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("Hook")
        }
    }

    impl Hook {
        pub(super) fn run(&self) {
            if let Some(h) = self.0.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
                h();
            }
        }
    }

    /// A truncation (and a different history appended at the same offsets) between two holds of
    /// one long read: the read returns what it copied before, never bytes from the new history
    /// read at an old record's offset.
    #[test]
    fn a_read_spanning_holds_stops_at_a_truncation() {
        let s = FaultStorage::new(1);
        let mut log =
            SegmentLog::open(s, LogOptions { prealloc_bytes: 64 << 10, segment_bytes_max: 4 << 20 })
                .expect("open");
        for z in (1..=1000).step_by(10) {
            log.append(&sample_batch(z, z + 9, 2000)).expect("append");
        }
        log.sync().expect("sync");
        let r = log.reader();
        let log = std::sync::Arc::new(Mutex::new(log));
        let in_hook = log.clone();
        let mut fired = false;
        *r.shared.between_holds.0.lock().expect("hook") = Some(Box::new(move || {
            if fired {
                return;
            }
            fired = true;
            // Cut back into what the reader has copied and rewrite it with other (larger) sizes,
            // so the offset the reader stopped at lies inside the new history.
            let mut l = in_hook.lock().expect("log");
            l.truncate_after(10).expect("truncate");
            l.append(&sample_batch(11, 1000, 5000)).expect("append");
            l.sync().expect("sync");
        }));
        let got = r.read_range(1, 1000, usize::MAX).expect("read");
        assert!(!got.is_empty() && got.len() < 1000, "stopped at the truncation: {} entries", got.len());
        for (e, z) in got.iter().zip(1..) {
            let (h, t) = sample_txn(z, 2000);
            assert_eq!((&e.header, &e.txn), (&h, &t), "zxid {z} is from the history before the cut");
        }
        // The next call, from where this one stopped, reads the new history.
        let next = got.len() as i64 + 1;
        let more = r.read_range(next, 1000, usize::MAX).expect("read on");
        assert_eq!(more.first().map(|e| e.header.zxid), Some(next));
        let (h, t) = sample_txn(next, if next <= 10 { 2000 } else { 5000 });
        assert_eq!((&more[0].header, &more[0].txn), (&h, &t));
    }
}
