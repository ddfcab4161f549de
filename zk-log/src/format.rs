//! The bytes of a log segment: the segment header and the record frame. docs/log-format.md is the
//! prose version of this file; keep the two in step.
//!
//! All integers are little-endian (the log is our own format, read and written only by zkrs on
//! little-endian machines in practice; the payload inside a record stays jute, big-endian).

use crate::error::LogError;
use zk_proto::{Jute, OpCode, Reader, Txn, TxnDigest, TxnHeader};

/// First 8 bytes of every segment.
pub const SEGMENT_MAGIC: [u8; 8] = *b"ZKRSTXLG";
/// The segment format this code writes, and the newest it reads. Version 2 added the group mark
/// ([`GROUP_START_BIT`]); its frames are otherwise those of version 1.
pub const FORMAT_VERSION: u32 = 2;
/// The oldest segment format this code reads. A version-1 segment is read with version-1 rules
/// (no group marks; any damage followed by an intact record refuses) and never appended to.
pub const OLDEST_FORMAT_VERSION: u32 = 1;
/// Bytes of the segment header; records start here.
pub const SEGMENT_HEADER_BYTES: u64 = 32;
/// Bytes of a record's frame before its payload: `u32 len | u32 crc | u64 zxid`.
pub const RECORD_HEADER_BYTES: u64 = 16;
/// Smallest payload: an encoded TxnHeader (i64 + i32 + i64 + i64 + i32).
pub const MIN_PAYLOAD_BYTES: u32 = 32;
/// Largest payload accepted, on write and on read. Apache's jute.maxbuffer defaults to under 1 MiB,
/// so a legitimate txn is far below this; the bound keeps a corrupt length from asking for gigabytes.
pub const MAX_PAYLOAD_BYTES: u32 = 64 << 20;
/// The first format version whose frames carry the group mark ([`GROUP_START_BIT`]).
pub const GROUP_MARK_VERSION: u32 = 2;
/// Bit 31 of a version-2 frame's length word: the record is the first of a sync group, which the
/// log writes only when every byte before it in the segment is durable (docs/log-format.md,
/// "Sync groups"). Lengths stay below 2^27 ([`MAX_PAYLOAD_BYTES`] is 2^26), so the bit is free;
/// a version-1 frame never has it set.
pub const GROUP_START_BIT: u32 = 1 << 31;
/// XORed into the stored checksum of a frame that carries [`GROUP_START_BIT`], so the mark is as
/// well protected as the length it rides in: a flipped mark fails the checksum. Any nonzero
/// constant would do; this one is ASCII `GRPS` read as a big-endian u32.
pub const GROUP_START_CRC_XOR: u32 = 0x4752_5053;
/// Segment file names are this prefix plus the first zxid as 16 lower-case hex digits.
pub const SEGMENT_PREFIX: &str = "log.";

/// The file name of the segment whose first record has `first_zxid`.
pub fn segment_name(first_zxid: i64) -> String {
    format!("{SEGMENT_PREFIX}{:016x}", first_zxid as u64)
}

/// The first zxid a segment file name stands for, or `None` if `name` is not a segment name.
pub fn parse_segment_name(name: &str) -> Option<i64> {
    let hex = name.strip_prefix(SEGMENT_PREFIX)?;
    if hex.len() != 16 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let v = u64::from_str_radix(hex, 16).ok()?;
    i64::try_from(v).ok()
}

/// Whether `next` may follow `prev` in a log: the next counter of the same epoch, or any zxid of a
/// later epoch (a new leader starts its epoch's counter afresh, so the jump is not a gap).
pub fn zxid_follows(prev: i64, next: i64) -> bool {
    next == prev.wrapping_add(1) || (next > prev && (next >> 32) > (prev >> 32))
}

/// Encodes the 32-byte segment header, of the current [`FORMAT_VERSION`].
pub fn encode_segment_header(first_zxid: i64) -> [u8; SEGMENT_HEADER_BYTES as usize] {
    encode_segment_header_version(first_zxid, FORMAT_VERSION)
}

/// Encodes the 32-byte segment header of format `version` (the layout is the same in every
/// version this code knows). Only tests write anything but [`FORMAT_VERSION`]: the log itself
/// never starts a segment of an older format.
pub fn encode_segment_header_version(first_zxid: i64, version: u32) -> [u8; SEGMENT_HEADER_BYTES as usize] {
    debug_assert!((OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&version), "version {version}");
    let mut h = [0u8; SEGMENT_HEADER_BYTES as usize];
    h[0..8].copy_from_slice(&SEGMENT_MAGIC);
    h[8..12].copy_from_slice(&version.to_le_bytes());
    h[12..16].copy_from_slice(&(SEGMENT_HEADER_BYTES as u32).to_le_bytes());
    h[16..24].copy_from_slice(&(first_zxid as u64).to_le_bytes());
    // 24..28: flags, zero in versions 1 and 2.
    let crc = crc32fast::hash(&h[0..28]);
    h[28..32].copy_from_slice(&crc.to_le_bytes());
    debug_assert_eq!(check_segment_header(&h), HeaderCheck::Valid { first_zxid });
    debug_assert_eq!(segment_header_version(&h), Some(version));
    h
}

/// The format version a segment header names (bytes 8..12), without checking anything else; use
/// it once [`check_segment_header`] found the header valid. `None` if `h` is too short.
pub fn segment_header_version(h: &[u8]) -> Option<u32> {
    h.get(8..12).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
}

/// What a segment header turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderCheck {
    /// A good header, of a version this code reads ([`segment_header_version`] says which), for
    /// this first zxid.
    Valid {
        /// First zxid recorded in the header.
        first_zxid: i64,
    },
    /// Our magic, but a format version this code does not know.
    NewerVersion(u32),
    /// Not a valid header (torn, zero, foreign or corrupt); the reason says which.
    Invalid(&'static str),
}

/// Checks a segment header. The version is looked at before the checksum: a newer format may
/// lay out (and checksum) its header differently, and it must be refused by version, not
/// misreported as corruption.
pub fn check_segment_header(h: &[u8]) -> HeaderCheck {
    if h.len() < SEGMENT_HEADER_BYTES as usize {
        return HeaderCheck::Invalid("file shorter than a segment header");
    }
    if h[0..8] != SEGMENT_MAGIC {
        return if h[0..32].iter().all(|&b| b == 0) {
            HeaderCheck::Invalid("header is all zero")
        } else {
            HeaderCheck::Invalid("bad magic")
        };
    }
    let version = u32::from_le_bytes(h[8..12].try_into().expect("4 bytes"));
    if version > FORMAT_VERSION {
        return HeaderCheck::NewerVersion(version);
    }
    if version < OLDEST_FORMAT_VERSION {
        return HeaderCheck::Invalid("unknown format version 0");
    }
    let crc = u32::from_le_bytes(h[28..32].try_into().expect("4 bytes"));
    if crc != crc32fast::hash(&h[0..28]) {
        return HeaderCheck::Invalid("header checksum mismatch");
    }
    let hlen = u32::from_le_bytes(h[12..16].try_into().expect("4 bytes"));
    if hlen as u64 != SEGMENT_HEADER_BYTES {
        return HeaderCheck::Invalid("unexpected header length");
    }
    let first = u64::from_le_bytes(h[16..24].try_into().expect("8 bytes"));
    match i64::try_from(first) {
        Ok(first_zxid) => HeaderCheck::Valid { first_zxid },
        Err(_) => HeaderCheck::Invalid("first zxid out of range"),
    }
}

/// A record frame's fixed part, as read from disk (not yet checked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    /// Payload length (the length word without its [`GROUP_START_BIT`]).
    pub len: u32,
    /// The checksum the record's length, zxid and payload must have ([`record_crc`]): the stored
    /// checksum, with [`GROUP_START_CRC_XOR`] taken back out when the frame is marked.
    pub crc: u32,
    /// Zxid stored in the frame.
    pub zxid: u64,
    /// The frame carries [`GROUP_START_BIT`]: its record is the first of a sync group (version 2).
    pub group_start: bool,
}

impl RecordHeader {
    /// Parses the 16 frame bytes by the rules of the current [`FORMAT_VERSION`]. A valid
    /// version-1 frame never has [`GROUP_START_BIT`] set, so every valid frame of either version
    /// parses to the same length, checksum and zxid as it was written with; the log's own
    /// recovery, which must treat damage in a version-1 segment exactly as version 1 did, uses
    /// [`Self::parse_version`].
    pub fn parse(b: &[u8; RECORD_HEADER_BYTES as usize]) -> RecordHeader {
        Self::parse_version(b, FORMAT_VERSION)
    }

    /// Parses the 16 frame bytes of a segment of format `version`: in version 1 the length word
    /// is the length, whole (a set top bit makes it implausible); from version 2 its top bit is
    /// the group mark.
    pub fn parse_version(b: &[u8; RECORD_HEADER_BYTES as usize], version: u32) -> RecordHeader {
        let word = u32::from_le_bytes(b[0..4].try_into().expect("4 bytes"));
        let stored_crc = u32::from_le_bytes(b[4..8].try_into().expect("4 bytes"));
        let zxid = u64::from_le_bytes(b[8..16].try_into().expect("8 bytes"));
        let group_start = version >= GROUP_MARK_VERSION && word & GROUP_START_BIT != 0;
        if group_start {
            RecordHeader {
                len: word & !GROUP_START_BIT,
                crc: stored_crc ^ GROUP_START_CRC_XOR,
                zxid,
                group_start,
            }
        } else {
            RecordHeader { len: word, crc: stored_crc, zxid, group_start }
        }
    }

    /// All sixteen bytes zero: the preallocated, never-written part of a segment.
    pub fn is_zero(&self) -> bool {
        self.len == 0 && self.crc == 0 && self.zxid == 0 && !self.group_start
    }

    /// Whether the length is one a record can have.
    pub fn len_plausible(&self) -> bool {
        (MIN_PAYLOAD_BYTES..=MAX_PAYLOAD_BYTES).contains(&self.len)
    }
}

/// The first 16 bytes of an encoded, unmarked frame (as [`RecordBatch`] encodes every record),
/// marked as the first record of a sync group: [`GROUP_START_BIT`] set in the length word and
/// [`GROUP_START_CRC_XOR`] applied to the checksum. Eight bytes change; the payload and the
/// checksum's computation do not, so marking costs nothing per record.
pub fn mark_group_start(frame: &[u8]) -> [u8; RECORD_HEADER_BYTES as usize] {
    let mut h: [u8; RECORD_HEADER_BYTES as usize] =
        frame[..RECORD_HEADER_BYTES as usize].try_into().expect("16 bytes");
    let before = RecordHeader::parse(&h);
    debug_assert!(!before.group_start && before.len_plausible(), "an encoded, unmarked frame: {before:?}");
    let word = u32::from_le_bytes(h[0..4].try_into().expect("4 bytes")) | GROUP_START_BIT;
    let crc = u32::from_le_bytes(h[4..8].try_into().expect("4 bytes")) ^ GROUP_START_CRC_XOR;
    h[0..4].copy_from_slice(&word.to_le_bytes());
    h[4..8].copy_from_slice(&crc.to_le_bytes());
    // The paired check: read back, the marked frame is the same record, marked.
    debug_assert_eq!(RecordHeader::parse(&h), RecordHeader { group_start: true, ..before });
    h
}

/// The checksum of a record: CRC32 over the length, the zxid and the payload, so that a corrupt
/// length or zxid fails the check as surely as a corrupt payload does.
pub fn record_crc(len: u32, zxid: u64, payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&len.to_le_bytes());
    h.update(&zxid.to_le_bytes());
    h.update(payload);
    h.finalize()
}

/// The zxid inside an encoded payload's TxnHeader (bytes 12..20, big-endian jute), used to check
/// that the frame's zxid and the txn's own zxid agree.
pub fn payload_zxid(payload: &[u8]) -> Option<i64> {
    payload.get(12..20).map(|b| i64::from_be_bytes(b.try_into().expect("8 bytes")))
}

/// Size of the [`TxnDigest`] trailer a payload may end with.
pub const DIGEST_TRAILER_BYTES: usize = 12;

/// Decodes a record payload into the txn header and body (a digest trailer is left unread).
pub fn decode_payload(payload: bytes::Bytes) -> Result<(TxnHeader, Txn), zk_proto::DecodeError> {
    decode_payload_digest(payload).map(|(h, t, _)| (h, t))
}

/// Decodes a record payload into the txn header, the body and the tree digest that follows
/// them when the payload carries one (Apache 3.6+ appends it to the txns of its log and its
/// proposals: exactly [`DIGEST_TRAILER_BYTES`] after the body).
pub fn decode_payload_digest(
    payload: bytes::Bytes,
) -> Result<(TxnHeader, Txn, Option<TxnDigest>), zk_proto::DecodeError> {
    let mut r = Reader::new(payload);
    let hdr = TxnHeader::read(&mut r)?;
    let op = OpCode::from_i32(hdr.txn_type).ok_or(zk_proto::DecodeError::InvalidValue {
        what: "transaction type",
        value: hdr.txn_type as i64,
    })?;
    let txn = Txn::decode(op, &mut r)?;
    let digest = read_digest_trailer(&mut r)?;
    Ok((hdr, txn, digest))
}

/// The [`TxnDigest`] after a txn's body: exactly [`DIGEST_TRAILER_BYTES`] left, else none (what
/// remains is left unread). Apache's log entries and proposals and zkrs's records share the rule.
///
/// Errors: as the digest's decoding.
pub fn read_digest_trailer(r: &mut Reader) -> Result<Option<TxnDigest>, zk_proto::DecodeError> {
    if r.remaining() == DIGEST_TRAILER_BYTES {
        TxnDigest::read(r).map(Some)
    } else {
        Ok(None)
    }
}

/// Transactions encoded into record frames, ready to be copied into a segment in one write.
///
/// Encoding happens on the caller's thread (the core), so the log writer's thread only copies
/// bytes and syncs. Zxids inside a batch must follow one another ([`zxid_follows`]).
#[derive(Debug, Clone, Default)]
pub struct RecordBatch {
    pub(crate) buf: Vec<u8>,
    pub(crate) first_zxid: Option<i64>,
    pub(crate) last_zxid: Option<i64>,
    /// Byte offset of each record in `buf`, with its zxid (for the index).
    pub(crate) records: Vec<(i64, u32)>,
}

impl RecordBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Encodes a whole batch as handed over by the core.
    ///
    /// Errors: as [`Self::push`].
    pub fn encode(batch: &[(&TxnHeader, &Txn)]) -> Result<RecordBatch, LogError> {
        let mut b = RecordBatch::new();
        for (h, t) in batch {
            b.push(h, t)?;
        }
        Ok(b)
    }

    /// Appends one transaction.
    ///
    /// Errors: [`LogError::OutOfOrder`] if `hdr.zxid` is not positive or does not follow the
    /// batch's last zxid; [`LogError::RecordTooLarge`] if the encoding exceeds
    /// [`MAX_PAYLOAD_BYTES`]. The batch is unchanged on error.
    pub fn push(&mut self, hdr: &TxnHeader, txn: &Txn) -> Result<(), LogError> {
        self.push_digested(hdr, txn, None)
    }

    /// As [`Self::push`], with the tree digest the txn leaves (Apache's 12-byte trailer) after
    /// the body when there is one: the payload is then what an Apache leader logs and proposes.
    ///
    /// Errors: as [`Self::push`].
    pub fn push_digested(
        &mut self,
        hdr: &TxnHeader,
        txn: &Txn,
        digest: Option<&TxnDigest>,
    ) -> Result<(), LogError> {
        let start = self.begin(hdr.zxid)?;
        hdr.write(&mut self.buf);
        txn.encode(&mut self.buf);
        if let Some(d) = digest {
            d.write(&mut self.buf);
        }
        self.seal(start, hdr.zxid)
    }

    /// Appends one transaction already encoded as a payload (a jute TxnHeader then the txn, as
    /// a PROPOSAL carries it): no decoding and encoding again.
    ///
    /// Errors: [`LogError::BadPayload`] if the payload does not start with a TxnHeader; otherwise
    /// as [`Self::push`]. The batch is unchanged on error.
    pub fn push_payload(&mut self, payload: &[u8]) -> Result<(), LogError> {
        let zxid = payload_zxid(payload).ok_or(LogError::BadPayload { bytes: payload.len() })?;
        let start = self.begin(zxid)?;
        self.buf.extend_from_slice(payload);
        self.seal(start, zxid)
    }

    /// Checks `zxid` follows the batch and reserves its record header; returns where it starts.
    fn begin(&mut self, zxid: i64) -> Result<usize, LogError> {
        if zxid <= 0 {
            return Err(LogError::OutOfOrder { last: self.last_zxid.unwrap_or(0), got: zxid });
        }
        if let Some(last) = self.last_zxid {
            if !zxid_follows(last, zxid) {
                return Err(LogError::OutOfOrder { last, got: zxid });
            }
        }
        let start = self.buf.len();
        self.buf.extend_from_slice(&[0u8; RECORD_HEADER_BYTES as usize]);
        Ok(start)
    }

    /// Fills in the record header of the payload written after `start`, or takes it back when
    /// too large.
    fn seal(&mut self, start: usize, zxid: i64) -> Result<(), LogError> {
        let payload_len = self.buf.len() - start - RECORD_HEADER_BYTES as usize;
        if payload_len > MAX_PAYLOAD_BYTES as usize || start > u32::MAX as usize {
            self.buf.truncate(start);
            return Err(LogError::RecordTooLarge { zxid, bytes: payload_len as u64 });
        }
        let len = payload_len as u32;
        let payload = &self.buf[start + RECORD_HEADER_BYTES as usize..];
        debug_assert_eq!(payload_zxid(payload), Some(zxid));
        let crc = record_crc(len, zxid as u64, payload);
        self.buf[start..start + 4].copy_from_slice(&len.to_le_bytes());
        self.buf[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
        self.buf[start + 8..start + 16].copy_from_slice(&(zxid as u64).to_le_bytes());
        // The paired check: the frame reads back as what was meant, an unmarked record (the log
        // marks a group's first record as it writes it, `mark_group_start`).
        debug_assert_eq!(
            RecordHeader::parse(self.buf[start..start + 16].try_into().expect("16 bytes")),
            RecordHeader { len, crc, zxid: zxid as u64, group_start: false }
        );
        self.first_zxid.get_or_insert(zxid);
        self.last_zxid = Some(zxid);
        self.records.push((zxid, start as u32));
        Ok(())
    }

    /// Appends every record of `other` after this batch's, so that both go to the log in one
    /// write (the log writer merges the batches of a group this way).
    ///
    /// Errors: [`LogError::OutOfOrder`] if `other`'s first zxid does not follow this batch's last;
    /// [`LogError::RecordTooLarge`] if the merged batch would pass 4 GiB (record offsets are
    /// u32). The batch is unchanged on error.
    pub fn extend_from(&mut self, other: &RecordBatch) -> Result<(), LogError> {
        let (Some(first), Some(last)) = (other.first_zxid, other.last_zxid) else {
            return Ok(());
        };
        if let Some(mine) = self.last_zxid {
            if !zxid_follows(mine, first) {
                return Err(LogError::OutOfOrder { last: mine, got: first });
            }
        }
        let base = self.buf.len();
        if base + other.buf.len() > u32::MAX as usize {
            return Err(LogError::RecordTooLarge { zxid: first, bytes: (base + other.buf.len()) as u64 });
        }
        self.buf.extend_from_slice(&other.buf);
        self.records.extend(other.records.iter().map(|&(z, at)| (z, at + base as u32)));
        self.first_zxid.get_or_insert(first);
        self.last_zxid = Some(last);
        Ok(())
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether the batch holds no record.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Encoded size in bytes.
    pub fn bytes(&self) -> u64 {
        self.buf.len() as u64
    }

    /// Zxid of the first record.
    pub fn first_zxid(&self) -> Option<i64> {
        self.first_zxid
    }

    /// Zxid of the last record.
    pub fn last_zxid(&self) -> Option<i64> {
        self.last_zxid
    }

    /// Each record's zxid and payload (the jute TxnHeader and txn, as [`decode_payload`] reads
    /// them), in order: the bytes a leader can send its learners without encoding them again.
    pub fn payloads(&self) -> impl Iterator<Item = (i64, &[u8])> + '_ {
        self.records.iter().map(|&(zxid, start)| (zxid, &self.buf[self.payload_range(start)]))
    }

    /// As [`Self::payloads`], owned: every payload a slice of one copy of the batch, so handing
    /// them on (to the learners) costs one allocation for the whole batch.
    pub fn shared_payloads(&self) -> Vec<(i64, bytes::Bytes)> {
        let all = bytes::Bytes::copy_from_slice(&self.buf);
        self.records.iter().map(|&(zxid, start)| (zxid, all.slice(self.payload_range(start)))).collect()
    }

    /// Where the payload of the record starting at `start` lies in the buffer.
    fn payload_range(&self, start: u32) -> std::ops::Range<usize> {
        let at = start as usize;
        let len = u32::from_le_bytes(self.buf[at..at + 4].try_into().expect("4 bytes")) as usize;
        let from = at + RECORD_HEADER_BYTES as usize;
        from..from + len
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zk_proto::{CreateSessionTxn, ErrorTxn};

    #[test]
    fn payloads_give_back_what_was_encoded() {
        let h1 = TxnHeader {
            client_id: 7,
            cxid: 0,
            zxid: 0x1_0000_0001,
            time: 5,
            txn_type: OpCode::CreateSession.code(),
        };
        let t1 = Txn::CreateSession(CreateSessionTxn { time_out: 30_000 });
        let h2 =
            TxnHeader { client_id: 7, cxid: 1, zxid: 0x1_0000_0002, time: 6, txn_type: OpCode::Error.code() };
        let t2 = Txn::Error(ErrorTxn { err: -101 });
        let batch = RecordBatch::encode(&[(&h1, &t1), (&h2, &t2)]).expect("encode");
        let back: Vec<(i64, (TxnHeader, Txn))> = batch
            .payloads()
            .map(|(z, p)| (z, decode_payload(bytes::Bytes::copy_from_slice(p)).expect("decode")))
            .collect();
        assert_eq!(back, vec![(h1.zxid, (h1, t1)), (h2.zxid, (h2, t2))]);
        let shared: Vec<(i64, Vec<u8>)> =
            batch.shared_payloads().into_iter().map(|(z, p)| (z, p.to_vec())).collect();
        let borrowed: Vec<(i64, Vec<u8>)> = batch.payloads().map(|(z, p)| (z, p.to_vec())).collect();
        assert_eq!(shared, borrowed);
        // The same payloads pushed as they are make the same bytes, record headers and all.
        let mut again = RecordBatch::new();
        for (_, p) in batch.payloads() {
            again.push_payload(p).expect("push payload");
        }
        assert_eq!((again.buf, again.records), (batch.buf.clone(), batch.records.clone()));
        // Refused without a change: out of order, and a payload with no header.
        let mut b = RecordBatch::new();
        let second = batch.payloads().nth(1).expect("two").1.to_vec();
        b.push_payload(&second).expect("first");
        assert!(matches!(b.push_payload(&second), Err(LogError::OutOfOrder { .. })));
        assert!(matches!(b.push_payload(&second[..10]), Err(LogError::BadPayload { bytes: 10 })));
        assert_eq!(b.len(), 1);
    }

    #[test]
    fn a_digest_trailer_rides_after_the_body() {
        let h =
            TxnHeader { client_id: 7, cxid: 1, zxid: 0x2_0000_0001, time: 6, txn_type: OpCode::Error.code() };
        let t = Txn::Error(ErrorTxn { err: -101 });
        let d = TxnDigest { version: 2, tree_digest: -0x1234_5678_9abc };
        let mut b = RecordBatch::new();
        b.push_digested(&h, &t, Some(&d)).expect("push");
        let (_, p) = b.payloads().next().expect("one");
        let plain = {
            let mut b = RecordBatch::new();
            b.push(&h, &t).expect("push");
            let n = b.payloads().next().expect("one").1.len();
            n
        };
        assert_eq!(p.len(), plain + DIGEST_TRAILER_BYTES);
        let back = decode_payload_digest(bytes::Bytes::copy_from_slice(p)).expect("decode");
        assert_eq!(back, (h.clone(), t.clone(), Some(d)));
        assert_eq!(decode_payload(bytes::Bytes::copy_from_slice(p)).expect("decode"), (h, t));
    }

    /// The group mark: set on a frame, the frame reads back as the same record, marked; version 1
    /// reads the marked length word as implausible (so a version-1 reader never misreads it);
    /// a flipped mark fails the checksum either way; an unmarked frame reads alike in both
    /// versions.
    #[test]
    fn the_group_mark_rides_in_the_length_word_under_the_checksum() {
        let h =
            TxnHeader { client_id: 7, cxid: 1, zxid: 0x3_0000_0009, time: 6, txn_type: OpCode::Error.code() };
        let b = RecordBatch::encode(&[(&h, &Txn::Error(ErrorTxn { err: -101 }))]).expect("encode");
        let frame: &[u8; 16] = b.buf[..16].try_into().expect("16 bytes");
        let payload = &b.buf[16..];
        let plain = RecordHeader::parse(frame);
        assert_eq!(plain, RecordHeader::parse_version(frame, 1), "an unmarked frame is a version-1 frame");
        assert!(!plain.group_start && plain.len as usize == payload.len());
        assert_eq!(record_crc(plain.len, plain.zxid, payload), plain.crc);

        let marked = mark_group_start(&b.buf);
        assert_eq!(&marked[8..], &frame[8..], "the zxid is untouched");
        assert_eq!(u32::from_le_bytes(marked[0..4].try_into().unwrap()), plain.len | GROUP_START_BIT);
        assert_eq!(u32::from_le_bytes(marked[4..8].try_into().unwrap()), plain.crc ^ GROUP_START_CRC_XOR);
        let m = RecordHeader::parse(&marked);
        assert_eq!(m, RecordHeader { group_start: true, ..plain });
        assert_eq!(record_crc(m.len, m.zxid, payload), m.crc, "a marked frame checks out");
        let v1 = RecordHeader::parse_version(&marked, 1);
        assert!(!v1.group_start && !v1.len_plausible(), "version 1 never takes the mark for a length");

        // Media damage to the mark alone, set or cleared, is caught by the checksum.
        let mut cleared = marked;
        cleared[3] ^= 0x80;
        let c = RecordHeader::parse(&cleared);
        assert!(!c.group_start && record_crc(c.len, c.zxid, payload) != c.crc);
        let mut set = *frame;
        set[3] ^= 0x80;
        let s = RecordHeader::parse(&set);
        assert!(s.group_start && record_crc(s.len, s.zxid, payload) != s.crc);
    }

    /// Headers of both versions check out and say which they are; a newer one is refused by
    /// version, version 0 is invalid.
    #[test]
    fn segment_headers_of_both_versions_are_read() {
        for version in OLDEST_FORMAT_VERSION..=FORMAT_VERSION {
            let h = encode_segment_header_version(0x2_0000_0001, version);
            assert_eq!(check_segment_header(&h), HeaderCheck::Valid { first_zxid: 0x2_0000_0001 });
            assert_eq!(segment_header_version(&h), Some(version));
        }
        assert_eq!(segment_header_version(&encode_segment_header(5)), Some(FORMAT_VERSION));
        for (version, want) in [
            (FORMAT_VERSION + 1, HeaderCheck::NewerVersion(FORMAT_VERSION + 1)),
            (0, HeaderCheck::Invalid("unknown format version 0")),
        ] {
            let mut h = encode_segment_header(5);
            h[8..12].copy_from_slice(&version.to_le_bytes());
            let crc = crc32fast::hash(&h[0..28]);
            h[28..32].copy_from_slice(&crc.to_le_bytes());
            assert_eq!(check_segment_header(&h), want);
        }
    }
}
