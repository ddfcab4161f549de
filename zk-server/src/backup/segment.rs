//! Reading a zkrs log segment as a stream of records, for the archiver (which needs each
//! closed segment's zxid range and transaction times, and checks every record before the
//! segment goes into an archive) and for restore (which replays archived segments).
//!
//! The reader takes any [`Read`], so a segment is never held whole in memory: one record's
//! payload at a time, bounded by [`MAX_PAYLOAD_BYTES`]. It reads the bytes docs/log-format.md
//! specifies (header, frames, CRCs, zxid order) itself, because the log's own reader needs the
//! directory's lock, which a running server holds.

use bytes::Bytes;
use std::io::Read;
use zk_log::format::{
    check_segment_header, decode_payload_digest, payload_zxid, record_crc, segment_header_version,
    zxid_follows, HeaderCheck, RecordHeader, RECORD_HEADER_BYTES, SEGMENT_HEADER_BYTES,
};
use zk_log::MAX_PAYLOAD_BYTES;
use zk_proto::{Txn, TxnDigest, TxnHeader};

/// One transaction read from a segment, checked (frame CRC, zxid in frame and payload equal,
/// zxid order) and decoded.
#[derive(Debug, Clone)]
pub struct SegmentRecord {
    /// The txn header: zxid, time, session, type.
    pub header: TxnHeader,
    /// The txn body.
    pub txn: Txn,
    /// The tree digest the txn leaves, when the record carries one (an ensemble's records do).
    pub digest: Option<TxnDigest>,
    /// The record's frame as stored: the 16-byte frame header, then the payload.
    pub frame: Bytes,
    /// The frame carries the group mark: every byte before it in its segment was durable
    /// before it was written (docs/log-format.md, "Sync groups").
    pub group_start: bool,
}

impl SegmentRecord {
    /// The CRC-32 of the record's payload (its txn, not the frame header, whose group mark
    /// depends on how the record was synced): with the zxid, what tells this transaction from
    /// another one given the same zxid in a log that was cut and written again.
    pub fn payload_crc(&self) -> u32 {
        crc32fast::hash(&self.frame[RECORD_HEADER_BYTES as usize..])
    }
}

/// What is wrong with a segment, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name}: {why} at offset {offset}")]
pub struct SegmentDamage {
    /// The segment's name (or path) as shown to the operator.
    pub name: String,
    /// Byte offset in the segment.
    pub offset: u64,
    /// What was found.
    pub why: String,
}

/// Reads records one at a time from a segment's bytes.
#[derive(Debug)]
pub struct SegmentReader<R: Read> {
    r: R,
    name: String,
    version: u32,
    first_zxid: i64,
    offset: u64,
    prev_zxid: Option<i64>,
    ended: bool,
    /// The next record is read without checking its zxid against the header's or a previous
    /// one (it is read to check it, in [`SegmentReader::resume_after`]).
    order_unchecked: bool,
}

/// Reads as much of `buf` as the source has; returns how many bytes that was (less than
/// `buf.len()` only at the end of the source).
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

impl<R: Read> SegmentReader<R> {
    /// Reads and checks the segment header. `name` is how errors name the segment; its file
    /// name, if it parses as one, must agree with the header's first zxid (checked by the
    /// caller, who knows which name the file had).
    ///
    /// Errors: a header that is short, foreign, corrupt, or of a newer format.
    pub fn open(name: &str, mut r: R) -> Result<Self, SegmentDamage> {
        let damage = |offset, why: String| SegmentDamage { name: name.to_string(), offset, why };
        let mut h = [0u8; SEGMENT_HEADER_BYTES as usize];
        let got = read_full(&mut r, &mut h).map_err(|e| damage(0, format!("read failed: {e}")))?;
        if got < h.len() {
            return Err(damage(0, format!("only {got} bytes, shorter than a segment header")));
        }
        let first_zxid = match check_segment_header(&h) {
            HeaderCheck::Valid { first_zxid } => first_zxid,
            HeaderCheck::NewerVersion(v) => {
                return Err(damage(8, format!("segment format version {v} is newer than this zkrs reads")))
            }
            HeaderCheck::Invalid(why) => return Err(damage(0, format!("not a zkrs log segment: {why}"))),
        };
        let version = segment_header_version(&h).expect("a valid header has a version");
        Ok(SegmentReader {
            r,
            name: name.to_string(),
            version,
            first_zxid,
            offset: SEGMENT_HEADER_BYTES,
            prev_zxid: None,
            ended: false,
            order_unchecked: false,
        })
    }

    /// The first zxid the header names.
    pub fn first_zxid(&self) -> i64 {
        self.first_zxid
    }

    /// Bytes consumed so far (the offset of the next frame).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Moves to the record at `record_at` and reads it: when it has zxid `zxid` and the frame
    /// CRC `frame_crc`, it is the record an earlier reader of the same file ended on, and reading
    /// goes on right after it (for a growing segment read again from where the last look
    /// stopped). Anything else there (the file was cut, reset or rewritten since: a TRUNC or a
    /// SNAP on a follower, or a purge and a new file of the same name) returns false, and this
    /// reader is then of no further use: open the file again and read it from its start.
    ///
    /// Errors: the seek fails.
    pub fn resume_after(&mut self, record_at: u64, zxid: i64, payload_crc: u32) -> Result<bool, SegmentDamage>
    where
        R: std::io::Seek,
    {
        if record_at < SEGMENT_HEADER_BYTES {
            return Ok(false);
        }
        self.r
            .seek(std::io::SeekFrom::Start(record_at))
            .map_err(|e| self.damage(record_at, format!("seek failed: {e}")))?;
        self.offset = record_at;
        self.prev_zxid = None;
        self.ended = false;
        self.order_unchecked = true;
        let found = self.next_record();
        self.order_unchecked = false;
        match found {
            Ok(Some(rec)) if rec.header.zxid == zxid && rec.payload_crc() == payload_crc => Ok(true),
            _ => {
                self.ended = true;
                Ok(false)
            }
        }
    }

    fn damage(&self, offset: u64, why: impl Into<String>) -> SegmentDamage {
        SegmentDamage { name: self.name.clone(), offset, why: why.into() }
    }

    /// The next record, or `None` at the end of the records: the end of the bytes right after a
    /// record, or preallocated zeros (all zero to the end of the bytes).
    ///
    /// Errors: a frame cut short, an implausible length, a checksum that does not match, a
    /// zxid out of order (or not the header's for the first record), a payload that does not
    /// decode, non-zero bytes after a zero frame. A closed segment has none of these: for one
    /// that is archived or restored, each is damage. The error names the frame's offset.
    pub fn next_record(&mut self) -> Result<Option<SegmentRecord>, SegmentDamage> {
        if self.ended {
            return Ok(None);
        }
        let at = self.offset;
        let mut hb = [0u8; RECORD_HEADER_BYTES as usize];
        let got =
            read_full(&mut self.r, &mut hb).map_err(|e| self.damage(at, format!("read failed: {e}")))?;
        if got == 0 {
            self.ended = true;
            return Ok(None);
        }
        if got < hb.len() {
            return Err(self.damage(at, format!("frame cut short ({got} of 16 bytes)")));
        }
        let h = RecordHeader::parse_version(&hb, self.version);
        if h.is_zero() {
            self.check_zero_tail(at + RECORD_HEADER_BYTES)?;
            self.ended = true;
            return Ok(None);
        }
        if !h.len_plausible() || h.len > MAX_PAYLOAD_BYTES {
            return Err(self.damage(at, format!("implausible record length {}", h.len)));
        }
        let mut frame = vec![0u8; RECORD_HEADER_BYTES as usize + h.len as usize];
        frame[..RECORD_HEADER_BYTES as usize].copy_from_slice(&hb);
        let got = read_full(&mut self.r, &mut frame[RECORD_HEADER_BYTES as usize..])
            .map_err(|e| self.damage(at, format!("read failed: {e}")))?;
        let payload = &frame[RECORD_HEADER_BYTES as usize..];
        if got < payload.len() {
            return Err(self.damage(at, format!("record cut short ({got} of {} payload bytes)", h.len)));
        }
        if record_crc(h.len, h.zxid, payload) != h.crc {
            return Err(self.damage(at, "record checksum mismatch"));
        }
        let zxid = h.zxid as i64;
        if payload_zxid(payload) != Some(zxid) {
            return Err(self.damage(at, format!("frame zxid {zxid:#x} differs from the payload's")));
        }
        match self.prev_zxid {
            _ if self.order_unchecked => {}
            None if zxid != self.first_zxid => {
                return Err(self.damage(
                    at,
                    format!("first record has zxid {zxid:#x}, the header says {:#x}", self.first_zxid),
                ))
            }
            Some(prev) if !zxid_follows(prev, zxid) => {
                return Err(self.damage(at, format!("zxid {zxid:#x} does not follow {prev:#x}")))
            }
            _ => {}
        }
        let frame = Bytes::from(frame);
        let (header, txn, digest) = decode_payload_digest(frame.slice(RECORD_HEADER_BYTES as usize..))
            .map_err(|e| self.damage(at, format!("payload does not decode: {e}")))?;
        self.prev_zxid = Some(zxid);
        self.offset = at + RECORD_HEADER_BYTES + u64::from(h.len);
        Ok(Some(SegmentRecord { header, txn, digest, frame, group_start: h.group_start }))
    }

    /// After a zero frame, everything to the end must be zero too (preallocated space).
    fn check_zero_tail(&mut self, from: u64) -> Result<(), SegmentDamage> {
        let mut buf = vec![0u8; 64 << 10];
        let mut off = from;
        loop {
            let n = read_full(&mut self.r, &mut buf)
                .map_err(|e| self.damage(off, format!("read failed: {e}")))?;
            if let Some(i) = buf[..n].iter().position(|b| *b != 0) {
                return Err(self.damage(off + i as u64, "non-zero byte after the end of the records"));
            }
            off += n as u64;
            if n < buf.len() {
                return Ok(());
            }
        }
    }
}

/// What a whole segment held: its records' zxid range and times, as the manifest lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentSummary {
    /// The header's first zxid (also the first record's).
    pub first_zxid: i64,
    /// The last record's zxid.
    pub last_zxid: i64,
    /// Records in it.
    pub records: u64,
    /// The first record's txn time (ms since the epoch, the leader's clock).
    pub first_time_ms: i64,
    /// The last record's txn time.
    pub last_time_ms: i64,
    /// The latest txn time in it (times can step back when the clock does).
    pub max_time_ms: i64,
    /// Records that carry a tree digest.
    pub digests: u64,
}

impl SegmentSummary {
    /// The summary of one record.
    pub fn of(rec: &SegmentRecord) -> Self {
        let (z, t) = (rec.header.zxid, rec.header.time);
        SegmentSummary {
            first_zxid: z,
            last_zxid: z,
            records: 1,
            first_time_ms: t,
            last_time_ms: t,
            max_time_ms: t,
            digests: u64::from(rec.digest.is_some()),
        }
    }

    /// Adds the record that follows.
    pub fn add(&mut self, rec: &SegmentRecord) {
        self.last_zxid = rec.header.zxid;
        self.records += 1;
        self.last_time_ms = rec.header.time;
        self.max_time_ms = self.max_time_ms.max(rec.header.time);
        self.digests += u64::from(rec.digest.is_some());
    }
}

/// Reads a whole segment and sums it up; every record is checked.
///
/// Errors: any damage ([`SegmentReader::next_record`]), or a segment with no record at all
/// (a closed segment always has one).
pub fn summarize(name: &str, r: impl Read) -> Result<SegmentSummary, SegmentDamage> {
    let mut reader = SegmentReader::open(name, r)?;
    let mut s: Option<SegmentSummary> = None;
    while let Some(rec) = reader.next_record()? {
        match &mut s {
            None => s = Some(SegmentSummary::of(&rec)),
            Some(s) => s.add(&rec),
        }
    }
    s.ok_or_else(|| SegmentDamage {
        name: name.to_string(),
        offset: SEGMENT_HEADER_BYTES,
        why: "no record in it".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backup::test_log::create_at;
    use zk_log::format::encode_segment_header;
    use zk_log::RecordBatch;

    fn segment(first: i64, n: i64) -> Vec<u8> {
        let mut out = encode_segment_header(first).to_vec();
        let mut batch = RecordBatch::new();
        for z in first..first + n {
            let (hdr, txn) = create_at(z, 1000 + z);
            batch.push(&hdr, &txn).unwrap();
        }
        for (_, p) in batch.payloads() {
            let len = p.len() as u32;
            let zxid = payload_zxid(p).unwrap() as u64;
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(&record_crc(len, zxid, p).to_le_bytes());
            out.extend_from_slice(&zxid.to_le_bytes());
            out.extend_from_slice(p);
        }
        out
    }

    #[test]
    fn a_clean_segment_sums_up_with_or_without_zeros_after_it() {
        let mut bytes = segment(5, 3);
        let s = summarize("log.5", &bytes[..]).unwrap();
        assert_eq!((s.first_zxid, s.last_zxid, s.records), (5, 7, 3));
        assert_eq!((s.first_time_ms, s.last_time_ms, s.digests), (1005, 1007, 0));
        bytes.extend_from_slice(&[0u8; 100]);
        assert_eq!(summarize("log.5", &bytes[..]).unwrap(), s);
    }

    #[test]
    fn damage_is_named_with_its_offset() {
        let good = segment(5, 3);
        let mut flipped = good.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        let e = summarize("log.5", &flipped[..]).unwrap_err();
        assert!(e.why.contains("checksum"), "{e}");
        assert!(e.offset > SEGMENT_HEADER_BYTES, "{e}");
        let e = summarize("log.5", &good[..good.len() - 3]).unwrap_err();
        assert!(e.why.contains("cut short"), "{e}");
        let mut junk = good.clone();
        junk.extend_from_slice(&[0u8; 16]);
        junk.push(7);
        let e = summarize("log.5", &junk[..]).unwrap_err();
        assert!(e.why.contains("non-zero"), "{e}");
        let e = summarize("log.5", &good[..10]).unwrap_err();
        assert!(e.to_string().starts_with("log.5: "), "{e}");
        let e = summarize("log.5", &good[..32]).unwrap_err();
        assert!(e.why.contains("no record"), "{e}");
    }
}
