//! The segmented transaction log: append, group-commit sync, read, truncate, purge, and recovery.

use crate::base::{read_marker, write_marker, BaseMarker, BASE_FILE};
use crate::error::LogError;
use crate::format::{
    check_segment_header, decode_payload, encode_segment_header, mark_group_start, parse_segment_name,
    payload_zxid, record_crc, segment_header_version, segment_name, zxid_follows, HeaderCheck, RecordBatch,
    RecordHeader, FORMAT_VERSION, GROUP_MARK_VERSION, RECORD_HEADER_BYTES, SEGMENT_HEADER_BYTES,
};
use crate::reader::{LogReader, ReadShared, ViewSegment};
use crate::storage::{Storage, StorageFile, StorageRead, TMP_SUFFIX};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use zk_proto::{Txn, TxnHeader};

/// One index entry is kept per this many records of a segment; a lookup reads at most this many
/// record frames forward from the entry. Keeps the index at ~0.5 byte per record.
pub const INDEX_STRIDE: u64 = 32;

/// Name of the directory inside dataLogDir that holds zkrs's segments (Apache's own files live in
/// `version-2`, so the two never mix).
pub const LOG_DIR_NAME: &str = "zkrs-log";

/// Sizes that shape the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogOptions {
    /// Segments grow in steps of this many bytes, reserved with fallocate before they are written
    /// (zoo.cfg's preAllocSize; Apache's default is 64 MiB).
    pub prealloc_bytes: u64,
    /// A segment that already holds records is closed, and a new one started, when the next batch
    /// would take it past this size. A batch never spans two segments, so a single batch larger
    /// than this makes one larger segment.
    pub segment_bytes_max: u64,
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions { prealloc_bytes: 64 << 20, segment_bytes_max: 64 << 20 }
    }
}

/// What recovery did when the log was opened.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Segments in the log after recovery.
    pub segments: usize,
    /// Records in the log after recovery.
    pub records: u64,
    /// A torn or corrupt tail that was cut off: (file, offset, bytes dropped).
    pub truncated_tail: Option<(String, u64, u64)>,
    /// Zxids of checksum-valid records that were cut off with that tail, oldest first: records
    /// of an unsynced sync group found after a page of the same group that never reached the
    /// disk (docs/log-format.md, "Out-of-order page writeback"). Empty when none were.
    pub dropped_records: Vec<i64>,
    /// Segment files removed because they held no record (a crash while one was being started).
    pub removed_segments: Vec<String>,
    /// Segments removed to finish a reset (or a truncation that emptied the log) that a crash
    /// interrupted after it was decided.
    pub reset_finished: Vec<String>,
}

/// One transaction read back from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    /// Its header (the zxid is `header.zxid`).
    pub header: TxnHeader,
    /// Its body.
    pub txn: Txn,
}

#[derive(Debug, Clone)]
struct SegmentMeta {
    name: String,
    /// The segment's format version: [`FORMAT_VERSION`] for every segment this build starts; an
    /// older one only for a segment an older build wrote, which is never appended to again.
    version: u32,
    first_zxid: i64,
    last_zxid: i64,
    /// Offset just past the last record.
    end: u64,
    records: u64,
    /// (zxid, offset) of records 0, INDEX_STRIDE, 2*INDEX_STRIDE, ...
    index: Vec<(i64, u64)>,
}

impl SegmentMeta {
    fn note_record(&mut self, zxid: i64, offset: u64, bytes: u64) {
        if self.records.is_multiple_of(INDEX_STRIDE) {
            self.index.push((zxid, offset));
        }
        self.records += 1;
        self.last_zxid = zxid;
        self.end = offset + bytes;
    }

    /// The index entry to start a forward scan from to find `zxid`: (record number, offset).
    fn seek_start(&self, zxid: i64) -> (u64, u64) {
        let i = self.index.partition_point(|&(z, _)| z <= zxid);
        if i == 0 {
            (0, SEGMENT_HEADER_BYTES)
        } else {
            (((i - 1) as u64) * INDEX_STRIDE, self.index[i - 1].1)
        }
    }
}

/// The transaction log: a directory of segments named by their first zxid.
///
/// Appends are not durable until [`SegmentLog::sync`] returns; [`SegmentLog::commit`] does both,
/// one sync for the whole batch. After a failed write or sync the log is poisoned (see
/// [`LogError::Poisoned`]); a full disk is reported before anything is written and does not poison.
#[derive(Debug)]
pub struct SegmentLog<S: Storage> {
    storage: S,
    opts: LogOptions,
    segments: Vec<SegmentMeta>,
    /// Open handle of the newest segment while it takes appends; `None` after a roll (the next
    /// append starts a new segment) or when the log is empty.
    active: Option<S::File>,
    last_zxid: i64,
    durable_zxid: i64,
    unsynced: bool,
    poisoned: Option<String>,
    report: RecoveryReport,
    /// A file prepared off the commit path (allocated, zero-filled, synced) that the next segment
    /// start renames into place instead of allocating on the spot.
    spare: Option<S::File>,
    /// A [`SparePrep`] is out being run.
    spare_pending: bool,
    /// The last preparation failed: no new one until a segment has been started without it.
    spare_failed: bool,
    /// The base zxid recorded in [`BASE_FILE`], if the log has one (see [`Self::base_zxid`]).
    marker: Option<i64>,
    /// What readers see, once a [`LogReader`] was asked for.
    view: Option<Arc<ReadShared<S>>>,
    /// How many syncs ran and how long they took, for metrics.
    sync_times: Arc<SyncTimes>,
}

/// How many of a log's syncs ran and how long they took in all: the figure Apache ZooKeeper
/// reports as `fsynctime`. Shared ([`SegmentLog::sync_times`]) so that another thread reads it
/// while the log is synced on its own; only syncs that wrote something and succeeded count.
///
/// The latest syncs' times are also kept, up to [`SyncTimes::RECENT_MAX`] of them (the oldest
/// dropped past that), for a reader that takes them ([`SyncTimes::take_recent`]) into a
/// distribution.
#[derive(Debug, Default)]
pub struct SyncTimes {
    count: AtomicU64,
    total_us: AtomicU64,
    recent_us: Mutex<VecDeque<u64>>,
}

impl SyncTimes {
    /// How many sync times wait for [`SyncTimes::take_recent`] at most.
    pub const RECENT_MAX: usize = 1024;

    /// Counts one sync that took `d`.
    pub fn record(&self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.total_us.fetch_add(us, Relaxed);
        self.count.fetch_add(1, Relaxed);
        let mut recent = self.recent_us.lock().unwrap_or_else(|e| e.into_inner());
        if recent.len() == Self::RECENT_MAX {
            recent.pop_front();
        }
        recent.push_back(us);
    }

    /// Syncs counted so far.
    pub fn count(&self) -> u64 {
        self.count.load(Relaxed)
    }

    /// Their time added up.
    pub fn total(&self) -> Duration {
        Duration::from_micros(self.total_us.load(Relaxed))
    }

    /// The times of the syncs since the last call (the latest [`SyncTimes::RECENT_MAX`] of
    /// them), µs, oldest first.
    pub fn take_recent(&self) -> Vec<u64> {
        let mut recent = self.recent_us.lock().unwrap_or_else(|e| e.into_inner());
        recent.drain(..).collect()
    }
}

/// The base of a log whose first record is `first` (None: empty) given its marker: the marker's
/// base if the first record directly follows it, else the zxid before the first record (the
/// marker is then older than the segments, as after a crash in the middle of a purge).
fn base_of(first: Option<i64>, marker: Option<i64>) -> i64 {
    let m = marker.unwrap_or(0);
    match first {
        None => m,
        Some(f) if f > m && zxid_follows(m, f) => m,
        Some(f) => f - 1,
    }
}

/// A spare file is prepared in steps of this many bytes (see [`SparePrep::run`]).
pub const SPARE_STEP_BYTES: u64 = 1 << 20;
const SPARE_STEP_PAUSE: std::time::Duration = std::time::Duration::from_millis(2);

/// Name of the prepared spare file. Recovery removes one it finds: it never holds records.
pub const SPARE_FILE: &str = "log.spare";

/// The slow part of starting a segment — creating its file, reserving and zero-filling its first
/// allocation step, syncing it — packaged to run on a thread other than the log's (see
/// [`SegmentLog::spare_needed`]).
#[derive(Debug)]
pub struct SparePrep<S: Storage> {
    storage: S,
    size: u64,
}

impl<S: Storage> SparePrep<S> {
    /// Creates and prepares the spare file. Errors (a full disk, say) are handed to
    /// [`SegmentLog::install_spare`], which then starts segments the slow way.
    ///
    /// The space is reserved and zero-filled one step (`SPARE_STEP_BYTES`) at a time, each step
    /// synced, with a short pause between steps: the disk never holds more than one step of this
    /// file's writes ahead of the log's own syncs, so commits do not stall behind a burst of
    /// zeros (measured here: a 64 MiB burst held commits up for 80 ms).
    pub fn run(self) -> std::io::Result<S::File> {
        let _ = self.storage.remove(SPARE_FILE);
        let mut f = self.storage.create(SPARE_FILE)?;
        let mut have = 0;
        while have < self.size {
            let next = (have + SPARE_STEP_BYTES).min(self.size);
            if let Err(e) = f.allocate(next) {
                drop(f);
                let _ = self.storage.remove(SPARE_FILE);
                return Err(e);
            }
            have = next;
            if have < self.size {
                std::thread::sleep(SPARE_STEP_PAUSE);
            }
        }
        Ok(f)
    }
}

fn round_up(n: u64, step: u64) -> u64 {
    let step = step.max(1);
    n.div_ceil(step).saturating_mul(step)
}

enum ScanStop {
    /// The file ends exactly after the last record.
    Eof,
    /// Sixteen zero bytes (or fewer, up to the end) where the next frame would be.
    Zero,
    /// Bytes that are not a valid record: torn, garbage or corrupt.
    Bad(String),
}

struct ScanOut {
    meta: SegmentMeta,
    stop: ScanStop,
}

fn read_at<F: StorageFile>(f: &F, shown: &str, off: u64, buf: &mut [u8]) -> Result<(), LogError> {
    f.read_at(off, buf).map_err(|e| LogError::io("read", shown, e))
}

/// Reads record frames from `SEGMENT_HEADER_BYTES` until the first thing that is not a valid
/// record. A record whose checksum holds but whose zxid is wrong is an error, not a stop: a
/// checksum-valid record was written whole, so a wrong zxid is a real inconsistency.
fn scan_segment<F: StorageFile>(
    file: &F,
    shown: &str,
    name: &str,
    version: u32,
    first_zxid: i64,
    file_len: u64,
    prev: &mut Option<i64>,
) -> Result<ScanOut, LogError> {
    let mut meta = SegmentMeta {
        name: name.to_string(),
        version,
        first_zxid,
        last_zxid: 0,
        end: SEGMENT_HEADER_BYTES,
        records: 0,
        index: Vec::new(),
    };
    let mut payload = Vec::new();
    let mut off = SEGMENT_HEADER_BYTES;
    let stop = loop {
        if off == file_len {
            break ScanStop::Eof;
        }
        let avail = file_len - off;
        if avail < RECORD_HEADER_BYTES {
            let mut rest = vec![0u8; avail as usize];
            read_at(file, shown, off, &mut rest)?;
            break if rest.iter().all(|&b| b == 0) {
                ScanStop::Zero
            } else {
                ScanStop::Bad("record frame cut short by the end of the file".into())
            };
        }
        let mut hb = [0u8; RECORD_HEADER_BYTES as usize];
        read_at(file, shown, off, &mut hb)?;
        let h = RecordHeader::parse_version(&hb, version);
        if h.is_zero() {
            break ScanStop::Zero;
        }
        if !h.len_plausible() {
            break ScanStop::Bad(format!("implausible record length {}", h.len));
        }
        let total = RECORD_HEADER_BYTES + h.len as u64;
        if total > avail {
            break ScanStop::Bad(format!("record of {} bytes runs past the end of the file", h.len));
        }
        payload.resize(h.len as usize, 0);
        read_at(file, shown, off + RECORD_HEADER_BYTES, &mut payload)?;
        if record_crc(h.len, h.zxid, &payload) != h.crc {
            break ScanStop::Bad("record checksum mismatch".into());
        }
        let corrupt = |reason: String| LogError::Corrupt { file: shown.to_string(), offset: off, reason };
        let zxid = i64::try_from(h.zxid).map_err(|_| corrupt(format!("zxid {:#x} out of range", h.zxid)))?;
        if payload_zxid(&payload) != Some(zxid) {
            return Err(corrupt(format!("frame zxid {zxid:#x} differs from the txn header's")));
        }
        if meta.records == 0 && zxid != first_zxid {
            return Err(corrupt(format!(
                "first record has zxid {zxid:#x} but the segment is named for {first_zxid:#x}"
            )));
        }
        if let Some(p) = *prev {
            if !zxid_follows(p, zxid) {
                return Err(LogError::ZxidGap { file: shown.to_string(), offset: off, prev: p, found: zxid });
            }
        }
        *prev = Some(zxid);
        meta.note_record(zxid, off, total);
        off += total;
    };
    Ok(ScanOut { meta, stop })
}

/// Version 1's tail search: looks in `region` (the bytes of a version-1 segment from offset
/// `base` on) for a checksum-valid record frame at any byte position after the first, with a zxid
/// in the same or the next epoch after `after`. Returns its offset and zxid.
fn find_intact_record(region: &[u8], base: u64, after: i64) -> Option<(u64, i64)> {
    let hdr = RECORD_HEADER_BYTES as usize;
    let mut pos = 1;
    while pos + hdr <= region.len() {
        let h = RecordHeader::parse(region[pos..pos + hdr].try_into().expect("16 bytes"));
        let z = h.zxid as i64;
        // Cheap filters first: a plausible length and a zxid the log could hold next. Random
        // garbage almost never passes both, so the checksum runs rarely.
        if h.len_plausible()
            && h.zxid <= i64::MAX as u64
            && z > after
            && (z >> 32) - (after >> 32) <= 1
            && pos + hdr + h.len as usize <= region.len()
        {
            let payload = &region[pos + hdr..pos + hdr + h.len as usize];
            if record_crc(h.len, h.zxid, payload) == h.crc {
                return Some((base + pos as u64, z));
            }
        }
        pos += 1;
    }
    None
}

/// A checksum-valid record frame found after the damage in a segment's tail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TailFrame {
    offset: u64,
    zxid: i64,
    /// It carries the group mark: everything before it in the segment was durable when it was
    /// written.
    group_start: bool,
}

/// The tail search from version 2 on: every checksum-valid record frame in `region` (the bytes of
/// a segment of format `version` from offset `base` on) that starts after the first byte and
/// before `starts_before` (the end of the region's nonzero bytes: a frame's length word is not
/// zero), with a zxid above `after` that its payload's txn header repeats. An intact frame is
/// stepped over whole, so bytes inside its payload (a client's data) are never taken for a frame.
///
/// Unlike version 1's search, no epoch bound is put on the zxid: a group mark of any later zxid is
/// evidence that must not be missed. The payload-zxid comparison keeps garbage from reaching the
/// checksum (a random 16-byte frame and the 8 bytes it names agree with probability 2^-64).
fn intact_frames(region: &[u8], base: u64, starts_before: usize, after: i64, version: u32) -> Vec<TailFrame> {
    let hdr = RECORD_HEADER_BYTES as usize;
    let mut found = Vec::new();
    let mut pos = 1;
    while pos < starts_before && pos + hdr <= region.len() {
        let h = RecordHeader::parse_version(region[pos..pos + hdr].try_into().expect("16 bytes"), version);
        let end = pos + hdr + h.len as usize;
        if h.len_plausible() && end <= region.len() {
            if let Ok(zxid) = i64::try_from(h.zxid) {
                let payload = &region[pos + hdr..end];
                if zxid > after
                    && payload_zxid(payload) == Some(zxid)
                    && record_crc(h.len, h.zxid, payload) == h.crc
                {
                    found.push(TailFrame { offset: base + pos as u64, zxid, group_start: h.group_start });
                    pos = end;
                    continue;
                }
            }
        }
        pos += 1;
    }
    found
}

/// What the damaged tail of the newest segment is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum TailVerdict {
    /// Bytes of the last sync group, whose sync never completed: cut. The zxids of intact records
    /// that go with them (same group, found after the damage).
    Torn(Vec<i64>),
    /// Damage to bytes that were synced: an intact record at this offset, with this zxid, proves
    /// it; the string says how.
    Synced { at: u64, zxid: i64, why: &'static str },
}

/// Judges the nonzero bytes after the last valid record of the newest segment (`region`, from
/// offset `base`; `nonzero_end` bytes of it up to its last nonzero byte), `after` being the zxid
/// of that record (or the one before the segment's first). docs/log-format.md, "Recovery", step 5,
/// gives the rules and the reasoning.
fn judge_tail(region: &[u8], base: u64, nonzero_end: usize, after: i64, version: u32) -> TailVerdict {
    if version < GROUP_MARK_VERSION {
        // Version 1 has no group marks: any intact record after the damage refuses, as it did.
        return match find_intact_record(region, base, after) {
            Some((at, zxid)) => TailVerdict::Synced { at, zxid, why: "an intact record follows" },
            None => TailVerdict::Torn(Vec::new()),
        };
    }
    let found = intact_frames(region, base, nonzero_end, after, version);
    match found.iter().find(|f| f.group_start) {
        Some(f) => TailVerdict::Synced {
            at: f.offset,
            zxid: f.zxid,
            why: "an intact record that starts a later sync group follows (the damaged bytes were synced \
                  before it was written)",
        },
        None => TailVerdict::Torn(found.iter().map(|f| f.zxid).collect()),
    }
}

impl<S: Storage> SegmentLog<S> {
    /// Opens the log in `storage`, recovering it: every segment is scanned and every record's
    /// checksum verified.
    ///
    /// - A torn, zero-filled or checksum-failing tail of the newest segment is cut off, with a
    ///   `warn` naming the file, offset and bytes dropped (and the zxids of intact records that
    ///   went with it); see [`Self::recovery`]. A tail is torn when no intact record after the
    ///   damage starts a later sync group (in a version-1 segment: when no intact record follows
    ///   at all); the records of the last group after the damage are cut with it.
    /// - A newest segment whose header never became valid and that holds nothing else (a crash
    ///   while it was being started) is removed; so is a newest segment with no records.
    /// - The newest segment is synced whole, so that everything recovery kept is durable before
    ///   anything is appended after it. One of an older format is cut at its last record instead
    ///   and the next append starts a new segment.
    ///
    /// Errors: [`LogError::UnsupportedVersion`] for a segment of a newer format;
    /// [`LogError::Corrupt`] for a bad header or record anywhere else (including damage followed
    /// by an intact record that starts a later sync group, or, in a version-1 segment, by any
    /// intact record), naming file and offset; [`LogError::ZxidGap`] when zxids do not follow
    /// across records or segments; [`LogError::Io`] if the backend fails.
    pub fn open(storage: S, opts: LogOptions) -> Result<SegmentLog<S>, LogError> {
        let names = storage.list().map_err(|e| LogError::io("list", storage.display_name("."), e))?;
        for n in names.iter().filter(|n| n.starts_with(crate::storage::TRASH_PREFIX)) {
            // Purged segments a crash left before they were removed.
            crate::storage::remove_gradually(&storage, n)
                .map_err(|e| LogError::io("remove", storage.display_name(n), e))?;
        }
        if names.iter().any(|n| n == SPARE_FILE) {
            // A spare holds no records; a new one is prepared when needed.
            storage
                .remove(SPARE_FILE)
                .map_err(|e| LogError::io("remove", storage.display_name(SPARE_FILE), e))?;
        }
        let base_tmp = format!("{BASE_FILE}{TMP_SUFFIX}");
        if names.contains(&base_tmp) {
            // A marker update that did not reach its rename: the old marker stands.
            Self::remove_file(&storage, &base_tmp)?;
        }
        let mut report = RecoveryReport::default();
        let mut marker = read_marker(&storage)?;
        let mut names = names;
        if let Some(m) = marker.as_mut().filter(|m| !m.doomed.is_empty()) {
            // A reset was decided (its marker is durable) but a crash came before every segment
            // it removes was gone: finish it, exactly as it would have finished.
            for n in m.doomed.iter().filter(|n| names.contains(n)) {
                let trash = crate::storage::move_to_trash(&storage, n)
                    .map_err(|e| LogError::io("rename for removal", storage.display_name(n), e))?;
                crate::storage::remove_gradually(&storage, &trash)
                    .map_err(|e| LogError::io("remove", storage.display_name(&trash), e))?;
                report.reset_finished.push(n.clone());
            }
            tracing::warn!(
                base = m.base,
                removed = ?report.reset_finished,
                "finished a log reset that a crash interrupted"
            );
            names.retain(|n| !m.doomed.contains(n));
            m.doomed.clear();
            write_marker(&storage, m)?;
        }
        let marker = marker.map(|m| m.base);
        let mut segs: Vec<(i64, String)> =
            names.into_iter().filter_map(|n| parse_segment_name(&n).map(|z| (z, n))).collect();
        segs.sort();
        let mut metas: Vec<SegmentMeta> = Vec::with_capacity(segs.len());
        let mut active = None;
        let mut prev: Option<i64> = None;
        let count = segs.len();
        for (i, (name_zxid, name)) in segs.into_iter().enumerate() {
            let is_last = i + 1 == count;
            let shown = storage.display_name(&name);
            let mut file = storage.open(&name).map_err(|e| LogError::io("open", shown.clone(), e))?;
            let file_len = file.len().map_err(|e| LogError::io("stat", shown.clone(), e))?;
            let mut head = vec![0u8; file_len.min(SEGMENT_HEADER_BYTES) as usize];
            read_at(&file, &shown, 0, &mut head)?;
            let first_zxid = match check_segment_header(&head) {
                HeaderCheck::Valid { first_zxid } => first_zxid,
                HeaderCheck::NewerVersion(version) => {
                    return Err(LogError::UnsupportedVersion {
                        file: shown,
                        version,
                        supported: FORMAT_VERSION,
                    })
                }
                HeaderCheck::Invalid(reason) => {
                    // The header is synced before any record is written, so a newest segment with
                    // a bad header and nothing but zeros after it never held a record.
                    if is_last
                        && Self::all_zero_from(&file, &shown, SEGMENT_HEADER_BYTES.min(file_len), file_len)?
                    {
                        tracing::warn!(file = %shown, reason, "removing newest log segment whose header was never completed");
                        drop(file);
                        Self::remove_file(&storage, &name)?;
                        report.removed_segments.push(name);
                        continue;
                    }
                    return Err(LogError::Corrupt { file: shown, offset: 0, reason: reason.to_string() });
                }
            };
            if first_zxid != name_zxid {
                return Err(LogError::Corrupt {
                    file: shown,
                    offset: 16,
                    reason: format!("header says first zxid {first_zxid:#x}, the name says {name_zxid:#x}"),
                });
            }
            let version = segment_header_version(&head).expect("a valid header has a version");
            let ScanOut { meta, stop } =
                scan_segment(&file, &shown, &name, version, first_zxid, file_len, &mut prev)?;
            if !is_last {
                let clean = match stop {
                    ScanStop::Eof => true,
                    ScanStop::Zero => Self::all_zero_from(&file, &shown, meta.end, file_len)?,
                    ScanStop::Bad(_) => false,
                };
                if !clean {
                    let reason = match stop {
                        ScanStop::Bad(r) => r,
                        _ => "non-zero bytes after the last record".into(),
                    };
                    return Err(LogError::Corrupt {
                        file: shown,
                        offset: meta.end,
                        reason: format!("{reason} (not the newest segment, so this is not a torn tail)"),
                    });
                }
                if meta.records == 0 {
                    return Err(LogError::Corrupt {
                        file: shown,
                        offset: SEGMENT_HEADER_BYTES,
                        reason: "segment holds no records but is not the newest".into(),
                    });
                }
                metas.push(meta);
                continue;
            }
            // The newest segment: whatever follows its last valid record is a tail that no sync
            // completed for, unless an intact record after it proves otherwise (judge_tail).
            let stop_reason = match stop {
                ScanStop::Eof => None,
                ScanStop::Zero => Some("zero-filled frame".to_string()),
                ScanStop::Bad(r) => Some(r),
            };
            // A preallocated segment's tail is tens of megabytes of zeros: checked a mebibyte at a
            // time first, and read whole only when something in it is not zero (one buffer for it
            // all stayed in the process's memory after start-up).
            let dirty = stop_reason.is_some() && !Self::all_zero_from(&file, &shown, meta.end, file_len)?;
            if let Some(reason) = stop_reason.filter(|_| dirty) {
                let mut region = vec![0u8; (file_len - meta.end) as usize];
                read_at(&file, &shown, meta.end, &mut region)?;
                let nonzero_end = region.iter().rposition(|&b| b != 0).map(|p| p as u64 + 1);
                if let Some(nz) = nonzero_end {
                    let after = if meta.records > 0 { meta.last_zxid } else { first_zxid - 1 };
                    let dropped = match judge_tail(&region, meta.end, nz as usize, after, version) {
                        TailVerdict::Synced { at, zxid, why } => {
                            return Err(LogError::Corrupt {
                                file: shown,
                                offset: meta.end,
                                reason: format!(
                                    "{reason}, yet {why}: zxid {zxid:#x} at offset {at}, so this is not a \
                                     torn tail"
                                ),
                            });
                        }
                        TailVerdict::Torn(dropped) => dropped,
                    };
                    if let (Some(first), Some(last)) = (dropped.first(), dropped.last()) {
                        tracing::warn!(
                            file = %shown,
                            offset = meta.end,
                            bytes_dropped = nz,
                            reason = %reason,
                            intact_records_dropped = dropped.len(),
                            "truncating the torn last sync group of the transaction log: its sync never \
                             completed (no record of a later group follows), and the {} intact record(s) \
                             after the damage, zxids {first:#x}..={last:#x}, go with it",
                            dropped.len()
                        );
                    } else {
                        tracing::warn!(
                            file = %shown,
                            offset = meta.end,
                            bytes_dropped = nz,
                            reason = %reason,
                            "truncating torn tail of the transaction log (no sync had completed for these bytes)"
                        );
                    }
                    let cut = |e| LogError::io("truncate", shown.clone(), e);
                    file.set_len(meta.end).map_err(cut)?;
                    file.sync().map_err(cut)?;
                    // Restore the preallocation, now zero-filled, so later appends write in place.
                    file.allocate(file_len).map_err(cut)?;
                    report.truncated_tail = Some((shown.clone(), meta.end, nz));
                    report.dropped_records = dropped;
                }
            }
            if meta.records == 0 {
                tracing::warn!(file = %shown, "removing newest log segment, which holds no records");
                drop(file);
                Self::remove_file(&storage, &name)?;
                report.removed_segments.push(name);
                continue;
            }
            let end = meta.end;
            let settle = |e| LogError::io("sync", shown.clone(), e);
            if version < FORMAT_VERSION {
                // An older format is never appended to: cut its unused preallocation, as a roll
                // does (the sync makes the records durable too), and let the next append start a
                // segment of the current format.
                file.set_len(end).and_then(|()| file.sync()).map_err(settle)?;
                metas.push(meta);
                continue;
            }
            // Made durable whole before anything is appended: after a process crash (not a power
            // loss) the tail a sync never covered is still in the page cache, and recovery just
            // took it for records. The next append marks its record as the start of a sync group,
            // which claims that every byte before it is durable (docs/log-format.md).
            file.sync_all_data().map_err(settle)?;
            metas.push(meta);
            // Reopened rather than kept: the scan read the whole segment through this handle's
            // mapping, and those pages would stay mapped into the process (resident, counted in
            // its RSS: up to a segment, 64 MiB, for as long as the segment takes appends). A
            // fresh handle maps the file without touching it; the page cache keeps the pages.
            drop(file);
            active = Some(storage.open(&name).map_err(|e| LogError::io("open", shown.clone(), e))?);
        }
        let base = base_of(metas.first().map(|m| m.first_zxid), marker);
        let last_zxid = metas.last().map_or(base, |m| m.last_zxid);
        report.segments = metas.len();
        report.records = metas.iter().map(|m| m.records).sum();
        Ok(SegmentLog {
            storage,
            opts,
            segments: metas,
            active,
            last_zxid,
            durable_zxid: last_zxid,
            unsynced: false,
            poisoned: None,
            report,
            spare: None,
            spare_pending: false,
            spare_failed: false,
            marker,
            view: None,
            sync_times: Arc::default(),
        })
    }

    /// When the log has no spare file and none is being prepared, the job that prepares one; the
    /// caller runs it ([`SparePrep::run`], slow: it writes a whole allocation step) on another
    /// thread and hands the outcome to [`Self::install_spare`]. Without spares, a segment start
    /// allocates on the commit path, as before.
    pub fn spare_needed(&mut self) -> Option<SparePrep<S>> {
        if self.spare.is_some() || self.spare_pending || self.spare_failed || self.poisoned.is_some() {
            return None;
        }
        self.spare_pending = true;
        Some(SparePrep {
            storage: self.storage.clone(),
            size: round_up(SEGMENT_HEADER_BYTES + 1, self.opts.prealloc_bytes),
        })
    }

    /// Takes the outcome of a [`SparePrep`]. A failed preparation is logged; the next segment
    /// start allocates the slow way (and reports a full disk itself).
    pub fn install_spare(&mut self, prepared: std::io::Result<S::File>) {
        self.spare_pending = false;
        match prepared {
            Ok(f) => self.spare = Some(f),
            Err(e) => {
                self.spare_failed = true;
                tracing::warn!(
                    "preparing the next log segment failed ({e}); it will be allocated when needed"
                )
            }
        }
    }

    fn all_zero_from(file: &S::File, shown: &str, from: u64, to: u64) -> Result<bool, LogError> {
        let mut off = from;
        let mut buf = vec![0u8; 1 << 20];
        while off < to {
            let n = (to - off).min(buf.len() as u64) as usize;
            read_at(file, shown, off, &mut buf[..n])?;
            if buf[..n].iter().any(|&b| b != 0) {
                return Ok(false);
            }
            off += n as u64;
        }
        Ok(true)
    }

    fn remove_file(storage: &S, name: &str) -> Result<(), LogError> {
        storage.remove(name).map_err(|e| LogError::io("remove", storage.display_name(name), e))?;
        storage.sync_dir().map_err(|e| LogError::io("sync directory", storage.display_name("."), e))
    }

    /// What recovery found and did when the log was opened.
    pub fn recovery(&self) -> &RecoveryReport {
        &self.report
    }

    /// Zxid of the last record appended; when the log holds none, its [`Self::base_zxid`] (0 for
    /// a new log). The next append must be above it.
    pub fn last_zxid(&self) -> i64 {
        self.last_zxid
    }

    /// The zxid above which the log holds every transaction this server has logged: 0 for a
    /// log that was only ever appended to, the zxid of the last [`Self::reset_to`] (or of a
    /// truncation that emptied the log) while the first record follows it directly, and
    /// otherwise the zxid just before the oldest record (after a purge). Recovery replays a
    /// snapshot taken at S only if the base is at most S ([`Self::reconcile_with_snapshot`]);
    /// reads from at or below a nonzero base are [`LogError::NotInLog`].
    ///
    /// The base survives restarts through the marker file `log.base`, which a reset writes
    /// before it removes anything (docs/log-format.md).
    pub fn base_zxid(&self) -> i64 {
        base_of(self.segments.first().map(|s| s.first_zxid), self.marker)
    }

    /// The zxid the log's base marker (`log.base`) names, if it has one: that of its last reset
    /// (or truncation that emptied it), or of a purge that moved its base up. A log that was
    /// only ever appended to has none.
    pub fn base_marker(&self) -> Option<i64> {
        self.marker
    }

    /// Zxid through which every appended record is durable.
    pub fn durable_zxid(&self) -> i64 {
        self.durable_zxid
    }

    /// Zxid of the oldest record held, if any.
    pub fn first_zxid(&self) -> Option<i64> {
        self.segments.first().map(|s| s.first_zxid)
    }

    /// Segment file names, oldest first.
    pub fn segment_names(&self) -> Vec<String> {
        self.segments.iter().map(|s| s.name.clone()).collect()
    }

    /// The backend.
    pub fn storage(&self) -> &S {
        &self.storage
    }

    fn check_usable(&self) -> Result<(), LogError> {
        match &self.poisoned {
            Some(why) => Err(LogError::Poisoned(why.clone())),
            None => Ok(()),
        }
    }

    fn poison(&mut self, e: LogError) -> LogError {
        self.poisoned = Some(e.to_string());
        e
    }

    /// Encodes and appends `batch` and makes it durable with one sync: the shape of the core's
    /// persist step. Returns the zxid now durable.
    ///
    /// Errors: as [`Self::append`] and [`Self::sync`].
    pub fn commit(&mut self, batch: &[(&TxnHeader, &Txn)]) -> Result<i64, LogError> {
        let b = RecordBatch::encode(batch)?;
        self.append(&b)?;
        self.sync()?;
        Ok(self.durable_zxid)
    }

    /// Appends an encoded batch, in one write, to the newest segment (starting a new segment first
    /// if the batch would take the current one past [`LogOptions::segment_bytes_max`]). Not
    /// durable until [`Self::sync`].
    ///
    /// Errors: [`LogError::OutOfOrder`] if the batch's first zxid does not follow the log's last
    /// (for an empty log: is not above it); [`LogError::Io`] with ENOSPC if space could not be
    /// reserved ([`LogError::is_storage_full`]); nothing is written then and the log stays usable.
    /// Any other I/O failure poisons the log.
    pub fn append(&mut self, batch: &RecordBatch) -> Result<(), LogError> {
        self.check_usable()?;
        let (Some(first), Some(last)) = (batch.first_zxid, batch.last_zxid) else {
            return Ok(());
        };
        let ok = if self.segments.is_empty() {
            first > self.last_zxid
        } else {
            zxid_follows(self.last_zxid, first)
        };
        if !ok {
            return Err(LogError::OutOfOrder { last: self.last_zxid, got: first });
        }
        let bytes = batch.bytes();
        if self.active.is_some() {
            let seg = self.segments.last().expect("active implies a segment");
            if seg.end + bytes > self.opts.segment_bytes_max {
                self.roll()?;
            }
        }
        if self.active.is_none() {
            self.start_segment(first, bytes)?;
        }
        let step = self.write_path_step();
        let seg = self.segments.last_mut().expect("a segment was just ensured");
        let file = self.active.as_mut().expect("a segment was just ensured");
        let shown = self.storage.display_name(&seg.name);
        let need = seg.end + bytes;
        let have = file.len().map_err(|e| LogError::io("stat", shown.clone(), e))?;
        if need > have {
            // Reserve before writing, so a full disk is an error here and never a SIGBUS later.
            file.allocate(round_up(need, step)).map_err(|e| LogError::io("allocate", shown.clone(), e))?;
        }
        let base = seg.end;
        debug_assert_eq!(seg.version, FORMAT_VERSION, "only segments of the current format take appends");
        // The first record written since the last completed sync starts a sync group, and says so
        // in its frame: every byte before it in this segment is durable (synced, or synced by
        // `open`), which is what lets recovery tell a torn last group from damage to synced
        // records (docs/log-format.md, "Sync groups"). Later batches of the same group go as they
        // were encoded.
        let written = if self.unsynced {
            file.write_at(base, &batch.buf)
        } else {
            let head = mark_group_start(&batch.buf);
            file.write_at_split(base, &head, &batch.buf[RECORD_HEADER_BYTES as usize..])
        };
        if let Err(e) = written {
            return Err(self.poison(LogError::io("write", shown, e)));
        }
        let ends = batch.records.iter().skip(1).map(|&(_, o)| o as u64).chain(std::iter::once(bytes));
        for (&(zxid, rel), end) in batch.records.iter().zip(ends) {
            seg.note_record(zxid, base + rel as u64, end - rel as u64);
        }
        debug_assert_eq!(seg.end, need);
        self.last_zxid = last;
        self.unsynced = true;
        Ok(())
    }

    /// Creates the segment for a batch starting at `first`: reserve space, write the header, sync
    /// the file and then the directory, so the segment exists durably before any record in it
    /// could be acknowledged.
    fn start_segment(&mut self, first: i64, batch_bytes: u64) -> Result<(), LogError> {
        // A sync group never spans segments: a roll syncs before the next segment exists, so the
        // new segment's first record starts a group.
        debug_assert!(!self.unsynced, "a segment is started with nothing unsynced");
        let name = segment_name(first);
        let shown = self.storage.display_name(&name);
        let size = round_up(SEGMENT_HEADER_BYTES + batch_bytes, self.write_path_step());
        if let Some(file) = self.spare.take() {
            if file.len().is_ok_and(|l| l >= size) {
                return self.start_segment_from_spare(file, name, first);
            }
            // Too small for this batch: it stays a spare for a later segment.
            self.spare = Some(file);
        }
        self.spare_failed = false;
        let mut file = self.storage.create(&name).map_err(|e| LogError::io("create", shown.clone(), e))?;
        if let Err(e) = file.allocate(size) {
            // Nothing of ours is in the file yet: remove it so the log is as before (full disk).
            drop(file);
            let _ = self.storage.remove(&name);
            let _ = self.storage.sync_dir();
            return Err(LogError::io("allocate", shown, e));
        }
        let header = encode_segment_header(first);
        let res = file
            .write_at(0, &header)
            .and_then(|_| file.sync())
            .map_err(|e| LogError::io("write header", shown.clone(), e))
            .and_then(|_| {
                self.storage
                    .sync_dir()
                    .map_err(|e| LogError::io("sync directory", self.storage.display_name("."), e))
            });
        if let Err(e) = res {
            return Err(self.poison(e));
        }
        self.push_new_segment(name, first, file);
        Ok(())
    }

    /// How much a file grows by when an append needs room there and then (a segment started
    /// without a spare, as after a reset, or one outgrowing its allocation): `preAllocSize`, but
    /// no more than one spare step, since zero-filling a whole 64 MiB allocation on the write path
    /// holds that write (and every sync behind it) for tens of milliseconds.
    fn write_path_step(&self) -> u64 {
        self.opts.prealloc_bytes.min(SPARE_STEP_BYTES)
    }

    /// Makes `file`, whose header for `first` is durable, the newest segment, taking appends.
    fn push_new_segment(&mut self, name: String, first: i64, file: S::File) {
        self.segments.push(SegmentMeta {
            name,
            version: FORMAT_VERSION,
            first_zxid: first,
            last_zxid: 0,
            end: SEGMENT_HEADER_BYTES,
            records: 0,
            index: Vec::new(),
        });
        self.active = Some(file);
    }

    /// Starts segment `name` in the prepared spare: header written and synced while the file is
    /// still the spare (a crash leaves a spare, removed at the next open), then renamed into place
    /// and the directory synced, so the segment exists durably before any record in it could be
    /// acknowledged.
    fn start_segment_from_spare(
        &mut self,
        mut file: S::File,
        name: String,
        first: i64,
    ) -> Result<(), LogError> {
        let shown = self.storage.display_name(&name);
        let header = encode_segment_header(first);
        let res = file
            .write_at(0, &header)
            .and_then(|_| file.sync())
            .and_then(|_| self.storage.rename(SPARE_FILE, &name))
            .and_then(|_| self.storage.sync_dir())
            .map_err(|e| LogError::io("start segment from spare", shown, e));
        if let Err(e) = res {
            return Err(self.poison(e));
        }
        self.push_new_segment(name, first, file);
        Ok(())
    }

    /// Makes every appended record durable (one msync/fdatasync of what was written since the
    /// last sync).
    ///
    /// Errors: [`LogError::Io`] if the sync fails; the log is then poisoned, and nothing appended
    /// since the last successful sync may be acknowledged.
    pub fn sync(&mut self) -> Result<(), LogError> {
        self.check_usable()?;
        if !self.unsynced {
            return Ok(());
        }
        if let Some(f) = self.active.as_mut() {
            let started = Instant::now();
            if let Err(e) = f.sync() {
                let name = self.segments.last().map(|s| s.name.as_str()).unwrap_or("");
                let e = LogError::io("sync", self.storage.display_name(name), e);
                return Err(self.poison(e));
            }
            self.sync_times.record(started.elapsed());
        }
        self.unsynced = false;
        self.durable_zxid = self.last_zxid;
        self.publish();
        Ok(())
    }

    /// The log's sync count and time, shared: it keeps counting after the log moves to a
    /// [`crate::LogWriter`]'s thread.
    pub fn sync_times(&self) -> Arc<SyncTimes> {
        Arc::clone(&self.sync_times)
    }

    /// Prepares the newest segment for the next append (see [`StorageFile::prepare_write`]): call
    /// it between commits, after acknowledging, so the next commit waits less. Changes nothing
    /// on disk.
    pub fn prepare_next(&mut self) {
        if self.poisoned.is_some() {
            return;
        }
        if let (Some(f), Some(seg)) = (self.active.as_mut(), self.segments.last()) {
            f.prepare_write(seg.end);
        }
    }

    /// Whether [`Self::prepare_next`] and the spare's upkeep have nothing to do: the newest
    /// segment's file prepares nothing ahead of a write, and the spare for the next segment is
    /// ready. A writer then need not be woken between commits.
    pub fn nothing_to_prepare(&self) -> bool {
        let prepares = self.active.as_ref().is_some_and(|f| f.prepares_writes());
        !prepares && (self.spare.is_some() || self.spare_failed || self.poisoned.is_some())
    }

    /// Closes the newest segment (syncing it and giving back its unused preallocation); the next
    /// append starts a new segment. Does nothing if there is no open segment. The server rolls
    /// when it takes a snapshot, as Apache ZooKeeper does, so old segments can be purged.
    ///
    /// Errors: [`LogError::Io`] if trimming or syncing fails (the log is then poisoned).
    pub fn roll(&mut self) -> Result<(), LogError> {
        self.check_usable()?;
        let Some(mut file) = self.active.take() else { return Ok(()) };
        let seg = self.segments.last().expect("active implies a segment");
        let shown = self.storage.display_name(&seg.name);
        // Cut the zero tail: an older segment then ends exactly at its last record, which is what
        // recovery checks. The sync covers the records and the new length, and completes before
        // the next segment is created.
        if let Err(e) = file.set_len(seg.end).and_then(|_| file.sync()) {
            return Err(self.poison(LogError::io("close segment", shown, e)));
        }
        self.unsynced = false;
        self.durable_zxid = self.last_zxid;
        self.publish();
        Ok(())
    }

    /// Finds, in segment `si`, the offset of the first record with zxid > `zxid` and the zxid of
    /// the record before it (None if it is the first), with the record count up to it.
    fn locate_after(&self, si: usize, zxid: i64) -> Result<(u64, Option<i64>, u64), LogError> {
        let seg = &self.segments[si];
        let shown = self.storage.display_name(&seg.name);
        let file = self.storage.open(&seg.name).map_err(|e| LogError::io("open", shown.clone(), e))?;
        let (mut n, mut off) = seg.seek_start(zxid);
        let mut before = None;
        while off < seg.end {
            let mut hb = [0u8; RECORD_HEADER_BYTES as usize];
            read_at(&file, &shown, off, &mut hb)?;
            let h = RecordHeader::parse(&hb);
            if h.zxid as i64 > zxid {
                break;
            }
            before = Some(h.zxid as i64);
            off += RECORD_HEADER_BYTES + h.len as u64;
            n += 1;
        }
        Ok((off, before, n))
    }

    /// Removes every record with a zxid above `zxid` (Zab's TRUNC), durably: when it returns,
    /// the cut is on disk. Later segments are removed newest first (a directory sync after each),
    /// then the segment holding `zxid` is cut and synced, so a crash part-way leaves a shorter
    /// log that is still contiguous and ends at a segment boundary; the caller repeats the
    /// truncation after a restart. If no record at or below `zxid` is held, the log empties:
    /// that is a reset to `zxid` ([`Self::reset_to`]), atomic as a reset is. Readers stop
    /// seeing the removed records before any file is touched. A `zxid` at or past the end
    /// changes nothing.
    ///
    /// Errors: [`LogError::NotInLog`] if `zxid` is negative or below [`Self::base_zxid`] (those
    /// transactions are no longer in the log but in a snapshot, which a truncation cannot
    /// reach); [`LogError::Io`] on a backend failure (the log is then poisoned).
    pub fn truncate_after(&mut self, zxid: i64) -> Result<(), LogError> {
        self.check_usable()?;
        if zxid < 0 || zxid < self.base_zxid() {
            return Err(self.not_in_log(zxid));
        }
        if zxid >= self.last_zxid {
            return Ok(());
        }
        let keep = self.segments.partition_point(|s| s.first_zxid <= zxid);
        if keep == 0 {
            let trash = self.reset_deferred(zxid)?;
            self.remove_trash(trash);
            return Ok(());
        }
        let si = keep - 1;
        let (cut, before, n) = self.locate_after(si, zxid)?;
        // The segment's first zxid is <= zxid, so a record precedes the cut; anything else means the
        // file changed under us.
        let Some(last) = before else {
            return Err(LogError::Corrupt {
                file: self.storage.display_name(&self.segments[si].name),
                offset: cut,
                reason: "no record before the cut".into(),
            });
        };
        self.withdraw_after(si, cut, last, n);
        while self.segments.len() > keep {
            let seg = self.segments.pop().expect("checked");
            self.active = None;
            if let Err(e) = Self::remove_file(&self.storage, &seg.name) {
                return Err(self.poison(e));
            }
        }
        self.unsynced = false;
        let seg = &mut self.segments[si];
        let shown = self.storage.display_name(&seg.name);
        let mut file = match self.active.take() {
            Some(f) => f,
            None => self.storage.open(&seg.name).map_err(|e| LogError::io("open", shown.clone(), e))?,
        };
        if let Err(e) = file.set_len(cut).and_then(|_| file.sync()) {
            return Err(self.poison(LogError::io("truncate", shown, e)));
        }
        seg.end = cut;
        seg.records = n;
        seg.last_zxid = last;
        seg.index.truncate(n.div_ceil(INDEX_STRIDE) as usize);
        // A segment of an older format is left closed (cut at its last record, which is how a
        // closed segment ends): the next append starts one of the current format.
        self.active = (seg.version == FORMAT_VERSION).then_some(file);
        self.last_zxid = last;
        self.durable_zxid = last;
        self.publish();
        Ok(())
    }

    /// Empties the log for a snapshot received at `zxid` (Zab's SNAP): every segment is removed,
    /// durably, and the log continues with any zxid above `zxid` (`zxid + 1`, or the first of a
    /// later epoch); [`Self::base_zxid`] becomes `zxid`, also across restarts.
    ///
    /// The reset is atomic: a marker naming `zxid` and the segments to remove is written and
    /// synced first (temp file, sync, rename, directory sync); once it is durable the reset is
    /// decided, and a crash before the segments are gone leaves a log that the next
    /// [`Self::open`] finishes resetting. A crash before it leaves the log as it was. Readers stop
    /// seeing the old records before any file is touched.
    ///
    /// Order the caller must keep (docs/log-format.md, "Reset"): the snapshot at `zxid` is
    /// durable before the reset is asked for, and the reset has returned before anything is
    /// appended above `zxid` or acknowledged to the leader.
    ///
    /// Errors: [`LogError::NotInLog`] for a negative `zxid`; [`LogError::Io`] on a backend
    /// failure (the log is then poisoned; reopening finishes or forgets the reset, depending on
    /// whether its marker became durable).
    pub fn reset_to(&mut self, zxid: i64) -> Result<(), LogError> {
        let trash = self.reset_deferred(zxid)?;
        self.remove_trash(trash);
        Ok(())
    }

    /// [`Self::reset_to`], leaving the removed segments as trash files (renamed, the rename
    /// durable) whose names it returns, for the caller to remove off the commit path.
    pub(crate) fn reset_deferred(&mut self, zxid: i64) -> Result<Vec<String>, LogError> {
        self.check_usable()?;
        if zxid < 0 {
            return Err(self.not_in_log(zxid));
        }
        if let Some(sh) = &self.view {
            let mut v = sh.write();
            v.segments.clear();
            v.base = zxid;
            v.withdrawals += 1;
            sh.note_durable(&v);
        }
        self.active = None;
        let doomed = self.segment_names();
        let mut trash = Vec::with_capacity(doomed.len());
        if !doomed.is_empty() {
            let decided = BaseMarker { base: zxid, doomed: doomed.clone() };
            if let Err(e) = write_marker(&self.storage, &decided) {
                return Err(self.poison(e));
            }
            for n in &doomed {
                let t = format!("{}{n}", crate::storage::TRASH_PREFIX);
                if let Err(e) = self.storage.rename(n, &t) {
                    return Err(self.poison(LogError::io(
                        "rename for removal",
                        self.storage.display_name(n),
                        e,
                    )));
                }
                trash.push(t);
            }
            if let Err(e) = self.storage.sync_dir() {
                return Err(self.poison(LogError::io("sync directory", self.storage.display_name("."), e)));
            }
        }
        // The segments are gone durably: the marker no longer names any, so that a later
        // segment of the same name is never taken for one of them.
        if let Err(e) = write_marker(&self.storage, &BaseMarker { base: zxid, doomed: Vec::new() }) {
            return Err(self.poison(e));
        }
        self.segments.clear();
        self.marker = Some(zxid);
        self.last_zxid = zxid;
        self.durable_zxid = zxid;
        self.unsynced = false;
        self.publish();
        Ok(trash)
    }

    /// Removes trash files now; a failure only leaves them for the next open.
    fn remove_trash(&self, trash: Vec<String>) {
        for t in trash {
            if let Err(e) = self.storage.remove(&t) {
                tracing::warn!("removing {t} failed (removed at the next open): {e}");
            }
        }
    }

    /// Fits the log to the snapshot recovery loaded, taken at `snapshot_zxid`, and says where
    /// replay starts: `Some(snapshot_zxid + 1)` when the log holds transactions after the
    /// snapshot (read them with [`Self::read_from`]), `None` when it holds none.
    ///
    /// A log that ends before the snapshot (a crash after a received snapshot was made durable
    /// and before the log's reset was, or a log that lost its tail) is reset to
    /// `snapshot_zxid`, with a `warn`: everything it holds is covered by the snapshot, and the
    /// next append must follow the snapshot, not the log's old end.
    ///
    /// Errors: [`LogError::NotInLog`] if the log's base is above `snapshot_zxid`: the
    /// transactions right after the snapshot are not in the log (purged, or the log was reset
    /// to a newer snapshot that is missing), so replaying would skip them; [`LogError::Io`]
    /// from the reset.
    pub fn reconcile_with_snapshot(&mut self, snapshot_zxid: i64) -> Result<Option<i64>, LogError> {
        let base = self.base_zxid();
        if base > snapshot_zxid {
            return Err(self.not_in_log(snapshot_zxid + 1));
        }
        if self.last_zxid > snapshot_zxid {
            return Ok(Some(snapshot_zxid + 1));
        }
        if self.last_zxid < snapshot_zxid {
            tracing::warn!(
                "the transaction log ends at {:#x}, before the snapshot at {snapshot_zxid:#x}; \
                 resetting it to the snapshot",
                self.last_zxid
            );
            self.reset_to(snapshot_zxid)?;
        }
        Ok(None)
    }

    /// Removes segments all of whose records are below `zxid` (the newest segment is always kept),
    /// oldest first, syncing the directory after each, so a crash part-way leaves a contiguous
    /// suffix of the log. Returns the names removed.
    ///
    /// Errors: [`LogError::Io`] if a removal fails; segments removed before it stay removed.
    pub fn purge_before(&mut self, zxid: i64) -> Result<Vec<String>, LogError> {
        let trashed = self.purge_before_deferred(zxid)?;
        let mut removed = Vec::with_capacity(trashed.len());
        for (name, trash) in trashed {
            Self::remove_file(&self.storage, &trash)?;
            removed.push(name);
        }
        Ok(removed)
    }

    /// Like [`Self::purge_before`], but each segment is only renamed to a
    /// [`crate::storage::TRASH_PREFIX`] name (a directory sync after each, oldest first): the
    /// log no longer has it, and a crash leaves trash that the next open removes. Returns (segment
    /// name, trash name) pairs; the caller removes the trash, gradually, off the commit path
    /// ([`crate::storage::remove_gradually`]).
    ///
    /// Errors: [`LogError::Io`] if a rename fails; segments trashed before it stay trashed.
    pub fn purge_before_deferred(&mut self, zxid: i64) -> Result<Vec<(String, String)>, LogError> {
        self.check_usable()?;
        let mut gone = 0;
        while gone + 1 < self.segments.len() && self.segments[gone + 1].first_zxid <= zxid {
            gone += 1;
        }
        if gone == 0 {
            return Ok(Vec::new());
        }
        // The base moves up first, durably: a marker left from a reset (or none, which stands
        // for 0) must not claim, after the segments that followed it are gone, that the log
        // still starts right after it. When the new first record does not follow the marker
        // anyway (always so for epoch 0, hence for a standalone server that never restored a
        // tree), the base is already right without a write.
        let first_kept = self.segments[gone].first_zxid;
        let base = first_kept - 1;
        if base_of(Some(first_kept), self.marker) != base {
            write_marker(&self.storage, &BaseMarker { base, doomed: Vec::new() })?;
            self.marker = Some(base);
        }
        if let Some(sh) = &self.view {
            let mut v = sh.write();
            let n = gone.min(v.segments.len());
            v.segments.drain(..n);
            v.base = base;
            v.withdrawals += 1;
            sh.note_durable(&v);
        }
        let mut trashed = Vec::new();
        while self.segments.len() > 1 && self.segments[1].first_zxid <= zxid {
            let name = self.segments[0].name.clone();
            let trash = crate::storage::move_to_trash(&self.storage, &name)
                .map_err(|e| LogError::io("rename for removal", self.storage.display_name(&name), e))?;
            self.segments.remove(0);
            trashed.push((name, trash));
        }
        Ok(trashed)
    }

    /// A read handle for other threads: it sees every record whose sync has completed, and
    /// nothing this log has begun to truncate, reset or purge (see [`LogReader`]). The first
    /// call starts publishing the log's durable state after every sync (a short write lock and
    /// a few field updates); later calls share it.
    pub fn reader(&mut self) -> LogReader<S> {
        if let Some(sh) = &self.view {
            return LogReader::new(sh.clone());
        }
        let sh = Arc::new(ReadShared::new(self.base_zxid()));
        self.view = Some(sh.clone());
        self.publish();
        LogReader::new(sh)
    }

    /// Brings the readers' view up to the log's durable state: every segment but a newest one
    /// holding unsynced records (older segments are always wholly durable: a roll syncs). Only
    /// the view's newest segment and new ones can have changed since the last publication;
    /// truncations, resets and purges withdraw what they remove before they remove it.
    fn publish(&mut self) {
        let Some(sh) = self.view.clone() else { return };
        let upto = if self.unsynced { self.segments.len().saturating_sub(1) } else { self.segments.len() };
        let mut v = sh.write();
        v.base = self.base_zxid();
        let start = v.segments.len().saturating_sub(1);
        for i in start..upto {
            let seg = &self.segments[i];
            if let Some(vs) = v.segments.get_mut(i) {
                debug_assert_eq!(vs.name, seg.name, "the view is a prefix of the log");
                if vs.end == seg.end {
                    continue;
                }
                if seg.end > vs.file.len() {
                    // The file grew past what this handle maps.
                    match self.storage.open_read(&seg.name) {
                        Ok(f) => vs.file = f,
                        Err(e) => {
                            tracing::warn!("log readers cannot see {} yet: {e}", vs.shown);
                            break;
                        }
                    }
                }
                vs.end = seg.end;
                vs.last_zxid = seg.last_zxid;
                vs.records = seg.records;
                if vs.index.len() > seg.index.len() {
                    vs.index.truncate(seg.index.len());
                } else {
                    let have = vs.index.len();
                    vs.index.extend_from_slice(&seg.index[have..]);
                }
            } else {
                let shown = self.storage.display_name(&seg.name);
                match self.storage.open_read(&seg.name) {
                    Ok(file) => v.segments.push(ViewSegment {
                        name: seg.name.clone(),
                        shown,
                        first_zxid: seg.first_zxid,
                        last_zxid: seg.last_zxid,
                        end: seg.end,
                        records: seg.records,
                        index: seg.index.clone(),
                        file,
                    }),
                    Err(e) => {
                        tracing::warn!("log readers cannot see {shown} yet: {e}");
                        break;
                    }
                }
            }
        }
        sh.note_durable(&v);
    }

    /// Before a truncation touches a file: readers keep segments `..=si` only, the last of them
    /// cut at `cut` (after `records` records, the last being `last`).
    fn withdraw_after(&self, si: usize, cut: u64, last: i64, records: u64) {
        let Some(sh) = &self.view else { return };
        let mut v = sh.write();
        v.withdrawals += 1;
        v.segments.truncate(si + 1);
        if let Some(vs) = v.segments.get_mut(si) {
            if vs.end > cut {
                vs.end = cut;
                vs.last_zxid = last;
                vs.records = records;
                vs.index.truncate(records.div_ceil(INDEX_STRIDE) as usize);
            }
        }
        sh.note_durable(&v);
    }

    fn not_in_log(&self, zxid: i64) -> LogError {
        LogError::NotInLog { zxid, first: self.first_zxid().unwrap_or(0), last: self.last_zxid }
    }

    /// Iterates over the records with zxid >= `zxid`, oldest first, including appended records
    /// whose sync has not completed yet. Each record's checksum is verified again as it is read.
    ///
    /// Errors: [`LogError::NotInLog`] if `zxid` is at or below a nonzero [`Self::base_zxid`]
    /// (records the caller asked for were purged, or precede a reset); a `zxid` past the end
    /// gives an empty iterator.
    /// The iterator yields [`LogError::Corrupt`] for a record that no longer checks out.
    pub fn read_from(&self, zxid: i64) -> Result<LogIter<'_, S>, LogError> {
        let mut it = LogIter {
            log: self,
            seg: self.segments.len(),
            file: None,
            off: 0,
            from: zxid,
            shown: String::new(),
        };
        let base = self.base_zxid();
        if base > 0 && zxid <= base {
            return Err(self.not_in_log(zxid));
        }
        if self.segments.is_empty() {
            return Ok(it);
        }
        if zxid > self.last_zxid {
            return Ok(it);
        }
        let si = self.segments.partition_point(|s| s.first_zxid <= zxid).saturating_sub(1);
        it.seg = si;
        it.off = self.segments[si].seek_start(zxid).1;
        Ok(it)
    }
}

/// Iterator over log records; see [`SegmentLog::read_from`].
pub struct LogIter<'a, S: Storage> {
    log: &'a SegmentLog<S>,
    seg: usize,
    file: Option<S::File>,
    off: u64,
    from: i64,
    /// The open segment's name as error messages show it.
    shown: String,
}

impl<S: Storage> LogIter<'_, S> {
    fn next_record(&mut self) -> Result<Option<LogEntry>, LogError> {
        loop {
            let Some(seg) = self.log.segments.get(self.seg) else { return Ok(None) };
            if self.off >= seg.end {
                self.seg += 1;
                self.file = None;
                self.off = SEGMENT_HEADER_BYTES;
                continue;
            }
            if self.file.is_none() {
                // The name for error messages is made once per segment, not once per record.
                self.shown = self.log.storage.display_name(&seg.name);
                self.file = Some(
                    self.log
                        .storage
                        .open(&seg.name)
                        .map_err(|e| LogError::io("open", self.shown.clone(), e))?,
                );
            }
            let file = self.file.as_ref().expect("just opened");
            let shown = &self.shown;
            let mut hb = [0u8; RECORD_HEADER_BYTES as usize];
            read_at(file, shown, self.off, &mut hb)?;
            let h = RecordHeader::parse(&hb);
            let corrupt =
                |off: u64, reason: String| LogError::Corrupt { file: shown.clone(), offset: off, reason };
            if !h.len_plausible() || self.off + RECORD_HEADER_BYTES + h.len as u64 > seg.end {
                self.seg = usize::MAX;
                return Err(corrupt(self.off, format!("bad record length {} on re-read", h.len)));
            }
            // Read straight into the buffer the decoded txn keeps (its data is a slice of it).
            let mut payload = bytes::BytesMut::zeroed(h.len as usize);
            read_at(file, shown, self.off + RECORD_HEADER_BYTES, &mut payload)?;
            if record_crc(h.len, h.zxid, &payload) != h.crc {
                self.seg = usize::MAX;
                return Err(corrupt(self.off, "record checksum mismatch on re-read".into()));
            }
            let at = self.off;
            self.off += RECORD_HEADER_BYTES + h.len as u64;
            if (h.zxid as i64) < self.from {
                continue;
            }
            let (header, txn) = decode_payload(payload.freeze()).map_err(|e| {
                self.seg = usize::MAX;
                corrupt(at, format!("record does not decode: {e}"))
            })?;
            if header.zxid != h.zxid as i64 {
                self.seg = usize::MAX;
                return Err(corrupt(at, "frame zxid differs from the txn header's".into()));
            }
            return Ok(Some(LogEntry { header, txn }));
        }
    }
}

impl<S: Storage> Iterator for LogIter<'_, S> {
    type Item = Result<LogEntry, LogError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_record().transpose()
    }
}
