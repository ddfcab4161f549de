//! Snapshot files: the container that carries the database's snapshot content (zk-tree's
//! `snapshot` module defines the content) to disk and back, checked.
//!
//! Files are `snapshot.<start zxid, 16 hex digits>` in dataDir's [`SNAP_DIR_NAME`] directory,
//! written as `<name>.tmp`, synced, renamed, and the directory synced. docs/log-format.md
//! ("Snapshot files") gives the byte layout and the crash cases. Integers are little-endian.
//!
//! Two formats, told apart by the header's version; this code reads both. Format 1 stores the
//! content as it is, and is what [`Compression::None`] writes (so a zkrs from before compression
//! reads it); format 2 stores each chunk compressed, independently of the others
//! ([`Compression::Zstd`]):
//!
//! ```text
//! header v1 (32 B): magic "ZKRSSNAP" | u32 version 1 | u32 header bytes (32) | u64 start zxid |
//!                   u32 max chunk bytes | u32 crc32 of bytes 0..28
//! header v2 (40 B): magic "ZKRSSNAP" | u32 version 2 | u32 header bytes (40) | u64 start zxid |
//!                   u32 max chunk bytes | u32 codec (1 = zstd) | u32 0 | u32 crc32 of bytes 0..36
//! chunk   (n ×):    u32 len | u32 crc32(u64 seq | u32 len | stored) | stored (len bytes)
//! end     (8 B):    u32 0 | u32 crc32(u64 seq | u32 0)
//! trailer (40 B):   magic "ZKRSSEND" | u64 chunks | u64 content bytes | u64 start zxid |
//!                   u32 0 | u32 crc32 of bytes 0..36
//! ```
//! The file ends right after the trailer.
//!
//! In format 1 a chunk's stored bytes are its content, 1 to max chunk bytes of it. In format 2
//! they are exactly one zstd frame (1 to [`stored_bytes_max`] bytes, declaring its content size)
//! that decompresses to 1 to max chunk bytes of content, max chunk bytes being at most
//! [`CHUNK_BYTES`] (format 2 is read only as this build writes it: an intact header asking for
//! anything else, an unknown codec for one, is refused as [`LogError::UnsupportedFormat`], not
//! skipped as damage). The checksum covers the bytes as stored, so a damaged chunk is found
//! before it is decompressed, and the reader decompresses into a buffer of max chunk bytes at most, so
//! that no chunk, damaged or hostile, expands past it. The trailer's content bytes count the
//! content, uncompressed, in both formats. Chunks being independent, the reader keeps its shape:
//! one chunk in memory at a time (stored and decompressed), each checked before its content is
//! handed on.
//!
//! Why a version rather than a flag in the format 1 header: a zkrs that reads only format 1 looks
//! at the version before anything else and refuses the file with
//! [`LogError::UnsupportedVersion`] (naming it and the version), where a flag it did not know
//! would have had it hand compressed bytes on as content.

use crate::error::LogError;
use crate::storage::{Storage, StorageFile};

/// Directory inside dataDir that holds zkrs's snapshots (Apache's live in `version-2`).
pub const SNAP_DIR_NAME: &str = "zkrs-snap";
/// Snapshot file names are this prefix plus the start zxid as 16 lower-case hex digits.
pub const SNAP_PREFIX: &str = "snapshot.";
/// Suffix of a snapshot being written.
pub const TMP_SUFFIX: &str = ".tmp";
/// First 8 bytes of a snapshot file.
pub const SNAP_MAGIC: [u8; 8] = *b"ZKRSSNAP";
/// First 8 bytes of the trailer.
pub const TRAILER_MAGIC: [u8; 8] = *b"ZKRSSEND";
/// The format of uncompressed snapshots (the only one a zkrs before compression reads).
pub const SNAP_FORMAT_V1: u32 = 1;
/// The format of compressed snapshots: a header naming the codec, and chunks stored compressed.
pub const SNAP_FORMAT_V2: u32 = 2;
/// The newest container format this code reads.
pub const SNAP_FORMAT_VERSION: u32 = SNAP_FORMAT_V2;
/// Header bytes, format 1.
pub const SNAP_HEADER_BYTES: u64 = 32;
/// Header bytes, format 2.
pub const SNAP_HEADER_V2_BYTES: u64 = 40;
/// Trailer bytes (after the end marker).
pub const TRAILER_BYTES: u64 = 40;
/// Chunk size the writer uses.
pub const CHUNK_BYTES: u32 = 1 << 20;
/// Largest chunk a reader accepts in format 1 (a header naming more is refused); format 2 takes
/// at most [`CHUNK_BYTES`].
pub const CHUNK_BYTES_MAX: u32 = 64 << 20;
/// The first 4 bytes of a zstd frame (zstd's magic number, little-endian).
const ZSTD_MAGIC: [u8; 4] = 0xFD2F_B528u32.to_le_bytes();
/// Reservation step when a snapshot file grows.
const GROW_BYTES: u64 = 16 << 20;
/// A snapshot is written back to the disk this much at a time as it is written.
const WRITEBACK_STEP_BYTES: u64 = 64 << 10;

/// The file name of the snapshot starting at `zxid`.
pub fn snapshot_name(zxid: i64) -> String {
    format!("{SNAP_PREFIX}{:016x}", zxid as u64)
}

/// The start zxid a snapshot file name stands for, or None if it is not one.
pub fn parse_snapshot_name(name: &str) -> Option<i64> {
    let hex = name.strip_prefix(SNAP_PREFIX)?;
    if hex.len() != 16 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    i64::try_from(u64::from_str_radix(hex, 16).ok()?).ok()
}

/// How a snapshot's chunks are stored (zoo.cfg's `snapshot.compression`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// As they are: format 1, which every zkrs reads.
    #[default]
    None,
    /// Each chunk a zstd frame of its own at this level ([`Compression::ZSTD_LEVELS`]): format 2.
    Zstd {
        /// zstd's compression level.
        level: i32,
    },
}

impl Compression {
    /// The zstd levels accepted: 1 (fastest of the regular levels) to 6. Higher levels are
    /// refused because of their speed: a snapshot is compressed on the snapshot thread at
    /// background priority while it keeps its pace (at least 10 MB/s of content), and a follower
    /// compresses a received SNAP on its driver before it acks, within the leader's initLimit.
    /// On snapshot-like records, 1 MiB blocks (`zstd -b`), level 1 ran at about 260 MB/s, 3 at
    /// 170, 6 at 70, 9 at 55 and 19 at 4.4, with sizes within 1% of each other from level 1 to 9:
    /// past 6 the cost grows and nothing is saved.
    pub const ZSTD_LEVELS: std::ops::RangeInclusive<i32> = 1..=6;

    /// The codec it records in the header.
    pub fn codec(&self) -> Codec {
        match self {
            Compression::None => Codec::None,
            Compression::Zstd { .. } => Codec::Zstd,
        }
    }
}

/// The codec a snapshot file's chunks are stored with, as its header records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Codec {
    /// Stored as they are (format 1; code 0 in a format 2 header).
    #[default]
    None,
    /// Each chunk one zstd frame (format 2, code 1).
    Zstd,
}

impl Codec {
    /// The codec's code in a format 2 header.
    pub fn code(self) -> u32 {
        match self {
            Codec::None => 0,
            Codec::Zstd => 1,
        }
    }

    /// The codec a header's code stands for, or None for a code this build does not know.
    pub fn from_code(code: u32) -> Option<Codec> {
        match code {
            0 => Some(Codec::None),
            1 => Some(Codec::Zstd),
            _ => None,
        }
    }

    /// Its name in zoo.cfg (`none`, `zstd`).
    pub fn name(self) -> &'static str {
        match self {
            Codec::None => "none",
            Codec::Zstd => "zstd",
        }
    }

    /// The codec `name` stands for in zoo.cfg, in any case; None if it is none of them.
    pub fn parse(name: &str) -> Option<Codec> {
        [Codec::None, Codec::Zstd].into_iter().find(|c| c.name().eq_ignore_ascii_case(name))
    }
}

/// The most bytes a compressed chunk of `chunk_max` content bytes is stored in: zstd's worst-case
/// bound for one frame of that much input (`ZSTD_compressBound`: content that does not compress
/// is stored in raw blocks, a few bytes of framing each, frame header and checksum included).
pub fn stored_bytes_max(chunk_max: u32) -> u64 {
    zstd::zstd_safe::compress_bound(chunk_max as usize) as u64
}

fn chunk_crc(seq: u64, payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&seq.to_le_bytes());
    h.update(&(payload.len() as u32).to_le_bytes());
    h.update(payload);
    h.finalize()
}

/// The header: format 1 for uncompressed chunks, format 2 (naming the codec) otherwise.
fn encode_header(start_zxid: i64, chunk_max: u32, codec: Codec) -> Vec<u8> {
    let (version, bytes) = match codec {
        Codec::None => (SNAP_FORMAT_V1, SNAP_HEADER_BYTES),
        Codec::Zstd => (SNAP_FORMAT_V2, SNAP_HEADER_V2_BYTES),
    };
    let mut h = vec![0u8; bytes as usize];
    h[0..8].copy_from_slice(&SNAP_MAGIC);
    h[8..12].copy_from_slice(&version.to_le_bytes());
    h[12..16].copy_from_slice(&(bytes as u32).to_le_bytes());
    h[16..24].copy_from_slice(&(start_zxid as u64).to_le_bytes());
    h[24..28].copy_from_slice(&chunk_max.to_le_bytes());
    if version == SNAP_FORMAT_V2 {
        h[28..32].copy_from_slice(&codec.code().to_le_bytes());
        // 32..36: zero, kept for a later use (readers of format 2 refuse anything else).
    }
    let at = bytes as usize - 4;
    let crc = crc32fast::hash(&h[0..at]);
    h[at..].copy_from_slice(&crc.to_le_bytes());
    h
}

fn encode_trailer(chunks: u64, content: u64, start_zxid: i64) -> [u8; TRAILER_BYTES as usize] {
    let mut t = [0u8; TRAILER_BYTES as usize];
    t[0..8].copy_from_slice(&TRAILER_MAGIC);
    t[8..16].copy_from_slice(&chunks.to_le_bytes());
    t[16..24].copy_from_slice(&content.to_le_bytes());
    t[24..32].copy_from_slice(&(start_zxid as u64).to_le_bytes());
    let crc = crc32fast::hash(&t[0..36]);
    t[36..40].copy_from_slice(&crc.to_le_bytes());
    t
}

fn le32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}
fn le64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

/// What a verified snapshot file holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotInfo {
    /// File name.
    pub name: String,
    /// Every txn up to this zxid is in it; replay from the next.
    pub start_zxid: i64,
    /// File size.
    pub file_bytes: u64,
    /// Content bytes (all chunks).
    pub content_bytes: u64,
    /// Chunks.
    pub chunks: u64,
    /// How its chunks are stored.
    pub codec: Codec,
}

/// Writes one snapshot: create, [`SnapshotWriter::write`] the content in any pieces, then
/// [`SnapshotWriter::finish`] (or [`SnapshotWriter::seal`], the slow part of finishing, then
/// `finish`). Until `finish` returns, nothing but a `.tmp` file exists, which a
/// crash leaves behind and [`remove_stale_temps`] clears at the next start (with any trash a
/// crash left during retention).
pub struct SnapshotWriter<S: Storage> {
    storage: S,
    file: Option<S::File>,
    tmp: String,
    name: String,
    start_zxid: i64,
    off: u64,
    reserved: u64,
    buf: Vec<u8>,
    seq: u64,
    content: u64,
    /// The file is complete and synced ([`SnapshotWriter::seal`]): only its rename is left.
    sealed: bool,
    /// Compresses each chunk (format 2), or None (format 1).
    compressor: Option<zstd::bulk::Compressor<'static>>,
    /// A chunk compressed, reused.
    packed: Vec<u8>,
}

/// By hand: zstd's compressor has no `Debug`.
impl<S: Storage> std::fmt::Debug for SnapshotWriter<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotWriter")
            .field("name", &self.name)
            .field("off", &self.off)
            .field("content", &self.content_bytes())
            .field("compressed", &self.compressor.is_some())
            .field("sealed", &self.sealed)
            .finish_non_exhaustive()
    }
}

impl<S: Storage> SnapshotWriter<S> {
    /// Starts `snapshot.<start_zxid>.tmp` (replacing a leftover of the same name) and writes the
    /// header, for an uncompressed snapshot ([`SnapshotWriter::create_with`]).
    ///
    /// Errors: [`LogError::Io`] (a full disk included: see [`LogError::is_storage_full`]).
    pub fn create(storage: &S, start_zxid: i64) -> Result<Self, LogError> {
        Self::create_with(storage, start_zxid, Compression::None)
    }

    /// [`SnapshotWriter::create`] for a snapshot whose chunks are stored as `compression` says.
    /// The compression is done by the thread that calls [`SnapshotWriter::write`] (and
    /// `seal`/`finish`, for the last chunk), as each chunk fills.
    ///
    /// Errors: [`LogError::Io`] (a full disk included), or a zstd level outside
    /// [`Compression::ZSTD_LEVELS`] (as an [`LogError::Io`] of kind `InvalidInput`).
    pub fn create_with(storage: &S, start_zxid: i64, compression: Compression) -> Result<Self, LogError> {
        let name = snapshot_name(start_zxid);
        let compressor = match compression {
            Compression::None => None,
            Compression::Zstd { level } => Some(
                new_compressor(level)
                    .map_err(|e| LogError::io("set up compression for", storage.display_name(&name), e))?,
            ),
        };
        let tmp = format!("{name}{TMP_SUFFIX}");
        let _ = storage.remove(&tmp);
        let file = storage.create(&tmp).map_err(|e| LogError::io("create", storage.display_name(&tmp), e))?;
        let mut w = SnapshotWriter {
            storage: storage.clone(),
            file: Some(file),
            tmp,
            name,
            start_zxid,
            off: 0,
            reserved: 0,
            buf: Vec::with_capacity(CHUNK_BYTES as usize),
            seq: 0,
            content: 0,
            sealed: false,
            packed: Vec::with_capacity(if compressor.is_some() {
                stored_bytes_max(CHUNK_BYTES) as usize
            } else {
                0
            }),
            compressor,
        };
        let h = encode_header(start_zxid, CHUNK_BYTES, compression.codec());
        if let Err(e) = w.put(&h) {
            w.abort();
            return Err(e);
        }
        Ok(w)
    }

    /// The file name it will have.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Content bytes taken so far.
    pub fn content_bytes(&self) -> u64 {
        self.content + self.buf.len() as u64
    }

    fn put(&mut self, data: &[u8]) -> Result<(), LogError> {
        let end = self.off + data.len() as u64;
        let shown = self.storage.display_name(&self.tmp);
        let file = self.file.as_mut().ok_or_else(|| LogError::Poisoned("snapshot writer closed".into()))?;
        if end > self.reserved {
            let want = end.div_ceil(GROW_BYTES) * GROW_BYTES;
            // Written once and synced once: reserve the blocks, skip the log's zero-fill.
            file.reserve(want).map_err(|e| LogError::io("allocate", shown.clone(), e))?;
            self.reserved = want;
        }
        file.write_at(self.off, data).map_err(|e| LogError::io("write", shown, e))?;
        self.off = end;
        Ok(())
    }

    fn flush_chunk(&mut self) -> Result<(), LogError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let payload = std::mem::take(&mut self.buf);
        let mut packed = std::mem::take(&mut self.packed);
        let stored = match self.compressor.as_mut() {
            None => &payload,
            Some(c) => {
                packed.clear();
                packed.reserve_exact(stored_bytes_max(CHUNK_BYTES) as usize);
                c.compress_to_buffer(&payload, &mut packed)
                    .map_err(|e| LogError::io("compress", self.storage.display_name(&self.tmp), e))?;
                // What the reader will insist on: a frame within the bound, and (paired with the
                // reader's check) the content within a chunk.
                debug_assert!(packed.len() as u64 <= stored_bytes_max(CHUNK_BYTES));
                &packed
            }
        };
        let mut head = [0u8; 8];
        head[0..4].copy_from_slice(&(stored.len() as u32).to_le_bytes());
        head[4..8].copy_from_slice(&chunk_crc(self.seq, stored).to_le_bytes());
        let start = self.off;
        self.put(&head)?;
        self.put(stored)?;
        self.packed = packed;
        // Write back as we go, one small piece at a time: whatever of the snapshot is queued at
        // the disk sits in front of every log sync meanwhile. A whole snapshot's dirty pages at
        // the final sync stalled log syncs for tens of milliseconds; two 1 MiB chunks in flight
        // still cost each log sync 5-10 ms here; one 256 KiB piece about a millisecond, and a
        // 64 KiB piece less again. (How much of the disk's time a snapshot takes is bounded by
        // the pace its writer keeps, not by the piece size.)
        let shown = self.storage.display_name(&self.tmp);
        let file = self.file.as_mut().ok_or_else(|| LogError::Poisoned("snapshot writer closed".into()))?;
        let mut at = start;
        while at < self.off {
            let n = WRITEBACK_STEP_BYTES.min(self.off - at);
            file.start_writeback(at, n).map_err(|e| LogError::io("write back", shown.clone(), e))?;
            file.wait_writeback(at, n).map_err(|e| LogError::io("write back", shown.clone(), e))?;
            at += n;
        }
        self.seq += 1;
        self.content += payload.len() as u64;
        self.buf = payload;
        self.buf.clear();
        Ok(())
    }

    /// Appends content. Full chunks go to the file as they fill.
    ///
    /// Errors: [`LogError::Io`]; the writer should then be dropped (or aborted), which removes
    /// the temp file. [`LogError::Poisoned`] once it is sealed.
    pub fn write(&mut self, mut data: &[u8]) -> Result<(), LogError> {
        if self.sealed {
            return Err(LogError::Poisoned(format!(
                "snapshot {} is sealed: nothing more goes in",
                self.name
            )));
        }
        while !data.is_empty() {
            let room = CHUNK_BYTES as usize - self.buf.len();
            let n = room.min(data.len());
            self.buf.extend_from_slice(&data[..n]);
            data = &data[n..];
            if self.buf.len() == CHUNK_BYTES as usize {
                self.flush_chunk()?;
            }
        }
        Ok(())
    }

    /// Writes the last chunk, the end marker and the trailer, cuts the file to its end, syncs
    /// it, renames it to its final name and syncs the directory. Only then is the snapshot
    /// there. On error the temp file is removed.
    pub fn finish(mut self) -> Result<SnapshotInfo, LogError> {
        match self.finish_inner() {
            Ok(info) => Ok(info),
            Err(e) => {
                self.abort_inner();
                Err(e)
            }
        }
    }

    /// Completes the temp file (the last chunk, the end marker and the trailer), cuts it to its
    /// end and syncs it: all of finishing but the rename and the directory's sync, which
    /// [`SnapshotWriter::finish`] then does quickly. A caller that must finish under a lock
    /// seals first, outside it. Nothing can be written after. On error the temp file is removed.
    ///
    /// Errors: [`LogError::Io`].
    pub fn seal(&mut self) -> Result<(), LogError> {
        let sealed = self.seal_inner();
        if sealed.is_err() {
            self.abort_inner();
        }
        sealed
    }

    fn seal_inner(&mut self) -> Result<(), LogError> {
        if self.sealed {
            return Ok(());
        }
        self.flush_chunk()?;
        let mut end = [0u8; 8];
        end[4..8].copy_from_slice(&chunk_crc(self.seq, &[]).to_le_bytes());
        self.put(&end)?;
        let t = encode_trailer(self.seq, self.content, self.start_zxid);
        self.put(&t)?;
        let shown = self.storage.display_name(&self.tmp);
        let mut file = self.file.take().ok_or_else(|| LogError::Poisoned("snapshot writer closed".into()))?;
        file.set_len(self.off).map_err(|e| LogError::io("truncate", shown.clone(), e))?;
        file.sync().map_err(|e| LogError::io("sync", shown, e))?;
        self.sealed = true;
        Ok(())
    }

    fn finish_inner(&mut self) -> Result<SnapshotInfo, LogError> {
        self.seal_inner()?;
        let shown = self.storage.display_name(&self.tmp);
        self.storage.rename(&self.tmp, &self.name).map_err(|e| LogError::io("rename", shown, e))?;
        self.storage
            .sync_dir()
            .map_err(|e| LogError::io("sync directory", self.storage.display_name("."), e))?;
        self.tmp.clear();
        Ok(SnapshotInfo {
            name: self.name.clone(),
            start_zxid: self.start_zxid,
            file_bytes: self.off,
            content_bytes: self.content,
            chunks: self.seq,
            codec: if self.compressor.is_some() { Codec::Zstd } else { Codec::None },
        })
    }

    fn abort_inner(&mut self) {
        self.file = None;
        if !self.tmp.is_empty() {
            let _ = self.storage.remove(&self.tmp);
            self.tmp.clear();
        }
    }

    /// Gives up: removes the temp file.
    pub fn abort(mut self) {
        self.abort_inner();
    }
}

impl<S: Storage> Drop for SnapshotWriter<S> {
    fn drop(&mut self) {
        self.abort_inner();
    }
}

/// A compressor at `level`, writing frames that record their content size (which the reader
/// checks against its bound before decompressing) and a checksum of their content (checked as
/// they decompress: the CRC covers the stored bytes, this the decompression).
fn new_compressor(level: i32) -> std::io::Result<zstd::bulk::Compressor<'static>> {
    if !Compression::ZSTD_LEVELS.contains(&level) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "zstd level {level} is outside {}..={}",
                Compression::ZSTD_LEVELS.start(),
                Compression::ZSTD_LEVELS.end()
            ),
        ));
    }
    let mut c = zstd::bulk::Compressor::new(level)?;
    c.set_parameter(zstd::zstd_safe::CParameter::ContentSizeFlag(true))?;
    c.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true))?;
    Ok(c)
}

/// Where the bytes of a snapshot come from while it is read.
trait Source {
    fn len(&self) -> u64;
    fn read(&self, off: u64, buf: &mut [u8]) -> Result<(), String>;
}

struct FileSource<'a, F: StorageFile>(&'a F, u64);
impl<F: StorageFile> Source for FileSource<'_, F> {
    fn len(&self) -> u64 {
        self.1
    }
    fn read(&self, off: u64, buf: &mut [u8]) -> Result<(), String> {
        self.0.read_at(off, buf).map_err(|e| e.to_string())
    }
}

/// A file opened by its path, read with positioned reads.
struct PathSource(std::fs::File, u64);
impl Source for PathSource {
    fn len(&self) -> u64 {
        self.1
    }
    fn read(&self, off: u64, buf: &mut [u8]) -> Result<(), String> {
        std::os::unix::fs::FileExt::read_exact_at(&self.0, buf, off).map_err(|e| e.to_string())
    }
}

struct SliceSource<'a>(&'a [u8]);
impl Source for SliceSource<'_> {
    fn len(&self) -> u64 {
        self.0.len() as u64
    }
    fn read(&self, off: u64, buf: &mut [u8]) -> Result<(), String> {
        let s = self.0.get(off as usize..off as usize + buf.len()).ok_or("read past the end")?;
        buf.copy_from_slice(s);
        Ok(())
    }
}

/// An error from the content sink while a snapshot is read: passed through as is.
pub type SinkError = String;

/// The decompression side of format 2: zstd's context, reused from chunk to chunk, and the
/// buffer a chunk's content is decompressed into (max chunk bytes, no more).
struct Unpacker {
    zstd: zstd::bulk::Decompressor<'static>,
    out: Vec<u8>,
}

impl Unpacker {
    /// The content of one chunk stored as a zstd frame, at most `chunk_max` bytes of it, or why
    /// not.
    fn unpack(&mut self, stored: &[u8], chunk_max: u32) -> Result<&[u8], String> {
        // Exactly one zstd frame, as written: no skippable frame (which declares no content and
        // would slip past the size check), nothing after it, and its content size declared and
        // within a chunk, refused before any work.
        if stored.get(0..4) != Some(&ZSTD_MAGIC[..]) {
            return Err("is not a zstd frame".into());
        }
        match zstd::zstd_safe::find_frame_compressed_size(stored) {
            Ok(n) if n == stored.len() => {}
            Ok(n) => return Err(format!("holds more than one zstd frame ({n} of {} bytes)", stored.len())),
            Err(_) => return Err("is not a whole zstd frame".into()),
        }
        let declared = match zstd::zstd_safe::get_frame_content_size(stored) {
            Ok(Some(n)) if n == 0 || n > chunk_max as u64 => {
                return Err(format!("declares {n} content bytes, not 1 to the {chunk_max} a chunk holds"))
            }
            Ok(Some(n)) => n as usize,
            Ok(None) => return Err("does not declare its content size".into()),
            Err(_) => return Err("is not a zstd frame".into()),
        };
        // The frame's declared size may be absent: the buffer's capacity is the bound either
        // way, and zstd stops with an error at its end rather than grow it.
        self.out.clear();
        self.out.reserve_exact(chunk_max as usize);
        let n = self
            .zstd
            .decompress_to_buffer(stored, &mut self.out)
            .map_err(|e| format!("does not decompress within {chunk_max} bytes: {e}"))?;
        if n != declared {
            return Err(format!("decompresses to {n} bytes, not the {declared} it declares"));
        }
        Ok(&self.out[..n])
    }
}

/// What a header says, checked.
struct Header {
    bytes: u64,
    start_zxid: i64,
    chunk_max: u32,
    codec: Codec,
}

/// Reads and checks the header. `newest` is the newest format accepted: [`SNAP_FORMAT_VERSION`],
/// or less in tests standing in for an older zkrs.
/// `name` is the file name the start zxid must match, None for a file read by its path, which
/// may have any name (a copy taken off a server).
fn read_header(file: &str, name: Option<&str>, src: &dyn Source, newest: u32) -> Result<Header, LogError> {
    let corrupt = |offset: u64, reason: String| LogError::Corrupt { file: file.to_string(), offset, reason };
    let mut h = [0u8; SNAP_HEADER_V2_BYTES as usize];
    src.read(0, &mut h[..SNAP_HEADER_BYTES as usize]).map_err(|e| corrupt(0, e))?;
    if h[0..8] != SNAP_MAGIC {
        return Err(corrupt(0, "not a zkrs snapshot (bad magic)".into()));
    }
    // The version is looked at before the checksum: a newer header may differ in layout.
    let version = le32(&h[8..12]);
    if version > newest || version == 0 {
        return Err(LogError::UnsupportedVersion { file: file.to_string(), version, supported: newest });
    }
    let bytes = if version == SNAP_FORMAT_V1 { SNAP_HEADER_BYTES } else { SNAP_HEADER_V2_BYTES };
    if bytes > SNAP_HEADER_BYTES {
        if src.len() < bytes {
            return Err(corrupt(0, format!("file of {} bytes is shorter than its header", src.len())));
        }
        src.read(SNAP_HEADER_BYTES, &mut h[SNAP_HEADER_BYTES as usize..bytes as usize])
            .map_err(|e| corrupt(SNAP_HEADER_BYTES, e))?;
    }
    let at = bytes as usize - 4;
    if crc32fast::hash(&h[0..at]) != le32(&h[at..at + 4]) || le32(&h[12..16]) as u64 != bytes {
        return Err(corrupt(0, "header checksum mismatch".into()));
    }
    let start_zxid = le64(&h[16..24]) as i64;
    if name.is_some_and(|name| parse_snapshot_name(name) != Some(start_zxid)) {
        return Err(corrupt(16, format!("header says start zxid {start_zxid:#x}, the file name differs")));
    }
    let chunk_max = le32(&h[24..28]);
    if chunk_max == 0 || chunk_max > CHUNK_BYTES_MAX {
        return Err(corrupt(24, format!("chunk size {chunk_max} out of bounds")));
    }
    let codec = if version == SNAP_FORMAT_V1 {
        Codec::None
    } else {
        // The checksum held: a writer meant these values. Format 2 is read only as this build
        // writes it; anything else in an intact header is a newer zkrs's, refused as clearly as
        // a newer version (the server stops) and never skipped as damage for an older snapshot.
        let unsupported = |what: String| LogError::UnsupportedFormat { file: file.to_string(), what };
        let code = le32(&h[28..32]);
        let codec = match Codec::from_code(code) {
            Some(Codec::Zstd) => Codec::Zstd,
            Some(Codec::None) => {
                return Err(unsupported("format 2 with compression codec 0 (none)".into()));
            }
            None => {
                return Err(unsupported(format!(
                    "compression codec {code}, unknown to this zkrs (it reads 1 = zstd)"
                )));
            }
        };
        let reserved = le32(&h[32..36]);
        if reserved != 0 {
            return Err(unsupported(format!("the reserved header field (set to {reserved})")));
        }
        if chunk_max > CHUNK_BYTES {
            return Err(unsupported(format!(
                "chunks of up to {chunk_max} bytes (this zkrs reads format 2 chunks of up to {CHUNK_BYTES})"
            )));
        }
        codec
    };
    Ok(Header { bytes, start_zxid, chunk_max, codec })
}

fn read_source(
    file: &str,
    name: &str,
    check_name: bool,
    src: &dyn Source,
    newest: u32,
    sink: &mut dyn FnMut(&[u8]) -> Result<(), SinkError>,
) -> Result<SnapshotInfo, LogError> {
    let corrupt = |offset: u64, reason: String| LogError::Corrupt { file: file.to_string(), offset, reason };
    let len = src.len();
    if len < SNAP_HEADER_BYTES + 8 + TRAILER_BYTES {
        return Err(corrupt(0, format!("file of {len} bytes is shorter than an empty snapshot")));
    }
    let Header { bytes: header_bytes, start_zxid, chunk_max, codec } =
        read_header(file, check_name.then_some(name), src, newest)?;
    // How many bytes a chunk may take on disk, and what turns them into content.
    let (stored_max, mut unpacker) = match codec {
        Codec::None => (chunk_max as u64, None),
        Codec::Zstd => {
            let zstd = zstd::bulk::Decompressor::new()
                .map_err(|e| LogError::io("set up decompression for", file.to_string(), e))?;
            (stored_bytes_max(chunk_max), Some(Unpacker { zstd, out: Vec::new() }))
        }
    };
    let mut off = header_bytes;
    let mut seq = 0u64;
    let mut content = 0u64;
    let mut buf = Vec::new();
    loop {
        if off + 8 > len {
            return Err(corrupt(off, "file ends before the end marker (torn write?)".into()));
        }
        let mut ch = [0u8; 8];
        src.read(off, &mut ch).map_err(|e| corrupt(off, e))?;
        let n = le32(&ch[0..4]);
        if n as u64 > stored_max || off + 8 + n as u64 > len {
            return Err(corrupt(off, format!("chunk {seq} length {n} out of bounds")));
        }
        buf.resize(n as usize, 0);
        src.read(off + 8, &mut buf).map_err(|e| corrupt(off, e))?;
        if chunk_crc(seq, &buf) != le32(&ch[4..8]) {
            return Err(corrupt(off, format!("chunk {seq} checksum mismatch")));
        }
        let at = off + 8;
        off = at + n as u64;
        if n == 0 {
            break;
        }
        let chunk = match unpacker.as_mut() {
            None => &buf[..],
            Some(u) => u.unpack(&buf, chunk_max).map_err(|e| corrupt(at, format!("chunk {seq} {e}")))?,
        };
        sink(chunk).map_err(|e| corrupt(at, format!("content: {e}")))?;
        seq += 1;
        content += chunk.len() as u64;
    }
    if off + TRAILER_BYTES != len {
        return Err(corrupt(
            off,
            format!("{} bytes after the end marker, expected a {TRAILER_BYTES}-byte trailer", len - off),
        ));
    }
    let mut t = [0u8; TRAILER_BYTES as usize];
    src.read(off, &mut t).map_err(|e| corrupt(off, e))?;
    if t[0..8] != TRAILER_MAGIC || crc32fast::hash(&t[0..36]) != le32(&t[36..40]) {
        return Err(corrupt(off, "trailer damaged".into()));
    }
    if le64(&t[8..16]) != seq || le64(&t[16..24]) != content || le64(&t[24..32]) as i64 != start_zxid {
        return Err(corrupt(off, "trailer counts differ from the chunks read".into()));
    }
    Ok(SnapshotInfo {
        name: name.to_string(),
        start_zxid,
        file_bytes: len,
        content_bytes: content,
        chunks: seq,
        codec,
    })
}

/// Reads snapshot `name` from `storage`, checking everything (header, every chunk's checksum and
/// sequence, the end marker, the trailer's counts, the exact length), and hands each chunk's
/// content to `sink` as it is verified (decompressed, in format 2, into at most the header's max
/// chunk bytes). A sink error stops the read. Either format is read.
///
/// Errors: [`LogError::UnsupportedVersion`] for a newer format, [`LogError::UnsupportedFormat`]
/// for an intact format 2 header this build does not read (an unknown codec, codec 0, a reserved
/// field in use, chunks over [`CHUNK_BYTES`]); [`LogError::Corrupt`] (naming the offset) for
/// anything torn or damaged (a compressed chunk that is not exactly one zstd frame, does not
/// decompress, or decompresses past its bound, included), or a sink error; [`LogError::Io`].
pub fn read_snapshot<S: Storage>(
    storage: &S,
    name: &str,
    sink: &mut dyn FnMut(&[u8]) -> Result<(), SinkError>,
) -> Result<SnapshotInfo, LogError> {
    let shown = storage.display_name(name);
    let f = storage.open(name).map_err(|e| LogError::io("open", shown.clone(), e))?;
    let len = f.len().map_err(|e| LogError::io("stat", shown.clone(), e))?;
    read_source(&shown, name, true, &FileSource(&f, len), SNAP_FORMAT_VERSION, sink)
}

/// [`read_snapshot`] over bytes already in memory (tools, tests). `name` is the file name.
pub fn read_snapshot_bytes(
    name: &str,
    data: &[u8],
    sink: &mut dyn FnMut(&[u8]) -> Result<(), SinkError>,
) -> Result<SnapshotInfo, LogError> {
    read_source(name, name, true, &SliceSource(data), SNAP_FORMAT_VERSION, sink)
}

/// [`read_snapshot`] of the file at `path`, opened read-only and read chunk by chunk (one chunk
/// in memory at a time), without the directory lock a [`crate::FileStorage`] takes: for tools
/// that read a copy, or the newest snapshot of a running server. The file's name is not checked
/// against the start zxid its header records (a copy may be named anything).
///
/// Errors: as [`read_snapshot`].
pub fn read_snapshot_file(
    path: &std::path::Path,
    sink: &mut dyn FnMut(&[u8]) -> Result<(), SinkError>,
) -> Result<SnapshotInfo, LogError> {
    let shown = path.display().to_string();
    let f = std::fs::File::open(path).map_err(|e| LogError::io("open", shown.clone(), e))?;
    let len = f.metadata().map_err(|e| LogError::io("stat", shown.clone(), e))?.len();
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    read_source(&shown, &name, false, &PathSource(f, len), SNAP_FORMAT_VERSION, sink)
}

/// Snapshots in the directory, oldest first: (start zxid, name). Temp files are not listed.
///
/// Errors: [`LogError::Io`] if the directory cannot be listed.
pub fn list_snapshots<S: Storage>(storage: &S) -> Result<Vec<(i64, String)>, LogError> {
    let mut v: Vec<(i64, String)> = storage
        .list()
        .map_err(|e| LogError::io("list", storage.display_name("."), e))?
        .into_iter()
        .filter_map(|n| Some((parse_snapshot_name(&n)?, n)))
        .collect();
    v.sort();
    Ok(v)
}

/// The newest snapshot that verifies completely. Newer ones that are torn or corrupt are
/// skipped with a `warn` line naming them and why. This reads each candidate once; the caller
/// then loads the chosen one (from the page cache).
///
/// Errors: [`LogError::UnsupportedVersion`] or [`LogError::UnsupportedFormat`] when a snapshot
/// newer than every valid one is in a newer format (falling back to an older snapshot would silently lose what only the newer
/// one holds once logs were purged); [`LogError::Io`] for listing or reading failures.
pub fn latest_valid<S: Storage>(storage: &S) -> Result<Option<SnapshotInfo>, LogError> {
    for (_, name) in list_snapshots(storage)?.into_iter().rev() {
        match read_snapshot(storage, &name, &mut |_| Ok(())) {
            Ok(info) => return Ok(Some(info)),
            Err(e @ (LogError::UnsupportedVersion { .. } | LogError::UnsupportedFormat { .. })) => {
                return Err(e)
            }
            Err(e @ LogError::Corrupt { .. }) => {
                tracing::warn!("skipping snapshot {}: {e}", storage.display_name(&name));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// Removes temp files left by a crash while a snapshot was being written. Call once at start,
/// before any snapshot is begun. Returns the names removed.
///
/// Errors: [`LogError::Io`].
pub fn remove_stale_temps<S: Storage>(storage: &S) -> Result<Vec<String>, LogError> {
    let mut removed = Vec::new();
    for n in storage.list().map_err(|e| LogError::io("list", storage.display_name("."), e))? {
        if n.starts_with(SNAP_PREFIX) && n.ends_with(TMP_SUFFIX) {
            storage.remove(&n).map_err(|e| LogError::io("remove", storage.display_name(&n), e))?;
            removed.push(n);
        } else if n.starts_with(crate::storage::TRASH_PREFIX) {
            crate::storage::remove_gradually(storage, &n)
                .map_err(|e| LogError::io("remove", storage.display_name(&n), e))?;
            removed.push(n);
        }
    }
    if !removed.is_empty() {
        storage.sync_dir().map_err(|e| LogError::io("sync directory", storage.display_name("."), e))?;
    }
    Ok(removed)
}

/// What [`retain_newest`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Retention {
    /// Snapshots removed, oldest first.
    pub removed: Vec<String>,
    /// Snapshots kept, oldest first.
    pub kept: Vec<String>,
    /// Pass this to `SegmentLog::purge_before`: every log record below it is older than the
    /// oldest kept snapshot's start and no longer needed (the start zxid of the oldest kept
    /// snapshot plus one). None when no snapshot is kept: then no log may be purged.
    pub purge_logs_before: Option<i64>,
}

/// Keeps the newest `keep` snapshots (autopurge.snapRetainCount; at least 1 is kept whatever
/// `keep` says) and removes the rest, oldest first, syncing the directory after each so that a
/// crash part-way leaves a suffix. Temp files are left alone (one may be in progress).
///
/// Errors: [`LogError::Io`]; snapshots removed before the failure stay removed.
pub fn retain_newest<S: Storage>(storage: &S, keep: usize) -> Result<Retention, LogError> {
    let (r, trash) = retain_newest_to_trash(storage, keep)?;
    for t in &trash {
        crate::storage::remove_gradually(storage, t)
            .map_err(|e| LogError::io("remove", storage.display_name(t), e))?;
    }
    Ok(r)
}

/// [`retain_newest`]'s first half: the snapshots past the newest `keep` are moved out of the way
/// (durably; a crash leaves trash, removed at the next open), and the trash files are returned
/// for the caller to cut down gradually ([`crate::remove_gradually`]), so that freeing a large
/// file's blocks never holds up the log's syncs, nor whatever the caller holds while it decides.
///
/// Errors: [`LogError::Io`]; snapshots moved before the failure stay moved.
pub fn retain_newest_to_trash<S: Storage>(
    storage: &S,
    keep: usize,
) -> Result<(Retention, Vec<String>), LogError> {
    retain_newest_to_trash_at_most(storage, keep, usize::MAX)
}

/// [`retain_newest_to_trash`], moving at most the `at_most` oldest snapshots out of the way: a
/// caller that must keep some of the ones past the newest `keep` for a while (the server keeps
/// those its archive has not taken yet) keeps them, and the log they need
/// ([`Retention::purge_logs_before`] is the oldest kept one's start plus one), so that what is
/// kept is still a suffix.
///
/// Errors: [`LogError::Io`]; snapshots moved before the failure stay moved.
pub fn retain_newest_to_trash_at_most<S: Storage>(
    storage: &S,
    keep: usize,
    at_most: usize,
) -> Result<(Retention, Vec<String>), LogError> {
    let all = list_snapshots(storage)?;
    let keep = keep.max(1);
    let cut = all.len().saturating_sub(keep).min(at_most);
    let mut r = Retention::default();
    let mut trash = Vec::new();
    for (_, name) in &all[..cut] {
        trash.push(
            crate::storage::move_to_trash(storage, name)
                .map_err(|e| LogError::io("rename for removal", storage.display_name(name), e))?,
        );
        r.removed.push(name.clone());
    }
    r.kept = all[cut..].iter().map(|(_, n)| n.clone()).collect();
    r.purge_logs_before = all.get(cut).map(|(z, _)| z.saturating_add(1));
    Ok((r, trash))
}

/// Of log segments named by their first zxid (oldest first), those [`crate::SegmentLog::purge_before`]
/// would remove for `purge_before`: every segment whose successor starts at or below it.
pub fn purgeable_segments(first_zxids: &[i64], purge_before: i64) -> Vec<i64> {
    let mut out = Vec::new();
    for w in first_zxids.windows(2) {
        if w[1] <= purge_before {
            out.push(w[0]);
        } else {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::FaultStorage;

    fn content(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 31 % 251) as u8).collect()
    }

    fn write<S: Storage>(s: &S, zxid: i64, data: &[u8]) -> SnapshotInfo {
        let mut w = SnapshotWriter::create(s, zxid).expect("create");
        for piece in data.chunks(100_003) {
            w.write(piece).expect("write");
        }
        w.finish().expect("finish")
    }

    fn read_all<S: Storage>(s: &S, name: &str) -> Result<Vec<u8>, LogError> {
        let mut out = Vec::new();
        read_snapshot(s, name, &mut |c| {
            out.extend_from_slice(c);
            Ok(())
        })?;
        Ok(out)
    }

    #[test]
    fn names() {
        assert_eq!(snapshot_name(0x1_0000_0002), "snapshot.0000000100000002");
        assert_eq!(parse_snapshot_name("snapshot.0000000100000002"), Some(0x1_0000_0002));
        assert_eq!(parse_snapshot_name("snapshot.0000000100000002.tmp"), None);
        assert_eq!(parse_snapshot_name("snapshot.12"), None);
    }

    #[test]
    fn round_trip_sizes() {
        let s = FaultStorage::new(1);
        for (z, n) in [(1i64, 0usize), (2, 1), (3, CHUNK_BYTES as usize), (4, 3 * CHUNK_BYTES as usize + 17)]
        {
            let data = content(n);
            let info = write(&s, z, &data);
            assert_eq!(info.content_bytes, n as u64);
            assert_eq!(read_all(&s, &snapshot_name(z)).expect("read"), data);
        }
        assert_eq!(list_snapshots(&s).expect("list").len(), 4);
        assert_eq!(latest_valid(&s).expect("latest").map(|i| i.start_zxid), Some(4));
    }

    /// A copy under another name reads by its path, chunk by chunk, with every check but the
    /// name's; in a directory the name must still match.
    #[test]
    fn a_file_read_by_its_path_may_have_any_name() {
        let s = FaultStorage::new(4);
        let data = content(2 * CHUNK_BYTES as usize + 9);
        write(&s, 0x30, &data);
        let bytes = s.contents(&snapshot_name(0x30)).expect("bytes");
        let dir = tempfile::tempdir().expect("dir");
        let copy = dir.path().join("backup.snap");
        std::fs::write(&copy, &bytes).expect("write");
        let (mut got, mut chunks) = (Vec::new(), 0);
        let info = read_snapshot_file(&copy, &mut |c| {
            chunks += 1;
            got.extend_from_slice(c);
            Ok(())
        })
        .expect("read");
        assert_eq!(
            (got == data, chunks, info.start_zxid, info.name.as_str()),
            (true, 3, 0x30, "backup.snap")
        );
        assert!(read_snapshot_bytes("backup.snap", &bytes, &mut |_| Ok(())).is_err(), "by name");
        let mut cut = bytes.clone();
        cut.truncate(bytes.len() - 1);
        std::fs::write(&copy, &cut).expect("write");
        assert!(read_snapshot_file(&copy, &mut |_| Ok(())).is_err(), "a torn copy");
        let missing = read_snapshot_file(&dir.path().join("none"), &mut |_| Ok(())).expect_err("missing");
        assert!(missing.to_string().starts_with("open "), "{missing}");
    }

    #[test]
    fn a_sealed_snapshot_is_only_a_temp_file_until_it_is_finished() {
        let s = FaultStorage::new(3);
        let data = content(2 * CHUNK_BYTES as usize + 5);
        let mut w = SnapshotWriter::create(&s, 7).expect("create");
        w.write(&data).expect("write");
        w.seal().expect("seal");
        w.seal().expect("sealing twice is sealing once");
        assert!(w.write(b"more").is_err(), "nothing is written after the seal");
        assert!(list_snapshots(&s).expect("list").is_empty(), "not there before finish");
        let info = w.finish().expect("finish");
        assert_eq!(info.content_bytes, data.len() as u64);
        assert_eq!(read_all(&s, &snapshot_name(7)).expect("read"), data);
        // Sealed, then dropped: the temp file goes.
        let mut w = SnapshotWriter::create(&s, 8).expect("create");
        w.write(&data).expect("write");
        w.seal().expect("seal");
        drop(w);
        assert_eq!(list_snapshots(&s).expect("list").len(), 1);
        assert!(s.contents("snapshot.0000000000000008.tmp").is_none());
    }

    #[test]
    fn every_damage_is_caught_and_skipped() {
        let s = FaultStorage::new(2);
        write(&s, 10, &content(5000));
        write(&s, 20, &content(3 * CHUNK_BYTES as usize / 2));
        let name = snapshot_name(20);
        let good = s.contents(&name).expect("bytes");
        // Flip one byte at many offsets, and cut at many lengths: never accepted.
        let step = (good.len() / 97).max(1);
        for off in (0..good.len()).step_by(step) {
            let mut bad = good.clone();
            bad[off] ^= 0x40;
            assert!(read_snapshot_bytes(&name, &bad, &mut |_| Ok(())).is_err(), "flip at {off}");
        }
        for cut in (0..good.len()).step_by(step) {
            assert!(read_snapshot_bytes(&name, &good[..cut], &mut |_| Ok(())).is_err(), "cut at {cut}");
        }
        let mut longer = good.clone();
        longer.push(0);
        assert!(read_snapshot_bytes(&name, &longer, &mut |_| Ok(())).is_err());
        // Renamed to another zxid: refused.
        assert!(read_snapshot_bytes(&snapshot_name(21), &good, &mut |_| Ok(())).is_err());
        // A torn newest snapshot is skipped for the older one.
        let mut f = s.open(&name).expect("open");
        f.write_at(good.len() as u64 / 2, &[0xff; 16]).expect("damage");
        f.sync().expect("sync");
        assert_eq!(latest_valid(&s).expect("latest").map(|i| i.start_zxid), Some(10));
    }

    #[test]
    fn newer_format_refused() {
        let s = FaultStorage::new(3);
        write(&s, 5, &content(10));
        let name = snapshot_name(5);
        let mut f = s.open(&name).expect("open");
        f.write_at(8, &(SNAP_FORMAT_VERSION + 1).to_le_bytes()).expect("write");
        f.sync().expect("sync");
        assert!(matches!(
            read_all(&s, &name),
            Err(LogError::UnsupportedVersion { version: 3, supported: 2, .. })
        ));
        assert!(matches!(latest_valid(&s), Err(LogError::UnsupportedVersion { .. })));
    }

    fn write_compressed<S: Storage>(s: &S, zxid: i64, data: &[u8], level: i32) -> SnapshotInfo {
        let mut w = SnapshotWriter::create_with(s, zxid, Compression::Zstd { level }).expect("create");
        for piece in data.chunks(100_003) {
            w.write(piece).expect("write");
        }
        w.finish().expect("finish")
    }

    /// Bytes that do not compress (a xorshift stream).
    fn noise(n: usize) -> Vec<u8> {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    /// A snapshot file built here byte by byte, independently of the writer: `version`'s header
    /// with `chunk_max` (codec zstd in format 2), `stored` as the chunks' bytes, and a trailer
    /// counting `content` bytes.
    fn craft(version: u32, zxid: i64, chunk_max: u32, stored: &[Vec<u8>], content: u64) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend_from_slice(b"ZKRSSNAP");
        f.extend_from_slice(&version.to_le_bytes());
        f.extend_from_slice(&(if version == 1 { 32u32 } else { 40 }).to_le_bytes());
        f.extend_from_slice(&(zxid as u64).to_le_bytes());
        f.extend_from_slice(&chunk_max.to_le_bytes());
        if version == 2 {
            f.extend_from_slice(&1u32.to_le_bytes());
            f.extend_from_slice(&0u32.to_le_bytes());
        }
        let crc = crc32fast::hash(&f);
        f.extend_from_slice(&crc.to_le_bytes());
        for (seq, c) in stored.iter().chain(std::iter::once(&Vec::new())).enumerate() {
            let mut h = crc32fast::Hasher::new();
            h.update(&(seq as u64).to_le_bytes());
            h.update(&(c.len() as u32).to_le_bytes());
            h.update(c);
            f.extend_from_slice(&(c.len() as u32).to_le_bytes());
            f.extend_from_slice(&h.finalize().to_le_bytes());
            f.extend_from_slice(c);
        }
        let t0 = f.len();
        f.extend_from_slice(b"ZKRSSEND");
        f.extend_from_slice(&(stored.len() as u64).to_le_bytes());
        f.extend_from_slice(&content.to_le_bytes());
        f.extend_from_slice(&(zxid as u64).to_le_bytes());
        f.extend_from_slice(&0u32.to_le_bytes());
        let crc = crc32fast::hash(&f[t0..]);
        f.extend_from_slice(&crc.to_le_bytes());
        f
    }

    fn read_bytes(name: &str, data: &[u8]) -> Result<(Vec<u8>, SnapshotInfo), LogError> {
        let mut out = Vec::new();
        let info = read_snapshot_bytes(name, data, &mut |c| {
            out.extend_from_slice(c);
            Ok(())
        })?;
        Ok((out, info))
    }

    #[test]
    fn compressed_round_trip_sizes() {
        let s = FaultStorage::new(5);
        let chunk = CHUNK_BYTES as usize;
        for (z, data) in [
            (1i64, content(0)),
            (2, content(1)),
            (3, content(chunk)),
            (4, content(3 * chunk + 17)),
            (5, noise(2 * chunk + 3)),
        ] {
            let info = write_compressed(&s, z, &data, 3);
            assert_eq!(info.content_bytes, data.len() as u64, "the trailer counts content, uncompressed");
            assert_eq!(info.codec, Codec::Zstd);
            let name = snapshot_name(z);
            let bytes = s.contents(&name).expect("bytes");
            assert_eq!(le32(&bytes[8..12]), SNAP_FORMAT_V2);
            let (back, read) = read_bytes(&name, &bytes).expect("read");
            assert_eq!(back, data, "zxid {z}");
            assert_eq!(read, info, "the reader reports what the writer wrote");
            let plain = SNAP_HEADER_BYTES + 8 * (info.chunks + 1) + TRAILER_BYTES + data.len() as u64;
            if z == 4 {
                assert!(info.file_bytes * 10 < plain, "repetitive content compresses: {info:?}");
            }
            if z == 5 {
                // Noise is stored raw inside its frames: a few bytes of framing a chunk.
                assert!(info.file_bytes < plain + 64 * info.chunks, "noise stays near its size: {info:?}");
            }
        }
        // Both formats side by side: the newest valid one is found whatever its format.
        write(&s, 6, &content(10));
        assert_eq!(
            latest_valid(&s).expect("latest").map(|i| (i.start_zxid, i.codec)),
            Some((6, Codec::None))
        );
        write_compressed(&s, 7, &content(10), 1);
        assert_eq!(
            latest_valid(&s).expect("latest").map(|i| (i.start_zxid, i.codec)),
            Some((7, Codec::Zstd))
        );
    }

    #[test]
    fn uncompressed_snapshots_stay_in_format_1() {
        let s = FaultStorage::new(6);
        let data = content(CHUNK_BYTES as usize + 9);
        let info = write(&s, 9, &data);
        assert_eq!(info.codec, Codec::None);
        let bytes = s.contents(&snapshot_name(9)).expect("bytes");
        assert_eq!(le32(&bytes[8..12]), SNAP_FORMAT_V1, "a zkrs before compression reads it");
        assert_eq!(le32(&bytes[12..16]) as u64, SNAP_HEADER_BYTES);
        // A format 1 file built byte by byte, as a zkrs before compression wrote it, reads.
        let old = craft(
            1,
            9,
            CHUNK_BYTES,
            &[data[..CHUNK_BYTES as usize].to_vec(), data[CHUNK_BYTES as usize..].to_vec()],
            data.len() as u64,
        );
        assert_eq!(old, bytes, "the writer's format 1 is byte for byte the old one");
        let (back, info) = read_bytes(&snapshot_name(9), &old).expect("an old file reads");
        assert_eq!((back, info.codec, info.chunks), (data, Codec::None, 2));
    }

    #[test]
    fn every_damage_to_a_compressed_snapshot_is_caught() {
        let s = FaultStorage::new(7);
        write_compressed(&s, 10, &content(5000), 1);
        let mut data = content(2 * CHUNK_BYTES as usize);
        data.extend_from_slice(&noise(CHUNK_BYTES as usize / 2));
        write_compressed(&s, 20, &data, 1);
        let name = snapshot_name(20);
        let good = s.contents(&name).expect("bytes");
        assert_eq!(read_bytes(&name, &good).expect("read").0, data);
        let step = (good.len() / 211).max(1);
        for off in (0..good.len()).step_by(step).chain([8, 28, 32, 36, 40, 44, 48]) {
            let mut bad = good.clone();
            bad[off] ^= 0x40;
            assert!(read_bytes(&name, &bad).is_err(), "flip at {off}");
        }
        for cut in (0..good.len()).step_by(step) {
            assert!(read_bytes(&name, &good[..cut]).is_err(), "cut at {cut}");
        }
        // A damaged chunk is named, with the offset of its stored bytes, and nothing past the
        // chunks before it was handed on.
        let mut bad = good.clone();
        let second = 40 + 8 + le32(&good[40..44]) as usize;
        bad[second + 8 + 20] ^= 1;
        let mut handed = 0u64;
        let err = read_snapshot_bytes(&name, &bad, &mut |c| {
            handed += c.len() as u64;
            Ok(())
        })
        .expect_err("damaged");
        assert!(
            matches!(&err, LogError::Corrupt { offset, reason, .. } if *offset == second as u64 && reason.contains("chunk 1 checksum")),
            "{err}"
        );
        assert_eq!(handed, CHUNK_BYTES as u64, "only the first chunk's content");
        // The torn newest snapshot is skipped for the older one.
        let mut f = s.open(&name).expect("open");
        f.write_at(good.len() as u64 / 2, &[0xff; 16]).expect("damage");
        f.sync().expect("sync");
        assert_eq!(latest_valid(&s).expect("latest").map(|i| i.start_zxid), Some(10));
    }

    /// A zstd frame of `n` bytes of `z`, declaring its size or not.
    fn frame(n: usize, declared: bool) -> Vec<u8> {
        let mut c = zstd::bulk::Compressor::new(3).expect("compressor");
        c.set_parameter(zstd::zstd_safe::CParameter::ContentSizeFlag(declared)).expect("param");
        let f = c.compress(&vec![b'z'; n]).expect("compress");
        let size = zstd::zstd_safe::get_frame_content_size(&f).expect("a frame");
        assert_eq!(size.is_some(), declared, "the frame declares its size only when asked");
        f
    }

    fn refused_with(name: &str, file: &[u8], want: &str) {
        let err = read_bytes(name, file).map(|(_, info)| info).expect_err(want);
        assert!(matches!(&err, LogError::Corrupt { reason, .. } if reason.contains(want)), "{want}: {err}");
    }

    /// A chunk whose checksum holds but whose frame would decompress past the header's max chunk
    /// bytes is refused unread; one exactly at the bound reads. So are frames that are not zstd,
    /// frames that do not declare their size (the writer always does), and a chunk of nothing.
    #[test]
    fn a_chunk_that_decompresses_past_its_bound_is_refused() {
        let max = 4096u32;
        let name = snapshot_name(3);
        let at_bound = craft(2, 3, max, &[frame(max as usize, true)], max as u64);
        let (back, info) = read_bytes(&name, &at_bound).expect("a full chunk reads");
        assert_eq!((back.len(), info.content_bytes), (max as usize, max as u64));
        let past = craft(2, 3, max, &[frame(max as usize + 1, true)], max as u64 + 1);
        refused_with(&name, &past, "declares 4097 content bytes");
        // Far past it (a frame of a gigabyte would be refused alike, unread).
        let far = craft(2, 3, max, &[frame(64 * max as usize, true)], 64 * max as u64);
        refused_with(&name, &far, "declares 262144 content bytes");
        // No declared size: refused before decompressing, at the bound or past it.
        for n in [max as usize, max as usize + 1] {
            let undeclared = craft(2, 3, max, &[frame(n, false)], n as u64);
            refused_with(&name, &undeclared, "does not declare its content size");
        }
        let not_zstd = craft(2, 3, max, &[b"plain bytes, checksummed".to_vec()], 24);
        refused_with(&name, &not_zstd, "not a zstd frame");
        let empty = craft(2, 3, max, &[frame(0, true)], 0);
        refused_with(&name, &empty, "declares 0 content bytes");
        // A stored chunk longer than any frame of max chunk bytes can be is refused unread.
        let long = craft(2, 3, max, &[vec![0; stored_bytes_max(max) as usize + 1]], 1);
        refused_with(&name, &long, "out of bounds");
    }

    /// Format 2 is read only as this build writes it: each chunk exactly one zstd frame. Two
    /// frames in a chunk, a skippable frame before one, or bytes after it are refused, though each
    /// frame alone is within the bound and the chunk's checksum holds.
    #[test]
    fn a_format_2_chunk_is_exactly_one_zstd_frame() {
        let max = 4096u32;
        let name = snapshot_name(3);
        let one = frame(1000, true);
        let ok = craft(2, 3, max, std::slice::from_ref(&one), 1000);
        assert_eq!(read_bytes(&name, &ok).expect("one frame reads").0, vec![b'z'; 1000]);
        let two = [one.clone(), one.clone()].concat();
        refused_with(&name, &craft(2, 3, max, &[two], 2000), "more than one zstd frame");
        // A skippable frame (magic 0x184D2A50, u32 length, that many bytes), then a frame.
        let mut skippable = 0x184D_2A50u32.to_le_bytes().to_vec();
        skippable.extend_from_slice(&4u32.to_le_bytes());
        skippable.extend_from_slice(b"skip");
        refused_with(&name, &craft(2, 3, max, &[skippable.clone()], 0), "not a zstd frame");
        let skip_then = [skippable, one.clone()].concat();
        refused_with(&name, &craft(2, 3, max, &[skip_then], 1000), "not a zstd frame");
        let trailing = [one.clone(), vec![1, 2, 3]].concat();
        refused_with(&name, &craft(2, 3, max, &[trailing], 1000), "more than one zstd frame");
        let cut = one[..one.len() - 1].to_vec();
        refused_with(&name, &craft(2, 3, max, &[cut], 1000), "not a whole zstd frame");
    }

    /// `craft`'s format 2 file with header fields 24..36 (max chunk bytes, codec, reserved) set
    /// and the header checksum made to hold.
    fn crafted_v2_header(zxid: i64, chunk_max: u32, codec: u32, reserved: u32) -> Vec<u8> {
        let mut f = craft(2, zxid, CHUNK_BYTES, &[frame(1000, true)], 1000);
        f[24..28].copy_from_slice(&chunk_max.to_le_bytes());
        f[28..32].copy_from_slice(&codec.to_le_bytes());
        f[32..36].copy_from_slice(&reserved.to_le_bytes());
        let crc = crc32fast::hash(&f[0..36]);
        f[36..40].copy_from_slice(&crc.to_le_bytes());
        f
    }

    /// An intact format 2 header (its checksum holds) with a codec this build does not know,
    /// codec 0, the reserved field in use, or chunks larger than this build writes is a newer
    /// zkrs's file: refused as unsupported, naming what, and `latest_valid` stops on it rather
    /// than fall back to the older snapshot. The same header damaged (checksum off) is skipped.
    #[test]
    fn an_intact_format_2_header_this_build_does_not_read_stops_the_fallback() {
        let s = FaultStorage::new(11);
        write(&s, 5, &content(100));
        let name = snapshot_name(9);
        assert!(read_bytes(&name, &crafted_v2_header(9, CHUNK_BYTES, 1, 0)).is_ok(), "as written");
        for (chunk_max, codec, reserved, want) in [
            (CHUNK_BYTES, 2, 0, "compression codec 2, unknown to this zkrs"),
            (CHUNK_BYTES, 0, 0, "format 2 with compression codec 0 (none)"),
            (CHUNK_BYTES, 1, 1, "the reserved header field (set to 1)"),
            (CHUNK_BYTES + 1, 1, 0, "chunks of up to 1048577 bytes"),
            (CHUNK_BYTES_MAX, 1, 0, "chunks of up to 67108864 bytes"),
        ] {
            let file = crafted_v2_header(9, chunk_max, codec, reserved);
            let err = read_bytes(&name, &file).map(|(_, info)| info).expect_err(want);
            assert!(
                matches!(&err, LogError::UnsupportedFormat { what, .. } if what.contains(want)),
                "{want}: {err}"
            );
            assert!(err.to_string().contains("run a newer zkrs"), "{err}");
            let put = |bytes: &[u8]| {
                let _ = s.remove(&name);
                let mut f = s.create(&name).expect("create");
                f.reserve(bytes.len() as u64).expect("reserve");
                f.write_at(0, bytes).expect("write");
                f.sync().expect("sync");
            };
            put(&file);
            let latest = latest_valid(&s).map(|i| i.map(|i| i.start_zxid));
            assert!(matches!(&latest, Err(LogError::UnsupportedFormat { .. })), "{want}: {latest:?}");
            // The same header with its checksum broken is damage: skipped for snapshot 5.
            let mut damaged = file.clone();
            damaged[36] ^= 1;
            put(&damaged);
            assert_eq!(latest_valid(&s).expect("skipped").map(|i| i.start_zxid), Some(5));
            s.remove(&name).expect("remove");
        }
    }

    /// What a zkrs that reads only format 1 does with a compressed snapshot: the version check
    /// (the first thing looked at after the magic) refuses it, naming the file and both versions;
    /// it is never handed on as content. An unknown codec in a format 2 header is refused too.
    #[test]
    fn a_format_1_reader_refuses_a_compressed_snapshot() {
        let s = FaultStorage::new(8);
        write_compressed(&s, 12, &content(3000), 1);
        let name = snapshot_name(12);
        let bytes = s.contents(&name).expect("bytes");
        let mut handed = 0;
        let err = read_source(&name, &name, true, &SliceSource(&bytes), SNAP_FORMAT_V1, &mut |_| {
            handed += 1;
            Ok(())
        })
        .expect_err("refused");
        assert!(matches!(err, LogError::UnsupportedVersion { version: 2, supported: 1, .. }), "{err}");
        assert_eq!(
            err.to_string(),
            "snapshot.000000000000000c has format version 2, this zkrs reads up to version 1; \
             run a newer zkrs or move the file away"
        );
        assert_eq!(handed, 0);
        // An uncompressed one it reads.
        write(&s, 13, &content(3000));
        let plain = s.contents(&snapshot_name(13)).expect("bytes");
        assert!(read_source(
            "x",
            &snapshot_name(13),
            true,
            &SliceSource(&plain),
            SNAP_FORMAT_V1,
            &mut |_| Ok(())
        )
        .is_ok());
        // A codec this build does not know, under a checksum that holds.
        let mut other = bytes.clone();
        other[28..32].copy_from_slice(&7u32.to_le_bytes());
        let crc = crc32fast::hash(&other[0..36]);
        other[36..40].copy_from_slice(&crc.to_le_bytes());
        let err = read_bytes(&name, &other).map(|(_, info)| info).expect_err("unknown codec");
        assert!(matches!(err, LogError::UnsupportedFormat { .. }), "{err}");
        assert!(err.to_string().contains("compression codec 7, unknown to this zkrs"), "{err}");
    }

    #[test]
    fn a_zstd_level_outside_the_range_is_refused() {
        let s = FaultStorage::new(9);
        for level in [0, -1, 7, 19, 20, 22] {
            let err = SnapshotWriter::create_with(&s, 1, Compression::Zstd { level }).expect_err("refused");
            assert!(err.to_string().contains(&format!("zstd level {level} is outside 1..=6")), "{err}");
        }
        assert!(s.list().expect("list").is_empty(), "nothing created");
        assert_eq!(Codec::parse("ZSTD"), Some(Codec::Zstd));
        assert_eq!(Codec::parse("none"), Some(Codec::None));
        assert_eq!(Codec::parse("gzip"), None);
    }

    #[test]
    fn crash_while_writing_leaves_only_a_temp() {
        for seed in 0..12 {
            let s = FaultStorage::new(seed);
            write(&s, 1, &content(1000));
            let mut w = SnapshotWriter::create(&s, 2).expect("create");
            w.write(&content(CHUNK_BYTES as usize + 1000)).expect("write");
            if seed % 2 == 0 {
                // Crash before finish: the temp may or may not be there, the final name is not.
                s.crash();
                drop(w);
            } else {
                w.finish().expect("finish");
                s.crash();
            }
            let names = list_snapshots(&s).expect("list");
            let latest = latest_valid(&s).expect("latest").expect("some");
            if seed % 2 == 0 {
                assert_eq!(names.len(), 1, "seed {seed}");
                assert_eq!(latest.start_zxid, 1);
            } else {
                assert_eq!(latest.start_zxid, 2, "finished snapshot survives the crash");
            }
            remove_stale_temps(&s).expect("clean");
            assert!(s.list().expect("list").iter().all(|n| !n.ends_with(TMP_SUFFIX)));
        }
    }

    #[test]
    fn retention_keeps_newest_and_reports_log_cut() {
        let s = FaultStorage::new(4);
        for z in [5i64, 9, 14, 30] {
            write(&s, z, &content(10));
        }
        let r = retain_newest(&s, 2).expect("retain");
        assert_eq!(r.removed, vec![snapshot_name(5), snapshot_name(9)]);
        assert_eq!(r.kept, vec![snapshot_name(14), snapshot_name(30)]);
        assert_eq!(r.purge_logs_before, Some(15));
        assert_eq!(purgeable_segments(&[1, 10, 15, 20], 15), vec![1, 10]);
        assert_eq!(purgeable_segments(&[1, 16], 15), Vec::<i64>::new());
        let r = retain_newest(&s, 0).expect("retain");
        assert_eq!(r.kept, vec![snapshot_name(30)]);
    }

    /// A retention told to remove at most so many keeps the rest of the oldest ones, and the
    /// log from the oldest it kept.
    #[test]
    fn retention_removes_at_most_what_it_is_allowed() {
        let s = FaultStorage::new(5);
        for z in [5i64, 9, 14, 30] {
            write(&s, z, &content(10));
        }
        let (r, trash) = retain_newest_to_trash_at_most(&s, 1, 1).expect("retain");
        assert_eq!(r.removed, vec![snapshot_name(5)]);
        assert_eq!(r.kept, vec![snapshot_name(9), snapshot_name(14), snapshot_name(30)]);
        assert_eq!(r.purge_logs_before, Some(10));
        assert_eq!(trash.len(), 1);
        let (r, _) = retain_newest_to_trash_at_most(&s, 1, 0).expect("retain");
        assert!(r.removed.is_empty());
        assert_eq!(r.purge_logs_before, Some(10));
        let (r, _) = retain_newest_to_trash_at_most(&s, 2, usize::MAX).expect("retain");
        assert_eq!(r.removed, vec![snapshot_name(9)]);
        assert_eq!(r.purge_logs_before, Some(15));
    }
}
